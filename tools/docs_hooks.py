"""mkdocs hooks for the documentation site (named in mkdocs.yml).

The command-line reference is written from the typer app itself at every build: `docs/cli.md`
holds the prose and a `<!-- cli-reference -->` marker, which is replaced by every command's usage,
help and options as `agentdesign COMMAND --help` gives them. So the page cannot drift from the
code: a new option is on it at the next build.
"""

from __future__ import annotations

import html
from typing import Any

MARKER = "<!-- cli-reference -->"


def _cell(text: str) -> str:
    """Help text as one markdown table cell: no HTML, no table or link syntax."""
    text = html.escape(" ".join(text.split()), quote=False)
    for char in "|*_[]`":
        text = text.replace(char, "\\" + char)
    return text


def cli_reference() -> str:
    """Markdown for every command of `agentdesign.search.cli.app`, in the app's order."""
    import typer

    from agentdesign.search.cli import app

    group = typer.main.get_command(app)
    root = group.make_context("agentdesign", [], resilient_parsing=True)
    parts: list[str] = []
    for name in group.list_commands(root):
        command = group.get_command(root, name)
        if command is None or command.hidden:
            continue
        context = command.make_context(name, [], parent=root, resilient_parsing=True)
        usage = command.get_usage(context).removeprefix("Usage: ").strip()
        parts += [f"## `agentdesign {name}`", ""]
        parts += [" ".join((command.help or "").split()), ""]
        parts += ["```text", usage, "```", ""]
        rows = []
        for param in command.params:
            record = param.get_help_record(context)
            if record is None or getattr(param, "hidden", False):
                continue
            declaration, help_text = record
            rows.append(f"| `{declaration}` | {_cell(help_text)} |")
        if rows:
            parts += ["| argument or option | what it does |", "|---|---|", *rows, ""]
    return "\n".join(parts)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if page.file.src_uri == "cli.md":
        if MARKER not in markdown:
            raise ValueError(f"docs/cli.md lost its {MARKER} marker")
        return markdown.replace(MARKER, cli_reference())
    return markdown
