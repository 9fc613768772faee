"""Agent components, agent specs, the runtime that runs them, and the LLM boundary.

What is exported, and nothing else (the rest is internal and may change):

- specs and agents: `AgentSpec` (with `unused_slots` of a combination of components),
  `parse_spec`, `build_agent`, `Agent`, `AgentResult` with its
  `CallRecord` trace, `TaskBudget`; export with `write_export` (an `ExportedAgent` folder) and
  `render_export`;
- models: the `ChatModel` protocol with `Message` and `Completion`, `LLMCallError`,
  `LiteLLMChatModel`, `default_chat_model`, `check_model`, `model_size`, `ResponseCache`,
  `default_cache_dir`, `sqlite_disk_full`,
  `import_litellm`, `DEFAULT_LLM_TIMEOUT_S`, `DEFAULT_RETRY_BUDGET_S`, `embedded_thread_choice`,
  a model's price in litellm's table (`token_price`, a `TokenPrice`),
  the process's limiter of a model's calls (`rate_limiter`, a `RateLimiter`), and for a runner that
  gives up on a task, `pending_model_call` with its `PendingCall` and the `ThrottleClock` of the
  seconds rate limits held its calls back (`throttle_clock`);
- traces: the optional OpenTelemetry export (`enable_tracing`, `disable_tracing`, `tracing_on`,
  `start_tracing_from_environment`, `trace_span` with its `TraceSpan`, `traced_model`,
  `provider_name`, `GENAI_SEMCONV_VERSION`; docs/tracing.md);
- extending: the slot base classes a new component subclasses (`Workflow`, `Planning`,
  `Reasoning`, `Memory`, `Tool`, `Reflection`, on `Component`), the types their methods take and
  return (`Solver`, `Attempt`, `Observation`, `Example`, `Lesson`, `Recall`, `MemoryStore`;
  `Environment`, `EnvState`, `Episode`, `EnvironmentFailed` for interactive tasks), `register`,
  `param`, `ParamInfo`, the registry (`REGISTRY`, `SLOTS`, `Registry`, `NamedRegistry`), helpers
  (`extract_answer`, `output_key`, `safe_eval`) and the conformance check (`check_component`,
  `ConformanceError`);
- the sandbox for model-written code: `run_python`, `SandboxLimits`, `SandboxResult`,
  `current_isolation`, `Isolation`, `UNSAFE_ENV`;
- what users hand in, within bounds: `read_regular_file`, `read_text_file`, `decode_text`,
  `check_nesting`, `check_unicode` and their `MAX_*` limits;
- errors: `AgentDesignError` and its `SpecError`, `ProviderError`, `ModelUnavailableError`,
  `SandboxUnavailableError`.

Test doubles (a fake model) are in `agentdesign.components.testing`.
"""

from __future__ import annotations

# isort: off
# First, before anything imports a component module: the built-ins register in this order (the
# listing's and the search space's, so that a seeded run draws the designs it always drew).
from agentdesign.components.library import _workflows  # noqa: F401
# isort: on

