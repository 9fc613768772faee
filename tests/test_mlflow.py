"""The MLflow copy of a run, against a real `mlflow server` on loopback (one per module): a parent
run with the run's settings, a child run per evaluation with its scores, the verdict on the
parent; a resumed run that adds to the same parent and sends nothing twice; a server that goes
away mid-run, which costs one warning line and nothing of the search; a bad setting, which is one
line before anything is stored; and no mlflow import at all unless the copy is asked for."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from conftest import SUMS, EmbeddedSpeed, space_choices, sums_model, sums_reply, sums_search
from forked_python import run_forked
from outage_proxy import OutageProxy

from agentdesign.archive import Archive
from agentdesign.components import (
    AgentDesignError,
    LLMCallError,
    Message,
    ProviderError,
    default_cache_dir,
)
from agentdesign.components.testing import FakeChatModel
from agentdesign.search import Search, create_search, load_search
from agentdesign.search.study import resume_search
from agentdesign.search.verdict import run_verdict

mlflow = pytest.importorskip("mlflow")
from mlflow.entities import Run  # noqa: E402
from mlflow.tracking import MlflowClient  # noqa: E402

# Every test here uses the module's one server: xdist keeps them on one worker.
pytestmark = pytest.mark.xdist_group("mlflow-server")

STARTUP_S = 180.0  # the server's first start: migrations and imports, on a loaded machine
# Three designs: which reasoning; the fake model is right only with scratchpad's.
SPACE: Mapping[str, Any] = {
    "choices": space_choices(reasoning=["direct", "cot", "scratchpad"]),
    "limits": {"reasoning__max_tokens": [512, 512]},
}


def new_search(tmp_path: Path, name: str, **overrides: Any) -> Search:
    """A run on a JSON Lines file of sums (so that `resume` finds its items again)."""
    data = tmp_path / "sums.jsonl"
    data.write_text("".join(json.dumps(item) + "\n" for item in SUMS))
    arguments = {"name": name, "storage": tmp_path / "runs.db", "space": SPACE, **overrides}
    return sums_search(f"jsonl:{data}", **arguments)


class MlflowServer:
    """`mlflow server` on a free loopback port, its store in a temporary folder; started at once,
    waited for on first use, stopped (its whole process group) at the end."""

    def __init__(self, folder: Path) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port: int = probe.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = folder / "server.log"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_", "AGENTDESIGN_"))}
        env |= {
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",  # its gateway imports litellm: no download
            "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",  # no job workers to start or stop
        }
        with self.log.open("w") as log:
            self.process = subprocess.Popen(
                [
                    *(sys.executable, "-m", "mlflow", "server"),
                    *("--host", "127.0.0.1", "--port", str(self.port), "--workers", "1"),
                    *("--backend-store-uri", f"sqlite:///{folder / 'mlflow.db'}"),
                    *("--artifacts-destination", str(folder / "artifacts")),
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,  # its workers in its own group, all stopped together
            )
        self._up = False

    def ready(self) -> str:
        started = time.monotonic()
        while not self._up:
            assert self.process.poll() is None, self.log.read_text()[-3000:]
            assert time.monotonic() - started < STARTUP_S, self.log.read_text()[-3000:]
            try:
                with urllib.request.urlopen(f"{self.url}/health", timeout=2) as answer:
                    self._up = answer.status == 200
            except OSError:
                time.sleep(0.2)
        return self.url

    def stop(self) -> None:
        with_group = os.getpgid(self.process.pid)
        os.killpg(with_group, signal.SIGTERM)
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(with_group, signal.SIGKILL)
            self.process.wait(timeout=15)
        with_group_left = subprocess.run(
            ["pgrep", "-g", str(with_group)], capture_output=True, text=True, check=False
        )
        if with_group_left.stdout.strip():  # a worker that outlived its parent
            os.killpg(with_group, signal.SIGKILL)


@pytest.fixture(scope="module")
def server_process(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MlflowServer]:
    server = MlflowServer(tmp_path_factory.mktemp("mlflow"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module", autouse=True)
def _start_early(server_process: MlflowServer) -> None:
    """Starts the server with the module's first test, so that it comes up while the tests that
    need none run."""


@pytest.fixture
def server(server_process: MlflowServer) -> str:
    return server_process.ready()


def use_mlflow(monkeypatch: pytest.MonkeyPatch, uri: str, experiment: str) -> None:
    monkeypatch.setenv("AGENTDESIGN_MLFLOW", "1")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", experiment)
    monkeypatch.delenv("MLFLOW_EXPERIMENT_ID", raising=False)


def mlflow_runs(server: str, experiment: str) -> tuple[Run, list[Run]]:
    """The experiment's one parent run and its children."""
    client = MlflowClient(tracking_uri=server)
    found = client.get_experiment_by_name(experiment)
    assert found is not None
    runs = client.search_runs([found.experiment_id], max_results=1000)
    [parent] = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert len(children) == len(runs) - 1
    return parent, sorted(children, key=lambda c: int(c.data.tags["agentdesign.evaluation_id"]))


