"""Exports an archive's complete evaluations on one benchmark as a replay table (JSON).

    .venv/bin/python bench/replay_export.py ARCHIVE [--benchmark gsm8k] [--out PATH]

Takes the task set most designs were evaluated on (one model); writes
bench/results/replay_<benchmark>.json unless --out says otherwise.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from agentdesign.archive import Archive
from agentdesign.components import AgentDesignError
from agentdesign.search import ReplayTable


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("archive", help="archive file path or database URL")
    parser.add_argument("--benchmark", default="gsm8k")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    out = args.out or Path(__file__).parent / "results" / f"replay_{args.benchmark}.json"
    try:
        with Archive(args.archive) as archive:
            table = ReplayTable.from_archive(
                archive, benchmark=args.benchmark, note=f"exported from {Path(args.archive).name}"
            )
    except AgentDesignError as exc:
        sys.exit(f"error: {exc}")
    table.save(out)
    best = table.ranked()[0]
    print(
        f"wrote {out}: {len(table.designs)} designs x {len(table.task_ids)} tasks of "
        f"{table.benchmark} ({table.model}); best {best.mean:.2f} {best.spec.describe()}"
    )


if __name__ == "__main__":
    main()
