"""What the listing commands print (`benchmarks`, `components`, `strategies`): tables that fit 80
columns, or JSON for scripts."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from agentdesign.components import REGISTRY, SLOTS, Component, ParamInfo
from agentdesign.evaluators import available_benchmarks, get_benchmark
from agentdesign.search.cli._format import print_json
from agentdesign.search.strategies import STRATEGIES

__all__ = ["list_benchmarks", "list_components", "list_strategies"]


def list_benchmarks(console: Console, *, as_json: bool) -> None:
    """The benchmarks a run can use, with their sizes."""
    found = [(name, get_benchmark(name)) for name in available_benchmarks()]
    if as_json:
        print_json(
            [
                {"name": name, "tasks": len(bench.tasks()), "description": bench.description}
                for name, bench in found
            ]
        )
        return
    table = Table(
        title="benchmarks",
        caption="or your own data: --benchmark jsonl:data.jsonl (settings in data.yaml beside it)",
    )
    table.add_column("name", no_wrap=True)
    table.add_column("tasks", justify="right", no_wrap=True)
    table.add_column("description")
    for name, bench in found:
        table.add_row(name, str(len(bench.tasks())), escape(bench.description))
    console.print(table)


def list_components(console: Console, *, as_json: bool) -> None:
    """Every component by slot, with its parameters, ranges and defaults."""
    found = [
        (slot, name, REGISTRY.get(slot, name)) for slot in SLOTS for name in REGISTRY.names(slot)
    ]
    if as_json:
        print_json(
            [
                {
                    "slot": slot,
                    "name": name,
                    "description": _summary_line(cls),
                    "parameters": [
                        {
                            "name": f"{slot}__{info.name}",
                            "param": info.name,
                            "kind": info.kind,
                            "default": info.default,
                            "low": info.low,
                            "high": info.high,
                            "log": info.log,
                            "choices": info.choices,
                            "searchable": info.searchable,
                            "description": info.doc,
                        }
                        for info in cls.param_info()
                    ],
                }
                for slot, name, cls in found
            ]
        )
        return
    # Two columns, so that at 80 the names stay whole and the descriptions get half the width.
    table = Table(title="components (flat names: slot, slot__param)")
    table.add_column("slot, component, parameter", no_wrap=True)
    table.add_column("what it does; default, searched range")
    for slot in SLOTS:
        in_slot = [(name, cls) for s, name, cls in found if s == slot]
        table.add_row(f"[bold]{slot}[/]", f"slot: one of the {len(in_slot)} components below")
        for name, cls in in_slot:
            table.add_row(f"  [bold]{name}[/]", escape(_summary_line(cls)))
            for info in cls.param_info():
                table.add_row(f"    {slot}__{info.name}", escape(_param_text(info)))
        table.add_section()
    console.print(table)


def _summary_line(cls: type[Component]) -> str:
    """A component's docstring up to its first blank line, on one line; an opt-in one says so."""
    summary = " ".join((cls.__doc__ or "").strip().split("\n\n")[0].split())
    if cls.opt_in:
        summary += " Opt-in: in a search space only where its choices name it."
    return summary


def _param_text(info: ParamInfo) -> str:
    """A parameter's doc, default and range, as the components listing shows them."""
    if info.choices is not None:
        span = "one of " + ", ".join(map(str, info.choices))
    elif info.low is not None:
        span = f"in {info.low}..{info.high}" + (" (log)" if info.log else "")
    else:
        span = "searched" if info.searchable else "fixed"
    default = repr(info.default) if len(repr(info.default)) < 40 else "a text"
    return f"{info.doc}; default {default}, {span}"


def list_strategies(console: Console, *, as_json: bool) -> None:
    """The search strategies a run can use (--strategy)."""
    listing = [{"name": name, "description": about} for name, (about, _) in STRATEGIES.items()]
    if as_json:
        print_json(listing)
        return
    table = Table(title="strategies")
    table.add_column("name", no_wrap=True)
    table.add_column("how it proposes designs")
    for entry in listing:
        table.add_row(entry["name"], escape(entry["description"]))
    console.print(table)
