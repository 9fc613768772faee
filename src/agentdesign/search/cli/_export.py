"""Which designs `agentdesign export` writes, and why each was chosen (the reason goes into the
exported evidence, so a reader knows whether they hold a run's winner or only its best so far)."""

from __future__ import annotations

from agentdesign.archive import Archive, RunRecord
from agentdesign.components import AgentDesignError, AgentSpec

__all__ = ["designs_to_export"]


def designs_to_export(
    archive: Archive, run: RunRecord, *, agent: str | None, pareto: bool
) -> list[tuple[AgentSpec, str]]:
    """The designs to export with the reason for each: the one named by hash, else the run's
    recorded winner, else its score-cost Pareto front (`pareto`) or its best so far."""
    if agent is not None:
        return [(AgentSpec.from_dict(archive.find_agent(agent).spec), "chosen by its hash")]
    if not pareto and run.winner_hash is not None:  # the recorded winner stands
        return [
            (AgentSpec.from_dict(archive.get_agent(run.winner_hash).spec), "its recorded winner")
        ]
    rows = (
        archive.pareto(run_name=run.name)
        if pareto
        else archive.leaderboard(run_name=run.name, limit=1)
    )
    if not rows:
        raise AgentDesignError(f"no finished agent to export in run {run.name}")
    why = "on its score-cost Pareto front" if pareto else "its best so far (no winner yet)"
    return [(AgentSpec.from_dict(row.spec), why) for row in rows]