def by_evaluation(children: list[Run]) -> dict[int, Run]:
    ids = [int(c.data.tags["agentdesign.evaluation_id"]) for c in children]
    assert len(ids) == len(set(ids)), f"an evaluation logged twice: {sorted(ids)}"
    return dict(zip(ids, children, strict=True))


def assert_mirrors_the_archive(archive: Archive, run_name: str, children: list[Run]) -> None:
    """A child per evaluation the run holds, each with the archive's numbers."""
    roles = archive.run_roles(run_name)
    logged = by_evaluation(children)
    assert set(logged) == set(roles)
    for evaluation_id, child in logged.items():
        evaluation = archive.get_evaluation(evaluation_id)
        tags, metrics, params = child.data.tags, child.data.metrics, child.data.params
        assert tags["agentdesign.role"] == roles[evaluation_id]
        assert tags["agentdesign.split"] == evaluation.split
        assert tags["agentdesign.status"] == evaluation.status
        assert params["spec_hash"] == evaluation.agent_hash
        assert child.info.status == "FINISHED"
        assert metrics["mean"] == pytest.approx(evaluation.mean)
        assert metrics["ci_low"] == pytest.approx(evaluation.ci_low)
        assert metrics["ci_high"] == pytest.approx(evaluation.ci_high)
        assert metrics["n_items"] == evaluation.n_done
        assert metrics["tokens_per_item"] == pytest.approx(evaluation.tokens_per_item)
        assert metrics["seconds_per_item"] == pytest.approx(evaluation.wall_s / evaluation.n_done)
        assert metrics["cost_usd"] == pytest.approx(evaluation.cost)


# -- without a server ---------------------------------------------------------------------------

_SEARCH = """
import os, sys
from agentdesign.components.testing import FakeChatModel
from agentdesign.search import create_search

items = [{"question": f"Capital number {i}?", "answer": "Paris"} for i in range(4)]
for switch in ("unset", "0"):
    if switch != "unset":
        os.environ["AGENTDESIGN_MLFLOW"] = switch
    with create_search(
        items, scorer=lambda output, answer: 1.0, name=f"s{switch}", storage=sys.argv[1],
        model=FakeChatModel(lambda *a: "Answer: Paris"), model_name="fake", space="tiny",
        n_search=2, n_holdout=1, race=False,
    ) as search:
        search.optimize(n_agents=1)
print("loaded:", ",".join(sorted({m for m in sys.modules if m.split(".")[0].startswith("mlflow")})))
"""


