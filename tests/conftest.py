"""Fixtures shared by the suites: a fresh database per test, SQLite or PostgreSQL, and how fast
the embedded SmolLM2 runs here (for the timeouts of the tests that run it); and the small
benchmarks, fake models and design spaces several suites search with.

PostgreSQL tests use the server named by AGENTDESIGN_TEST_POSTGRES_URL, each in a fresh schema;
without a server they are skipped, except in CI (`CI=true`), where that is a failure.

The suite runs on pytest-xdist's workers (pyproject's addopts); the tests that run SmolLM2 (marker
`embedded`) share one xdist group, so they run one after another on one worker, never two models
at once, and that worker measures the model's speed once (`smollm2_speed`). Beside the other
workers the model runs on the cores they leave (AGENTDESIGN_EMBEDDED_THREADS, unless set): chosen
from a moment's load, it could take a core another worker is about to use, and llama.cpp's threads
slow down many times over when one of them waits for a core.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from sqlalchemy import create_engine, make_url, text
from sqlalchemy.exc import OperationalError

from agentdesign.archive import Archive
from agentdesign.components import Message
from agentdesign.components.testing import FakeChatModel

if TYPE_CHECKING:
    from agentdesign.search import Search

EMBEDDED_GROUP = "embedded-model"


def pytest_configure(config: pytest.Config) -> None:
    """On an xdist worker, leaves a core to each other worker (see the module's docstring)."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers > 1 and "AGENTDESIGN_EMBEDDED_THREADS" not in os.environ:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        os.environ["AGENTDESIGN_EMBEDDED_THREADS"] = str(max(1, (cores or 1) - (workers - 1)))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Puts every test marked `embedded` in one xdist group (see the module's docstring)."""
    for item in items:
        if item.get_closest_marker("embedded") is not None:
            item.add_marker(pytest.mark.xdist_group(EMBEDDED_GROUP))


POSTGRES_URL = os.environ.get(
    "AGENTDESIGN_TEST_POSTGRES_URL", "postgresql+psycopg2://postgres@127.0.0.1:5432/test"
)


@pytest.fixture(scope="session")
def postgres_schema() -> Iterator[Callable[[], str]]:
    """Makes the URL of a fresh, empty schema per call; drops them all at the end, in one go."""
    engine = create_engine(POSTGRES_URL)
    try:
        with engine.connect():
            pass
    except OperationalError as err:
        engine.dispose()
        reason = str(err.orig).strip().splitlines()[0]
        message = (
            f"PostgreSQL at {make_url(POSTGRES_URL)!s} is unreachable ({reason}); point "
            "AGENTDESIGN_TEST_POSTGRES_URL at a server (a SQLAlchemy URL) to run these tests"
        )
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    schemas: list[str] = []

    def new_schema() -> str:
        schema = f"test_archive_{uuid.uuid4().hex[:12]}"
        with engine.begin() as conn:
            conn.execute(text(f'CREATE SCHEMA "{schema}"'))
        schemas.append(schema)
        url = make_url(POSTGRES_URL).update_query_dict({"options": f"-csearch_path={schema}"})
        return url.render_as_string(hide_password=False)

    yield new_schema
    with engine.begin() as conn:
        for schema in schemas:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
    engine.dispose()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def archive_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An empty database: a SQLite file, or a PostgreSQL schema of its own."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'archive.db'}"
    new_schema: Callable[[], str] = request.getfixturevalue("postgres_schema")
    return new_schema()


@pytest.fixture
def archive(archive_url: str) -> Iterator[Archive]:
    with Archive(archive_url) as opened:
        yield opened


@dataclass(frozen=True)
class EmbeddedSpeed:
    """How fast SmolLM2 runs on this machine now, so that a test on it waits as long as the work
    takes at that speed: a fixed timeout fails on a loaded machine, or waits for nothing on a
    fast one. `seconds_per_token` covers a GSM8K-sized prompt's share too."""

    load_s: float
    seconds_per_token: float
    factor: float = 3.0  # on top of token counts that are already upper bounds
    startup_s: float = 60.0  # a fresh process importing agentdesign and litellm, loaded machine

    def timeout(self, tokens: int, *, loads: int = 1) -> float:
        """Seconds for a process that loads the model `loads` times and generates `tokens`."""
        work = loads * self.load_s + tokens * self.seconds_per_token
        return self.startup_s + self.factor * work


