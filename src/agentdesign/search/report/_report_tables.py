"""The report's two tables: the leaderboard (every design with its search and holdout scores, the
winner and the baselines marked) and the meta agent's proposals (what became of each, with its
prompt and response folded away). Everything a model wrote is escaped.
"""

from __future__ import annotations

from collections.abc import Mapping
from html import escape

from agentdesign.archive import Archive, ProposalRecord
from agentdesign.search.report._report_run import (
    MOST_ROWS,
    Design,
    Run,
    components_of,
    interval,
    skip,
)

_MOST_PROPOSALS = 200  # the meta agent's proposals listed (the newest ones)
_CLIP_CHARS = 4000  # of each proposal's prompt and response


# -- the leaderboard --------------------------------------------------------------------------


def leaderboard_table(run: Run) -> str:
    if not run.ranked and not run.holdout:
        return skip("No complete evaluation yet.")
    baselines = {b.baseline_hash: b.label for b in run.verdict.baselines}
    rows = []
    for design in run.ranked[:MOST_ROWS]:
        held = run.holdout.get(design.row.agent_hash)
        gap = "" if held is None else f"{design.summary.mean - held.summary.mean:+.2f}"
        rows.append(
            _table_row(
                str(design.row.rank),
                _badged(design, run),
                design,
                interval(design.summary, html_=True),
                _holdout_cell(held, run),
                gap,
            )
        )
    searched = {design.row.agent_hash for design in run.ranked}
    for agent_hash, held in run.holdout.items():
        if agent_hash not in searched:
            role = run.roles.get(held.row.evaluation_id, "holdout")
            label = f"baseline {baselines[agent_hash]}" if agent_hash in baselines else role
            badge = f'<span class="tag baseline">{escape(label)}</span>'
            rows.append(
                _table_row(
                    "&ndash;",
                    f"<code>{held.short}</code> {badge}",
                    held,
                    "&ndash;",
                    _holdout_cell(held, run),
                    "",
                )
            )
    more = len(run.ranked) - MOST_ROWS
    note = f"<p class='note'>{more} lower-ranked designs not shown.</p>" if more > 0 else ""
    model = "<th>model</th>" if run.many_models else ""
    return (
        f"<table><thead><tr><th>#</th><th>design</th>{model}<th>components</th>"
        "<th>search score</th><th>tokens / item</th><th>holdout score</th><th>gap</th></tr>"
        f"</thead><tbody>{''.join(rows)}</tbody></table>{note}"
    )


def _table_row(rank: str, name: str, design: Design, search: str, holdout: str, gap: str) -> str:
    components = escape(" + ".join(components_of(design.spec)))
    model = [escape(str(design.row.spec.get("model")))] if design.show_model else []
    cells = [rank, name, *model, components, search, f"{design.tokens_per_item:,.0f}", holdout, gap]
    anchor = _anchor(design.row.agent_hash)
    return f'<tr id="{anchor}">' + "".join(f"<td>{cell}</td>" for cell in cells) + "</tr>"


def _anchor(agent_hash: str) -> str:
    """The id of a design's row in the leaderboard, which the meta agent's table links to."""
    return escape(f"design-{agent_hash}")


def _listed(run: Run) -> set[str]:
    """The designs that have a row in the leaderboard table (as `_leaderboard` lists them)."""
    searched = {d.row.agent_hash for d in run.ranked}
    return {d.row.agent_hash for d in run.ranked[:MOST_ROWS]} | (set(run.holdout) - searched)


def _badged(design: Design, run: Run) -> str:
    name = f"<code>{design.short}</code>"
    if design.row.agent_hash != run.leader:
        return name
    kind = "winner" if run.record.winner_hash else "leader"
    return f'{name} <span class="tag {kind}">{escape(run.leader_label)}</span>'


def _holdout_cell(held: Design | None, run: Run) -> str:
    if held is None:
        return "&ndash;"
    cell = interval(held.summary, html_=True)
    if run.roles.get(held.row.evaluation_id) == "exploratory":
        cell += ' <span class="tag exploratory">exploratory</span>'
    return cell


# -- the meta agent ----------------------------------------------------------------------------


