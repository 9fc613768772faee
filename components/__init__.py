"""Agent components, agent specs, the runtime that runs them, and the LLM boundary.

Also the base classes a new component subclasses (`Workflow`, `Planning`, `Reasoning`, `Memory`,
`Tool`, `Reflection`) and the types their methods take and return (`Solver`, `Attempt`, `Message`,
...), so extending agentdesign needs no private import.
"""

from __future__ import annotations

from agentdesign.components import _workflows  # noqa: F401  (registers the workflows)
from agentdesign.components._agent import Agent, AgentResult, Solver
from agentdesign.components._build import (
    build_agent,
    check_model,
    default_chat_model,
    parse_spec,
)
from agentdesign.components._cache import ResponseCache, default_cache_dir
from agentdesign.components._checks import ConformanceError, check_component
from agentdesign.components._embedded import (
    EMBEDDED_MODELS,
    embedded_model_path,
    embedded_thread_choice,
)
from agentdesign.components._environment import Environment, EnvironmentFailed, EnvState, Episode
from agentdesign.components._errors import (
    AgentDesignError,
    ModelUnavailableError,
    ProviderError,
    SandboxUnavailableError,
    SpecError,
)
from agentdesign.components._export import render_standalone, write_agent_files
from agentdesign.components._fake import FakeCall, FakeChatModel, failing_responder
from agentdesign.components._functional import safe_eval
from agentdesign.components._isolation import UNSAFE_ENV, Isolation, current_isolation
from agentdesign.components._llm import DEFAULT_LLM_TIMEOUT_S, LiteLLMChatModel, import_litellm
from agentdesign.components._memory import Example, Lesson, MemoryStore, Recall
from agentdesign.components._parsing import answer_key, extract_answer
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
from agentdesign.components._sandbox import (
    SandboxLimits,
    SandboxResult,
    run_python,
    sandbox_isolation,
)
from agentdesign.components._slots import (
    Attempt,
    Memory,
    Observation,
    Planning,
    Reasoning,
    Reflection,
    Tool,
    Workflow,
)
from agentdesign.components._spec import AgentSpec
from agentdesign.components._trace import (
    CallRecord,
    ChatModel,
    Completion,
    LLMCallError,
    Message,
    TaskBudget,
)

__all__ = [
    "DEFAULT_LLM_TIMEOUT_S",
    "EMBEDDED_MODELS",
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
    "Completion",
    "Component",
    "ConformanceError",
    "EnvState",
    "Environment",
    "EnvironmentFailed",
    "Episode",
    "Example",
    "FakeCall",
    "FakeChatModel",
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
    "Planning",
    "ProviderError",
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
    "Tool",
    "Workflow",
    "answer_key",
    "build_agent",
    "check_component",
    "check_model",
    "current_isolation",
    "default_cache_dir",
    "default_chat_model",
    "embedded_model_path",
    "embedded_thread_choice",
    "extract_answer",
    "failing_responder",
    "import_litellm",
    "param",
    "parse_spec",
    "register",
    "render_standalone",
    "run_python",
    "safe_eval",
    "sandbox_isolation",
    "write_agent_files",
]
