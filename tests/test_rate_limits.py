"""Rate limits slow a run instead of stopping it: against an OpenAI-compatible server on 127.0.0.1
that enforces a requests-a-minute limit (tests/limited_provider.py), a run at concurrency finishes
with no provider failure; a call waits as long as `Retry-After` or the `x-ratelimit-*` headers ask,
and keeps to `--rpm`; a call the provider keeps refusing past the retry budget is a provider
failure, never a score.

bench/rate_limits.py measures the throughput against such a server, as a share of its limit.
"""

from __future__ import annotations

import math
import re
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import capitals_file, space_choices
from limited_provider import LimitedProvider

from agentdesign.archive import Archive
from agentdesign.components import (
    AgentDesignError,
    LiteLLMChatModel,
    LLMCallError,
    ProviderError,
    RateLimiter,
    ResponseCache,
    ThrottleClock,
    default_cache_dir,
    import_litellm,
    parse_spec,
    throttle_clock,
)
from agentdesign.components.llm._limits import retry_after_s
from agentdesign.components.llm._pending import held_back
from agentdesign.evaluators import Benchmark, get_benchmark
from agentdesign.search import Budget, RunConfig, evaluate_agent, run_search

MODEL = "openai/limited"
ONE_CALL = space_choices()  # a design that makes one model call per task


@pytest.fixture(autouse=True)
def _environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")  # litellm's OpenAI client wants one
    monkeypatch.setenv("AGENTDESIGN_CACHE_DIR", str(tmp_path / "cache"))
    import_litellm()  # its import takes seconds: not part of any timing


def ask(llm: LiteLLMChatModel, question: str = "Capital of France?") -> str:
    messages = [{"role": "user", "content": question}]
    return llm.complete(model=MODEL, messages=messages, temperature=0.0, max_tokens=8, seed=0).text


def capitals(tmp_path: Path, n: int) -> Benchmark:
    return get_benchmark(f"jsonl:{capitals_file(tmp_path, n)}")


# --- the model boundary ---------------------------------------------------------------------------


def test_a_call_waits_as_long_as_retry_after_asks() -> None:
    """The server lets one request through every 2 s and says so in Retry-After; the refused
    call comes back no sooner, so it is refused once only (tries after 0.1, 0.2 and 0.4 s, as
    before, would all be refused)."""
    with LimitedProvider(rpm=30, burst_s=1.0, headers=False) as provider:
        llm = LiteLLMChatModel(api_base=provider.url, backoff_s=0.1, retry_budget_s=60)
        assert ask(llm, "first?") == ask(llm, "second?") == "Answer: Paris"
        assert len(provider.ok_at) == 2 and len(provider.limited_at) == 1
        waited_s = provider.ok_at[1] - provider.limited_at[0]
        assert 1.9 <= waited_s < 30, waited_s  # asked for 2 s (retry-after-ms: 2000)


def test_spent_limit_headers_hold_the_next_call_before_it_is_refused() -> None:
    """A reply that says no request is left (x-ratelimit-remaining-requests: 0) holds the next
    call until one is back (the limit's pace: 30 a minute, one every 2 s), without a 429."""
    with LimitedProvider(rpm=30, burst_s=1.0, retry_after=False) as provider:
        llm = LiteLLMChatModel(api_base=provider.url, backoff_s=0.1, retry_budget_s=60)
        ask(llm, "first?")
        ask(llm, "second?")
        assert len(provider.ok_at) == 2 and provider.limited_at == []
        assert 1.9 <= provider.ok_at[1] - provider.ok_at[0] < 30


def test_rpm_caps_the_pace_of_calls() -> None:
    """--rpm 240 lets four calls go at once (a second's worth), then one every 0.25 s: ten calls
    from five threads take 1.5 s at least, where the server answers them all in a moment."""
    from concurrent.futures import ThreadPoolExecutor

    with LimitedProvider(rpm=60_000) as provider:
        llm = LiteLLMChatModel(api_base=provider.url, rpm=240)
        started = time.monotonic()
        with ThreadPoolExecutor(max_workers=5) as pool:
            replies = list(pool.map(lambda i: ask(llm, f"question {i}?"), range(10)))
        assert replies == ["Answer: Paris"] * 10
        assert time.monotonic() - started >= 1.45 and provider.limited_at == []


def test_the_retry_budget_ends_in_a_transient_failure(capsys: pytest.CaptureFixture[str]) -> None:
    """A provider that refuses every call (a quota spent for the day) is tried for the budget's
    1.5 s, well past max_retries, then the call fails as the provider's, saying why, with one
    line on stderr while it waited."""
    with LimitedProvider(rpm=0, refuse_for_s=0.2, headers=False) as provider:
        llm = LiteLLMChatModel(api_base=provider.url, backoff_s=0.05, max_retries=1)
        llm.retry_budget_s = 1.5
        started = time.monotonic()
        with pytest.raises(LLMCallError) as failed:
            ask(llm)
        assert 1.2 <= time.monotonic() - started < 30
        assert failed.value.transient and "RateLimitError" in str(failed.value)
        assert "(the retry budget: 1.5 s)" in str(failed.value)
        assert len(provider.limited_at) > 2  # past max_retries: rate limits have their budget
        err = capsys.readouterr().err.splitlines()
        assert len(err) == 1 and err[0].startswith(f"warning: {MODEL}: the provider rate-limits")
        assert "asking to wait 0.2 s" in err[0] and "tries again for up to 1.5 s" in err[0]