_SPEED_PROBE = """
import json, time
from agentdesign.components import import_litellm
from agentdesign.components.llm._embedded import register_embedded_provider

litellm = import_litellm()
register_embedded_provider()
model = "embedded/smollm2-135m"
started = time.perf_counter()
litellm.completion(model=model, messages=[{"role": "user", "content": "Hi"}], max_tokens=1)
load_s = time.perf_counter() - started
question = (
    "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in "
    "May. How many clips did Natalia sell altogether in April and May? Think step by step."
)
started = time.perf_counter()
reply = litellm.completion(
    model=model, messages=[{"role": "user", "content": question}], max_tokens=64, temperature=0
)
spent = time.perf_counter() - started
print(json.dumps([load_s, spent / max(reply.usage.completion_tokens, 1)]))
"""


@pytest.fixture(scope="session")
def smollm2_speed() -> EmbeddedSpeed:
    """SmolLM2's load time and seconds per token, measured once per session in a fresh process
    (as the command line runs it), on whatever else this machine is doing at the time."""
    probe = subprocess.run(
        [sys.executable, "-c", _SPEED_PROBE],
        capture_output=True,
        text=True,
        timeout=900,  # only a machine too slow for any embedded test takes this long
        check=False,
    )
    assert probe.returncode == 0, probe.stderr
    load_s, seconds_per_token = json.loads(probe.stdout.splitlines()[-1])
    return EmbeddedSpeed(load_s=load_s, seconds_per_token=seconds_per_token)


@contextmanager
def serving(server: HTTPServer) -> Iterator[None]:
    """Serves a loopback test server on a thread until the block ends, then closes it."""
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def chat_completion(
    text: str,
    *,
    model: str,
    prompt_tokens: int,
    completion_tokens: int,
    finish_reason: str = "stop",
) -> dict[str, Any]:
    """An OpenAI chat completion that answers `text`, as the fake providers on loopback reply."""
    return {
        "id": f"chatcmpl-{model}",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": finish_reason,
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def send_json(handler: BaseHTTPRequestHandler, payload: Any) -> None:
    """Answers the request `handler` serves: status 200, `payload` as JSON."""
    body = json.dumps(payload).encode()
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


def capitals_file(folder: Path, n: int) -> Path:
    """A JSONL benchmark of `n` questions whose answer is always Paris."""
    path = folder / "capitals.jsonl"
    path.write_text(
        "".join(f'{{"question": "Capital number {i}?", "answer": "Paris"}}\n' for i in range(n))
    )
    return path


# Twelve sums to search on.
SUMS = [
    {"question": f"What is {a} plus {b}?", "answer": str(a + b)}
    for a in range(1, 5)
    for b in range(1, 4)
]


def sums_reply(messages: Sequence[Message]) -> str:
    """Right on a sum only with scratchpad reasoning (its prompt asks for four labelled sections),
    so that the winner is neither baseline."""
    asked = re.search(r"What is (\d+) plus (\d+)\?", messages[-1]["content"])
    right = int(asked[1]) + int(asked[2]) if asked else 0
    return f"Answer: {right if 'four labelled sections' in messages[0]['content'] else -1}"


def sums_model() -> FakeChatModel:
    """A fake model that answers with `sums_reply`."""
    return FakeChatModel(lambda model, messages, temperature, seed: sums_reply(messages))


def sums_search(benchmark: Any = SUMS, **settings: Any) -> Search:
    """A small search with the fake `sums_model`: at random, on 4 search items and 3 holdout,
    without racing; `settings` add to that or change it."""
    from agentdesign.search import create_search  # its import is heavy: only where it is used

    defaults = {
        "model": sums_model(),
        "model_name": "fake",
        "strategy": "random",
        "n_search": 4,
        "n_holdout": 3,
        "race": False,
    }
    return create_search(benchmark, **(defaults | settings))


def space_choices(**varied: Sequence[str]) -> dict[str, Sequence[str]]:
    """A design space's choices: the single workflow with direct reasoning and no planning,
    memory, tool or reflection (one model call an item), but for the slots in `varied`."""
    return {
        "workflow": ["single"],
        "planning": ["none"],
        "reasoning": ["direct"],
        "memory": ["none"],
        "tool": ["none"],
        "reflection": ["none"],
    } | varied
