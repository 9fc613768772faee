"""Exports an agent as a folder a person can read and ship, that needs only litellm to run.

The folder holds a short agent file (the design, its prompts as text, the steps of one question),
the runtime module beside it, the prompts file (what the model is sent, call by call), the
training items the memory keeps, the design's JSON spec, and the evidence for it. The runtime is
the engine's own runtime, LLM boundary and embedded-model provider, copied from their modules
rather than re-implemented, so the exported agent makes the same calls and gives the same answers
as the agent the search evaluated. A third-party component's module is copied too, so long as it
imports from agentdesign only names the runtime defines (`from agentdesign.components import
Workflow, param, ...`); the agent file's header names each such module and its distribution.
"""

from __future__ import annotations

import ast
import contextlib
import ctypes
import errno
import functools
import importlib.metadata
import inspect
import json
import os
import shutil
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from importlib import util as import_util
from pathlib import Path
from types import ModuleType
from typing import Any

from agentdesign.components._errors import AgentDesignError
from agentdesign.components._registry import Component
from agentdesign.components._slots import Memory
from agentdesign.components._spec import AgentSpec
from agentdesign.components.export._export_text import (
    examples_json,
    rehearse,
    render_agent_file,
    render_prompts,
)
from agentdesign.components.export._standalone import EXAMPLES_FILE
from agentdesign.components.library._memory import Example

__all__ = [
    "ExportedAgent",
    "load_exported_agent",
    "render_export",
    "render_runtime",
    "write_export",
]

# Modules copied into the runtime module, in order. Their imports of each other are cut (the
# names are defined earlier in the same file), and so are imports of the names the preamble
# defines.
_INLINED = (
    "llm/_trace.py",
    "_environment.py",
    "_parsing.py",
    "_plugins.py",
    "_registry.py",
    "library/_memory.py",
    "_slots.py",
    "_spec.py",
    "_agent.py",
    "sandbox/_workfolder.py",
    "sandbox/_seccomp.py",
    "sandbox/_isolation.py",
    "sandbox/_sandbox_child.py",
    "sandbox/_channel.py",
    "sandbox/_sandbox.py",
    "library/_tools.py",
    "library/_functional.py",
    "library/_workflows.py",
    "library/_code.py",
    "llm/_cache.py",
    "llm/_weights.py",
    "llm/_embedded.py",
    "llm/_limits.py",
    "llm/_pending.py",
    "llm/_llm.py",
    "export/_standalone.py",
)
_PACKAGE = "agentdesign.components"
_STALE_TEMPORARY_S = 60.0
_PROVIDED_BY_PREAMBLE = {
    f"{_PACKAGE}._errors": {"ModelUnavailableError", "SandboxUnavailableError"}
}

AGENT_FILE = "agent.py"
RUNTIME_FILE = "agentdesign_runtime.py"
PROMPTS_FILE = "prompts.md"
SPEC_FILE = "spec.json"
EVIDENCE_FILE = "evidence.json"

_PREAMBLE = '''\
"""The agentdesign runtime that the agent file beside it runs on.

The engine's own modules, copied from agentdesign: the agent runs here exactly the code that ran
it in the search. Needs only litellm; do not edit it, edit the agent file's design instead.
"""

from __future__ import annotations


class ModelUnavailableError(Exception):
    """A model cannot be used here: its package is missing or its weights are corrupt."""


class SandboxUnavailableError(Exception):
    """Model-written code would run without operating-system isolation (set
    AGENTDESIGN_UNSAFE_SANDBOX=1 to run it anyway)."""

'''

_NO_PLUGINS = """

# The components the agent uses are all in this file: never load agentdesign's plugins.
REGISTRY.plugins.skip()
"""


