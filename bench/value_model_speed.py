"""How long the value model takes to refit and to predict, by the number of labelled designs.

    .venv/bin/python bench/value_model_speed.py [--sizes 10 30 100 1000 5000] [--repeats 3]

The value-guided strategies refit the model from scratch whenever the run's results change (so a
resumed run's model is the one an uninterrupted run would have), once per proposal: the refit
time at the archive's size is what each proposal pays. Designs are random designs of the full
space with synthetic scores (their time does not depend on the scores); one description and model
string. Prints, per size, the refit time (median of `--repeats` fits, each from scratch) and the
time to predict 100 fresh designs (median of 20), features included. Take it on a quiet machine.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from _common import markdown_table

from agentdesign.search import Labelled, SearchSpace, ValueModel


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", type=int, default=[10, 30, 100, 1000, 5000])
    parser.add_argument("--repeats", type=int, default=3, help="fits timed per size")
    args = parser.parse_args()
    space = SearchSpace(model="embedded/qwen2.5-coder-1.5b")
    rng = np.random.default_rng(0)
    designs = [space.sample(rng) for _ in range(max(args.sizes))]
    fresh = [space.sample(rng) for _ in range(100)]
    rows = [
        Labelled(spec=spec, description="gsm8k", score=float(rng.uniform()), tokens_per_item=1.0)
        for spec in designs
    ]
    table = []
    for size in args.sizes:
        fits = []
        for _ in range(args.repeats):
            started = time.perf_counter()
            model = ValueModel(seed=0).fit(rows[:size])
            fits.append(time.perf_counter() - started)
        predictions = []
        for _ in range(20):
            started = time.perf_counter()
            model.predict(fresh, description="gsm8k")
            predictions.append(time.perf_counter() - started)
        table.append(
            {
                "labelled designs": f"{size:,}",
                "refit s (median)": f"{statistics.median(fits):.3f}",
                "predict 100 designs ms (median)": f"{statistics.median(predictions) * 1000:.1f}",
            }
        )
    print(markdown_table(table, right=("refit s (median)", "predict 100 designs ms (median)")))


if __name__ == "__main__":
    main()
