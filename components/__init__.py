"""Agent components, agent specs, the runtime that runs them, and the LLM boundary."""

from __future__ import annotations

from agentdesign.components import _workflows  # noqa: F401  (registers the workflows)
from agentdesign.components._build import (
    build_agent,
    check_model,
    default_chat_model,
    parse_spec,
)
from agentdesign.components._embedded import EMBEDDED_MODELS, embedded_model_path
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
from agentdesign.components._llm import (
    DEFAULT_LLM_TIMEOUT_S,
    LiteLLMChatModel,
    ResponseCache,
    default_cache_dir,
    import_litellm,
)
from agentdesign.components._runtime import (
    REGISTRY,
    SLOTS,
    Agent,
    AgentResult,
    AgentSpec,
    CallRecord,
    ChatModel,
    Completion,
    Component,
    Environment,
    EnvironmentFailed,
    EnvState,
    Episode,
    Example,
    LLMCallError,
    ParamInfo,
    Registry,
    TaskBudget,
    answer_key,
    extract_answer,
    param,
    register,
)
from agentdesign.components._sandbox import (
    SandboxLimits,
    SandboxResult,
    run_python,
    sandbox_isolation,
)

__all__ = [
    "DEFAULT_LLM_TIMEOUT_S",
    "EMBEDDED_MODELS",
    "REGISTRY",
    "SLOTS",
    "Agent",
    "AgentDesignError",
    "AgentResult",
    "AgentSpec",
    "CallRecord",
    "ChatModel",
    "Completion",
    "Component",
    "EnvState",
    "Environment",
    "EnvironmentFailed",
    "Episode",
    "Example",
    "FakeCall",
    "FakeChatModel",
    "LLMCallError",
    "LiteLLMChatModel",
    "ModelUnavailableError",
    "ParamInfo",
    "ProviderError",
    "Registry",
    "ResponseCache",
    "SandboxLimits",
    "SandboxResult",
    "SandboxUnavailableError",
    "SpecError",
    "TaskBudget",
    "answer_key",
    "build_agent",
    "check_model",
    "default_cache_dir",
    "default_chat_model",
    "embedded_model_path",
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
