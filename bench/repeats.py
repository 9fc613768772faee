"""Designs a run scored that were one agent with a design it had scored already.

    .venv/bin/python bench/repeats.py bench/results/evidence_gsm8k_1.5b.sqlite [...]

A design can hold parts it never uses (a program of thought's tool, an experience memory without a
reviewer); a search now evaluates each design's canonical form (`AgentSpec.canonical`), where such
parts are "none". For each run of each archive (read only, never written), this prints how many of
its search designs have the canonical form of an earlier one, whether the two gave the same
replies' scores and tokens on their common items (they should: the same prompts), and the
seconds their task results record.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
from collections.abc import Sequence
from pathlib import Path

from _common import markdown_table

from agentdesign.components import AgentSpec

_DESIGNS = """
    SELECT a.spec_hash, a.spec, e.id FROM ad_run_entry r
    JOIN ad_evaluation e ON e.id = r.evaluation_id
    JOIN ad_agent a ON a.spec_hash = e.agent_hash
    WHERE r.run_id = ? AND e.split = 'search' ORDER BY r.id
"""
_RESULTS = """
    SELECT task_id, score, prompt_tokens, completion_tokens, latency_s FROM ad_task_result
    WHERE evaluation_id = ?
"""


def run_rows(path: Path) -> list[dict[str, str]]:
    """One row per run of the archive at `path`."""
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as con:
        rows = []
        for run_id, name in con.execute("SELECT id, name FROM ad_run ORDER BY id").fetchall():
            first: dict[str, int] = {}  # canonical hash -> the evaluation that scored it first
            designs, repeats, same, seconds = set(), 0, 0, 0.0
            for spec_hash, spec, evaluation in con.execute(_DESIGNS, (run_id,)).fetchall():
                if spec_hash in designs:
                    continue
                designs.add(spec_hash)
                canonical = AgentSpec.from_dict(json.loads(spec)).canonical().spec_hash
                if canonical not in first:
                    first[canonical] = evaluation
                    continue
                repeats += 1
                mine = _results(con, evaluation)
                theirs = _results(con, first[canonical])
                common = mine.keys() & theirs.keys()
                same += all(mine[t][:3] == theirs[t][:3] for t in common) and bool(common)
                seconds += sum(row[3] for row in mine.values())
            rows.append(
                {
                    "archive": path.name,
                    "run": name,
                    "search designs": str(len(designs)),
                    "repeats of an earlier design": str(repeats),
                    "with the same scores and tokens": str(same),
                    "seconds recorded on repeats": f"{seconds:,.0f}",
                }
            )
    return rows


def _results(con: sqlite3.Connection, evaluation: int) -> dict[str, tuple[float, ...]]:
    return {row[0]: tuple(row[1:]) for row in con.execute(_RESULTS, (evaluation,)).fetchall()}


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("archives", nargs="+", type=Path, help="SQLite archives (read only)")
    args = parser.parse_args(argv)
    missing = [str(p) for p in args.archives if not p.is_file()]
    if missing:
        sys.exit(f"error: no such archive: {', '.join(missing)}")
    rows = [row for path in args.archives for row in run_rows(path)]
    numbers = [h for h in rows[0] if h not in ("archive", "run")] if rows else []
    print(markdown_table(rows, right=numbers) if rows else "no runs")


if __name__ == "__main__":
    main()
