"""OpenTelemetry traces of the engine's work, in the GenAI semantic conventions (docs/tracing.md).

Off unless asked for: `AGENTDESIGN_OTEL=1` in the environment, or `enable_tracing` from Python.
Until then nothing here imports opentelemetry (the optional `otel` extra), and each function is a
no-op that costs a dictionary lookup. When on, the engine records a span per design evaluation,
per task under it (`invoke_agent`), per model call under its task (`chat`) and per tool call or
environment step (`execute_tool`), and sends them through an OTLP/HTTP exporter that the
standard `OTEL_*` variables configure, or through the tracer provider an application set up.

Spans carry no prompt, completion or tool text unless `AGENTDESIGN_OTEL_CONTENT=1` asks for it
(the conventions' opt-in attributes): traces often go where the data must not.

The engine's own modules copy into an exported agent; this one does not, and none of them imports
it: the engine wraps the model it hands an agent (`traced_model`), and hears of tool calls through
the trace's listeners (`add_call_listener`).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from importlib import metadata
from typing import Any
from urllib.parse import urlsplit

from agentdesign.components._errors import AgentDesignError
from agentdesign.components.llm._trace import (
    CallRecord,
    ChatModel,
    Completion,
    LLMCallError,
    Message,
    add_call_listener,
)

__all__ = [
    "GENAI_SEMCONV_VERSION",
    "OTEL_CONTENT_ENV",
    "OTEL_ENV",
    "TraceSpan",
    "disable_tracing",
    "enable_tracing",
    "provider_name",
    "start_tracing_from_environment",
    "trace_span",
    "traced_model",
    "tracing_on",
]

# The version of the OpenTelemetry semantic conventions whose GenAI spans these follow: the last
# release that carries them (they have since moved to a repository of their own, unreleased).
GENAI_SEMCONV_VERSION = "1.41.0"
_SCHEMA_URL = f"https://opentelemetry.io/schemas/{GENAI_SEMCONV_VERSION}"
OTEL_ENV = "AGENTDESIGN_OTEL"
OTEL_CONTENT_ENV = "AGENTDESIGN_OTEL_CONTENT"
_ON = frozenset({"1", "true", "yes", "on"})
_OFF = frozenset({"", "0", "false", "no", "off"})
_MAX_DESCRIPTION = 300  # characters of an error kept as a span's status description
_SERVICE_NAME = "agentdesign"

# litellm's provider prefixes (`openai/gpt-4o-mini`) as the conventions' well-known
# `gen_ai.provider.name` values; any other prefix is reported as it is written.
_PROVIDERS = {
    "openai": "openai",
    "text-completion-openai": "openai",
    "anthropic": "anthropic",
    "bedrock": "aws.bedrock",
    "bedrock_converse": "aws.bedrock",
    "azure": "azure.ai.openai",
    "azure_ai": "azure.ai.inference",
    "cohere": "cohere",
    "cohere_chat": "cohere",
    "deepseek": "deepseek",
    "gemini": "gcp.gemini",
    "vertex_ai": "gcp.vertex_ai",
    "groq": "groq",
    "watsonx": "ibm.watsonx.ai",
    "mistral": "mistral_ai",
    "perplexity": "perplexity",
    "xai": "x_ai",
    "embedded": "agentdesign.embedded",  # this package's in-process models
}
# Model names litellm routes without a prefix, by how they begin.
_UNPREFIXED = (
    (("gpt-", "o1", "o3", "o4", "chatgpt-"), "openai"),
    (("claude",), "anthropic"),
    (("gemini",), "gcp.gemini"),
)

_lock = threading.Lock()
_tracer: Any | None = None  # an opentelemetry Tracer while tracing is on
_read_environment = False


def _switch(name: str) -> bool:
    value = os.environ.get(name, "").strip().lower()
    if value in _ON:
        return True
    if value in _OFF:
        return False
    raise AgentDesignError(f"{name} must be 1 (on) or 0 (off), got {os.environ[name]!r}")


def _import_error() -> AgentDesignError:
    return AgentDesignError(
        f"{OTEL_ENV}=1 asks for OpenTelemetry traces, but the OpenTelemetry packages are not "
        "installed: pip install 'agentdesign[otel]'"
    )


def _tracer_of(provider: Any) -> Any:
    try:
        version = metadata.version("agentdesign")
    except metadata.PackageNotFoundError:  # run from a source tree
        version = None
    return provider.get_tracer("agentdesign", version, schema_url=_SCHEMA_URL)


def _environment_provider() -> Any:
    """The application's tracer provider, if it set one up; else one of ours that sends spans
    over OTLP/HTTP as the standard OTEL_* variables say (endpoint, headers, timeout, sampler,
    service name, resource attributes), made the global one, flushed when the process exits."""
    try:
        from opentelemetry import trace
    except ImportError:
        raise _import_error() from None
    current = trace.get_tracer_provider()
    if not isinstance(current, trace.ProxyTracerProvider):  # the application's own
        return current
    for name in ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"):
        protocol = os.environ.get(name, "").strip()
        if protocol and protocol != "http/protobuf":
            raise AgentDesignError(
                f"{name}={protocol!r}: agentdesign sends OTLP over HTTP only (http/protobuf); "
                "point OTEL_EXPORTER_OTLP_ENDPOINT at the collector's HTTP port (often 4318)"
            )
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import SERVICE_NAME, Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter
    except ImportError:
        raise _import_error() from None
    resource = Resource.create()
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: _SERVICE_NAME}))
    provider = TracerProvider(resource=resource)
    exporter = os.environ.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower() or "otlp"
    if exporter == "console":  # for a look at the spans without a collector
        provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter()))
    elif exporter == "otlp":
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    elif exporter != "none":
        raise AgentDesignError(
            f"OTEL_TRACES_EXPORTER={exporter!r}: agentdesign sends traces with otlp "
            "(OTLP over HTTP), console or none"
        )
    trace.set_tracer_provider(provider)
    return provider


def _start(provider: Any) -> None:
    global _tracer
    _tracer = _tracer_of(provider)
    add_call_listener(_record_call)


def _current_tracer() -> Any | None:
    """The tracer while tracing is on; the environment is read once, on the first call."""
    global _read_environment
    if _read_environment:
        return _tracer
    with _lock:
        if not _read_environment:
            if _tracer is None and _switch(OTEL_ENV):
                _start(_environment_provider())
            _read_environment = True
    return _tracer


def start_tracing_from_environment() -> None:
    """Reads the environment's switch now: a bad setting, or the packages missing, is an
    `AgentDesignError` before any work starts rather than at the first span."""
    _current_tracer()


def enable_tracing(tracer_provider: Any | None = None) -> None:
    """Turns tracing on in this process, whatever the environment says: spans go to
    `tracer_provider` (an opentelemetry `TracerProvider`), or without one as with
    `AGENTDESIGN_OTEL=1` (the application's global provider, else OTLP/HTTP)."""
    global _read_environment
    with _lock:
        _start(tracer_provider if tracer_provider is not None else _environment_provider())
        _read_environment = True


def disable_tracing() -> None:
    """Turns tracing off in this process (spans already ended stay with their provider)."""
    global _tracer, _read_environment
    with _lock:
        _tracer = None
        _read_environment = True


def tracing_on() -> bool:
    return _current_tracer() is not None


def _content_on() -> bool:
    try:
        return _switch(OTEL_CONTENT_ENV)
    except AgentDesignError:
        return False


Attribute = str | bool | int | float | Sequence[str]


class TraceSpan:
    """A span being recorded, or none (tracing off): what the engine sets on it."""

    __slots__ = ("_span",)

    def __init__(self, span: Any | None = None) -> None:
        self._span = span

    @property
    def recording(self) -> bool:
        return self._span is not None

    def set(self, attributes: Mapping[str, Attribute | None]) -> None:
        """Sets each attribute whose value is not None."""
        if self._span is not None:
            self._span.set_attributes({k: v for k, v in attributes.items() if v is not None})

    def fail(self, error_type: str, description: str | None = None) -> None:
        """Marks the span's operation failed (`error.type`, and an error status)."""
        if self._span is None:
            return
        from opentelemetry.trace import Status, StatusCode

        self._span.set_attribute("error.type", error_type)
        text = " ".join((description or error_type).split())[:_MAX_DESCRIPTION]
        self._span.set_status(Status(StatusCode.ERROR, text))


_NOT_RECORDING = TraceSpan()


@contextmanager
def trace_span(
    name: str, attributes: Mapping[str, Attribute | None] | None = None, *, client: bool = False
) -> Iterator[TraceSpan]:
    """A span named `name` around the block, the current one inside it (a child of the span
    current here), of kind CLIENT if `client` else INTERNAL; a no-op while tracing is off. An
    exception leaving the block fails the span with its class's name as `error.type`."""
    tracer = _current_tracer()
    if tracer is None:
        yield _NOT_RECORDING
        return
    from opentelemetry.trace import SpanKind

    kind = SpanKind.CLIENT if client else SpanKind.INTERNAL
    given = {k: v for k, v in (attributes or {}).items() if v is not None}
    with tracer.start_as_current_span(name, kind=kind, attributes=given) as span:
        handle = TraceSpan(span)
        try:
            yield handle
        except BaseException as exc:
            if not span.attributes or "error.type" not in span.attributes:
                handle.fail(type(exc).__qualname__, str(exc))
            raise


def provider_name(model: str) -> str:
    """`gen_ai.provider.name` for a litellm model string, as well as the name tells."""
    prefix, slash, _ = model.partition("/")
    if slash:
        return _PROVIDERS.get(prefix, prefix)
    for starts, provider in _UNPREFIXED:
        if model.startswith(starts):
            return provider
    if "litellm" in sys.modules:  # litellm routes it somewhere; ask it where, if it is loaded
        try:
            routed = str(sys.modules["litellm"].get_llm_provider(model=model)[1])
        except Exception:  # a name litellm cannot route: it fails the call itself
            return "unknown"
        return _PROVIDERS.get(routed, routed)
    return "unknown"


def _message_parts(messages: Sequence[Message]) -> str:
    """Input messages as the conventions' JSON (a text part each)."""
    return json.dumps(
        [
            {"role": m.get("role", "user"), "parts": [{"type": "text", "content": m["content"]}]}
            for m in messages
        ],
        ensure_ascii=False,
    )


class TracedChatModel:
    """A `ChatModel` that records each call as a `chat` span, then answers with `inner`."""

    def __init__(self, inner: ChatModel) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:  # the wrapped model's settings (cache, api_base)
        return getattr(self.inner, name)

    def complete(
        self,
        *,
        model: str,
        messages: Sequence[Message],
        temperature: float,
        max_tokens: int,
        seed: int | None,
        stop: Sequence[str] = (),
    ) -> Completion:
        def call() -> Completion:
            return self.inner.complete(
                model=model,
                messages=messages,
                temperature=temperature,
                max_tokens=max_tokens,
                seed=seed,
                stop=stop,
            )

        if _current_tracer() is None:
            return call()
        attributes: dict[str, Attribute | None] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": provider_name(model),
            "gen_ai.request.model": model,
            "gen_ai.request.temperature": float(temperature),
            "gen_ai.request.max_tokens": int(max_tokens),
            "gen_ai.request.seed": seed,
            "gen_ai.request.stop_sequences": list(stop) if stop else None,
        }
        api_base = getattr(self.inner, "api_base", None)
        if isinstance(api_base, str) and api_base:
            server = urlsplit(api_base)
            attributes["server.address"] = server.hostname
            if server.hostname:
                attributes["server.port"] = server.port or (443 if server.scheme == "https" else 80)
        content = _content_on()
        if content:
            attributes["gen_ai.input.messages"] = _message_parts(messages)
        in_process = model.startswith("embedded/")
        with trace_span(f"chat {model}", attributes, client=not in_process) as span:
            try:
                done = call()
            except LLMCallError as exc:
                span.fail("provider_failure" if exc.transient else "request_rejected", str(exc))
                raise
            finish = "length" if done.completion_tokens >= max_tokens else "stop"
            span.set(
                {
                    "gen_ai.usage.input_tokens": done.prompt_tokens,
                    "gen_ai.usage.output_tokens": done.completion_tokens,
                    "gen_ai.response.finish_reasons": [finish],
                    "agentdesign.cost_usd": done.cost,
                    "agentdesign.cached": done.cached,
                }
            )
            if content:
                output = [
                    {
                        "role": "assistant",
                        "parts": [{"type": "text", "content": done.text}],
                        "finish_reason": finish,
                    }
                ]
                span.set({"gen_ai.output.messages": json.dumps(output, ensure_ascii=False)})
        return done


