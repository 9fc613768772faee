"""Embedded decode and prompt speed per thread count, idle and beside one busy process.

    .venv/bin/python bench/embedded_speed.py [--models qwen2.5-coder-1.5b smollm2-135m] [--quick]

Each measurement runs in a fresh process, since an engine keeps its thread count for life: with
AGENTDESIGN_EMBEDDED_THREADS set to 1 or 2, or unset for the engine's own choice ("default", from
the cores free when it loads). "busy" runs it beside one `while True: pass` process. One row per
model, condition and thread setting: the threads used, load time, prompt and decode tokens per
second (a cold request through the same litellm path the engine uses, split by a prompt-only call
of the same length), decode speed as a share of the best fixed count in the same condition, and
the process's peak memory. Run it on an otherwise quiet machine: other work skews every number.

    .venv/bin/python bench/embedded_speed.py --prompt-cache --max-tokens 32 [--items 50]

measures the engine's prompt cache instead (AGENTDESIGN_EMBEDDED_PROMPT_CACHE off, then on, each
in a fresh process) on GSM8K search items asked the way designs ask them: a system prompt with two
solved examples (few_shot), the question answered greedily, then the same prompt sampled once more
(one self-consistency sample). It prints the wall time of each and how many replies differ from
the uncached ones token for token.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from _common import search_tasks

from agentdesign.components import import_litellm
from agentdesign.components.llm._embedded import embedded_threads, register_embedded_provider
from agentdesign.evaluators import get_benchmark

QUESTION = (
    "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in "
    "May. How many clips did Natalia sell altogether in April and May? Think step by step."
)
THREADS_ENV = "AGENTDESIGN_EMBEDDED_THREADS"
CACHE_ENV = "AGENTDESIGN_EMBEDDED_PROMPT_CACHE"
DEFAULT = "default"
CACHE_MODEL = "qwen2.5-coder-1.5b"


def measure(model: str, repeats: int, max_tokens: int) -> dict[str, float]:
    """One model's speeds in this process, on the threads the engine chose or was given."""
    litellm = import_litellm()
    register_embedded_provider()
    started = time.perf_counter()
    litellm.completion(
        model=f"embedded/{model}", messages=[{"role": "user", "content": "Hi"}], max_tokens=1
    )
    load_s = time.perf_counter() - started
    prompt_rates, decode_rates = [], []
    for i in range(repeats):
        messages = [{"role": "user", "content": f"{QUESTION} (attempt {i})"}]
        started = time.perf_counter()
        response = litellm.completion(
            model=f"embedded/{model}", messages=messages, max_tokens=max_tokens, temperature=0
        )
        total = time.perf_counter() - started
        usage = response.usage
        # Split the request's time by a separate prompt-only call of the same length.
        started = time.perf_counter()
        litellm.completion(
            model=f"embedded/{model}", messages=messages, max_tokens=1, temperature=0
        )
        prompt_s = time.perf_counter() - started
        prompt_rates.append(usage.prompt_tokens / prompt_s)
        decode_rates.append((usage.completion_tokens - 1) / max(total - prompt_s, 1e-9))
    return {
        "threads": embedded_threads(),
        "load_s": load_s,
        "prompt_tok_s": sum(prompt_rates) / len(prompt_rates),
        "decode_tok_s": sum(decode_rates) / len(decode_rates),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def measure_apart(model: str, threads: str, repeats: int, max_tokens: int) -> dict[str, float]:
    """`measure` in a fresh process with `threads` set (or the engine's own choice)."""
    env = {k: v for k, v in os.environ.items() if k != THREADS_ENV}
    if threads != DEFAULT:
        env[THREADS_ENV] = threads
    args = [sys.executable, __file__, "--child", model, "--repeats", str(repeats)]
    done = subprocess.run(
        [*args, "--max-tokens", str(max_tokens)], env=env, capture_output=True, text=True
    )
    if done.returncode:
        raise SystemExit(f"embedded/{model} on {threads} threads failed:\n{done.stderr[-2000:]}")
    result: dict[str, float] = json.loads(done.stdout.splitlines()[-1])
    return result


@contextmanager
def busy(condition: str) -> Iterator[None]:
    """For "busy", one process spinning on a core for the duration; for "idle", nothing."""
    if condition == "idle":
        yield
        return
    burner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(1.0)  # running at full speed before an engine looks at the load
        yield
    finally:
        burner.kill()
        burner.wait()


def run(models: Sequence[str], settings: Sequence[str], repeats: int, max_tokens: int) -> None:
    print(
        "| model | beside | threads | load s | prompt tok/s | decode tok/s | of best fixed | "
        "peak RSS MB |"
    )
    print("|---|---|---|---|---|---|---|---|")
    verdicts = []
    for model in models:
        for condition in ("idle", "busy"):
            with busy(condition):
                rows = {s: measure_apart(model, s, repeats, max_tokens) for s in settings}
            fixed = [row["decode_tok_s"] for s, row in rows.items() if s != DEFAULT]
            best = max(fixed, default=float("nan"))
            for setting, row in rows.items():
                label = f"{setting} ({row['threads']:.0f})" if setting == DEFAULT else setting
                print(
                    f"| embedded/{model} | {'nothing' if condition == 'idle' else 'one busy'} | "
                    f"{label} | {row['load_s']:.1f} | {row['prompt_tok_s']:.0f} | "
                    f"{row['decode_tok_s']:.1f} | {row['decode_tok_s'] / best:.0%} | "
                    f"{row['peak_rss_mb']:.0f} |"
                )
            if condition == "busy" and DEFAULT in rows and fixed:
                share = rows[DEFAULT]["decode_tok_s"] / best
                verdicts.append(
                    f"embedded/{model} beside one busy process: the default choice "
                    f"({rows[DEFAULT]['threads']:.0f} threads) keeps {share:.0%} of the best fixed "
                    f"count's decode speed ({'meets' if share >= 0.8 else 'misses'} the 80% target)"
                )
    print("\n".join(["", *verdicts]))


def cache_workload(items: int, max_tokens: int) -> dict[str, Any]:
    """Every reply and the wall time of the few-shot workload, in this process's engine."""
    litellm = import_litellm()
    register_embedded_provider()
    gsm8k = get_benchmark("gsm8k")
    solved = "\n\n".join(
        f"Problem: {ex.question}\nSolution: {ex.answer}" for ex in gsm8k.train_examples()[:2]
    )
    system = f"Solve the problem step by step, then give the final number.\n\n{solved}"
    model = f"embedded/{CACHE_MODEL}"
    litellm.completion(model=model, messages=[{"role": "user", "content": "Hi"}], max_tokens=1)
    replies = []
    started = time.perf_counter()
    for task in search_tasks(gsm8k, items):
        messages = [
            {"role": "system", "content": system},
            {"role": "user", "content": task.question},
        ]
        for temperature, seed in ((0.0, 0), (0.7, 1)):  # the greedy answer, then one sample
            response = litellm.completion(
                model=model,
                messages=messages,
                max_tokens=max_tokens,
                temperature=temperature,
                seed=seed,
            )
            replies.append(response.choices[0].message.content)
    return {
        "wall_s": time.perf_counter() - started,
        "threads": embedded_threads(),
        "replies": replies,
    }


def prompt_cache(items: int, max_tokens: int) -> None:
    """The workload with the prompt cache off, then on, each in a fresh process, side by side."""
    results = {}
    for setting in ("0", "1"):
        env = dict(os.environ, **{CACHE_ENV: setting})
        args = [sys.executable, __file__, "--child-cache", "--items", str(items)]
        done = subprocess.run(
            [*args, "--max-tokens", str(max_tokens)], env=env, capture_output=True, text=True
        )
        if done.returncode:
            raise SystemExit(f"prompt cache {setting} failed:\n{done.stderr[-2000:]}")
        results[setting] = json.loads(done.stdout.splitlines()[-1])
    off = results["0"]
    print(
        f"embedded/{CACHE_MODEL}, {items} GSM8K search items x 2 requests (greedy, then one "
        f"sample at temperature 0.7), two solved examples in the system prompt, "
        f"max_tokens={max_tokens}, {off['threads']} engine threads\n"
    )
    print(
        "| prompt cache | wall s | s per item | greedy replies changed | sampled replies changed |"
    )
    print("|---|---|---|---|---|")
    for setting, row in results.items():
        greedy = sum(a != b for a, b in zip(row["replies"][::2], off["replies"][::2], strict=True))
        sampled = sum(
            a != b for a, b in zip(row["replies"][1::2], off["replies"][1::2], strict=True)
        )
        print(
            f"| {'on' if setting == '1' else 'off'} | {row['wall_s']:.0f} | "
            f"{row['wall_s'] / items:.1f} | {greedy} of {items} | {sampled} of {items} |"
        )
    saved = 1 - results["1"]["wall_s"] / off["wall_s"]
    print(f"\nthe prompt cache saves {saved:.0%} of the wall time")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["qwen2.5-coder-1.5b", "smollm2-135m"])
    parser.add_argument("--threads", nargs="+", default=["1", "2", DEFAULT])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument(
        "--quick", action="store_true", help="SmolLM2 only, one 64-token request per setting"
    )
    parser.add_argument(
        "--prompt-cache", action="store_true", help="measure the engine's prompt cache instead"
    )
    parser.add_argument("--items", type=int, default=50, help="--prompt-cache: GSM8K items")
    parser.add_argument("--child", metavar="MODEL", help=argparse.SUPPRESS)
    parser.add_argument("--child-cache", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.child, args.repeats, args.max_tokens)))
        return
    if args.child_cache:
        print(json.dumps(cache_workload(args.items, args.max_tokens)))
        return
    if args.prompt_cache:
        prompt_cache(args.items, args.max_tokens)
        return
    if args.quick:
        args.models, args.repeats, args.max_tokens = ["smollm2-135m"], 1, 64
    run(args.models, args.threads, args.repeats, args.max_tokens)


if __name__ == "__main__":
    main()