def meta_agent_table(archive: Archive, run: Run) -> str:
    """What the meta agent proposed: counts by status, what its calls cost, and each proposal
    (newest last) with its prompt and response folded away. Everything it wrote is escaped."""
    counts = archive.proposal_counts(run.record.name)
    total = sum(counts.values())
    tally = " &middot; ".join(
        f'<span class="tag {escape(status)}">{escape(status)}</span> {n:,}'
        for status, n in counts.items()
    )
    n_calls, prompt, completion, cost = archive.search_call_totals(run.record.name).get(
        "meta", (0, 0, 0, 0.0)
    )
    totals = archive.run_totals(run.record.name)
    spent = prompt + completion
    share = spent / max(totals.prompt_tokens + totals.completion_tokens, 1)
    summary = (
        f'<p class="counts"><b>{total:,}</b> proposals: {tally}</p>'
        f'<p class="spent">{n_calls:,} meta agent call{"" if n_calls == 1 else "s"} spent '
        f"<b>{spent:,}</b> tokens "
        f"({prompt:,} prompt + {completion:,} completion), ${cost:.4f}: {share:.0%} of the "
        f"run's {totals.prompt_tokens + totals.completion_tokens:,} tokens.</p>"
    )
    shown = run.proposals[-_MOST_PROPOSALS:]
    older = len(run.proposals) - len(shown)
    note = f"<p class='note'>{older:,} older proposals not listed.</p>" if older > 0 else ""
    scores = {d.row.agent_hash: d for d in run.ranked}
    listed = _listed(run)
    rows: list[str] = []
    call = older + 1  # the row showing the prompt and response the rows after it may share
    for n, proposal in enumerate(shown, start=older + 1):
        previous = shown[n - older - 2] if n > older + 1 else None
        if previous is None or (previous.prompt, previous.response) != (
            proposal.prompt,
            proposal.response,
        ):
            call = n  # a new reply (the designs of one reply share its texts)
        rows.append(_proposal_row(n, proposal, scores, listed, call))
    return (
        f'{summary}{note}<table class="proposals"><thead><tr><th>#</th><th>operator</th>'
        "<th>status</th><th>reason</th><th>design</th><th>parents</th><th>tokens</th>"
        f"<th>prompt and response</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


def _proposal_row(
    n: int, proposal: ProposalRecord, scores: Mapping[str, Design], listed: set[str], call: int
) -> str:
    """Proposal `n`; when it came from the same reply as row `call` above, its prompt, response
    and tokens are that row's and are not repeated."""
    design = "&ndash;"
    if proposal.spec_hash is not None:
        design = _design_link(proposal.spec_hash, listed)
        scored = scores.get(proposal.spec_hash)
        if scored is not None:
            design += f' <span class="score" title="search score">{scored.summary.mean:.2f}</span>'
    parents = " ".join(_design_link(parent, listed) for parent in proposal.parents) or "none"
    texts = "".join(
        f"<details><summary>{what} ({len(text):,} characters)</summary>"
        f"<pre>{escape(_clipped(text))}</pre></details>"
        for what, text in (("prompt", proposal.prompt), ("response", proposal.response))
    )
    tokens = f"{proposal.prompt_tokens + proposal.completion_tokens:,}"
    if call != n:
        texts = f'<span class="note">the prompt and response of #{call}</span>'
        if proposal.prompt_tokens + proposal.completion_tokens == 0:
            tokens = f"in #{call}"
    cells = [
        str(n),
        f"<code>{escape(proposal.operator)}</code>",
        f'<span class="tag {escape(proposal.status)}">{escape(proposal.status)}</span>',
        escape(proposal.reason or ""),
        design,
        parents,
        tokens,
        texts,
    ]
    return "<tr>" + "".join(f"<td>{cell}</td>" for cell in cells) + "</tr>"


def _design_link(agent_hash: str, listed: set[str]) -> str:
    """A design's short hash, linked to its leaderboard row when the table has one."""
    short = f'<code title="{escape(agent_hash)}">{escape(agent_hash[:10])}</code>'
    if agent_hash not in listed:
        return short
    return f'<a href="#{_anchor(agent_hash)}">{short}</a>'


def _clipped(text: str) -> str:
    if len(text) <= _CLIP_CHARS:
        return text
    return f"{text[:_CLIP_CHARS]}\n... ({len(text) - _CLIP_CHARS:,} more characters cut)"
