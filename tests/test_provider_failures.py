"""Failures are not scores: a provider that fails (429, 500, a garbled or empty reply, a hang)
leaves no task result and no final score, a run or evaluation it stops says so in one line with a
non-zero exit, and a later call against a healthy provider completes exactly those tasks.

The provider is a real OpenAI-compatible HTTP server on 127.0.0.1, called through litellm.
"""

from __future__ import annotations

import json
import sqlite3
import sys
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from conftest import capitals_file, chat_completion, serving
from rich.console import Console

from agentdesign.archive import Archive
from agentdesign.components import (
    DEFAULT_LLM_TIMEOUT_S,
    Completion,
    LiteLLMChatModel,
    LLMCallError,
    ModelUnavailableError,
    ProviderError,
    ResponseCache,
    build_agent,
    check_model,
    default_cache_dir,
    default_chat_model,
    import_litellm,
    parse_spec,
)
from agentdesign.components.llm._pending import redacted
from agentdesign.components.testing import FakeChatModel, failing_responder
from agentdesign.evaluators import Benchmark, get_benchmark, make_split
from agentdesign.search import RunConfig, evaluate_agent

MODEL = "openai/fake"
FAILURES = ["429", "500", "empty", "empty-tokens", "garbled"]
HANG_S = 3.0  # how long a hung reply takes; the client gives up well before
SLOW_S = 1.0  # how long a slow but healthy provider takes to answer
DRIP_S, DRIP_BYTES = 0.2, 20  # a dripping reply's pace, and how many bytes it drips (4 s)


class FakeProvider:
    """An OpenAI-compatible server whose every reply follows `mode` (or, for a request that asks
    a question of `modes_by_question`, its mode): "ok" answers `answer`; a number answers with that
    HTTP status; "empty", "garbled", "no-choices" and "hang" fail as they say ("slow" answers
    after SLOW_S); "empty-tokens" is
    an empty reply that claims completion tokens; "length" is an empty reply cut by the request's
    token limit; "drip" sends its first DRIP_BYTES bytes one every DRIP_S; "quote-key" and
    "quote-masked" refuse the key, quoting it back (whole, or masked as OpenAI does)."""

    def __init__(self) -> None:
        self.mode = "ok"
        self.modes_by_question: dict[str, str] = {}
        self.answer = "Paris"
        self.paths: list[str] = []
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                request = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                request["key"] = self.headers.get("Authorization", "").removeprefix("Bearer ")
                provider.paths.append(self.path)
                status, body, pace_s = provider.reply(request)
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    for i in range(DRIP_BYTES if pace_s else 0):
                        self.wfile.write(body[i : i + 1])
                        self.wfile.flush()
                        time.sleep(pace_s)
                    self.wfile.write(body[DRIP_BYTES if pace_s else 0 :])
                except OSError:  # the client gave up on a hung reply
                    pass

        class Server(ThreadingHTTPServer):
            daemon_threads = True

        self.server = Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    @property
    def requests(self) -> int:
        return len(self.paths)

    def reply(self, request: dict[str, Any]) -> tuple[int, bytes, float]:
        """The status, the body, and the seconds between its first bytes (0: all at once)."""
        asked = " ".join(str(m["content"]) for m in request["messages"])
        mode = next((m for q, m in self.modes_by_question.items() if q in asked), self.mode)
        if mode.isdigit():
            error = {"error": {"message": f"status {mode}"}}
            return int(mode), json.dumps(error).encode(), 0.0
        if mode.startswith("quote-"):
            key = request["key"]
            quoted = key if mode == "quote-key" else f"{key[:8]}***{key[-4:]}"
            error = {"error": {"message": f"Incorrect API key provided: {quoted}"}}
            return 401, json.dumps(error).encode(), 0.0
        if mode == "garbled":
            return 200, b'{"id": "x", "choices": [{"mess', 0.0
        if mode == "no-choices":
            body = {"id": "x", "object": "chat.completion", "choices": []}
            return 200, json.dumps(body).encode(), 0.0
        if mode in ("hang", "slow"):
            time.sleep(HANG_S if mode == "hang" else SLOW_S)
        text = "" if mode in ("empty", "empty-tokens", "length") else f"Answer: {self.answer}"
        tokens = {"empty-tokens": 5, "length": request["max_tokens"]}.get(mode, len(text.split()))
        completion = chat_completion(
            text,
            model="fake",
            prompt_tokens=7,
            completion_tokens=tokens,
            finish_reason="length" if mode == "length" else "stop",
        )
        return 200, json.dumps(completion).encode(), DRIP_S if mode == "drip" else 0.0