@dataclass(frozen=True)
class ExportedAgent:
    """An exported agent's folder and the files in it that a person runs or reads."""

    folder: Path
    spec: AgentSpec

    @property
    def agent_file(self) -> Path:
        return self.folder / AGENT_FILE

    @property
    def prompts_file(self) -> Path:
        return self.folder / PROMPTS_FILE

    @property
    def spec_file(self) -> Path:
        return self.folder / SPEC_FILE

    @property
    def evidence_file(self) -> Path:
        return self.folder / EVIDENCE_FILE


def _module_name(filename: str) -> str:
    """An inlined module's dotted name (`sandbox/_sandbox.py`: `...components.sandbox._sandbox`)."""
    return f"{_PACKAGE}.{filename.removesuffix('.py').replace('/', '.')}"


def _module_source(filename: str) -> str:
    """The module's source without its `from __future__` and package imports."""
    source = resources.files(_PACKAGE).joinpath(filename).read_text()
    return _without_package_imports(source, where=f"{filename} (copied from {_PACKAGE})")


def _without_package_imports(source: str, *, where: str) -> str:
    """`source` with its `from __future__` imports and its imports of what the file defines cut.

    Any other import of agentdesign would break the standalone file, so it is refused here.
    """
    lines = source.splitlines(keepends=True)
    inlined = {_module_name(name) for name in _INLINED}
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


def render_runtime(spec: AgentSpec) -> tuple[str, list[str]]:
    """The runtime module's source for `spec`, and a line per plugin module it carries."""
    plugins, notes = _plugin_sources(spec)
    parts = [_PREAMBLE, *(_module_source(name) for name in _INLINED), _NO_PLUGINS, *plugins]
    return "".join(parts), notes


def render_export(
    spec: AgentSpec,
    *,
    train_examples: Sequence[Example],
    question: str | None = None,
    evidence: Mapping[str, Any] | None = None,
    origin: str = "",
) -> dict[str, str]:
    """The exported folder's files, by name, for `spec`.

    The examples file carries the training items the spec's memory keeps from `train_examples`:
    none, a few_shot memory's k examples, or a retrieval memory's whole pool (BM25 ranks it per
    question). The prompts file shows the calls for `question` (one of the benchmark's, say);
    `origin` ("from run NAME ...") goes into the agent file's header, `evidence` (JSON values)
    into the evidence file, which is left out without it.
    """
    memory = spec["memory"]
    assert isinstance(memory, Memory)
    examples = memory.select(train_examples)
    runtime, notes = render_runtime(spec)
    rehearsal = rehearse(spec, examples=examples, question=question)
    files = {
        AGENT_FILE: render_agent_file(
            spec,
            rehearsal=rehearsal,
            runtime_file=RUNTIME_FILE,
            origin=origin,
            evidence=evidence is not None,
            plugin_notes=notes,
        ),
        RUNTIME_FILE: runtime,
        PROMPTS_FILE: render_prompts(spec, examples=examples, rehearsal=rehearsal),
        EXAMPLES_FILE: json.dumps(examples_json(examples), indent=1, ensure_ascii=False) + "\n",
        SPEC_FILE: json.dumps(spec.to_dict(), indent=2) + "\n",
    }
    if evidence is not None:
        files[EVIDENCE_FILE] = json.dumps(evidence, indent=2, ensure_ascii=False) + "\n"
    return files


