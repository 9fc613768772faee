"""Whole searches (`agentdesign run`, then `resume`) whose model replies with a hostile program
every time: each task ends with a result or a recorded failure, the run finishes, and a resume
finishes too. The model's reply being replayed on a resume, a program that crashed the engine
once would crash every resume."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

from forked_python import run_forked
from test_hostile import CASES, os_isolation  # noqa: F401  (the sandbox is needed, or skipped)

from agentdesign.archive import Archive

# `agentdesign ARGS...` on a fake model: asked as the meta agent it replies META, else REPLY
# (the first two arguments).
HOSTILE_MODEL_CLI = """import sys
from agentdesign.components.testing import FakeChatModel
from agentdesign.search.config import _resolve
from agentdesign.search.cli import main
reply, meta = sys.argv.pop(1), sys.argv.pop(1)
def answer(model, messages, temperature, seed):
    return meta if messages[0]["content"].startswith("You design LLM agents") else reply
_resolve.default_chat_model = lambda **_: FakeChatModel(answer)
sys.argv[0] = "agentdesign"
main()
"""
CAPITALS = "".join(f'{{"question": "Capital number {i}?", "answer": "Paris"}}\n' for i in range(4))
PROGRAM_OF_THOUGHT = {
    "choices": {
        "workflow": ["program_of_thought"],
        "planning": ["none"],
        "reasoning": ["direct", "cot"],
        "memory": ["none"],
        "tool": ["none"],
        "reflection": ["none"],
    }
}


def _search(folder: Path, reply: str, meta: str, *args: str) -> subprocess.CompletedProcess[str]:
    """The command in `folder`, forked from the server the CLI's other tests use (the same
    environment: the fake model replaces litellm, so nothing reads the response cache)."""
    done = run_forked(
        HOSTILE_MODEL_CLI,
        *(reply, meta, *args, "--storage", "h.db"),
        cwd=folder,
        env={**os.environ, "COLUMNS": "200"},
        timeout=90,
    )
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    return done


def _finished_with(folder: Path, designs: int) -> list[dict[str, Any]]:
    """Checks the run finished with `designs` designs scored, and returns the details of its
    task results."""
    with Archive(str(folder / "h.db")) as archive:
        assert archive.get_run("h").status == "finished"
        assert len(archive.leaderboard(run_name="h")) == designs
    with sqlite3.connect(folder / "h.db") as db:
        rows = db.execute("select details from ad_task_result").fetchall()
    db.close()
    return [json.loads(details) for (details,) in rows]


def test_a_program_that_leaves_a_deep_folder_tree_ends_its_task_and_the_run_resumes(
    tmp_path: Path,
) -> None:
    (tmp_path / "capitals.jsonl").write_text(CAPITALS)
    (tmp_path / "space.json").write_text(json.dumps(PROGRAM_OF_THOUGHT))
    program = "```python\n" + CASES["deep-folder-tree"].code + "\nprint('Paris')\n```"
    run = ["run", "--name", "h", "--benchmark", "jsonl:capitals.jsonl", "--space", "space.json"]
    _search(
        tmp_path, program, "{}", *run, "--max-agents", "1", "--n-search", "2", "--n-holdout", "0"
    )
    assert all(d.get("error") is None for d in _finished_with(tmp_path, 1))  # each one scored
    _search(tmp_path, program, "{}", "resume", "h", "--max-agents", "2")
    _finished_with(tmp_path, 2)


# A workflow that sends requests without ever reading the replies: the pipe to its stdin fills,
# then the one from its stdout, and both sides would wait on each other.
DEAF_WORKFLOW = """{"workflow": "code"}
```python
def run(question, agent):
    import os
    request = b'\\x1eagentdesign-request {"kind": "call", "messages": []}\\n'
    while True:
        os.write(1, request)
```"""


def test_a_code_workflow_that_never_reads_its_replies_ends_its_task_and_the_run_resumes(
    tmp_path: Path,
) -> None:
    (tmp_path / "capitals.jsonl").write_text(CAPITALS)
    run = ["run", "--name", "h", "--benchmark", "jsonl:capitals.jsonl", "--strategy", "meta"]
    budget = ["--meta-code", "--max-agents", "3", "--n-search", "2", "--n-holdout", "0"]
    _search(tmp_path, "Answer: Paris", DEAF_WORKFLOW, *run, *budget)
    ends = [details["trace"][-1] for details in _finished_with(tmp_path, 3)]
    stopped = [end["error"] for end in ends if end["role"] == "code"]
    assert stopped and set(stopped) == {"channel: the program sent more than 256 requests"}
    _search(tmp_path, "Answer: Paris", DEAF_WORKFLOW, "resume", "h", "--max-agents", "4")
    _finished_with(tmp_path, 4)
