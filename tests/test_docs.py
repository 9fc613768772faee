"""The README and the documentation site say what the code does.

- The site builds with `mkdocs build --strict`: a warning, a link to a missing page or a missing
  #anchor fails it, and its command-line reference is written from the typer app at build time.
- Every shell command in the README (and so in the getting-started page, which includes the
  README's quickstarts) is one this project knows: each `agentdesign ...` line parses with the
  real command line, each file it names exists, a block that needs a hosted model's key says so.
  Every `agentdesign ...` line of every docs page parses too, and every Python block compiles.
- The README's Python quickstart runs, on its stand-in model; its JSON Lines and YAML load as a
  benchmark.
- The README stays a user's page: short, install, own data and the verdict in its first 100
  lines, its links and anchors resolving, and no development history on any user page.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import shlex
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import typer

from agentdesign.search.cli import app

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
HOSTED_MARK = "# needs a hosted model's key"
CLI = [sys.executable, "-c", "from agentdesign.search.cli import main; main()"]


@dataclass(frozen=True)
class Block:
    source: str  # file name and line, for messages
    language: str
    text: str


def code_blocks(path: Path) -> Iterator[Block]:
    """The fenced code blocks of a markdown file (``` fences; indented blocks are output)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        match = re.match(r"^(\s*)```(\S*)\s*$", lines[i])
        if match is None:
            i += 1
            continue
        indent, language, start = match[1], match[2], i + 1
        i += 1
        body: list[str] = []
        while i < len(lines) and lines[i].strip() != "```":
            body.append(lines[i].removeprefix(indent))
            i += 1
        i += 1
        yield Block(f"{path.relative_to(ROOT)}:{start}", language, "\n".join(body))


def shell_commands(text: str) -> Iterator[list[str]]:
    """Each simple command of a shell block: continuations joined, comments dropped, split at
    `&&`, `;` and `|`."""
    for line in text.replace("\\\n", " ").splitlines():
        words = shlex.split(line, comments=True)
        command: list[str] = []
        for word in words:
            if word in ("&&", ";", "|", "||"):
                if command:
                    yield command
                command = []
            else:
                command.append(word)
        if command:
            yield command


def check_agentdesign(args: list[str], source: str) -> None:
    """The arguments parse with the real command line: a known command, known options, values of
    the right type (nothing runs)."""
    group = typer.main.get_command(app)
    root = group.make_context("agentdesign", [], resilient_parsing=True)
    assert args, f"{source}: `agentdesign` without a command"
    command = group.get_command(root, args[0])
    assert command is not None, f"{source}: no command {args[0]!r}"
    try:
        command.make_context(args[0], args[1:], parent=root)
    except Exception as error:
        raise AssertionError(f"{source}: agentdesign {shlex.join(args)}: {error}") from error


def extras() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return set(project["optional-dependencies"])


def check_pip(args: list[str], source: str) -> None:
    assert args[:1] == ["install"], f"{source}: pip {shlex.join(args)}"
    for word in args[1:]:
        match = re.fullmatch(r"(?:agentdesign|\.)\[([\w,]+)\]", word)
        if match:
            unknown = set(match[1].split(",")) - extras()
            assert not unknown, f"{source}: no extra {unknown} in pyproject.toml"
        elif not word.startswith("-") and word != "agentdesign":
            assert "==" in word, f"{source}: pin {word!r} as the project does"


def check_command(words: list[str], source: str) -> None:
    """One command of a README shell block, by the rule for its program."""
    program, args = words[0], words[1:]
    if program in ("agentdesign", ".venv/bin/agentdesign"):
        check_agentdesign(args, source)
    elif program == "bash":
        assert (ROOT / args[0]).is_file(), f"{source}: no {args[0]}"
    elif program in ("pip", ".venv/bin/pip"):
        check_pip(args, source)
    elif program in ("python", "python3", ".venv/bin/python"):
        if args[:2] == ["-m", "pytest"]:
            return
        target = args[0]
        assert target.startswith("exported/") or (ROOT / target).is_file(), f"{source}: no {target}"
    elif program == "export":
        assert re.fullmatch(r"[A-Z_]+=.*", args[0]), f"{source}: export {args}"
    elif program == ".venv/bin/mkdocs":
        assert (ROOT / "mkdocs.yml").is_file()
    else:
        raise AssertionError(f"{source}: no rule for {program!r}: teach tests/test_docs.py one")


def readme_blocks() -> list[Block]:
    return list(code_blocks(README))


def test_every_readme_block_is_known_and_each_shell_command_checks() -> None:
    blocks = readme_blocks()
    assert {b.language for b in blocks} <= {"bash", "python", "jsonl", "yaml", "text"}, [
        (b.source, b.language) for b in blocks
    ]
    shell = [b for b in blocks if b.language == "bash"]
    assert len(shell) >= 5
    for block in shell:
        for words in shell_commands(block.text):
            check_command(words, block.source)
        hosted = "_API_KEY" in block.text or re.search(
            r"--model (?!embedded/)\S+(?![^\n]*--api-base)", block.text
        )
        if hosted:
            assert HOSTED_MARK in block.text, f"{block.source}: mark it {HOSTED_MARK!r}"


def test_a_bad_readme_command_would_fail() -> None:
    with pytest.raises(AssertionError, match="No such option"):
        check_agentdesign(["run", "--max-agent", "4"], "here")
    with pytest.raises(AssertionError, match="no rule"):
        check_command(["curl", "x"], "here")


def test_the_two_commands_are_the_setup_and_ci_commands() -> None:
    texts = [b.text.strip() for b in readme_blocks() if b.language == "bash"]
    assert "bash .ci/setup && .venv/bin/agentdesign run" in texts
    assert "bash .ci/setup && .venv/bin/python -m pytest -q" in texts
    ci_run = (ROOT / ".ci" / "run").read_text(encoding="utf-8").strip().splitlines()
    assert ci_run[-1] == "bash .ci/setup && .venv/bin/python -m pytest -q"


def test_every_docs_command_parses_and_every_python_block_compiles() -> None:
    pages = [README, *sorted(DOCS.glob("*.md"))]
    checked = 0
    for page in pages:
        for block in code_blocks(page):
            if block.language in ("bash", "sh", "shell", "console"):
                for words in shell_commands(block.text):
                    if words[0] in ("agentdesign", ".venv/bin/agentdesign"):
                        check_agentdesign(words[1:], block.source)
                        checked += 1
            elif block.language == "python":
                ast.parse(block.text, filename=block.source)
    assert checked >= 40


def test_the_readme_data_and_settings_load_as_a_benchmark(tmp_path: Path) -> None:
    from agentdesign.evaluators import open_file_benchmark

    blocks = readme_blocks()
    data = next(b for b in blocks if b.language == "jsonl")
    settings = next(b for b in blocks if b.language == "yaml")
    (tmp_path / "capitals.jsonl").write_text(data.text + "\n", encoding="utf-8")
    (tmp_path / "capitals.yaml").write_text(settings.text + "\n", encoding="utf-8")
    benchmark = open_file_benchmark(str(tmp_path / "capitals.jsonl"))
    assert benchmark.name.startswith("capitals-")
    task = benchmark.tasks()[0]
    assert benchmark.score(task, f"Answer: {task.answer}").value == 1.0


def test_the_readme_python_quickstart_runs(tmp_path: Path) -> None:
    block = next(b for b in readme_blocks() if b.language == "python")
    assert HOSTED_MARK not in block.text
    script = tmp_path / "quickstart.py"
    script.write_text(block.text, encoding="utf-8")
    env = {**os.environ, "AGENTDESIGN_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    # What the README says of it: chain of thought wins, and is not compared with itself.
    first = done.stdout.splitlines()[0]
    assert first.startswith("baseline cot not scored: the winner is chain of thought itself")
    assert list((tmp_path / "exported").glob("agent_*/agent.py"))


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def test_the_readme_is_a_short_users_page_whose_links_resolve() -> None:
    text = README.read_text(encoding="utf-8")
    lines = text.splitlines()
    assert len(lines) <= 250, len(lines)
    first = "\n".join(lines[:100])
    for heading in (
        "## Install",
        "## Quickstart 2: your own data with a hosted model",
        "## Reading the verdict",
    ):
        assert heading in first, f"{heading!r} is not in the first 100 lines"
    slugs = {_slug(line.lstrip("#")) for line in lines if line.startswith("#")}
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        if not path:
            assert anchor in slugs, f"README links #{anchor}, which no heading makes"
        else:
            assert (ROOT / path).exists(), f"README links {path}, which does not exist"


HISTORY = re.compile(
    r"\bissue[- ]?\d|\bsession[- ]?\d|\bround \d|\bbefore (issue|session)|\bcommit [0-9a-f]{7}"
    r"|(?<![-\w])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)(?:[0-9a-f]{7}|[0-9a-f]{9}|[0-9a-f]{11,40})"
    r"(?![-\w])",
    re.IGNORECASE,
)


def test_no_user_page_carries_development_history() -> None:
    for page in [README, *sorted(DOCS.glob("*.md"))]:
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            match = HISTORY.search(line)
            assert match is None, f"{page.relative_to(ROOT)}:{number}: {match[0]!r} in {line!r}"


def test_the_history_check_would_catch_history() -> None:
    for line in ("as of issue 17", "rerun in session 13", "measured on 8e23c92", "commit fe1d600"):
        assert HISTORY.search(line), line
    for line in ("winner 61c7855459", "capitals-2d49311f", "agent 538c9319 on 8 items"):
        assert not HISTORY.search(line), line


def test_the_cli_reference_lists_every_command_and_option() -> None:
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "tools" / "docs_hooks.py")
    assert spec is not None and spec.loader is not None
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    reference = hooks.cli_reference()
    group = typer.main.get_command(app)
    root = group.make_context("agentdesign", [], resilient_parsing=True)
    for name in group.list_commands(root):
        command = group.get_command(root, name)
        assert command is not None
        assert f"## `agentdesign {name}`" in reference
        for param in command.params:
            for option in param.opts:
                assert option in reference, f"{name} {option}"
    assert "<!-- cli-reference -->" in (DOCS / "cli.md").read_text(encoding="utf-8")


def test_the_site_builds_strict(tmp_path: Path) -> None:
    if importlib.util.find_spec("mkdocs") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("mkdocs is not installed: it is in the dev extra")
        pytest.skip("mkdocs is not installed (pip install -e '.[dev]')")
    site = tmp_path / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    cli = (site / "cli" / "index.html").read_text(encoding="utf-8")
    assert "agentdesign finalize" in cli and "--select-on" in cli
    assert "create_search" in (site / "python-api" / "index.html").read_text(encoding="utf-8")
    started = (site / "getting-started" / "index.html").read_text(encoding="utf-8")
    assert "Reading the verdict" in started and "capitals.jsonl" in started


def test_the_readme_verdict_is_what_show_prints_for_its_archive(tmp_path: Path) -> None:
    """Every line of the README's real output is printed, as it stands, by `agentdesign show`
    on the archive it names (opened from a copy: opening an archive may migrate it)."""
    section = README.read_text(encoding="utf-8").split("## Reading the verdict", 1)[1]
    match = re.search(r"`agentdesign show` on a run kept in `([^`]+)`", section)
    assert match is not None, "the README no longer names the verdict's archive"
    shown = next(b for b in readme_blocks() if b.language == "text")
    run = re.search(r"^(\S+): \w+, ranked on the search split", shown.text, re.MULTILINE)
    assert run is not None, "the README's verdict shows no leaderboard title"
    storage = tmp_path / "archive.sqlite"
    storage.write_bytes((ROOT / match[1]).read_bytes())
    done = subprocess.run(
        [*CLI, "show", run[1], "--storage", str(storage)],
        env={**os.environ, "COLUMNS": "100", "NO_COLOR": "1"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    printed = {line.rstrip() for line in done.stdout.splitlines()}
    missing = [line for line in shown.text.splitlines() if line and line not in printed]
    assert not missing, f"the README shows lines `agentdesign show` does not print: {missing}"
