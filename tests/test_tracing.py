"""The OpenTelemetry export: spans in the GenAI semantic conventions, nested evaluation > task >
model and tool calls across the runner's threads, token counts equal to the archive's, nothing
of a prompt unless asked for, OTLP/HTTP to a real receiver, and no opentelemetry import at all
unless tracing is asked for."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
from conftest import EmbeddedSpeed, serving

from agentdesign.archive import Archive
from agentdesign.components import (
    GENAI_SEMCONV_VERSION,
    LiteLLMChatModel,
    ProviderError,
    disable_tracing,
    enable_tracing,
    parse_spec,
)
from agentdesign.components.testing import FakeChatModel, failing_responder
from agentdesign.evaluators import get_benchmark
from agentdesign.search.study import evaluate_agent

otel_sdk = pytest.importorskip("opentelemetry.sdk.trace")
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)
from opentelemetry.trace import SpanKind, StatusCode  # noqa: E402

CALCULATOR = {"model": "openai/gpt-4o-mini", "components": {"tool": "calculator"}}
N_TASKS = 4


def calculating(model: str, messages: Sequence[Any], temperature: float, seed: int | None) -> str:
    """Asks the calculator once per task, then answers with what it got back."""
    last = messages[-1]["content"]
    if last.startswith("RESULT:"):
        return f"So the answer is {last.removeprefix('RESULT:').strip()}.\nAnswer: 5"
    return "Let me compute.\nCALC: 2 + 3"


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """Tracing on, into memory, for one test."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    enable_tracing(provider)
    try:
        yield exporter
    finally:
        disable_tracing()
        provider.shutdown()


def _by_name(finished: Sequence[ReadableSpan], prefix: str) -> list[ReadableSpan]:
    return [s for s in finished if s.name.startswith(prefix)]