@pytest.fixture
def provider(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[FakeProvider]:
    """The fake provider, serving until the test ends; the response cache in `tmp_path`."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")  # litellm's OpenAI client wants one
    monkeypatch.setenv("AGENTDESIGN_CACHE_DIR", str(tmp_path / "cache"))
    fake = FakeProvider()
    with serving(fake.server):
        # litellm's import and first call set up for seconds: done before any test's clock starts
        messages = [{"role": "user", "content": "warm up"}]
        import_litellm().completion(model=MODEL, messages=messages, api_base=fake.url, max_tokens=1)
        fake.paths.clear()
        yield fake


@pytest.fixture
def capitals(tmp_path: Path) -> Benchmark:
    """Three questions whose answer is always Paris."""
    return get_benchmark(f"jsonl:{capitals_file(tmp_path, 3)}")


def fast_llm(
    provider: FakeProvider, *, timeout_s: float = DEFAULT_LLM_TIMEOUT_S
) -> LiteLLMChatModel:
    return LiteLLMChatModel(
        cache=ResponseCache(default_cache_dir() / "responses.sqlite"),
        api_base=provider.url,
        max_retries=1,
        backoff_s=0.0,
        timeout_s=timeout_s,
    )


def cached_replies() -> int:
    path = default_cache_dir() / "responses.sqlite"
    if not path.exists():
        return 0
    with sqlite3.connect(path) as conn:
        count: int = conn.execute("SELECT COUNT(*) FROM responses").fetchone()[0]
    return count


def ask(llm: LiteLLMChatModel) -> str:
    messages = [{"role": "user", "content": "Capital of France?"}]
    return llm.complete(model=MODEL, messages=messages, temperature=0.0, max_tokens=8, seed=0).text


# --- the model boundary ---------------------------------------------------------------------------


@pytest.mark.parametrize("mode", [*FAILURES, "no-choices", "hang", "drip"])
def test_each_failure_is_retried_then_transient_and_never_cached(
    provider: FakeProvider, mode: str, capsys: pytest.CaptureFixture[str]
) -> None:
    provider.mode = mode
    slow = mode in ("hang", "drip")
    started = time.perf_counter()
    with pytest.raises(LLMCallError) as failed:
        ask(fast_llm(provider, timeout_s=0.5 if slow else DEFAULT_LLM_TIMEOUT_S))
    assert failed.value.transient and "tried 2 times" in str(failed.value)
    assert provider.requests == 2  # our two tries, none from the OpenAI client's own retries
    assert provider.paths[0] == "/v1/chat/completions"
    assert cached_replies() == 0
    warnings = capsys.readouterr().err.splitlines()
    if slow:  # the deadline ends each whole try (a drip never lets a read time out), and says so
        assert time.perf_counter() - started < 2 * HANG_S
        assert warnings == [
            f"warning: {MODEL}: no reply within 0.5 s (try 1 of 2); trying again in 0 s"
        ]
    else:
        assert warnings == []
    provider.mode = "ok"
    assert ask(fast_llm(provider)) == "Answer: Paris" and cached_replies() == 1


def test_a_reply_cut_by_its_token_limit_is_the_models_answer(provider: FakeProvider) -> None:
    """No text, every allowed token spent (on hidden reasoning, say): the design asked for too
    few tokens, which retrying cannot mend, so it is the answer, and scores as one."""
    provider.mode = "length"
    assert ask(fast_llm(provider)) == "" and provider.requests == 1 and cached_replies() == 1
    assert ask(fast_llm(provider)) == "" and provider.requests == 1


@pytest.mark.parametrize(("mode", "transient"), [("400", False), ("401", True), ("404", True)])
def test_rejected_and_refused_calls_are_not_retried(
    provider: FakeProvider, mode: str, transient: bool
) -> None:
    """A request the provider rejects is the design's failure; a refused key or a model the
    server lacks is not, but waiting does not mend it, so neither is retried."""
    provider.mode = mode
    with pytest.raises(LLMCallError) as failed:
        ask(fast_llm(provider))
    assert failed.value.transient is transient and provider.requests == 1


def test_an_empty_reply_cached_before_is_asked_again(provider: FakeProvider) -> None:
    llm = fast_llm(provider)
    assert llm.cache is not None
    request = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "Capital of France?"}],
        "temperature": 0.0,
        "max_tokens": 8,
        "seed": 0,
        "api_base": provider.url,
    }
    for tokens in (0, 5):  # even one that claims completion tokens
        empty = Completion(text="", prompt_tokens=7, completion_tokens=tokens)
        llm.cache.put(ResponseCache.key(request), empty)
        assert ask(llm) == "Answer: Paris"
    assert provider.requests == 2


@pytest.mark.embedded
def test_an_embedded_models_empty_reply_is_its_answer(tmp_path: Path) -> None:
    """No provider stands between an embedded model and us: an empty reply (here its first word
    cut by a stop string) is what the model says, and would say again on every resume."""
    llm = LiteLLMChatModel(cache=ResponseCache(tmp_path / "responses.sqlite"), max_retries=1)
    ask = {
        "model": "embedded/smollm2-135m",
        "messages": [{"role": "user", "content": "What is 2 + 2?"}],
        "temperature": 0.0,
        "max_tokens": 8,
        "seed": 0,
    }
    first_word = llm.complete(**ask).text.split()[0]
    cut = llm.complete(**ask, stop=[first_word])
    assert cut.text == "" and 0 < cut.completion_tokens < 8 and not cut.cached
    assert llm.complete(**ask, stop=[first_word]).cached


# --- evaluations: no score until every task has a genuine answer ----------------------------------


@pytest.mark.parametrize(("transient", "kind"), [(True, "provider"), (False, "llm")])
def test_the_agent_tells_a_provider_failure_from_a_rejected_request(
    transient: bool, kind: str
) -> None:
    llm = FakeChatModel(failing_responder("down", transient=transient))
    result = build_agent(parse_spec({"model": MODEL}), llm=llm).run("Capital of France?")
    assert (result.error_kind, result.error) == (kind, "down")


@pytest.mark.parametrize("mode", FAILURES)
def test_a_failed_task_is_no_score_and_a_healthy_provider_completes_it(
    provider: FakeProvider, capitals: Benchmark, tmp_path: Path, mode: str
) -> None:
    spec = parse_spec({"model": MODEL})
    tasks = capitals.tasks()
    with Archive(str(tmp_path / "archive.db")) as archive:
        provider.mode = mode
        with pytest.raises(ProviderError, match="failed 1 task of agent") as failed:
            evaluate_agent(archive, spec, capitals, tasks, llm=fast_llm(provider), split="search")
        assert "\n" not in str(failed.value)
        assert provider.requests == 2  # the first task's two tries; then the evaluation stopped
        evaluation = archive.get_or_create_evaluation(
            agent_hash=spec.spec_hash,
            benchmark=capitals.name,
            task_ids=[t.id for t in tasks],
            split="search",
        )
        assert evaluation.status == "running" and evaluation.mean is None
        assert archive.task_results(evaluation.id) == {}
        [failure] = archive.task_failures(evaluation.id)
        assert (failure.task_id, failure.error_kind) == (tasks[0].id, "provider")
        assert cached_replies() == 0

        provider.mode = "ok"
        done = evaluate_agent(
            archive, spec, capitals, tasks, llm=fast_llm(provider), split="search"
        )
        assert done is not None and done.status == "complete" and done.mean == 1.0
        assert len(archive.task_results(evaluation.id)) == 3
        assert len(archive.task_failures(evaluation.id)) == 1  # kept for the record


def test_a_task_timeout_while_the_provider_hangs_is_no_score(
    provider: FakeProvider, capitals: Benchmark, tmp_path: Path
) -> None:
    """The task's time ran out while a model call waited on a provider that then failed it (its
    deadline passed): the provider's failure, not the design's slowness, so no score."""
    spec = parse_spec({"model": MODEL})
    tasks = capitals.tasks()
    with Archive(str(tmp_path / "archive.db")) as archive:
        provider.mode = "hang"
        with pytest.raises(ProviderError, match=r"no result after 0\.5 s, waiting on a model call"):
            evaluate_agent(
                archive, spec, capitals, tasks, llm=fast_llm(provider, timeout_s=1.0),
                split="search", timeout_s=0.5,
            )  # fmt: skip
        assert provider.requests == 1  # the call the runner gave up on tried no more
        evaluation = archive.get_or_create_evaluation(
            agent_hash=spec.spec_hash,
            benchmark=capitals.name,
            task_ids=[t.id for t in tasks],
            split="search",
        )
        assert archive.task_results(evaluation.id) == {}
        [failure] = archive.task_failures(evaluation.id)
        assert failure.error_kind == "provider" and "no reply within 1 s" in (failure.error or "")
        provider.mode = "ok"
        done = evaluate_agent(
            archive, spec, capitals, tasks, llm=fast_llm(provider), split="search", timeout_s=5
        )
        assert done is not None and (done.status, done.mean) == ("complete", 1.0)


def test_a_task_timeout_while_a_healthy_provider_answers_is_a_timeout_score(
    provider: FakeProvider, capitals: Benchmark, tmp_path: Path
) -> None:
    """A design too slow for its task's time is scored so, even when the time runs out in a
    model call: the provider answered that call."""
    spec = parse_spec({"model": MODEL})
    provider.mode = "slow"
    with Archive(str(tmp_path / "archive.db")) as archive:
        done = evaluate_agent(
            archive, spec, capitals, capitals.tasks()[:1], llm=fast_llm(provider),
            split="search", timeout_s=SLOW_S / 4,
        )  # fmt: skip
        assert done is not None and (done.status, done.mean) == ("complete", 0.0)
        [result] = archive.task_results(done.id).values()
        assert result.error_kind == "timeout" and archive.task_failures(done.id) == []


def test_a_wrong_answer_is_a_genuine_score(
    provider: FakeProvider, capitals: Benchmark, tmp_path: Path
) -> None:
    provider.answer = "London"
    spec = parse_spec({"model": MODEL})
    with Archive(str(tmp_path / "archive.db")) as archive:
        done = evaluate_agent(
            archive, spec, capitals, capitals.tasks(), llm=fast_llm(provider), split="search"
        )
        assert done is not None and (done.status, done.mean) == ("complete", 0.0)
        assert archive.task_failures(done.id) == []


# --- the command line -----------------------------------------------------------------------------


class Cli:
    """Runs `agentdesign ARGS` in this process through `main`, on litellm and the real default
    model but without backoff between tries; `timeouts` lists each model's client timeout."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
        from agentdesign.search.cli import _app
        from agentdesign.search.config import _resolve

        self.monkeypatch, self.capsys, self.main = monkeypatch, capsys, _app.main
        self.timeouts: list[float] = []
        monkeypatch.setattr(_resolve, "default_chat_model", self._model)
        monkeypatch.setattr(_app, "default_chat_model", self._model)
        monkeypatch.setattr(_app, "console", Console(width=200))

    def _model(self, **kwargs: Any) -> LiteLLMChatModel:
        llm = default_chat_model(**kwargs)
        # a 429 counts among the retries, as any failure, instead of trying for minutes
        llm.max_retries, llm.backoff_s, llm.retry_budget_s = 1, 0.0, 0.0
        self.timeouts.append(llm.timeout_s)
        return llm

    def __call__(self, *args: str) -> tuple[int | str | None, str, list[str]]:
        """The exit code, stdout, and the non-empty lines of stderr."""
        self.monkeypatch.setattr(sys, "argv", ["agentdesign", *args])
        with pytest.raises(SystemExit) as exited:
            self.main()
        out = self.capsys.readouterr()
        return exited.value.code, out.out, [line for line in out.err.splitlines() if line.strip()]


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Cli:
    return Cli(monkeypatch, capsys)