def _forked(code: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`python -c code args`, forked from a process that has imported agentdesign already (one
    per environment: this one's, without the switch or MLflow's variables, which `code` sets)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_", "AGENTDESIGN_"))}
    return run_forked(code, *args, cwd=cwd, env=env, timeout=120)


def test_nothing_imports_mlflow_unless_the_copy_is_asked_for(tmp_path: Path) -> None:
    done = _forked(_SEARCH, str(tmp_path / "a.db"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "loaded:"


_FAKE_MODEL_CLI = (
    "import os, sys; from agentdesign.components.testing import FakeChatModel; "
    "from agentdesign.search.config import _resolve; from agentdesign.search.cli import main; "
    "_resolve.default_chat_model = lambda **_: FakeChatModel(lambda *a: 'Answer: Paris'); "
    "os.environ['AGENTDESIGN_MLFLOW'] = '1'; os.environ['MLFLOW_TRACKING_URI'] = sys.argv.pop(1); "
    "sys.argv[0] = 'agentdesign'; main()"
)


def test_an_unreachable_server_is_one_line_before_anything_is_stored(tmp_path: Path) -> None:
    (tmp_path / "capitals.jsonl").write_text(
        "".join(f'{{"question": "Capital number {i}?", "answer": "Paris"}}\n' for i in range(4))
    )
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    run = ["run", "--benchmark", "jsonl:capitals.jsonl", "--name", "s", "--space", "tiny"]
    run += ["--max-agents", "1", "--n-search", "2", "--n-holdout", "1", "--storage", "s.db"]
    refused = _forked(_FAKE_MODEL_CLI, f"http://127.0.0.1:{closed}", *run, cwd=tmp_path)
    assert refused.returncode == 2
    assert refused.stderr == (
        f"error: cannot reach the MLflow tracking URI http://127.0.0.1:{closed} "
        "(MLFLOW_TRACKING_URI): connection refused\n"
    )
    assert not (tmp_path / "s.db").exists() or not Archive(str(tmp_path / "s.db")).list_runs()


def test_bad_settings_are_one_line_and_store_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refused() -> str:
        with pytest.raises(AgentDesignError) as caught:
            new_search(tmp_path, "bad")
        return str(caught.value)

    monkeypatch.setenv("AGENTDESIGN_MLFLOW", "maybe")
    assert refused() == "AGENTDESIGN_MLFLOW must be 1 (on) or 0 (off), got 'maybe'"
    use_mlflow(monkeypatch, "foo://nowhere", "bad")
    assert refused() == (
        "cannot use the MLflow tracking URI foo://nowhere (MLFLOW_TRACKING_URI): MLflow supports "
        "no such URI"
    )
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://")
    assert refused().endswith("(MLFLOW_TRACKING_URI): it names no host")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://user:secret@127.0.0.1:1")
    message = refused()
    assert "secret" not in message and "http://user:***@127.0.0.1:1" in message
    monkeypatch.setitem(sys.modules, "mlflow", None)  # not installed
    assert refused() == (
        "AGENTDESIGN_MLFLOW=1 asks for MLflow tracking, but MLflow is not installed: "
        "pip install 'agentdesign[mlflow]'"
    )
    with Archive(str(tmp_path / "runs.db")) as archive:
        assert archive.list_runs() == []


# -- against the server -------------------------------------------------------------------------


def test_a_run_is_a_parent_with_a_child_per_evaluation_and_the_verdict(
    server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    use_mlflow(monkeypatch, server, "whole-run")
    with new_search(tmp_path, "logged", storage=f"sqlite:///{tmp_path}/runs.db") as search:
        search.optimize(n_agents=3)
        verdict = search.verdict()
        parent, children = mlflow_runs(server, "whole-run")
        assert_mirrors_the_archive(search.archive, "logged", children)
        roles = {c.data.tags["agentdesign.role"] for c in children}
    assert "MLflow" not in capsys.readouterr().err

    assert parent.info.run_name == "logged" and parent.info.status == "FINISHED"
    params, tags, metrics = parent.data.params, parent.data.tags, parent.data.metrics
    assert params["benchmark"] == f"jsonl:{tmp_path / 'sums.jsonl'}"
    assert (params["model"], params["strategy"], params["seed"]) == ("python/fake", "random", "0")
    assert (params["n_search"], params["n_holdout"], params["split_seed"]) == ("4", "3", "0")
    assert (params["search_items"], params["holdout_items"]) == ("4", "3")
    assert params["baselines"] == "cot, cot-sc" and "max_tokens" in params
    assert tags["agentdesign.archive"] == f"sqlite:///{tmp_path}/runs.db"
    assert tags["agentdesign.run"] == "logged" and tags["agentdesign.version"]

    assert {"candidate", "winner", "baseline"} <= roles
    [winner] = [c for c in children if c.data.tags["agentdesign.role"] == "winner"]
    assert winner.data.tags["agentdesign.split"] == "holdout"
    assert winner.data.params["reasoning"] == "scratchpad"
    assert winner.data.params["reasoning.max_tokens"] == "512"

    assert verdict.holdout is not None and verdict.baselines
    assert tags["agentdesign.winner"] == verdict.holdout.agent_hash
    assert metrics["winner.holdout.mean"] == pytest.approx(verdict.holdout.mean)
    assert metrics["winner.holdout.ci_low"] == pytest.approx(verdict.holdout.ci_low)
    assert metrics["winner.holdout.ci_high"] == pytest.approx(verdict.holdout.ci_high)
    assert metrics["winner.holdout.n"] == 3
    for baseline in verdict.baselines:
        key, c = f"gain_vs_{baseline.label}", baseline.comparison
        assert metrics[key] == pytest.approx(c.mean_diff)
        assert metrics[f"{key}.ci_low"] == pytest.approx(c.ci_low)
        assert metrics[f"{key}.ci_high"] == pytest.approx(c.ci_high)
        assert metrics[f"{key}.p_value"] == pytest.approx(c.p_value)
        assert metrics[f"{key}.n"] == c.n
        assert tags[f"agentdesign.verdict.{baseline.label}"] in (
            "winner better",
            "no difference shown",
        )
    client = MlflowClient(tracking_uri=server)
    best = client.get_metric_history(parent.info.run_id, "search.best_mean")
    candidates = [c for c in children if c.data.tags["agentdesign.role"] == "candidate"]
    assert [m.step for m in sorted(best, key=lambda m: m.step)] == [*range(1, len(candidates) + 1)]
    assert max(m.value for m in best) == max(c.data.metrics["mean"] for c in candidates)
    text = Path(client.download_artifacts(parent.info.run_id, "verdict.txt", str(tmp_path)))
    assert text.read_text().splitlines()[: len(verdict.headline())] == verdict.headline()


def test_a_failed_run_resumed_adds_to_its_parent_and_logs_nothing_twice(
    server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_mlflow(monkeypatch, server, "resumed")
    calls = 0

    def failing_later(
        model: str, messages: Sequence[Message], temperature: float, seed: int | None
    ) -> str:
        nonlocal calls
        calls += 1
        if calls > 6:  # the provider fails on the second design's third item, and after
            raise LLMCallError("rate limited", transient=True)
        return sums_reply(messages)

    with (
        new_search(tmp_path, "twice", model=FakeChatModel(failing_later)) as search,
        pytest.raises(ProviderError),
    ):
        search.optimize(n_agents=3)
    parent, first = mlflow_runs(server, "resumed")
    assert parent.info.status == "FAILED" and len(first) == 1
    with load_search(
        "twice", storage=tmp_path / "runs.db", model=sums_model(), model_name="fake"
    ) as search:
        search.optimize(n_agents=2)  # the unfinished design, one more, then the holdout
        parent, children = mlflow_runs(server, "resumed")
        assert_mirrors_the_archive(search.archive, "twice", children)
    assert {c.info.run_id for c in first} <= {c.info.run_id for c in children}
    assert len(children) > len(first) + 2
    assert parent.info.status == "FINISHED" and "winner.holdout.mean" in parent.data.metrics
    best = MlflowClient(tracking_uri=server).get_metric_history(
        parent.info.run_id, "search.best_mean"
    )
    steps = [m.step for m in best]
    assert sorted(steps) == [*range(1, len(steps) + 1)]  # each design's step once


def test_a_server_that_goes_away_mid_run_costs_one_warning_line(
    server: str,
    server_process: MlflowServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The server is reached through a proxy that goes away after the first design: to the
    client, as a server that died (the module's server serves the other tests)."""
    proxy = OutageProxy(("127.0.0.1", server_process.port))
    use_mlflow(monkeypatch, f"http://127.0.0.1:{proxy.port}", "outage")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")  # MLflow's own: fail at once
    calls = 0

    def dying(model: str, messages: Sequence[Message], temperature: float, seed: int | None) -> str:
        nonlocal calls
        calls += 1
        if calls == 5:  # the second design's first item
            proxy.close()
        return sums_reply(messages)

    with proxy, new_search(tmp_path, "outage", model=FakeChatModel(dying)) as search:
        summary = search.optimize(n_agents=3)
        verdict = search.verdict()
    err = capsys.readouterr().err
    said = [line for line in err.splitlines() if "MLflow" in line]
    assert len(said) == 1, err
    # refused, or dropped under a request: whichever the proxy's going away met (a dropped
    # request's reason has parentheses of its own, such as IncompleteRead(0 bytes read))
    assert re.fullmatch(
        rf"warning: MLflow logging stopped \(http://127\.0\.0\.1:{proxy.port}: .+\); the "
        r"search goes on and the archive keeps every result: `agentdesign resume outage` logs "
        r"what is missing to the same MLflow run",
        said[0],
    ), said[0]
    assert summary.agents_done == 3 and summary.run.status == "finished"
    assert verdict.holdout is not None

    # Once the server answers again, a resume fills in the copy, sending nothing twice. (A resume
    # is a process of its own: in this one, MLflow keeps the artifact store it made for each run,
    # by run id, with the proxy's address in it.)
    from mlflow.tracking._tracking_service import utils

    utils._artifact_repos_cache.clear()
    use_mlflow(monkeypatch, server, "outage")
    with Archive(str(tmp_path / "runs.db")) as archive:
        resume_search(archive, "outage", llm=sums_model())
        parent, children = mlflow_runs(server, "outage")
        assert_mirrors_the_archive(archive, "outage", children)
    assert "MLflow" not in capsys.readouterr().err
    assert parent.info.status == "FINISHED" and "gain_vs_cot" in parent.data.metrics


@pytest.mark.embedded
def test_a_short_run_on_smollm2_is_logged(
    server: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    smollm2_speed: EmbeddedSpeed,
) -> None:
    """One design (a direct answer in 16 tokens) and a baseline (in 32), on the real embedded
    model: its real token counts and times reach MLflow."""
    cache = tmp_path / "cache"  # no answer cached by an earlier run: real generations
    cache.mkdir()
    if (default_cache_dir() / "models").is_dir():
        (cache / "models").symlink_to(default_cache_dir() / "models")
    monkeypatch.setenv("AGENTDESIGN_CACHE_DIR", str(cache))
    use_mlflow(monkeypatch, server, "smollm2")
    smol = "embedded/smollm2-135m"
    longer = {
        "model": smol,
        "components": {"reasoning": {"name": "direct", "params": {"max_tokens": 32}}},
    }
    with create_search(
        "gsm8k",
        name="smol",
        storage=tmp_path / "runs.db",
        model=smol,
        strategy="random",
        space={
            **SPACE,
            "choices": {**SPACE["choices"], "reasoning": ["direct"]},
            "limits": {"reasoning__max_tokens": [16, 16]},
        },
        n_search=2,
        n_holdout=1,
        race=False,
        baselines=[{"label": "direct32", "spec": longer}],
        task_timeout_s=smollm2_speed.timeout(32),
    ) as search:
        search.optimize(n_agents=1)
        verdict = run_verdict(search.archive, "smol")
        parent, children = mlflow_runs(server, "smollm2")
        assert_mirrors_the_archive(search.archive, "smol", children)
    assert parent.data.params["model"] == smol
    assert [c.data.tags["agentdesign.role"] for c in children] == [
        "candidate",
        "winner",
        "baseline",
    ]
    for child in children:
        assert child.data.metrics["tokens_per_item"] > 0
        assert 0 < child.data.metrics["seconds_per_item"] < smollm2_speed.timeout(32)
    assert verdict.baselines and "gain_vs_direct32" in parent.data.metrics
