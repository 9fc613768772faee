"""The HTML report: one self-contained page with every section, from full runs and bare ones."""

from __future__ import annotations

import hashlib
import html
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest
from test_meta import designs_and_answers
from test_strategies import config

from agentdesign.archive import Archive
from agentdesign.components import AgentSpec, Message
from agentdesign.components.testing import FakeChatModel
from agentdesign.evaluators import TaskOutcome, get_benchmark, summarize
from agentdesign.search import Budget, RunConfig, run_search
from agentdesign.search.report import write_report

GOLD = {t.question: t.answer for t in get_benchmark("gsm8k").tasks()}
SECTIONS = (
    "verdict",
    "leaderboard",
    "progress",
    "pareto",
    "items",
    "baselines",
    "value-model",
    "lineage",
)
PLOTS = ("progress", "pareto", "items", "baselines", "value-model", "lineage")


def noisy(model: str, messages: Sequence[Message], temperature: float, seed: int | None) -> str:
    """Right more often for some designs (by their first prompt) and on some items (easy ones),
    as on a real benchmark; the same request always gets the same answer, in a form every
    workflow reads (a final line, and a ReAct finish)."""
    question = next(
        (part for m in messages for part in m["content"].split("\n") if part in GOLD), ""
    )
    skill, ease, luck = (
        hashlib.sha256(repr(key).encode()).digest()[0] / 255
        for key in ((messages[0]["content"], temperature), question, (messages, seed))
    )
    answer = GOLD[question] if luck < (0.2 + 0.6 * skill) * (0.4 + ease) else "-1"
    return f"Thought: done.\nAction: finish[{answer}]\nAnswer: {answer}"


def searched_report(factory: pytest.TempPathFactory) -> Path:
    """The report of an evolution run on the fake model: enough designs for every plot, the
    baselines, and a second design confirmed on the holdout (exploratory). Made once a session:
    this module and the browser test read the same file."""
    directory = factory.getbasetemp() / "searched-report"
    path = directory / "report.html"
    if path.exists():
        return path
    directory.mkdir()
    with Archive(str(directory / "report.db")) as archive:
        run_search(
            archive,
            RunConfig.of(
                name="full",
                benchmark="gsm8k",  # `noisy` answers from its gold answers
                model="fake/model",
                strategy="evolution",
                budget=Budget(max_agents=10),
                n_search=8,
                n_holdout=6,
                confirm_top=2,
            ),
            llm=FakeChatModel(noisy),
        )
        write_report(archive, "full", path)
    return path


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> str:
    return searched_report(tmp_path_factory).read_text(encoding="utf-8")


def assert_self_contained(page: str) -> None:
    """No script, style sheet, image or frame from the network: the page must open offline."""
    sources = re.findall(r"""<(?:script|link|img|iframe)\b[^>]*\b(?:src|href)\s*=""", page, re.I)
    assert sources == [], sources
    assert "cdn.plot.ly" not in page.split("</script>", 1)[1]  # only inside plotly.js itself
    assert page.count("* plotly.js v") == 1  # plotly.js inlined once, not once per figure


def test_a_full_run_has_every_section_and_plot_and_embeds_plotly_once(page: str) -> None:
    assert_self_contained(page)
    for section in SECTIONS:
        assert f'<section id="{section}">' in page, section
    assert 'id="meta-agent"' not in page and "meta agent" not in page  # no meta agent, no section
    for plot in PLOTS:
        assert f'id="plot-{plot}"' in page, plot
    assert 'class="skip"' not in page  # every plot had what it needs
    assert "Plotly.newPlot" in page and page.count('class="plotly-graph-div"') == len(PLOTS)


def test_the_verdict_and_table_say_how_far_to_trust_each_score(page: str, tmp_path: Path) -> None:
    verdict = page.split('<section id="verdict">')[1].split("</section>")[0]
    assert "baseline cot" in verdict and "unseen items" in verdict
    table = page.split('<section id="leaderboard">')[1].split("</section>")[0]
    assert '<span class="tag winner">winner</span>' in table
    assert '<span class="tag exploratory">exploratory</span>' in table
    assert '<span class="tag baseline">baseline cot</span>' in table
    text = re.sub(r"<[^>]+>", "", table)
    method = re.escape(summarize([0.0, 1.0]).method)
    for n in (8, 6):  # search items, holdout items
        assert re.search(rf"\d\.\d\d \[\d\.\d\d, \d\.\d\d\] {method} n={n}", text)


