"""What the engine tells a record of the run kept outside the archive (`RunTracking`): that the
run started, that an evaluation finished, how the run ended; and what a record reads of the run
(`TrackedRun`). The MLflow copy (`_mlflow`) is the one there is; without it, `NoTracking` hears
nothing and costs nothing."""

from __future__ import annotations

from typing import Literal, Protocol

from agentdesign.archive import Archive, RunRecord

__all__ = ["NoTracking", "RunOutcome", "RunTracking", "TrackedRun"]

# How a process's part of a run ended: the winner confirmed on holdout ("finished"), the budget
# spent or the caller done without a holdout ("stopped"), an error ("failed"), or stopped by the
# user, e.g. Ctrl-C ("interrupted").
RunOutcome = Literal["finished", "stopped", "failed", "interrupted"]


class Warnings(Protocol):
    """Where a record's warning line goes (the run's reporter)."""

    def warning(self, line: str) -> None: ...


class TrackedRun(Protocol):
    """What a record reads of the run as it goes on (the engine's `RunContext`): read afresh each
    time, since the engine replaces the run as last read and its reporter."""

    @property
    def archive(self) -> Archive: ...

    @property
    def run(self) -> RunRecord: ...

    @property
    def reporter(self) -> Warnings: ...


class RunTracking(Protocol):
    """A record of the run outside the archive. The archive stays the source of truth: a record
    copies what the archive holds, and nothing it does (or fails to do) stops the run."""

    def run_started(self) -> None:
        """This process starts (or resumes) the run's search."""

    def evaluated(self) -> None:
        """An evaluation of the run finished (complete or pruned) in the archive."""

    def run_ended(self, outcome: RunOutcome) -> None:
        """This process's part of the run ended so; what is left to record is sent now."""


class NoTracking:
    """No record outside the archive (the default)."""

    def run_started(self) -> None:
        pass

    def evaluated(self) -> None:
        pass

    def run_ended(self, outcome: RunOutcome) -> None:
        pass