@pytest.mark.parametrize(
    ("mode", "timeouts", "said", "resume_timeout"),
    [
        ("429", ["--llm-timeout", "30"], "RateLimitError", 45.0),
        # the task's time runs out first, while its call waits on the hung provider
        ("hang", ["--llm-timeout", "2", "--task-timeout", "1"], "no reply within 2 s", None),
    ],
)
def test_a_run_the_provider_fails_stops_in_one_line_and_resumes(
    provider: FakeProvider,
    capitals: Benchmark,
    tmp_path: Path,
    cli: Cli,
    mode: str,
    timeouts: list[str],
    said: str,
    resume_timeout: float | None,
) -> None:
    db = str(tmp_path / "runs.db")
    provider.mode = mode
    code, _, err = cli(
        "run", "--name", "r", "--benchmark", capitals.reference, "--model", MODEL,
        "--api-base", provider.url, *timeouts, "--space", "tiny",
        "--max-agents", "1", "--n-search", "2", "--n-holdout", "1", "--storage", db,
    )  # fmt: skip
    assert code == 3 and len(err) == 1, err
    assert err[0].startswith("error: the model provider failed 1 task of agent")
    assert said in err[0] and "`agentdesign resume r`" in err[0]
    llm_timeout = float(timeouts[1])
    assert cli.timeouts == [llm_timeout]
    with Archive(db) as archive:
        run = archive.get_run("r")
        assert run.status == "failed" and run.config["llm_timeout_s"] == llm_timeout
        assert archive.leaderboard(run_name="r") == []  # nothing scored, nothing ranked

    provider.mode = "ok"
    given = [] if resume_timeout is None else ["--llm-timeout", str(resume_timeout)]
    code, _, err = cli("resume", "r", *given, "--storage", db)
    assert code == 0 and err == [], err
    # the run's, as stored; then this session's, if given
    assert cli.timeouts == [llm_timeout, resume_timeout or llm_timeout]
    with Archive(db) as archive:
        assert archive.get_run("r").status == "finished"
        [row] = archive.leaderboard(run_name="r")
        assert (row.mean, row.n_tasks) == (1.0, 2)


