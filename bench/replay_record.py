"""Records a replay table: designs chosen to cover the space, on a benchmark's items (GSM8K test
items unless named), item layer by item layer, through the product
(`agentdesign.benchmarking._recording`).

    .venv/bin/python bench/replay_record.py [--model embedded/qwen2.5-coder-0.5b] [--designs 40]
        [--items 100] [--layer 25] [--archive bench/results/table.sqlite] [--estimate]
        [--benchmark gsm8k] [--exclude-benchmark B]
    .venv/bin/python bench/replay_export.py bench/results/table.sqlite --cells   # the table file

Every design is scored on items 1-25, then every design on 26-50, and so on, one evaluation per
design and layer in the archive: stopped anywhere, the archive holds a rectangular table on an
item prefix; rerun the same command to resume (finished items are never run again, and the
designs the archive began come first, as recorded: `resume_designs`), or with more --items to
extend it. One line per finished design-layer (mean, tokens, recorded seconds); first,
a budget estimate at the seconds per cell the archive already holds for these designs (else a
stated guess). One model per process: record the 0.5B model's --designs 40, then the 1.5B
model's --designs 10 (the anchors: chain of thought, self-consistency and the cheap strong
designs of the first table), each into the same archive.

The designs (`table_designs`): the anchors, a pairwise covering design of the components, every
parameter at each of its grid points under cheap limits (token caps 128-384, at most 3 samples
or agents, one refinement round), then random grid designs. The items: a seeded sample of the
benchmark without the items a run on --exclude-benchmark (by default the same benchmark) with
--exclude-seed/--exclude-search/--exclude-holdout looks at (by default the evidence runs', seed 29
with 30 search and 150 holdout items, which hold the 0.5B run's 100, and the dev items refinement
would read). On a benchmark that names components it cannot use (BFCL: program of thought, and the
memories that show worked examples, since it has none), the designs leave them out. Responses are
not cached: each cell's seconds are its own.

The second table: `--benchmark bfcl-multiple --exclude-benchmark bfcl --layer 10 --archive
bench/results/table_bfcl.sqlite` (the BFCL evidence runs drew their items from all of BFCL),
exported with `replay_export.py bench/results/table_bfcl.sqlite --cells --benchmark bfcl-multiple`.

bench/results/replay.sqlite (the first table, 60 designs x 10 items) was recorded by this
script's first version, on the first 10 search items of the seed-0 split.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from agentdesign.archive import Archive
from agentdesign.benchmarking import (
    GUESS_S_PER_CELL,
    LayerDone,
    estimate,
    record_layers,
    resume_designs,
    run_items,
    table_designs,
    table_items,
)
from agentdesign.components import (
    AgentDesignError,
    LLMCallError,
    check_model,
    default_chat_model,
)
from agentdesign.evaluators import examples_from_tasks, get_benchmark
from agentdesign.search.space import unsuited_components


def _duration(seconds: float) -> str:
    hours, minutes = divmod(round(seconds / 60), 60)
    return f"{hours} h {minutes} min" if hours else f"{minutes} min"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="embedded/qwen2.5-coder-0.5b")
    parser.add_argument("--benchmark", default="gsm8k")
    parser.add_argument(
        "--exclude-benchmark", help="the benchmark the excluded run drew from (default: the same)"
    )
    parser.add_argument("--designs", type=int, default=40)
    parser.add_argument("--items", type=int, default=100)
    parser.add_argument("--layer", type=int, default=25, help="items per layer")
    parser.add_argument("--seed", type=int, default=0, help="seed of the designs")
    parser.add_argument("--item-seed", type=int, default=0, help="seed of the items' sample")
    parser.add_argument("--exclude-seed", type=int, default=29)
    parser.add_argument("--exclude-search", type=int, default=30)
    parser.add_argument("--exclude-holdout", type=int, default=150)
    parser.add_argument(
        "--archive", type=Path, default=Path(__file__).parent / "results" / "table.sqlite"
    )
    parser.add_argument("--estimate", action="store_true", help="print the estimate and stop")
    args = parser.parse_args()
    if args.designs < 1 or args.items < 1 or args.layer < 1:
        sys.exit("error: --designs, --items and --layer must be at least 1")
    try:
        benchmark = get_benchmark(args.benchmark)
        check_model(args.model)
        excluded = run_items(
            get_benchmark(args.exclude_benchmark or args.benchmark),
            seed=args.exclude_seed,
            n_search=args.exclude_search,
            n_holdout=args.exclude_holdout,
        )
        items = table_items(benchmark, n_items=args.items, seed=args.item_seed, exclude=excluded)
    except AgentDesignError as exc:
        sys.exit(f"error: {exc}")
    designs = table_designs(
        args.model, args.designs, seed=args.seed, unsuited=unsuited_components(benchmark)
    )
    layers = -(-len(items) // args.layer)
    with Archive(str(args.archive)) as archive:
        designs = resume_designs(archive, designs, benchmark=benchmark.name)
        pool = {t.id for t in benchmark.tasks()}
        left = estimate(archive, designs, items, layer=args.layer, benchmark=benchmark.name)
        pace = (
            f"measured on {left.measured_designs} of the designs"
            if left.measured
            else f"a guess: {GUESS_S_PER_CELL:.0f} s, the 1.5B model's mean on the first table"
        )
        print(
            f"{len(designs)} designs x {len(items)} items ({layers} layers of {args.layer}) of "
            f"{args.model}, {len(excluded & pool)} items of the excluded run left out; "
            f"{left.cells_done} cells done, {left.cells_left} left at "
            f"{left.seconds_per_cell:.1f} s per cell ({pace}): about {_duration(left.seconds)}",
            flush=True,
        )
        if not left.cells_left:
            print("nothing left to record: export it (bench/replay_export.py ARCHIVE --cells)")
        if args.estimate or not left.cells_left:
            return
        llm = default_chat_model(cache=False)
        started = time.perf_counter()
        try:  # loaded before the first cell, whose seconds would otherwise include it
            llm.complete(
                model=args.model,
                messages=[{"role": "user", "content": "Hi"}],
                temperature=0.0,
                max_tokens=1,
                seed=0,
            )
        except LLMCallError as exc:
            sys.exit(f"error: {args.model} does not answer: {exc}")
        print(f"model loaded in {time.perf_counter() - started:.0f} s", flush=True)
        started = time.perf_counter()

        def report(done: LayerDone) -> None:
            ran = f"{done.new_items} new" if done.new_items else "recorded before"
            print(
                f"layer {done.layer + 1}/{layers} design {done.design + 1:3d}/{len(designs)} "
                f"{done.spec.spec_hash[:10]} mean {done.mean:.2f} tokens {done.tokens:7d} "
                f"{done.seconds:7.1f}s ({ran}; {time.perf_counter() - started:.0f}s so far)  "
                f"{done.spec.describe()}",
                flush=True,
            )

        try:
            record_layers(
                archive,
                designs,
                benchmark,
                items,
                layer=args.layer,
                llm=llm,
                train_examples=examples_from_tasks(benchmark.train_examples()),
                on_layer=report,
            )
        except AgentDesignError as exc:
            sys.exit(f"error: {exc} (rerun the same command to resume)")
        except KeyboardInterrupt:
            sys.exit("stopped: rerun the same command to resume")


if __name__ == "__main__":
    main()
