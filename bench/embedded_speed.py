"""Decode and prompt speed of the embedded models through the same litellm path the engine uses.

    .venv/bin/python bench/embedded_speed.py [--models qwen2.5-coder-1.5b smollm2-135m]

Prints one table row per model: load time, prompt and decode tokens per second (from the engine's
own timings of a cold, uncached request), and the process's peak memory.
"""

from __future__ import annotations

import argparse
import resource
import time

from agentdesign.components import import_litellm
from agentdesign.components._embedded import register_embedded_provider

QUESTION = (
    "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in "
    "May. How many clips did Natalia sell altogether in April and May? Think step by step."
)


def measure(model: str, repeats: int) -> dict[str, float]:
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
            model=f"embedded/{model}", messages=messages, max_tokens=128, temperature=0
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
        "load_s": load_s,
        "prompt_tok_s": sum(prompt_rates) / len(prompt_rates),
        "decode_tok_s": sum(decode_rates) / len(decode_rates),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["qwen2.5-coder-1.5b", "smollm2-135m"])
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    print("| model | load s | prompt tok/s | decode tok/s | peak RSS MB (cumulative) |")
    print("|---|---|---|---|---|")
    for model in args.models:
        row = measure(model, args.repeats)
        print(
            f"| embedded/{model} | {row['load_s']:.1f} | {row['prompt_tok_s']:.0f} | "
            f"{row['decode_tok_s']:.1f} | {row['peak_rss_mb']:.0f} |"
        )


if __name__ == "__main__":
    main()