def test_evaluate_the_provider_fails_is_one_line_and_runs_again(
    provider: FakeProvider,
    capitals: Benchmark,
    tmp_path: Path,
    cli: Cli,
) -> None:
    spec_file = tmp_path / "agent.json"
    spec_file.write_text(parse_spec({"model": MODEL}).to_json())
    args = [
        "evaluate", str(spec_file), "--benchmark", capitals.reference, "--split", "all",
        "--items", "3", "--api-base", provider.url, "--storage", str(tmp_path / "runs.db"),
    ]  # fmt: skip
    provider.mode = "empty"
    code, _, err = cli(*args)
    assert code == 3 and len(err) == 1, err
    assert "an empty reply" in err[0] and "the same command runs the others" in err[0]
    assert cached_replies() == 0
    provider.mode = "ok"
    code, out, err = cli(*args)
    assert code == 0 and err == [] and "score 1.000" in out, (out, err)
    assert cli.timeouts == [DEFAULT_LLM_TIMEOUT_S] * 2


@pytest.mark.parametrize("mode", ["quote-key", "quote-masked"])
def test_a_key_the_provider_quotes_back_is_neither_stored_nor_printed(
    provider: FakeProvider,
    capitals: Benchmark,
    tmp_path: Path,
    cli: Cli,
    monkeypatch: pytest.MonkeyPatch,
    mode: str,
) -> None:
    key = "sk-proj-" + "Q7x2" * 10
    monkeypatch.setenv("OPENAI_API_KEY", key)
    spec_file = tmp_path / "agent.json"
    spec_file.write_text(parse_spec({"model": MODEL}).to_json())
    db = str(tmp_path / "runs.db")
    provider.mode = mode
    code, _, err = cli(
        "evaluate", str(spec_file), "--benchmark", capitals.reference, "--split", "all",
        "--items", "1", "--api-base", provider.url, "--storage", db,
    )  # fmt: skip
    assert code == 3 and len(err) == 1, err
    assert "Incorrect API key provided: [redacted]" in err[0] and "Q7x2" not in err[0], err
    with sqlite3.connect(db) as conn:
        [(stored,)] = conn.execute("SELECT error FROM ad_task_failure").fetchall()
    assert "Incorrect API key provided: [redacted]" in stored and "Q7x2" not in stored


