"""Exports an archive's evaluations on one benchmark as a replay table file.

    .venv/bin/python bench/replay_export.py ARCHIVE [--benchmark gsm8k] [--out PATH]
    .venv/bin/python bench/replay_export.py ARCHIVE --cells [--benchmark gsm8k] [--out PATH]

Without --cells: the task set most designs were evaluated on (one model), in the first format,
bench/results/replay_<benchmark>.json unless --out says otherwise. With --cells: a recording of
bench/replay_record.py, every model in the archive, each the rectangle of its designs and the
item layers all of them finished (`ReplayTable.from_layers`), one row per cell (design, model,
item, score, tokens, cost, seconds) with the designs' specs, the archive file's sha256 and the
script that recorded it, in bench/results/table_<benchmark>.json; the data's license is copied
beside it (table_<benchmark>.LICENSE). An archive file is read from a copy, so its digest is of
the file as it was.
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import sys
import tempfile
from importlib.resources import files
from pathlib import Path

from agentdesign.archive import Archive
from agentdesign.benchmarking import ReplayTable, save_cells
from agentdesign.components import AgentDesignError

RESULTS = Path(__file__).parent / "results"


def _digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as opened:
        for chunk in iter(lambda: opened.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _license(benchmark: str) -> Path:
    """The packaged license of the benchmark's data: its own folder's, else its family's (the
    BFCL categories, bfcl-multiple and the rest, share bfcl's data)."""
    data = files("agentdesign.evaluators") / "data"
    for name in dict.fromkeys((benchmark, benchmark.split("-")[0])):
        found = Path(str(data / name / "LICENSE"))
        if found.is_file():
            return found
    raise AgentDesignError(f"no license file for {benchmark}'s data: pass --license FILE")


def export_cells(archive_path: str, *, benchmark: str, out: Path, license_file: Path) -> None:
    source = Path(archive_path)
    with tempfile.TemporaryDirectory() as scratch:
        origin: dict[str, object]
        if source.is_file():
            origin = {
                "name": source.name,
                "sha256": _digest(source),
                "bytes": source.stat().st_size,
            }
            archive_url = str(Path(scratch) / "copy.sqlite")
            shutil.copyfile(source, archive_url)
        else:
            origin, archive_url = {"url": archive_path, "sha256": None}, archive_path
        with Archive(archive_url) as archive:
            models = sorted(
                {
                    str(r.spec.get("model"))
                    for r in archive.leaderboard(benchmark=benchmark, limit=1_000_000)
                }
            )
            if not models:
                raise AgentDesignError(f"the archive has no complete evaluation on {benchmark}")
            tables = [
                ReplayTable.from_layers(
                    archive, benchmark=benchmark, model=m, note=f"recorded into {source.name}"
                )
                for m in models
            ]
    license_copy = out.with_suffix(".LICENSE")
    shutil.copyfile(license_file, license_copy)
    text = license_file.read_text().splitlines()
    save_cells(
        tables,
        out,
        provenance={
            "archive": origin,
            "recorder": "bench/replay_record.py",
            "license": {
                "file": license_copy.name,
                "name": text[0].strip() if text else "",
                "notice": next((line.strip() for line in text if "Copyright" in line), ""),
            },
        },
    )
    for table in tables:
        best = table.ranked()[0]
        print(
            f"{table.model}: {len(table.designs)} designs x {len(table.task_ids)} items; best "
            f"{best.mean:.2f} {best.spec.describe()}"
        )
    print(f"wrote {out} and {license_copy.name}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("archive", help="archive file path or database URL")
    parser.add_argument("--benchmark", default="gsm8k")
    parser.add_argument("--cells", action="store_true", help="a recording, one row per cell")
    parser.add_argument("--license", type=Path, help="the data's license (default: packaged)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    try:
        if args.cells:
            export_cells(
                args.archive,
                benchmark=args.benchmark,
                out=args.out or RESULTS / f"table_{args.benchmark}.json",
                license_file=args.license or _license(args.benchmark),
            )
            return
        out = args.out or RESULTS / f"replay_{args.benchmark}.json"
        with Archive(args.archive) as archive:
            table = ReplayTable.from_archive(
                archive, benchmark=args.benchmark, note=f"exported from {Path(args.archive).name}"
            )
    except (AgentDesignError, OSError) as exc:
        sys.exit(f"error: {exc}")
    table.save(out)
    best = table.ranked()[0]
    print(
        f"wrote {out}: {len(table.designs)} designs x {len(table.task_ids)} tasks of "
        f"{table.benchmark} ({table.model}); best {best.mean:.2f} {best.spec.describe()}"
    )


if __name__ == "__main__":
    main()