def _attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def test_spans_nest_evaluation_task_and_calls_across_threads_with_the_archives_tokens(
    spans: InMemorySpanExporter, tmp_path: Path
) -> None:
    spec = parse_spec(CALCULATOR)
    gsm8k = get_benchmark("gsm8k")
    tasks = gsm8k.tasks()[:N_TASKS]
    llm = FakeChatModel(calculating, latency_s=0.05)  # so that the tasks overlap in 4 threads
    with Archive(str(tmp_path / "a.db")) as archive:
        evaluation = evaluate_agent(
            archive,
            spec,
            gsm8k,
            tasks,
            llm=llm,
            split="search",
            concurrency=N_TASKS,
            timeout_s=60,  # each task in a thread of its own too
        )
        assert evaluation is not None
        results = archive.task_results(evaluation.id)
    finished = spans.get_finished_spans()

    [root] = _by_name(finished, "evaluate ")
    assert root.parent is None and root.kind == SpanKind.INTERNAL
    assert (
        _attrs(root).items()
        >= {
            "agentdesign.agent.hash": spec.spec_hash,
            "agentdesign.benchmark": "gsm8k",
            "agentdesign.split": "search",
            "agentdesign.evaluation.id": evaluation.id,
            "agentdesign.evaluation.status": "complete",
            "agentdesign.evaluation.tasks": N_TASKS,
            "gen_ai.request.model": "openai/gpt-4o-mini",
        }.items()
    )
    assert root.instrumentation_scope is not None
    assert root.instrumentation_scope.schema_url.endswith(f"/schemas/{GENAI_SEMCONV_VERSION}")

    task_spans = _by_name(finished, "invoke_agent ")
    assert len(task_spans) == N_TASKS
    by_task = {_attrs(s)["agentdesign.task.id"]: s for s in task_spans}
    assert set(by_task) == {t.id for t in tasks}
    for task_span in task_spans:
        assert task_span.parent is not None and task_span.parent.span_id == root.context.span_id
        attrs = _attrs(task_span)
        assert attrs["gen_ai.operation.name"] == "invoke_agent"
        assert attrs["gen_ai.provider.name"] == "openai"
        assert attrs["gen_ai.agent.id"] == spec.spec_hash
        assert task_span.name == f"invoke_agent {attrs['gen_ai.agent.name']}"

    chats, tools = _by_name(finished, "chat "), _by_name(finished, "execute_tool ")
    assert len(chats) == 2 * N_TASKS and len(tools) == N_TASKS  # a call, the tool, a call
    for task_id, task_span in by_task.items():
        mine = [s for s in chats if s.parent and s.parent.span_id == task_span.context.span_id]
        assert len(mine) == 2
        result = results[task_id]
        assert result.prompt_tokens > 0 and result.completion_tokens > 0
        assert sum(_attrs(s)["gen_ai.usage.input_tokens"] for s in mine) == result.prompt_tokens
        assert (
            sum(_attrs(s)["gen_ai.usage.output_tokens"] for s in mine) == result.completion_tokens
        )
        assert _attrs(task_span)["gen_ai.usage.input_tokens"] == result.prompt_tokens
        assert _attrs(task_span)["gen_ai.usage.output_tokens"] == result.completion_tokens
        assert _attrs(task_span)["agentdesign.task.score"] == result.score
        [tool] = [s for s in tools if s.parent and s.parent.span_id == task_span.context.span_id]
        assert tool.name == "execute_tool calculator" and tool.kind == SpanKind.INTERNAL
        assert (
            _attrs(tool).items()
            >= {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "calculator",
            }.items()
        )
        assert tool.start_time is not None and tool.end_time is not None
        assert mine[0].end_time <= tool.start_time <= tool.end_time <= mine[1].start_time
    for chat in chats:
        attrs = _attrs(chat)
        assert chat.kind == SpanKind.CLIENT and chat.name == "chat openai/gpt-4o-mini"
        assert (
            attrs.items()
            >= {
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": "openai",
                "gen_ai.request.model": "openai/gpt-4o-mini",
                "gen_ai.request.max_tokens": 512,
            }.items()
        )
        assert isinstance(attrs["gen_ai.request.temperature"], float)
    assert {s.context.trace_id for s in finished} == {root.context.trace_id}
    assert len({s.context.span_id for s in finished}) == len(finished)
    # the tasks ran at once, in the pool's threads, and still nested under their own task
    starts = sorted(s.start_time or 0 for s in task_spans)
    ends = sorted(s.end_time or 0 for s in task_spans)
    assert starts[-1] < ends[0]
    # no prompt, completion or tool text unless asked for
    for span in finished:
        for key, value in _attrs(span).items():
            assert "messages" not in key and "call.arguments" not in key and "result" not in key
            assert not (isinstance(value, str) and "CALC" in value), (span.name, key)