def test_keys_from_the_environment_are_redacted_whatever_their_shape(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MY_SERVICE_API_KEY", "plain-words-1234")
    monkeypatch.setenv("SHORT_KEY", "abc")  # too short to be told from ordinary text
    said = "key plain-words-1234 refused; abc; sk-ant-api03-AbCdEf012345 too; a risk-assessment"
    assert redacted(said) == "key [redacted] refused; abc; [redacted] too; a risk-assessment"


@pytest.mark.postgres
def test_a_reply_with_nul_is_stored_on_postgresql_and_the_run_resumes(
    provider: FakeProvider,
    capitals: Benchmark,
    postgres_schema: Callable[[], str],
    cli: Cli,
) -> None:
    """PostgreSQL's text cannot hold NUL, which a model may write: the archive stores it as the
    symbol for NUL. The run stops on a provider failure after the search, and the resume, which
    meets the same replies again, completes it."""
    url = postgres_schema()
    split = make_split(
        [t.id for t in capitals.tasks()], seed=RunConfig(name="r").split.seed, n_search=2,
        n_holdout=1,
    )  # fmt: skip
    [holdout_task] = capitals.tasks_by_ids(split.holdout_ids)
    provider.answer = "Paris\x00"
    provider.modes_by_question = {holdout_task.question: "500"}
    code, _, err = cli(
        "run", "--name", "r", "--benchmark", capitals.reference, "--model", MODEL,
        "--api-base", provider.url, "--space", "tiny", "--max-agents", "1",
        "--n-search", "2", "--n-holdout", "1", "--storage", url,
    )  # fmt: skip
    assert code == 3 and len(err) == 1, err
    with Archive(url) as archive:
        [row] = archive.leaderboard(run_name="r")
        outputs = {r.output for r in archive.task_results(row.evaluation_id).values()}
        assert outputs == {"Answer: Paris\u2400"}
    provider.modes_by_question = {}
    code, _, err = cli("resume", "r", "--storage", url)
    assert code == 0 and err == [], err
    with Archive(url) as archive:
        assert archive.get_run("r").status == "finished"
        confirmed = archive.leaderboard(run_name="r", split="holdout")
        assert confirmed and all(
            [r.output for r in archive.task_results(row.evaluation_id).values()]
            == ["Answer: Paris\u2400"]
            for row in confirmed
        )


@pytest.mark.parametrize("command", ["run", "evaluate"])
def test_an_unknown_provider_is_refused_before_anything_is_written(
    tmp_path: Path, cli: Cli, command: str
) -> None:
    db = str(tmp_path / "runs.db")
    if command == "run":
        args = ["run", "--name", "x", "--model", "nosuchprovider/x", "--storage", db]
    else:
        spec_file = tmp_path / "agent.json"
        spec_file.write_text(parse_spec({"model": "nosuchprovider/x"}).to_json())
        args = ["evaluate", str(spec_file), "--split", "all", "--storage", db]
    code, _, err = cli(*args)
    assert code == 2 and len(err) == 1, err
    assert err[0].startswith("error: litellm knows no provider for model 'nosuchprovider/x'")
    with Archive(db) as archive:
        assert archive.list_runs() == []


@pytest.mark.parametrize("command", ["run", "evaluate"])
def test_a_timeout_must_be_positive(tmp_path: Path, cli: Cli, command: str) -> None:
    spec_file = tmp_path / "agent.json"
    spec_file.write_text(parse_spec({"model": MODEL}).to_json())
    target = ["--name", "t"] if command == "run" else [str(spec_file), "--split", "all"]
    code, _, err = cli(command, *target, "--llm-timeout", "0", "--storage", str(tmp_path / "a.db"))
    assert code == 2 and len(err) == 1 and "timeout must be positive, got 0" in err[0], err


def test_known_providers_pass_the_check(monkeypatch: pytest.MonkeyPatch) -> None:
    from agentdesign.components.llm import _embedded

    checked: list[str] = []
    monkeypatch.setattr(_embedded, "embedded_model_path", checked.append)
    check_model("embedded/qwen2.5-coder-1.5b")  # its own check, not litellm's
    assert checked == ["qwen2.5-coder-1.5b"]
    for model in ("openai/gpt-4o-mini", "anthropic/claude-x", "ollama/llama3", "hosted_vllm/m"):
        check_model(model)
    check_model("openai/served-name", api_base="http://127.0.0.1:8000/v1")
    with pytest.raises(ModelUnavailableError, match="no provider"):
        check_model("mymodel")  # no provider named


def test_a_stored_config_without_a_timeout_gets_the_default() -> None:
    stored = RunConfig(name="old").to_dict()
    del stored["llm_timeout_s"]
    assert RunConfig.from_dict(stored).llm_timeout_s == DEFAULT_LLM_TIMEOUT_S
    with pytest.raises(Exception, match="LLM timeout must be positive"):
        RunConfig.of("bad", llm_timeout_s=0)
