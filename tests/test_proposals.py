"""The meta agent's proposals in the archive (schema 7): every one kept, valid or not, with its
prompt, response, operator, parents and fate; on SQLite and PostgreSQL alike."""

from __future__ import annotations

import io
from collections.abc import Callable
from datetime import UTC
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from sqlalchemy import create_engine, inspect, text
from test_archive import _create_run, _evaluated

from agentdesign.archive import Archive, ArchiveError, ProposalRecord
from agentdesign.archive.database._tables import SCHEMA_VERSION
from agentdesign.components import AgentSpec


def _propose(archive: Archive, **changes: Any) -> ProposalRecord:
    values: dict[str, Any] = {
        "run_name": "run-1",
        "operator": "meta",
        "parents": ["p1"],
        "prompt": "Here is the archive ...\nPropose a better agent.",
        "response": '{"model": "fake", "prompt": "cot"}',
        "status": "accepted",
        "reason": None,
        "spec_hash": "new1",
        "prompt_tokens": 120,
        "completion_tokens": 30,
    }
    values.update(changes)
    return archive.add_proposal(**values)


def _one_line_error(call: Any, match: str) -> str:
    with pytest.raises(ArchiveError, match=match) as caught:
        call()
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_each_status_round_trips(archive: Archive) -> None:
    _create_run(archive)
    accepted = _propose(archive, parents=["p1", "p2"], operator="merge")
    invalid = _propose(
        archive,
        status="invalid",
        reason="unknown component 'telepathy'",
        spec_hash=None,
        response="I think the agent should read minds.",
    )
    duplicate = _propose(
        archive, status="duplicate", reason="already archived", spec_hash="old1", parents=[]
    )
    failed = _propose(
        archive,
        status="failed",
        reason="provider error: rate limited after 3 retries",
        spec_hash=None,
        response="",
        operator="meta-code",
        prompt_tokens=0,
        completion_tokens=0,
    )
    assert accepted.run_name == "run-1"
    assert accepted.parents == ("p1", "p2") and accepted.operator == "merge"
    assert (accepted.status, accepted.reason, accepted.spec_hash) == ("accepted", None, "new1")
    assert (accepted.prompt_tokens, accepted.completion_tokens) == (120, 30)
    assert accepted.created_at.tzinfo == UTC
    assert invalid.reason == "unknown component 'telepathy'" and invalid.spec_hash is None
    assert duplicate.parents == () and duplicate.spec_hash == "old1"
    assert failed.response == "" and failed.operator == "meta-code"
    stored = archive.proposals("run-1")
    assert stored == [accepted, invalid, duplicate, failed]  # oldest first
    assert [p.status for p in stored] == ["accepted", "invalid", "duplicate", "failed"]
    # the prompt and the response come back exactly, newlines and all
    assert stored[0].prompt == "Here is the archive ...\nPropose a better agent."
    with pytest.raises(AttributeError):
        stored[0].status = "invalid"  # type: ignore[misc]


def test_proposals_are_filtered_by_status_and_design(archive: Archive) -> None:
    _create_run(archive)
    _create_run(archive, "run-2")
    first = _propose(archive)
    again = _propose(archive, status="duplicate", reason="same as new1", spec_hash="new1")
    bad = _propose(archive, status="invalid", reason="not JSON", spec_hash=None)
    other = _propose(archive, run_name="run-2", spec_hash="new2")
    assert archive.proposals("run-1", status="accepted") == [first]
    assert archive.proposals("run-1", status="invalid") == [bad]
    assert archive.proposals("run-1", status="failed") == []
    assert archive.proposals("run-1", spec_hash="new1") == [first, again]
    assert archive.proposals("run-1", status="accepted", spec_hash="new1") == [first]
    assert archive.proposals("run-1", spec_hash="new2") == []  # run-2's, not run-1's
    assert archive.proposals("run-2") == [other]
    counts = archive.proposal_counts("run-1")  # every status, zeros included
    assert {"accepted", "invalid", "duplicate", "failed"} <= set(counts)
    assert (counts["accepted"], counts["invalid"], counts["duplicate"]) == (1, 1, 1)
    assert counts["failed"] == 0 and sum(counts.values()) == 3
    assert archive.proposal_counts("run-2")["accepted"] == 1


def test_many_proposals_come_back_oldest_first(archive: Archive) -> None:
    _create_run(archive)
    statuses = ["failed", "accepted", "invalid", "accepted", "duplicate", "invalid"] * 3
    made = [
        _propose(
            archive,
            status=status,
            reason=None if status == "accepted" else f"reason {i}",
            spec_hash=f"h{i}" if status != "invalid" else None,
            prompt=f"prompt {i}",
        )
        for i, status in enumerate(statuses)
    ]
    assert [p.prompt for p in archive.proposals("run-1")] == [f"prompt {i}" for i in range(18)]
    assert archive.proposals("run-1") == made
    accepted = archive.proposals("run-1", status="accepted")
    assert [p.id for p in accepted] == sorted(p.id for p in accepted) and len(accepted) == 6


