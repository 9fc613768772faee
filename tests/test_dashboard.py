"""The README's promise: `optuna-dashboard` pointed at the archive's URL shows each run's study,
its trials under the flat names a user reads (`workflow`, `reasoning__max_tokens`) with the
values and scores the archive holds."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from test_cli import make_archive_with_a_run

from agentdesign.archive import Archive
from agentdesign.components import REGISTRY, SLOTS, AgentSpec

DASHBOARD = Path(sys.executable).with_name("optuna-dashboard")  # from the dev extra
STARTUP_S = 30.0


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.load(response)


def _wait_for(url: str, server: subprocess.Popen[bytes], log: Path) -> Any:
    """The first answer of `url`, polled until the server is up (at most STARTUP_S)."""
    deadline = time.monotonic() + STARTUP_S
    while True:
        if server.poll() is not None:
            pytest.fail(f"optuna-dashboard exited with {server.returncode}:\n{log.read_text()}")
        try:
            return _get(url)
        except (urllib.error.URLError, ConnectionError):
            if time.monotonic() > deadline:
                pytest.fail(f"optuna-dashboard did not answer in {STARTUP_S} s:\n{log.read_text()}")
            time.sleep(0.25)


def test_dashboard_serves_each_run_with_readable_parameter_names(tmp_path: Path) -> None:
    if not DASHBOARD.exists():
        message = f"{DASHBOARD} is missing: install the dev extra (pip install -e '.[dev]')"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    db = make_archive_with_a_run(tmp_path)
    with Archive(str(db)) as archive:
        url = archive.url
        means = {row.agent_hash: row.mean for row in archive.leaderboard(run_name="kept")}
    readable = set(SLOTS) | {"memory_without_reviewer"} | {
        f"{slot}__{info.name}"
        for slot in SLOTS
        for name in REGISTRY.names(slot)
        for info in REGISTRY.get(slot, name).param_info()
    }
    port = _free_port()
    log = tmp_path / "dashboard.log"
    with log.open("wb") as out:
        server = subprocess.Popen(
            [str(DASHBOARD), url, "--host", "127.0.0.1", "--port", str(port)],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        studies = _wait_for(f"{base}/api/studies", server, log)["study_summaries"]
        assert [s["study_name"] for s in studies] == ["agentdesign/kept"]
        study = _get(f"{base}/api/studies/{studies[0]['study_id']}")
        trials = [t for t in study["trials"] if t["state"] == "Complete"]
        assert len(trials) == len(means) == 2
        seen: set[str] = set()
        for trial in trials:
            spec = AgentSpec.from_dict(json.loads(_user_attr(trial, "spec")))
            flat = spec.to_flat()
            params = {p["name"]: p["param_external_value"] for p in trial["params"]}
            assert set(params) <= readable, params
            # as the archive holds; a slot the design cannot use is not asked, and holds "none"
            held = {name.replace("_without_reviewer", ""): v for name, v in params.items()}
            assert held == {name: str(flat[name]) for name in held}
            assert all(flat[slot] == "none" for slot in SLOTS if slot not in held)
            assert trial["values"] == [means[spec.spec_hash]]
            seen |= set(params)
        assert {"workflow", "reasoning", "reasoning__max_tokens"} <= seen
        with urllib.request.urlopen(f"{base}/dashboard", timeout=5) as page:
            assert page.status == 200 and b"<html" in page.read().lower()
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def _user_attr(trial: dict[str, Any], key: str) -> str:
    return next(str(a["value"]) for a in trial["user_attrs"] if a["key"] == key)
