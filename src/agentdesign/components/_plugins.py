"""The one registry mechanism behind components, benchmarks and strategies: objects by name that
refuse a second object under a taken name, plus the third-party plugins that package entry points
name, loaded once, when a registry is first read.

Standard library only, like every module export inlines.
"""

from __future__ import annotations

import importlib.metadata
import inspect
import sys
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Generic, TypeVar

__all__ = ["NamedRegistry", "PluginGroup"]

T = TypeVar("T")


class PluginGroup:
    """The entry points of one group (e.g. `agentdesign.benchmarks`), loaded once on demand.

    An entry point names a module (importing it registers what it defines, through the usual
    decorators) or an object, which `adopt` registers under the entry point's name. Loading is
    lazy, so a plugin may import agentdesign itself, and happens on the first read rather than the
    first write, so registering the built-ins never imports a plugin. A plugin that fails to load
    is skipped with one line on stderr naming it: a broken third-party package must not break the
    built-ins.
    """

    def __init__(self, group: str | None) -> None:
        self.group = group
        self._loaded = group is None

    def load(self, adopt: Callable[[str, Any], object]) -> None:
        if self._loaded or self.group is None:
            return
        self._loaded = True  # first: a plugin that reads the registry while loading sees it so far
        for entry in importlib.metadata.entry_points(group=self.group):
            try:
                loaded = entry.load()
                if not inspect.ismodule(loaded):
                    adopt(entry.name, loaded)
            except Exception as error:  # third-party code: any failure is the plugin's
                print(
                    f"agentdesign: skipped plugin '{entry.name}' ({entry.value}, entry point "
                    f"group {self.group}): {type(error).__name__}: {error}",
                    file=sys.stderr,
                )

    def skip(self) -> None:
        """Never load this group (an exported agent carries the plugins it needs inlined)."""
        self._loaded = True


class NamedRegistry(Mapping[str, T], Generic[T]):
    """Objects of one kind by name; reading it first loads the plugins of its entry point group.

    Register a class, or a configured preset of one (a factory with its settings bound), under any
    name not yet taken; a collision is refused naming both sides, since silently replacing a
    built-in would change what a stored run name means.
    """

    def __init__(
        self,
        *,
        kind: str,
        group: str | None = None,
        adopt: Callable[[str, Any], object] | None = None,
    ) -> None:
        """`adopt` registers what a plugin's entry point names, when that is not simply an object
        to register under the entry point's name (the default)."""
        self.kind = kind
        self.plugins = PluginGroup(group)
        self._adopt = adopt or self.adopt
        self._objects: dict[str, T] = {}

    def register(self, name: str, obj: T) -> T:
        if not isinstance(name, str) or not name:
            raise ValueError(f"a {self.kind} needs a non-empty name, got {name!r}")
        existing = self._objects.get(name)
        if existing is not None:
            raise ValueError(
                f"a {self.kind} named '{name}' is already registered (by {_origin(existing)})"
            )
        self._objects[name] = obj
        return obj

    def adopt(self, name: str, obj: T) -> None:
        """Registers a plugin's object unless its module's own decorator already did."""
        if self._objects.get(name) is not obj:
            self.register(name, obj)

    def lookup(self, name: str, *, error: type[Exception] = ValueError, hint: str = "") -> T:
        """The object called `name`; `error` otherwise, listing the names there are."""
        found = self.get(name)
        if found is None:
            available = ", ".join(self)
            raise error(f"unknown {self.kind} '{name}' (available: {available}{hint})")
        return found

    def __getitem__(self, name: str) -> T:
        self.plugins.load(self._adopt)
        return self._objects[name]

    def __iter__(self) -> Iterator[str]:
        self.plugins.load(self._adopt)
        return iter(tuple(self._objects))

    def __len__(self) -> int:
        self.plugins.load(self._adopt)
        return len(self._objects)


def _origin(obj: object) -> str:
    module = getattr(obj, "__module__", None) or type(obj).__module__
    qualname = getattr(obj, "__qualname__", None) or type(obj).__qualname__
    return f"{module}.{qualname}"