def test_bad_proposals_are_refused_in_one_line_and_write_nothing(archive: Archive) -> None:
    _create_run(archive, "beta")
    _create_run(archive, "run-1")
    _one_line_error(
        lambda: _propose(archive, status="weird"),
        r"proposal status must be one of accepted, .*invalid, duplicate, failed, not 'weird'",
    )
    _one_line_error(
        lambda: _propose(archive, run_name="ghost"),
        r"no run named 'ghost' \(runs: beta, run-1\)",
    )
    for changes, match in (
        ({"operator": ""}, "operator must be a non-empty string"),
        ({"parents": "p1"}, "parents must be a sequence of spec hashes"),
        ({"parents": ["p1", ""]}, "a spec hash in parents must be a non-empty string"),
        ({"prompt": ""}, "prompt must be a non-empty string"),
        ({"response": None}, "response must be a string"),
        ({"spec_hash": ""}, "spec_hash must be a non-empty string"),
        ({"prompt_tokens": -1}, "prompt_tokens must not be negative"),
        ({"completion_tokens": 1.5}, "completion_tokens must be an integer"),
        ({"spec_hash": None}, "an accepted proposal needs the spec_hash"),
        ({"status": "invalid", "reason": None}, "status 'invalid' needs a reason"),
        ({"status": "failed", "reason": " "}, "status 'failed' needs a reason"),
    ):
        _one_line_error(lambda changes=changes: _propose(archive, **changes), match)
    assert archive.proposals("run-1") == [] and archive.proposals("beta") == []
    _one_line_error(lambda: archive.proposals("ghost"), "no run named 'ghost'")
    _one_line_error(lambda: archive.proposal_counts("ghost"), "no run named 'ghost'")
    _one_line_error(
        lambda: archive.proposals("run-1", status="odd"), "proposal status must be one of"
    )


def test_proposal_tokens_are_not_counted_twice(archive: Archive) -> None:
    """The meta agent's call counts once, as a search call; its proposal's tokens are a note."""
    _create_run(archive)
    _evaluated(archive, "a", 0.5, run_name="run-1")
    before = archive.run_totals("run-1")
    archive.add_search_call(
        run_name="run-1",
        purpose="meta",
        model="m",
        prompt_tokens=120,
        completion_tokens=30,
        cost=0.0,
        latency_s=1.0,
    )
    _propose(archive)
    totals = archive.run_totals("run-1")
    assert totals.prompt_tokens - before.prompt_tokens == 120
    assert totals.completion_tokens - before.completion_tokens == 30
    assert totals.n_search_calls == 1 and totals.n_agents == before.n_agents


def test_search_calls_are_summed_by_purpose(archive: Archive) -> None:
    """What the meta agent spent, apart from refinements: the purposes add up to the totals."""
    _create_run(archive)
    _create_run(archive, "run-2")
    _evaluated(archive, "a", 0.5, run_name="run-1")
    assert archive.search_call_totals("run-1") == {}  # no search call yet: no purpose
    for run_name, purpose, prompt, completion, cost in (
        ("run-1", "meta", 100, 20, 0.25),
        ("run-1", "refinement", 7, 3, 0.0),
        ("run-1", "meta", 50, 10, 0.5),
        ("run-2", "meta", 1000, 1000, 1.0),  # another run's
    ):
        archive.add_search_call(
            run_name=run_name,
            purpose=purpose,
            model="m",
            prompt_tokens=prompt,
            completion_tokens=completion,
            cost=cost,
            latency_s=1.0,
        )
    by_purpose = archive.search_call_totals("run-1")
    assert by_purpose == {"meta": (2, 150, 30, 0.75), "refinement": (1, 7, 3, 0.0)}
    assert list(by_purpose) == ["meta", "refinement"]
    totals = archive.run_totals("run-1")
    assert totals.n_search_calls == sum(n for n, _, _, _ in by_purpose.values())
    evaluation = archive.run_evaluations("run-1")[0]
    assert totals.prompt_tokens == evaluation.prompt_tokens + 157
    assert archive.search_call_totals("run-2") == {"meta": (1, 1000, 1000, 1.0)}
    _one_line_error(lambda: archive.search_call_totals("ghost"), "no run named 'ghost'")