def hand_run(archive: Archive, name: str, designs: Mapping[str, Sequence[float]]) -> None:
    """A run written straight into the archive: one search evaluation per design (any scores
    in [0, 1]), each design bred from the one before, the last by a crossover with a partner the
    run never scored; no holdout, no baseline and no recorded winner."""
    tasks = [f"t{i}" for i in range(len(next(iter(designs.values()), [0.0])))]
    archive.create_run(
        name=name,
        benchmark="gsm8k",
        model="fake/model",
        strategy="random",
        budget={},
        config={},
        split_seed=0,
        search_task_ids=tasks,
        holdout_task_ids=[],
    )
    partner = AgentSpec.create(model="fake/model", workflow="debate")
    archive.add_agent(spec=partner.to_dict(), spec_hash=partner.spec_hash)
    parent: str | None = None
    for n, (workflow, scores) in enumerate(designs.items(), start=1):
        spec = AgentSpec.create(model="fake/model", workflow=workflow)
        last = n == len(designs) and parent is not None
        archive.add_agent(
            spec=spec.to_dict(),
            spec_hash=spec.spec_hash,
            parent_hash=parent,
            co_parent_hash=partner.spec_hash if last else None,
            operator=None if parent is None else "crossover" if last else "mutation",
        )
        parent = spec.spec_hash
        evaluation = archive.get_or_create_evaluation(
            agent_hash=spec.spec_hash, benchmark="gsm8k", task_ids=tasks, split="search"
        )
        for task, score in zip(tasks, scores, strict=True):
            archive.add_task_result(
                evaluation.id, TaskOutcome(task, "out", "1", score, 10 * n, 5, 0.0, 0.1)
            )
        summary = summarize(scores)
        archive.finish_evaluation(
            evaluation.id,
            status="complete",
            mean=summary.mean,
            ci_low=summary.ci_low,
            ci_high=summary.ci_high,
        )
        archive.add_run_entry(
            run_name=name,
            agent_hash=spec.spec_hash,
            evaluation_id=evaluation.id,
            trial_number=None,
        )


@pytest.mark.parametrize(
    ("designs", "drawn"),
    [
        ({}, ()),
        ({"single": [0.25, 0.5, 1.0]}, ("progress", "pareto", "items", "lineage")),
        (
            {"single": [0.25, 0.5, 0.0], "self_consistency": [0.75, 0.0, 0.6]},
            ("progress", "pareto", "items", "lineage"),
        ),
    ],
    ids=["no-evaluation", "one-evaluation", "partial-scores"],
)
def test_a_bare_run_says_what_is_missing_instead_of_failing(
    tmp_path: Path, designs: Mapping[str, Sequence[float]], drawn: Sequence[str]
) -> None:
    path = tmp_path / "bare.html"
    with Archive(str(tmp_path / "bare.db")) as archive:
        hand_run(archive, "bare", designs)
        write_report(archive, "bare", path)
    page = path.read_text(encoding="utf-8")
    assert_self_contained(page)
    for section in SECTIONS:
        assert f'<section id="{section}">' in page, section
    for plot in PLOTS:
        assert (f'id="plot-{plot}"' in page) == (plot in drawn), plot
    assert "no winner recorded yet" in page
    assert "No baseline scored on the holdout yet" in page
    assert "Not enough designs to judge the value model" in page
    assert 'id="meta-agent"' not in page and "<details>" not in page
    if len(designs) == 2:  # the leader, bred from the other design and an unscored partner
        assert "not scored in this run" in page and '"text":"crossover"' in page


# -- the meta agent -------------------------------------------------------------------------------

# Model-written text with markup in it: the report must show it as text, never as HTML.
INJECTED = '<b id="injected">bold & "quoted"</b>'


def marked_up(model: str, messages: Sequence[Message], temperature: float, seed: int | None) -> str:
    """`designs_and_answers`, its meta agent replies opening with markup."""
    reply = designs_and_answers(model, messages, temperature, seed)
    return f"{INJECTED}\n{reply}" if messages[0]["content"].startswith("You design") else reply


