"""A run's progress as it is drawn in the terminal: the designs done and to go with the best so
far, the current design's items, an ETA, then the holdout phase."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from datetime import timedelta

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TaskID,
    TextColumn,
)
from rich.table import Column
from rich.text import Text

from agentdesign.archive import Archive, EvaluationRecord, LeaderboardRow, RunRecord
from agentdesign.components import AgentSpec
from agentdesign.evaluators import TaskOutcome, summarize
from agentdesign.search.cli._format import ci_text, interval_text, row_summary
from agentdesign.search.config import Budget, RunConfig
from agentdesign.search.study import Reporter
from agentdesign.search.verdict import run_verdict

__all__ = ["ProgressReporter", "progress_bars"]


class ProgressReporter(Reporter):
    """Draws a run's progress: designs done and to go, the best design so far with its interval,
    an ETA, the current design's items, then the holdout phase with a line per result.

    Counts and the best come from the archive (search candidates only, other workers' included),
    so a resume starts where the run stands and a refiner's development items never count. The
    designs to go are `budget`'s, or the run's own budget's (None).
    """

    def __init__(
        self,
        progress: Progress,
        archive: Archive,
        budget: Budget | None,
        *,
        announce: Callable[[RunRecord], str] | None = None,
    ) -> None:
        self.progress = progress
        self.archive = archive
        self.given_budget = budget
        self.announce = announce
        self.tokens = 0
        self.items_run = 0  # by this process: the pace of the ETA
        self.items_left = 0  # of the evaluation running now
        # Why the evaluation running now is run: "candidate" or "dev" on the search split, the
        # run's role for it ("winner", "baseline", "exploratory") on the holdout; "" between.
        self.running = ""
        self.holdout = False  # the search is over: the winner and the baselines are scored
        self.holdout_done = 0
        self.done = 0
        self.best: LeaderboardRow | None = None

    def run_started(self, run: RunRecord) -> None:
        # Drawn only now, once the run passed validation, so refused input prints nothing else.
        if self.announce is not None:
            self.progress.console.print(self.announce(run))
        self.run = run
        config = RunConfig.from_dict(run.config)
        self.budget: Budget = self.given_budget or config.budget
        self.many_models = len(config.models) > 1  # each design's model is then named
        built_in = {b["label"] for b in config.baselines if b.get("spec") is None}
        # cot-sc takes its samples from CoT's cost, so CoT is scored too even when not asked for.
        extra_cot = "cot-sc" in built_in and "cot" not in built_in
        self.holdout_asked = config.confirm_top + len(config.baselines) + extra_cot
        self.holdout_planned = self.holdout_asked  # less the baselines the run will not score
        self.started_at = time.monotonic()
        self.overall: TaskID = self.progress.add_task(
            "designs", total=self.budget.max_agents, info="", deadline=None
        )
        self.current: TaskID = self.progress.add_task(
            "", total=None, visible=False, info="", tail=""
        )
        self._count_designs()

    def run_header(self, lines: Sequence[str]) -> None:
        for line in lines:
            self.progress.console.print(line, markup=False, highlight=False)

    def warning(self, line: str) -> None:
        self.run_header([line])  # above the bars, as the header is

    def agent_started(self, spec: AgentSpec, n_tasks: int, n_done: int, split: str) -> None:
        if split == "holdout":
            if not self.holdout:
                self._start_holdout()
            self.running = self._holdout_role(spec)
            label = f"  {self.running}"
        elif n_tasks == len(self.run.search_task_ids):
            self.running = "candidate"
            self._count_designs()  # designs reused whole from the archive report nothing
            label = f"  design {self.done + 1}{self._of_max()}"
        else:  # a prompt refiner scores a parent on its own development items
            self.running = "dev"
            label = "  dev items"
        self.items_left = n_tasks - n_done
        self.progress.reset(
            self.current, total=n_tasks, completed=n_done, visible=True, description=label
        )
        info = f"{spec.model}: {spec.describe()}" if self.many_models else spec.describe()
        self.progress.update(self.current, info=info, tail=f"{self.tokens:,} tokens")
        self._update_eta()

    def search_call_started(self, purpose: str) -> None:
        doing = {
            "meta": "the meta agent writes designs",
            "refinement": "a prompt is rewritten from failed tasks",
        }.get(purpose, f"a {purpose} call")
        self.progress.reset(
            self.current, total=None, visible=True, description=f"  {purpose}", info=doing
        )

    def search_call_finished(self, purpose: str, tokens: int) -> None:
        self.tokens += tokens
        self.progress.update(self.current, tail=f"{self.tokens:,} tokens", visible=False)

    def task_finished(self, outcome: TaskOutcome) -> None:
        self.tokens += outcome.prompt_tokens + outcome.completion_tokens
        self.items_run += 1
        self.items_left = max(self.items_left - 1, 0)
        self.progress.advance(self.current)
        self.progress.update(self.current, tail=f"{self.tokens:,} tokens")
        self._update_eta()

    def agent_finished(self, spec: AgentSpec, evaluation: EvaluationRecord, split: str) -> None:
        role, self.running, self.items_left = self.running, "", 0
        # A refiner's development items are never the search items (see `dev_task_ids`).
        searched = split == "search" and set(evaluation.task_ids) == set(self.run.search_task_ids)
        if split == "holdout" or searched:
            scored = summarize([r.score for r in self.archive.task_results(evaluation.id).values()])
            agent = spec.spec_hash[:10] + (f" on {spec.model}" if self.many_models else "")
            if split == "holdout":
                self.holdout_done += 1
                # a baseline the run will not score (cot-sc below 3 samples' worth of the
                # winner's tokens) leaves the plan once the verdict knows it
                skipped = len(run_verdict(self.archive, self.run.name).unscored)
                self.holdout_planned = max(self.holdout_asked - skipped, self.holdout_done)
                self.progress.update(
                    self.overall, completed=self.holdout_done, total=self.holdout_planned
                )
                line = f"holdout {role} {agent}: {interval_text(scored)}"
            else:
                previous = self.best
                self._count_designs()
                line = f"design {self.done}{self._of_max()} {agent}: {interval_text(scored)}"
                if evaluation.status == "pruned":
                    line += ", dropped by racing"
                elif self.best is not None and self.best.agent_hash == spec.spec_hash:
                    line += ", best so far" + _tie_note(self.best, previous)
            self.progress.console.print(line)
        self._update_eta()

    def _of_max(self) -> str:
        return "" if self.budget.max_agents is None else f"/{self.budget.max_agents}"

    def _count_designs(self) -> None:
        """Designs finished and the best of them, ranked as the run's winner will be."""
        self.done = self.archive.run_totals(self.run.name).n_finished
        top = self.archive.leaderboard(run_name=self.run.name, limit=1)
        self.best = top[0] if top else None
        best = "-" if self.best is None else ci_text(row_summary(self.archive, self.best))
        max_agents = self.budget.max_agents
        to_go = "" if max_agents is None else f"{max(max_agents - self.done, 0)} to go, "
        self.progress.update(self.overall, completed=self.done, info=f"{to_go}best {best}")

    def _start_holdout(self) -> None:
        """The winner is recorded now, on search scores alone: says so before any holdout item."""
        self.holdout = True
        self.run = self.archive.get_run(self.run.name)
        winner = (self.run.winner_hash or "-")[:10]
        best = None if self.best is None else row_summary(self.archive, self.best)
        search = "" if best is None else f" at {interval_text(best)}"
        self.progress.console.print(
            f"holdout: winner {winner} is fixed on the search items{search}; now it and the "
            f"baselines are scored on {len(self.run.holdout_task_ids)} unseen items"
        )
        self.holdout_done = sum(  # a resume may find some of them scored already
            e.status == "complete"
            for e in self.archive.run_evaluations(self.run.name, split="holdout")
        )
        self.progress.reset(
            self.overall,
            total=max(self.holdout_planned, self.holdout_done + 1),
            completed=self.holdout_done,
            description="holdout",
            info=f"winner {winner}, then the baselines",
        )

    def _holdout_role(self, spec: AgentSpec) -> str:
        """Why the run scores `spec` on the holdout: winner, baseline or exploratory."""
        roles = self.archive.run_roles(self.run.name)
        entries = self.archive.run_evaluations(self.run.name, split="holdout")
        return next(
            (roles[e.id] for e in reversed(entries) if e.agent_hash == spec.spec_hash), "holdout"
        )

    def _update_eta(self) -> None:
        seconds = self._seconds_left()
        deadline = None if seconds is None else time.monotonic() + seconds
        self.progress.update(self.overall, deadline=deadline)

    def _seconds_left(self) -> float | None:
        """Items still to run times this process's pace so far: an upper bound while racing drops
        designs early; None before the first item, or with neither an agent nor a time budget."""
        if not self.items_run:
            return None
        elapsed = time.monotonic() - self.started_at
        pace = elapsed / self.items_run
        waiting = self.holdout_planned - self.holdout_done - (self.holdout and bool(self.running))
        holdout = pace * len(self.run.holdout_task_ids) * max(waiting, 0)
        current = pace * self.items_left
        if self.holdout:
            return current + holdout
        bounds = []
        if self.budget.max_agents is not None:
            unstarted = self.budget.max_agents - self.done - (self.running == "candidate")
            bounds.append(current + pace * len(self.run.search_task_ids) * max(unstarted, 0))
        if self.budget.max_minutes is not None:
            spent = self.run.elapsed_s + elapsed
            bounds.append(max(self.budget.max_minutes * 60 - spent, 0.0))
        return min(bounds) + holdout if bounds else None


_LONGEST_ETA_S = 999 * 86_400


class _EtaColumn(ProgressColumn):
    """The run's row: the time left, counting down between updates (rich's own estimate needs
    steps faster than its 30-second window, and a design takes minutes). Other rows: `tail`."""

    def render(self, task: Task) -> Text:
        if "deadline" not in task.fields:
            return Text(str(task.fields.get("tail", "")))
        deadline = task.fields["deadline"]
        if deadline is None:
            return Text("ETA -:--:--")
        left = max(deadline - time.monotonic(), 0)
        if left > _LONGEST_ETA_S:  # a budget of 10**18 agents, say: past what timedelta holds
            return Text(f"ETA > {_LONGEST_ETA_S // 86_400} days")
        return Text(f"ETA {timedelta(seconds=round(left))}")


def progress_bars(out: Console) -> Progress:
    """Two rows that fit 80 columns: the run (designs, then the holdout) and the current design."""
    return Progress(
        TextColumn("{task.description}", table_column=Column(no_wrap=True)),
        BarColumn(bar_width=10),
        MofNCompleteColumn(),
        TextColumn(
            "{task.fields[info]}",
            markup=False,
            table_column=Column(ratio=1, no_wrap=True, overflow="ellipsis"),
        ),
        _EtaColumn(),
        console=out,
        expand=True,
        transient=False,
    )


def _tie_note(best: LeaderboardRow, previous: LeaderboardRow | None) -> str:
    """Why a design that only equals the previous best's score now leads: the leaderboard's
    tie-break (see `Archive.leaderboard`), said so that a run of equal "best so far" lines reads
    as ties rather than gains."""
    if previous is None or previous.agent_hash == best.agent_hash or previous.mean != best.mean:
        return ""
    if best.cost < previous.cost:
        return " (a tie, costs less)"
    tokens = best.prompt_tokens + best.completion_tokens
    if tokens < previous.prompt_tokens + previous.completion_tokens:
        return " (a tie, fewer tokens)"
    return " (a tie)"