def test_a_wait_past_the_budget_gives_up_at_once() -> None:
    with LimitedProvider(rpm=0, refuse_for_s=3600, headers=False) as provider:
        llm = LiteLLMChatModel(api_base=provider.url, retry_budget_s=60)
        with pytest.raises(LLMCallError, match="asked to wait 60 min, longer than the 1 min retry"):
            ask(llm)
        assert len(provider.limited_at) == 1


def test_without_a_budget_a_rate_limit_is_retried_as_any_failure() -> None:
    with LimitedProvider(rpm=0, refuse_for_s=0.01, headers=False) as provider:
        llm = LiteLLMChatModel(api_base=provider.url, backoff_s=0.0, max_retries=2)
        with pytest.raises(LLMCallError, match="tried 3 times"):
            ask(llm)
        assert len(provider.limited_at) == 3


# --- evaluations and runs -------------------------------------------------------------------------


def score_every_task(tmp_path: Path, url: str, n: int, **settings: Any) -> None:
    """A run of one design on `n` capitals against the server at `url`, with `settings`: it
    finishes with every task scored right and none a failure."""
    config = RunConfig.of(
        "limited",
        benchmark=capitals(tmp_path, n).reference,
        model=MODEL,
        api_base=url,
        budget=Budget(max_agents=1),
        n_search=n,
        n_holdout=0,
        choices=ONE_CALL,
        **settings,
    )
    with Archive(str(tmp_path / "archive.db")) as archive:
        summary = run_search(archive, config)
        [row] = archive.leaderboard(run_name="limited")
        assert archive.task_failures(row.evaluation_id) == []
    assert (row.n_tasks, row.mean, summary.agents_done) == (n, 1.0, 1)


def test_a_run_at_concurrency_against_a_rate_limited_server_finishes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Sixteen tasks at once against a server that lets four a second through: the calls wait
    and slow down instead of failing (tries after 1, 2 and 4 s lose to the fifteen others), the
    run finishes with every task scored, and stderr says it waited in a line or two."""
    with LimitedProvider(rpm=240, latency_s=0.1, burst_s=1.0) as provider:
        score_every_task(tmp_path, provider.url, 24, concurrency=16)
        assert len(provider.ok_at) == 24 and provider.limited_at  # it was rate-limited
        warnings = [line for line in capsys.readouterr().err.splitlines() if "warning" in line]
        assert 1 <= len(warnings) <= 2, warnings  # one a minute at most: not a flood


def test_a_task_timeout_does_not_count_the_time_rate_limits_hold_a_call_back(
    tmp_path: Path,
) -> None:
    """Four tasks at once against a server that lets one call through every 1.5 s, with a task
    timeout of 1.5 s: the later tasks wait 1.5-6 s for the limit, past their timeout, but the
    wait is the provider's, not the design's, so every task is scored and none is a failure
    (before, each such task was a provider failure and the run stopped). A first call warms
    litellm's client, whose first use alone can take a second on a busy machine."""
    with LimitedProvider(rpm=40, latency_s=0.05, burst_s=1.0) as provider:
        ask(LiteLLMChatModel(api_base=provider.url), "warm-up?")
        score_every_task(tmp_path, provider.url, 4, concurrency=4, task_timeout_s=1.5)
        assert len(provider.ok_at) == 5
        assert provider.ok_at[-1] - provider.ok_at[1] >= 4.0  # they were held back


def test_a_throttle_clock_counts_waits_of_several_threads_once_each() -> None:
    clock = ThrottleClock()
    assert clock.seconds() == 0.0
    with throttle_clock(clock), held_back():
        time.sleep(0.05)
    with held_back():  # outside the task's context: not its clock
        time.sleep(0.05)
    first = clock.seconds()
    assert 0.05 <= first < 0.09
    with clock.waiting(), clock.waiting():  # two calls of the task held back at once
        time.sleep(0.05)
    assert 0.15 <= clock.seconds() < 0.25