def meta_report(factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The report of a short meta run (code workflows on) on the fake model, and its archive:
    one proposal accepted, one invalid. Made once a session, for this module and the browser's."""
    directory = factory.getbasetemp() / "meta-report"
    path, database = directory / "report.html", directory / "meta.db"
    if path.exists():
        return path, database
    directory.mkdir()
    with Archive(str(database)) as archive:
        run_search(
            archive,
            config("meta", "meta", meta_code=True, budget=Budget(max_agents=3)),
            llm=FakeChatModel(marked_up),
        )
        write_report(archive, "meta", path)
    return path, database


def section(page: str, anchor: str) -> str:
    return page.split(f'<section id="{anchor}">')[1].split("</section>")[0]


def test_a_meta_run_shows_every_proposal_its_fate_and_what_its_calls_cost(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    path, database = meta_report(tmp_path_factory)
    page = path.read_text(encoding="utf-8")
    with Archive(str(database)) as archive:
        proposals = archive.proposals("meta")
        counts = archive.proposal_counts("meta")
        n_calls, prompt, completion, _ = archive.search_call_totals("meta")["meta"]
    assert_self_contained(page)
    meta = section(page, "meta-agent")
    # each reply: the code design (accepted once, then a duplicate) and an invalid one
    assert counts["accepted"] == 1 and counts["invalid"] == n_calls
    assert f"<b>{sum(counts.values())}</b> proposals" in meta
    for status, n in counts.items():
        assert f'<span class="tag {status}">{status}</span> {n}' in meta, status
    assert f"spent <b>{prompt + completion:,}</b> tokens ({prompt:,} prompt" in meta
    assert n_calls >= 1 and prompt > 0
    # one row a proposal, newest last, a refused one with its reason
    rows = meta.split("<tbody>")[1].split("<tr>")[1:]
    assert len(rows) == len(proposals)
    for row, proposal in zip(rows, proposals, strict=True):
        assert f'<span class="tag {proposal.status}">' in row
        assert f"<code>{proposal.operator}</code>" in row
    invalid = next(p for p in proposals if p.status == "invalid")
    assert "tree_of_thoughts" in (invalid.reason or "")
    assert html.escape(invalid.reason or "") in meta
    # the model's text, escaped and folded away: shown once for the reply its designs share
    assert INJECTED not in page and 'id="injected"' not in page
    assert html.escape(INJECTED) in meta
    assert meta.count("<details>") == 2 * n_calls and "<details open" not in meta
    assert "the prompt and response of #1" in meta
    # the design it made links to its leaderboard row, and the lineage names its operator
    made = next(p for p in proposals if p.status == "accepted").spec_hash
    assert made is not None
    assert f'<a href="#design-{made}">' in meta
    assert f'<tr id="design-{made}">' in section(page, "leaderboard")
    lineage = section(page, "lineage")
    assert '"text":"meta-code"' in lineage and "written by the meta agent" in lineage


def test_long_texts_are_clipped_and_old_proposals_summarised(tmp_path: Path) -> None:
    """Written by hand: many proposals, each its own call, one prompt far past the clip."""
    path = tmp_path / "many.html"
    with Archive(str(tmp_path / "many.db")) as archive:
        hand_run(archive, "many", {"single": [0.5, 1.0]})
        for i in range(205):
            archive.add_proposal(
                run_name="many",
                operator="meta",
                parents=[],
                prompt=("p" * 10_000) if i == 204 else f"prompt {i}",
                response=f"</pre><script>alert({i})</script>",
                status="failed" if i % 2 else "duplicate",
                reason=f"<i>reason {i}</i>",
                spec_hash=None,
                prompt_tokens=10,
                completion_tokens=5,
            )
        write_report(archive, "many", path)
    page = path.read_text(encoding="utf-8")
    meta = section(page, "meta-agent")
    assert "<b>205</b> proposals" in meta
    assert "5 older proposals not listed." in meta
    rows = meta.split("<tbody>")[1].split("<tr>")[1:]
    assert len(rows) == 200 and rows[0].startswith("<td>6</td>")  # the newest 200, oldest first
    assert rows[-1].startswith("<td>205</td>") and "6,000 more characters cut" in rows[-1]
    assert "<script>alert" not in page and "<i>reason" not in page
    assert "&lt;/pre&gt;&lt;script&gt;alert(204)" in rows[-1] and "&lt;i&gt;reason 204" in rows[-1]
    assert "spent <b>0</b> tokens" in meta  # no search call recorded: nothing the section invents
