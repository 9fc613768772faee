"""What an exported agent's file calls: its agent on litellm, its examples, its command line.

The runtime module beside an exported `agent.py` carries this module with the others export
copies, so the agent file itself holds only the design. Standard library only, like every
module export inlines.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from agentdesign.components._agent import Agent
from agentdesign.components._errors import ModelUnavailableError, SandboxUnavailableError
from agentdesign.components._spec import AgentSpec
from agentdesign.components.library._memory import Example
from agentdesign.components.llm._embedded import check_embedded_model
from agentdesign.components.llm._llm import LiteLLMChatModel

__all__ = ["EXAMPLES_FILE", "command_line", "exported_agent", "load_examples"]

EXAMPLES_FILE = "examples.json"


def load_examples(folder: str | Path) -> tuple[Example, ...]:
    """The training items the design's memory kept at export time, from `folder`'s examples file.

    Keeping again from just these keeps them all, in the same order: a few_shot memory's k
    examples, or the whole pool a retrieval memory ranks per question.
    """
    items = json.loads((Path(folder) / EXAMPLES_FILE).read_text(encoding="utf-8"))
    return tuple(Example(**item) for item in items)


def exported_agent(
    spec: AgentSpec,
    examples: Sequence[Example],
    *,
    model: str | None = None,
    api_base: str | None = None,
) -> Agent:
    """The design on litellm, as the search ran it, or on another `model` (any litellm model
    string) at `api_base`; no response cache, so every call reaches the model."""
    chosen = spec if model is None else spec.set_params(model=model)
    return Agent(chosen, llm=LiteLLMChatModel(api_base=api_base), train_examples=examples)


def command_line(
    build: Callable[..., Agent],
    *,
    spec: AgentSpec,
    description: str,
    argv: Sequence[str] | None = None,
) -> int:
    """`python agent.py [--model M] [--api-base URL] [--json] QUESTION`: prints the answer (with
    its trace under --json); a problem with the model or the question is one line and exit 2."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("question", nargs="?", help="the question (read from stdin if omitted)")
    parser.add_argument("--model", default=None, help=f"model string (default {spec.model})")
    parser.add_argument("--api-base", default=None, help="base URL of an OpenAI-compatible server")
    parser.add_argument("--json", action="store_true", help="print the answer with its trace")
    args = parser.parse_args(argv)
    question = args.question if args.question is not None else sys.stdin.read()
    if not question.strip():
        print("error: no question given", file=sys.stderr)
        return 2
    try:
        check_embedded_model(args.model or spec.model)  # one line, not a provider failure
        result = build(model=args.model, api_base=args.api_base).run(question)
    except (ModelUnavailableError, SandboxUnavailableError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(dataclasses.asdict(result), indent=2))
    else:
        failure = f"error ({result.error_kind}): {result.error}"
        print(result.answer if not result.error else failure)
    return 0 if not result.error else 1