def test_past_the_retry_budget_a_task_is_no_score_and_runs_again(tmp_path: Path) -> None:
    bench = capitals(tmp_path, 2)
    spec = parse_spec({"model": MODEL})
    tasks = bench.tasks()
    cache = ResponseCache(default_cache_dir() / "responses.sqlite")
    with LimitedProvider(rpm=0, refuse_for_s=0.1, headers=False) as provider:
        llm = LiteLLMChatModel(cache=cache, api_base=provider.url, backoff_s=0.05)
        llm.retry_budget_s = 0.5
        with Archive(str(tmp_path / "archive.db")) as archive:
            with pytest.raises(ProviderError, match="retry budget"):
                evaluate_agent(archive, spec, bench, tasks, llm=llm, split="search")
            evaluation = archive.get_or_create_evaluation(
                agent_hash=spec.spec_hash,
                benchmark=bench.name,
                task_ids=[t.id for t in tasks],
                split="search",
            )
            assert evaluation.mean is None and archive.task_results(evaluation.id) == {}
            [failure] = archive.task_failures(evaluation.id)
            assert failure.error_kind == "provider"
    with LimitedProvider(rpm=60_000) as provider:
        llm = LiteLLMChatModel(cache=cache, api_base=provider.url)
        with Archive(str(tmp_path / "archive.db")) as archive:
            done = evaluate_agent(archive, spec, bench, tasks, llm=llm, split="search")
            assert done is not None and (done.status, done.mean) == ("complete", 1.0)


def test_evaluate_stops_past_the_retry_budget_in_one_error_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from agentdesign.search.cli import _app

    spec_file = tmp_path / "agent.json"
    spec_file.write_text(parse_spec({"model": MODEL}).to_json())
    bench = capitals(tmp_path, 1)
    with LimitedProvider(rpm=0, refuse_for_s=0.1, headers=False) as provider:
        argv = [
            "agentdesign", "evaluate", str(spec_file), "--benchmark", bench.reference,
            "--split", "all", "--items", "1", "--api-base", provider.url,
            "--retry-budget", "0.6", "--storage", str(tmp_path / "runs.db"),
        ]  # fmt: skip
        monkeypatch.setattr(sys, "argv", argv)
        with pytest.raises(SystemExit) as exited:
            _app.main()
        err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
        assert exited.value.code == 3, err
        assert err[-1].startswith("error: the model provider failed 1 task") and len(err) <= 2
        assert "(the retry budget: 0.6 s)" in err[-1], err


@pytest.mark.parametrize(
    ("setting", "said"),
    [
        ({"retry_budget_s": -60.0}, "retry budget must be from 0 to 1,000,000 seconds, got -60"),
        ({"rpm": 0.0}, "rpm (a minute's cap) must be positive, got 0"),
        ({"tpm": -5.0}, "tpm (a minute's cap) must be positive, got -5"),
    ],
)
def test_bad_rate_limits_are_refused_before_a_run_is_written(
    setting: dict[str, float], said: str
) -> None:
    with pytest.raises(AgentDesignError, match=re.escape(said)):
        RunConfig.of("bad", **setting)


def test_a_stored_config_without_rate_limits_gets_the_defaults() -> None:
    stored = RunConfig(name="old").to_dict()
    for key in ("retry_budget_s", "rpm", "tpm"):
        del stored[key]
    config = RunConfig.from_dict(stored)
    assert (config.retry_budget_s, config.rpm, config.tpm) == (600.0, None, None)


# --- the limiter ----------------------------------------------------------------------------------


def test_a_rate_limit_halves_the_calls_at_once_once_a_round_and_answers_raise_them() -> None:
    limiter = RateLimiter("m")
    tickets = [limiter.acquire(10) for _ in range(8)]
    assert all(t is not None for t in tickets) and limiter.calls_at_once == math.inf
    first, *others = [t for t in tickets if t is not None]
    limiter.release(first, rate_limited=True)  # 8 in flight: cut to 4
    assert limiter.calls_at_once == 4
    limiter.release(others[0], rate_limited=True)  # started before the cut: no second cut
    assert limiter.calls_at_once == 4
    for ticket in others[1:]:
        limiter.release(ticket)
    assert limiter.in_flight == 0
    late = [limiter.acquire(10) for _ in range(4)]
    waited: list[str] = []
    blocked = limiter.acquire(
        10, given_up=lambda: bool(waited), on_wait=lambda w, p: waited.append(w)
    )
    assert blocked is None and waited == ["rate limited: 4 calls at once for now"]
    for ticket in late:
        assert ticket is not None
        limiter.release(ticket)  # an answer while the cap binds adds 1/cap
    assert 4.2 < limiter.cap < 4.5
    again = limiter.acquire(10)
    assert again is not None
    limiter.release(again, rate_limited=True)  # a later round's rate limit cuts again
    assert limiter.calls_at_once == 1


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"Retry-After": "7"}, 7.0),
        ({"retry-after-ms": "250", "retry-after": "1"}, 0.25),
        ({"llm_provider-retry-after": "3"}, 3.0),  # as litellm passes a reply's headers on
        ({"Retry-After": "Wed, 21 Oct 2015 07:28:10 GMT"}, 10.0),
        ({"Retry-After": "soon"}, None),
        ({}, None),
    ],
)
def test_retry_after_is_read_in_its_forms(headers: dict[str, str], seconds: float | None) -> None:
    now = 1445412480.0  # 07:28:00 GMT that day
    assert retry_after_s(headers, now=now) == seconds
