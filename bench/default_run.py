"""The default run as a new user meets it: `agentdesign run` (plus any options given) in an empty
folder, with an empty response cache, timed from start to verdict, with its peak memory.

    .venv/bin/python bench/default_run.py                      # the default run
    .venv/bin/python bench/default_run.py -- --n-holdout 40    # options passed to `agentdesign run`

A clean clone also joins the embedded model's weight parts on first use; `--weights-from DIR`
reuses a cache folder's joined weights (DIR/models), and the table says so. Prints a table: wall
seconds, peak RSS, holdout items, and each verdict line of the run.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import markdown_table

AGENTDESIGN = Path(sys.executable).with_name("agentdesign")
# "... on 40 unseen items (p = 0.125)": the verdict's lines against each baseline.
_VERDICT = re.compile(r"^.*\bon (\d+) unseen items\b.*$", re.MULTILINE)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--weights-from", type=Path, help="a cache folder holding joined weights")
    parser.add_argument("run_args", nargs="*", help="options for `agentdesign run` (after --)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="agentdesign-default-") as folder:
        cache = Path(folder) / "cache"
        cache.mkdir()
        if args.weights_from is not None:
            shutil.copytree(args.weights_from / "models", cache / "models")
        env = {**os.environ, "AGENTDESIGN_CACHE_DIR": str(cache)}
        start = time.monotonic()
        done = subprocess.run(
            [str(AGENTDESIGN), "run", *args.run_args],
            cwd=folder,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        wall = time.monotonic() - start
    peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    sys.stdout.write(done.stdout)
    if done.returncode != 0:
        sys.exit(f"agentdesign run exited {done.returncode}: {done.stderr.strip()[-2000:]}")
    verdicts = _VERDICT.findall(done.stdout)
    holdout = max((int(n) for n in verdicts), default=0)
    rows = [
        {
            "command": " ".join(["agentdesign run", *args.run_args]),
            "weights": "reused" if args.weights_from else "joined in the run",
            "wall": f"{wall:.0f} s ({wall / 60:.1f} min)",
            "peak RSS": f"{peak_kb / 1e6:.2f} GB",
            "holdout items": str(holdout),
        }
    ]
    print()
    print(markdown_table(rows, right=["wall", "peak RSS", "holdout items"]))
    for line in _VERDICT.finditer(done.stdout):
        print(f"    {line.group(0).strip()}")


if __name__ == "__main__":
    main()