from agentdesign.components._agent import Agent, AgentResult
from agentdesign.components._build import (
    build_agent,
    check_model,
    default_chat_model,
    model_size,
    parse_spec,
)
from agentdesign.components._conformance import ConformanceError, check_component
from agentdesign.components._environment import Environment, EnvironmentFailed, EnvState, Episode
from agentdesign.components._errors import (
    AgentDesignError,
    ModelUnavailableError,
    ProviderError,
    SandboxUnavailableError,
    SpecError,
)
from agentdesign.components._input import (
    MAX_DATA_BYTES,
    MAX_LINE_BYTES,
    MAX_NESTING,
    MAX_SETTINGS_BYTES,
    check_nesting,
    check_unicode,
    decode_text,
    read_regular_file,
    read_text_file,
)
from agentdesign.components._parsing import extract_answer, output_key
from agentdesign.components._plugins import NamedRegistry
from agentdesign.components._registry import (
    REGISTRY,
    SLOTS,
    Component,
    ParamInfo,
    Registry,
    param,
    register,
)
from agentdesign.components._slots import (
    Attempt,
    Memory,
    Observation,
    Planning,
    Reasoning,
    Reflection,
    Solver,
    Tool,
    Workflow,
)
from agentdesign.components._spec import AgentSpec, unused_slots
from agentdesign.components.export._export import ExportedAgent, render_export, write_export
from agentdesign.components.library._code import CodeWorkflow, check_workflow_source
from agentdesign.components.library._memory import Example, Lesson, MemoryStore, Recall
from agentdesign.components.library._tools import safe_eval
from agentdesign.components.llm._cache import ResponseCache, default_cache_dir, sqlite_disk_full
from agentdesign.components.llm._embedded import embedded_thread_choice
from agentdesign.components.llm._limits import DEFAULT_RETRY_BUDGET_S, RateLimiter, rate_limiter
from agentdesign.components.llm._llm import DEFAULT_LLM_TIMEOUT_S, LiteLLMChatModel, import_litellm
from agentdesign.components.llm._otel import (
    GENAI_SEMCONV_VERSION,
    TraceSpan,
    disable_tracing,
    enable_tracing,
    provider_name,
    start_tracing_from_environment,
    trace_span,
    traced_model,
    tracing_on,
)
from agentdesign.components.llm._pending import (
    PendingCall,
    ThrottleClock,
    pending_model_call,
    throttle_clock,
)
from agentdesign.components.llm._price import TokenPrice, token_price
from agentdesign.components.llm._trace import (
    CallRecord,
    ChatModel,
    Completion,
    LLMCallError,
    Message,
    TaskBudget,
)
from agentdesign.components.sandbox._isolation import UNSAFE_ENV, Isolation, current_isolation
from agentdesign.components.sandbox._sandbox import SandboxLimits, SandboxResult, run_python

__all__ = [
    "DEFAULT_LLM_TIMEOUT_S",
    "DEFAULT_RETRY_BUDGET_S",
    "GENAI_SEMCONV_VERSION",
    "MAX_DATA_BYTES",
    "MAX_LINE_BYTES",
    "MAX_NESTING",
    "MAX_SETTINGS_BYTES",
    "REGISTRY",
    "SLOTS",
    "UNSAFE_ENV",
    "Agent",
    "AgentDesignError",
    "AgentResult",
    "AgentSpec",
    "Attempt",
    "CallRecord",
    "ChatModel",
    "CodeWorkflow",
    "Completion",
    "Component",
    "ConformanceError",
    "EnvState",
    "Environment",
    "EnvironmentFailed",
    "Episode",
    "Example",
    "ExportedAgent",
    "Isolation",
    "LLMCallError",
    "Lesson",
    "LiteLLMChatModel",
    "Memory",
    "MemoryStore",
    "Message",
    "ModelUnavailableError",
    "NamedRegistry",
    "Observation",
    "ParamInfo",
    "PendingCall",
    "Planning",
    "ProviderError",
    "RateLimiter",
    "Reasoning",
    "Recall",
    "Reflection",
    "Registry",
    "ResponseCache",
    "SandboxLimits",
    "SandboxResult",
    "SandboxUnavailableError",
    "Solver",
    "SpecError",
    "TaskBudget",
    "ThrottleClock",
    "TokenPrice",
    "Tool",
    "TraceSpan",
    "Workflow",
    "build_agent",
    "check_component",
    "check_model",
    "check_nesting",
    "check_unicode",
    "check_workflow_source",
    "current_isolation",
    "decode_text",
    "default_cache_dir",
    "default_chat_model",
    "disable_tracing",
    "embedded_thread_choice",
    "enable_tracing",
    "extract_answer",
    "import_litellm",
    "model_size",
    "output_key",
    "param",
    "parse_spec",
    "pending_model_call",
    "provider_name",
    "rate_limiter",
    "read_regular_file",
    "read_text_file",
    "register",
    "render_export",
    "run_python",
    "safe_eval",
    "sqlite_disk_full",
    "start_tracing_from_environment",
    "throttle_clock",
    "token_price",
    "trace_span",
    "traced_model",
    "tracing_on",
    "unused_slots",
    "write_export",
]