def traced_model(llm: ChatModel) -> ChatModel:
    """`llm` with a span for each call while tracing is on; `llm` itself while it is off."""
    if _current_tracer() is None or isinstance(llm, TracedChatModel):
        return llm
    return TracedChatModel(llm)


def _record_call(record: CallRecord) -> None:
    """A span for a tool call or an environment step that a task's trace just recorded (model
    calls have theirs from `TracedChatModel`); it ended now, and took the record's latency."""
    tracer = _tracer
    if tracer is None or record.kind == "llm":
        return
    try:
        from opentelemetry.trace import SpanKind, Status, StatusCode

        end = time.time_ns()
        start = end - int(record.latency_s * 1e9)
        content = _content_on()
        attributes: dict[str, Attribute] = {}
        if record.kind == "tool":
            name = f"execute_tool {record.role}"
            attributes = {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": record.role,
                "gen_ai.tool.type": "function",
            }
            if record.isolation is not None:
                attributes["agentdesign.sandbox.isolation"] = record.isolation
            if content:
                attributes["gen_ai.tool.call.arguments"] = record.input
                if record.error is None:
                    attributes["gen_ai.tool.call.result"] = record.output
        else:  # an interactive task's environment: its reset, or a step with an action
            name = f"environment {record.role}"
            attributes = {"agentdesign.environment.operation": record.role}
            if content:
                attributes["agentdesign.environment.action"] = record.input
                attributes["agentdesign.environment.observation"] = record.output
        span = tracer.start_span(
            name, kind=SpanKind.INTERNAL, attributes=attributes, start_time=start
        )
        if record.error is not None:
            span.set_attribute("error.type", f"{record.kind}_error")
            shown = record.error if content else f"{record.kind}_error"
            span.set_status(Status(StatusCode.ERROR, shown[:_MAX_DESCRIPTION]))
        span.end(end_time=end)
    except Exception:  # tracing never fails a task
        return
