"""DSPy programs on the embedded model, as a DSPy user runs them: `dspy.LM("embedded/...")` after
`register_embedded_provider()`, nothing patched, every call through litellm."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentdesign.components.llm._embedded import register_embedded_provider

dspy = pytest.importorskip("dspy")

SMOL = "embedded/smollm2-135m"


class _Calls:
    """A litellm callback that keeps what each successful call asked for and spent."""

    def __init__(self) -> None:
        from litellm.integrations.custom_logger import CustomLogger

        calls: list[tuple[dict[str, Any], int]] = []
        self.calls = calls

        class Logger(CustomLogger):  # type: ignore[misc]
            def log_success_event(
                self, kwargs: dict[str, Any], response_obj: Any, start_time: Any, end_time: Any
            ) -> None:
                calls.append((kwargs.get("optional_params") or {}, response_obj.usage.total_tokens))

        self.logger = Logger()

    def wait_for(self, n: int, *, timeout_s: float = 30.0) -> None:
        """litellm runs the callbacks of sync calls later, in a background thread."""
        deadline = time.monotonic() + timeout_s
        while len(self.calls) < n and time.monotonic() < deadline:
            time.sleep(0.05)


@pytest.fixture
def litellm_calls(tmp_path: Path) -> Iterator[_Calls]:
    """DSPy's cache in tmp_path (not the home folder), litellm's calls kept."""
    register_embedded_provider()
    import litellm

    dspy.configure_cache(
        enable_disk_cache=True, enable_memory_cache=False, disk_cache_dir=str(tmp_path / "dspy")
    )
    recorder = _Calls()
    # litellm copies callbacks into its per-event lists and skips a second logger of the same
    # class there: remove it from all of them, or the next test's logger is never called.
    manager = litellm.logging_callback_manager
    manager.add_litellm_callback(recorder.logger)
    try:
        yield recorder
    finally:
        manager.remove_callback_from_all_lists(recorder.logger)


@pytest.mark.embedded
@pytest.mark.parametrize("adapter", ["chat", "json"])
def test_chain_of_thought_runs_on_the_embedded_model(litellm_calls: _Calls, adapter: str) -> None:
    lm = dspy.LM(SMOL, temperature=0, max_tokens=96)
    chosen = dspy.ChatAdapter() if adapter == "chat" else dspy.JSONAdapter()
    with dspy.context(lm=lm, adapter=chosen):
        prediction = dspy.ChainOfThought("question -> answer")(question="What is 2 + 2?")
    assert isinstance(prediction.answer, str) and prediction.answer.strip()
    assert isinstance(prediction.reasoning, str)
    # Every call DSPy made (a ChatAdapter reply it cannot parse is asked again as JSON) went
    # through litellm.
    litellm_calls.wait_for(len(lm.history))
    assert len(litellm_calls.calls) == len(lm.history) >= 1
    first, tokens = litellm_calls.calls[0]
    assert tokens > 0
    assert first.get("max_retries") is not None  # DSPy's own option, accepted
    if adapter == "json":
        # Structured outputs: the signature's schema, held by the engine's grammar.
        fmt = first["response_format"]
        assert fmt["type"] == "json_schema"
        assert {"reasoning", "answer"} <= set(fmt["json_schema"]["schema"]["properties"])
        reply = lm.history[0]["outputs"][0]
        assert {"reasoning", "answer"} <= set(json.loads(reply))
    else:
        assert "response_format" not in first