def test_a_schema_6_archive_is_upgraded_and_keeps_its_data(archive_url: str) -> None:
    """An archive as schema 6 left it (no ad_proposal nor anything later, stamped 0006) opens
    as the current schema."""
    with Archive(archive_url) as archive:
        _create_run(archive)
        evaluation = _evaluated(archive, "a", 0.5, run_name="run-1")
        archive.add_search_call(
            run_name="run-1",
            purpose="refinement",
            model="m",
            prompt_tokens=7,
            completion_tokens=3,
            cost=0.2,
            latency_s=1.0,
        )
        totals = archive.run_totals("run-1")
        board = archive.leaderboard(run_name="run-1")
        results = archive.task_results(evaluation.id)
    engine = create_engine(archive_url)
    try:
        with engine.begin() as conn:
            conn.execute(text("DROP TABLE ad_proposal"))
            conn.execute(text("DROP TABLE ad_holdout_look"))  # schema 8
            conn.execute(text("ALTER TABLE ad_run DROP COLUMN dev_task_ids"))
            conn.execute(text("UPDATE ad_meta SET value = '6' WHERE key = 'schema_version'"))
            conn.execute(text("UPDATE ad_alembic_version SET version_num = '0006'"))
        with engine.connect() as conn:
            assert "ad_proposal" not in inspect(conn).get_table_names()
        with Archive(archive_url) as archive:
            assert archive.run_totals("run-1") == totals
            assert archive.leaderboard(run_name="run-1") == board
            assert archive.task_results(evaluation.id) == results
            assert archive.proposals("run-1") == []
            made = _propose(archive)
            assert archive.proposals("run-1", spec_hash="new1") == [made]
        with engine.connect() as conn:
            meta = dict(conn.execute(text("SELECT key, value FROM ad_meta")).all())
            revision = conn.execute(text("SELECT version_num FROM ad_alembic_version")).scalar()
            indexes = {i["name"] for i in inspect(conn).get_indexes("ad_proposal")}
        assert meta["schema_version"] == str(SCHEMA_VERSION)
        assert revision == f"{SCHEMA_VERSION:04d}"
        assert {"ix_ad_proposal_run_id", "ix_ad_proposal_spec_hash"} <= indexes
    finally:
        engine.dispose()
    with Archive(archive_url) as archive:  # a second open finds it current and keeps it
        assert len(archive.proposals("run-1")) == 1


# -- what `show` prints ---------------------------------------------------------------------------


def _shown(print_it: Callable[[Console], None]) -> str:
    out = io.StringIO()
    print_it(Console(file=out, width=200, color_system=None))
    return out.getvalue()


def test_show_lineage_prints_the_meta_agents_prompt_and_response(tmp_path: Path) -> None:
    from agentdesign.search.cli import print_lineage

    prompt = "Improve on [bold]p1[/bold]: " + "x" * 1000  # markup-like text prints as it is
    parent, child = (AgentSpec.create(model=model) for model in ("fake/a", "fake/b"))
    with Archive(str(tmp_path / "a.db")) as archive:
        _create_run(archive)
        archive.add_agent(spec=parent.to_dict(), spec_hash=parent.spec_hash)
        archive.add_agent(
            spec=child.to_dict(),
            spec_hash=child.spec_hash,
            parent_hash=parent.spec_hash,
            operator="meta",
        )
        _propose(archive, status="invalid", reason="bad JSON", spec_hash=None, prompt="before")
        _propose(
            archive,
            parents=[parent.spec_hash],
            spec_hash=child.spec_hash,
            prompt=prompt,
            response="{}",
        )
        shown = _shown(lambda console: print_lineage(console, archive, child.spec_hash[:8]))
        plain = _shown(lambda console: print_lineage(console, archive, parent.spec_hash[:8]))
    assert f"lineage of {child.spec_hash[:10]}" in shown
    assert (
        f"made by the meta agent in run run-1: operator meta, parents {parent.spec_hash[:10]}"
        in shown
    )
    assert "120 + 30 tokens" in shown
    assert "prompt (1,028 characters):" in shown
    assert "Improve on [bold]p1[/bold]: " + "x" * 572 + "\n... (428 more characters cut)" in shown
    assert "response (2 characters):\n{}\n" in shown
    assert "before" not in shown  # the refused proposal made no agent
    assert "meta agent" not in plain  # a design the meta agent did not make


def test_show_run_counts_the_meta_agents_proposals(tmp_path: Path) -> None:
    from agentdesign.search.cli import print_leaderboard

    with Archive(str(tmp_path / "a.db")) as archive:
        _create_run(archive)
        _create_run(archive, "quiet")
        _propose(archive, spec_hash="a")
        _propose(archive, status="duplicate", reason="same as a", spec_hash="a")
        for i in range(2):
            _propose(archive, status="invalid", reason=f"bad {i}", spec_hash=None)
        _propose(archive, status="failed", reason="timeout", spec_hash=None, response="")
        shown = _shown(lambda console: print_leaderboard(console, archive, "run-1", limit=5))
        quiet = _shown(lambda console: print_leaderboard(console, archive, "quiet", limit=5))
    lines = [line for line in shown.splitlines() if line.startswith("meta agent:")]
    assert len(lines) == 1
    assert lines[0].startswith("meta agent: 5 proposals, 1 accepted, 4 refused (")
    assert lines[0].endswith(")")
    for count in ("invalid 2", "duplicate 1", "failed 1"):
        assert count in lines[0]
    assert "meta agent" not in quiet