def write_export(
    spec: AgentSpec,
    *,
    train_examples: Sequence[Example],
    out: Path,
    question: str | None = None,
    evidence: Mapping[str, Any] | None = None,
    origin: str = "",
) -> ExportedAgent:
    """Writes `spec`'s folder, `agent_<hash>` in `out` (see `render_export`); returns it.

    The folder is written under a temporary name in `out`, then renamed into place in one step,
    or, over an earlier export of it, swapped with that one in one step (where the system cannot
    swap, or the folder holds files no export wrote, it is refused). So a process killed at any
    moment leaves the earlier folder or the new one, never half of one: at most a hidden
    temporary, which the next export into `out` removes.
    """
    files = render_export(
        spec, train_examples=train_examples, question=question, evidence=evidence, origin=origin
    )
    if out.exists() and not out.is_dir():
        raise AgentDesignError(f"cannot export into {out}: it is not a directory")
    folder = out / f"agent_{spec.spec_hash[:10]}"
    staged = out / f".{folder.name}.{os.getpid()}.tmp"
    try:
        out.mkdir(parents=True, exist_ok=True)
        _remove_stale_temporaries(out)
        _check_replaceable(folder, files)
        staged.mkdir()
        for name, text in files.items():
            (staged / name).write_text(text, encoding="utf-8")
        if folder.exists():
            _exchange(staged, folder)  # `staged` now holds the earlier export
        else:
            staged.rename(folder)
    except BaseException as err:
        shutil.rmtree(staged, ignore_errors=True)
        if isinstance(err, OSError):
            raise AgentDesignError(f"cannot export into {out}: {err.strerror or err}") from None
        raise
    shutil.rmtree(staged, ignore_errors=True)
    return ExportedAgent(folder=folder, spec=spec)


def _check_replaceable(folder: Path, files: Mapping[str, str]) -> None:
    """Refuses, in one line, to replace `folder` unless it is an earlier export's folder: a
    directory holding only an export's files (and the bytecode Python leaves beside them)."""
    if not folder.exists() and not folder.is_symlink():
        return
    if folder.is_symlink() or not folder.is_dir():
        raise AgentDesignError(f"cannot export into {folder}: it is there and not a folder")
    foreign = sorted(
        p.name
        for p in folder.iterdir()
        if p.name not in files and p.name not in {EVIDENCE_FILE, "__pycache__"}
    )
    if foreign:
        raise AgentDesignError(
            f"cannot export into {folder}: it holds files an export did not write "
            f"({', '.join(foreign[:3])}); move them or give another --out"
        )


_RENAME_EXCHANGE = 2  # renameat2's flag: swap the two paths in one step (Linux)
_AT_FDCWD = -100


def _exchange(staged: Path, folder: Path) -> None:
    """Swaps `staged` and `folder` in one step; refuses in one line where the system cannot."""
    renameat2 = getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None)
    if renameat2 is None:
        raise AgentDesignError(f"cannot replace {folder} in one step here: remove it first")
    done = renameat2(
        _AT_FDCWD, os.fsencode(staged), _AT_FDCWD, os.fsencode(folder), _RENAME_EXCHANGE
    )
    if done != 0:
        code = ctypes.get_errno()
        if code in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
            raise AgentDesignError(f"cannot replace {folder} in one step here: remove it first")
        raise OSError(code, os.strerror(code))


def _remove_stale_temporaries(out: Path) -> None:
    """Removes the temporaries that killed exports left in `out`: an export writes its own in
    milliseconds, so one a minute old is no running export's."""
    now = time.time()
    for temporary in out.glob(".agent_*.tmp"):
        with contextlib.suppress(OSError):
            if now - temporary.lstat().st_mtime <= _STALE_TEMPORARY_S:
                continue
            if temporary.is_dir() and not temporary.is_symlink():
                shutil.rmtree(temporary, ignore_errors=True)
            else:
                temporary.unlink()


def load_exported_agent(folder: Path, *, name: str) -> ModuleType:
    """Imports the agent file of an exported `folder` in this process as module `name`, on its
    own runtime rather than one an earlier export left loaded: for checks and tests."""
    sys.modules.pop(RUNTIME_FILE.removesuffix(".py"), None)
    found = import_util.spec_from_file_location(name, folder / AGENT_FILE)
    assert found is not None and found.loader is not None
    module = import_util.module_from_spec(found)
    sys.modules[name] = module  # dataclasses look their module up while it runs
    path = list(sys.path)
    try:
        found.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    finally:
        sys.path[:] = path  # the agent file puts its folder first
    return module