def test_prompts_and_completions_only_when_asked_for(
    spans: InMemorySpanExporter, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTDESIGN_OTEL_CONTENT", "1")
    gsm8k = get_benchmark("gsm8k")
    with Archive(str(tmp_path / "a.db")) as archive:
        evaluate_agent(
            archive,
            parse_spec(CALCULATOR),
            gsm8k,
            gsm8k.tasks()[:1],
            llm=FakeChatModel(calculating),
            split="search",
        )
    first, second = _by_name(spans.get_finished_spans(), "chat ")
    sent = json.loads(_attrs(first)["gen_ai.input.messages"])
    assert [m["role"] for m in sent] == ["system", "user"]
    assert sent[-1]["parts"] == [{"type": "text", "content": gsm8k.tasks()[0].question}]
    said = json.loads(_attrs(first)["gen_ai.output.messages"])
    assert said == [
        {
            "role": "assistant",
            "parts": [{"type": "text", "content": "Let me compute.\nCALC: 2 + 3"}],
            "finish_reason": "stop",
        }
    ]
    assert json.loads(_attrs(second)["gen_ai.input.messages"])[-1]["parts"][0]["content"] == (
        "RESULT: 5"
    )
    [tool] = _by_name(spans.get_finished_spans(), "execute_tool ")
    assert _attrs(tool)["gen_ai.tool.call.arguments"] == "2 + 3"
    assert _attrs(tool)["gen_ai.tool.call.result"] == "5"


def test_a_provider_failure_fails_the_call_the_task_and_the_evaluation(
    spans: InMemorySpanExporter, tmp_path: Path
) -> None:
    gsm8k = get_benchmark("gsm8k")
    llm = FakeChatModel(failing_responder("rate limited", transient=True))
    with Archive(str(tmp_path / "a.db")) as archive, pytest.raises(ProviderError):
        evaluate_agent(
            archive, parse_spec(CALCULATOR), gsm8k, gsm8k.tasks()[:1], llm=llm, split="search"
        )
    finished = spans.get_finished_spans()
    [chat], [task], [root] = (
        _by_name(finished, p) for p in ("chat ", "invoke_agent ", "evaluate ")
    )
    assert _attrs(chat)["error.type"] == "provider_failure"
    assert chat.status.status_code == StatusCode.ERROR
    assert "rate limited" in (chat.status.description or "")
    assert _attrs(task)["error.type"] == "provider" and task.status.status_code == StatusCode.ERROR
    assert _attrs(root)["error.type"] == "ProviderError"
    assert root.status.status_code == StatusCode.ERROR


_EVALUATE = """
import sys
from agentdesign.archive import Archive
from agentdesign.components import parse_spec
from agentdesign.components.testing import FakeChatModel
from agentdesign.evaluators import get_benchmark
from agentdesign.search.study import evaluate_agent

gsm8k = get_benchmark("gsm8k")
spec = parse_spec({"model": "openai/gpt-4o-mini", "components": {"tool": "calculator"}})
replies = lambda model, messages, temperature, seed: (
    "Answer: 5" if messages[-1]["content"].startswith("RESULT") else "CALC: 2 + 3"
)
with Archive(sys.argv[1]) as archive:
    evaluate_agent(
        archive, spec, gsm8k, gsm8k.tasks()[:2], llm=FakeChatModel(replies), split="search"
    )
loaded = sorted({m.split(".")[0] for m in sys.modules if m.startswith("opentelemetry")})
print("loaded:", ",".join(loaded))
"""


def _python(code: str, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "AGENTDESIGN_OTEL"))}
        | env,
        check=False,
    )


def test_nothing_imports_opentelemetry_unless_tracing_is_asked_for(tmp_path: Path) -> None:
    done = _python(_EVALUATE, str(tmp_path / "a.db"), env={})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "loaded:"
    off = _python(_EVALUATE, str(tmp_path / "b.db"), env={"AGENTDESIGN_OTEL": "0"})
    assert off.returncode == 0, off.stderr
    assert off.stdout.strip().splitlines()[-1] == "loaded:"


class _Receiver(BaseHTTPRequestHandler):
    """An OTLP/HTTP trace receiver: decodes each export request and keeps its spans."""

    requests: ClassVar[list[Any]] = []
    lock: ClassVar[threading.Lock] = threading.Lock()

    def do_POST(self) -> None:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
            ExportTraceServiceResponse,
        )

        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        with self.lock:
            type(self).requests.append((self.path, self.headers.get("Content-Type"), request))
        answer = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass


def test_spans_reach_an_otlp_http_receiver_from_the_environments_settings(tmp_path: Path) -> None:
    pytest.importorskip("opentelemetry.proto.collector.trace.v1.trace_service_pb2")
    _Receiver.requests = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    env = {
        "AGENTDESIGN_OTEL": "1",
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{server.server_address[1]}",
        "OTEL_EXPORTER_OTLP_HEADERS": "x-test-token=abc",
        "OTEL_RESOURCE_ATTRIBUTES": "deployment.environment=test",
    }
    with serving(server):
        done = _python(_EVALUATE, str(tmp_path / "a.db"), env=env)  # spans flushed at its exit
    assert done.returncode == 0, done.stderr
    assert "opentelemetry" in done.stdout.strip().splitlines()[-1]
    assert _Receiver.requests, "no export request arrived"
    assert {(path, kind) for path, kind, _ in _Receiver.requests} == {
        ("/v1/traces", "application/x-protobuf")
    }
    names: list[str] = []
    services = set()
    for _, _, request in _Receiver.requests:
        for resource_spans in request.resource_spans:
            resource = {a.key: a.value.string_value for a in resource_spans.resource.attributes}
            services.add((resource["service.name"], resource["deployment.environment"]))
            for scope_spans in resource_spans.scope_spans:
                assert scope_spans.scope.name == "agentdesign"
                assert scope_spans.schema_url.endswith(GENAI_SEMCONV_VERSION)
                for span in scope_spans.spans:
                    names.append(span.name)
                    attrs = {a.key: a.value for a in span.attributes}
                    if span.name.startswith("chat "):
                        assert attrs["gen_ai.usage.input_tokens"].int_value > 0
                        assert attrs["gen_ai.provider.name"].string_value == "openai"
    assert services == {("agentdesign", "test")}
    assert sorted(n.split(" ")[0] for n in names) == sorted(
        ["evaluate"] + ["invoke_agent"] * 2 + ["chat"] * 4 + ["execute_tool"] * 2
    )


def test_bad_tracing_settings_are_one_line_errors() -> None:
    main = (
        "import sys; from agentdesign.search.cli import main\n"
        "sys.argv = ['agentdesign', 'list']; main()"
    )
    bad = _python(main, env={"AGENTDESIGN_OTEL": "maybe"})
    assert bad.returncode == 2
    assert bad.stderr.strip() == "error: AGENTDESIGN_OTEL must be 1 (on) or 0 (off), got 'maybe'"
    grpc = _python(main, env={"AGENTDESIGN_OTEL": "1", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"})
    assert grpc.returncode == 2 and grpc.stderr.count("\n") == 1
    assert grpc.stderr.startswith("error: OTEL_EXPORTER_OTLP_PROTOCOL='grpc': agentdesign sends")
    missing = _python(
        "import sys; sys.modules['opentelemetry'] = None\n" + main, env={"AGENTDESIGN_OTEL": "1"}
    )
    assert missing.returncode == 2
    assert missing.stderr.strip() == (
        "error: AGENTDESIGN_OTEL=1 asks for OpenTelemetry traces, but the OpenTelemetry "
        "packages are not installed: pip install 'agentdesign[otel]'"
    )


@pytest.mark.embedded
def test_model_call_spans_carry_smollm2s_real_token_counts(
    spans: InMemorySpanExporter, tmp_path: Path, smollm2_speed: EmbeddedSpeed
) -> None:
    """One GSM8K item on the embedded SmolLM2, one direct call of at most 16 tokens."""
    spec = parse_spec(
        {
            "model": "embedded/smollm2-135m",
            "components": {"reasoning": {"name": "direct", "params": {"max_tokens": 16}}},
        }
    )
    gsm8k = get_benchmark("gsm8k")
    with Archive(str(tmp_path / "a.db")) as archive:
        evaluation = evaluate_agent(
            archive,
            spec,
            gsm8k,
            gsm8k.tasks()[:1],
            llm=LiteLLMChatModel(),  # no response cache: a real generation
            split="search",
            timeout_s=smollm2_speed.timeout(16),
        )
        assert evaluation is not None
        [result] = archive.task_results(evaluation.id).values()
    [chat] = _by_name(spans.get_finished_spans(), "chat ")
    attrs = _attrs(chat)
    assert chat.kind == SpanKind.INTERNAL  # the model runs in this process
    assert attrs["gen_ai.provider.name"] == "agentdesign.embedded"
    assert attrs["gen_ai.request.max_tokens"] == 16
    assert 0 < attrs["gen_ai.usage.output_tokens"] <= 16
    assert attrs["gen_ai.usage.input_tokens"] > 10  # the question alone is longer
    assert (attrs["gen_ai.usage.input_tokens"], attrs["gen_ai.usage.output_tokens"]) == (
        result.prompt_tokens,
        result.completion_tokens,
    )
