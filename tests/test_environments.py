"""Interactive benchmarks: the ReAct workflow plays environment episodes, scored by the environment.

The orchestration tests use a tiny pure-Python environment; the TextWorldExpress and ScienceWorld
tests start the real simulators (Java). Their simulators are pooled per process, so the JVMs start
once for the whole module.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

import pytest
from typer.testing import CliRunner

from agentdesign.components import (
    Agent,
    AgentSpec,
    EnvironmentFailed,
    EnvState,
    Message,
    TaskBudget,
)
from agentdesign.components.testing import FakeChatModel
from agentdesign.evaluators import (
    BenchmarkError,
    InteractiveBenchmark,
    Task,
    get_benchmark,
    run_task,
)
from agentdesign.evaluators.environments._environments import _check_simulator
from agentdesign.search import SPACE_PRESETS, SearchSpace

REACT = AgentSpec.create(model="fake/model", workflow="react")
TWX_NAMES = ("twx-arithmetic", "twx-coin", "twx-sorting", "twx-cooking")


# --- a tiny environment, for the orchestration --------------------------------------------------


class CountToThree:
    """Say 'inc' three times: each scores a third. Anything else is an unknown action."""

    def __init__(self, *, max_steps: int = 10) -> None:
        self.max_steps = max_steps
        self.count = 0

    def reset(self) -> EnvState:
        self.count = 0
        return EnvState("Count to three.", valid_actions=("inc", "look"))

    def step(self, action: str) -> EnvState:
        if action == "inc":
            self.count += 1
            observation = f"The count is {self.count}."
        else:
            observation = f"Unknown action: {action}"
        return EnvState(
            observation,
            valid_actions=("inc", "look"),
            done=self.count >= 3,
            score=self.count / 3,
        )


def scripted(turns: Sequence[str]) -> FakeChatModel:
    """A fake model that says turns[i] at its i-th call (the last one from then on); counted by
    call, not by the turns in the prompt, which ReAct's history window cuts."""
    llm: FakeChatModel

    def respond(
        model: str, messages: Sequence[Message], temperature: float, seed: int | None
    ) -> str:
        return turns[min(len(llm.calls) - 1, len(turns) - 1)]

    llm = FakeChatModel(respond)
    return llm


def act(*actions: str) -> list[str]:
    return [f"Thought: next.\nAction: act[{a}]" for a in actions]


def test_react_plays_an_episode_and_the_trace_holds_each_step() -> None:
    llm = scripted(act("inc", "inc", "inc"))
    result = Agent(REACT, llm=llm).run("count", environment=CountToThree())
    assert result.error_kind is None
    assert result.episode is not None
    assert (result.episode.score, result.episode.steps, result.episode.done) == (1.0, 3, True)
    kinds = [(r.kind, r.role, r.input) for r in result.trace]
    assert kinds == [
        ("env", "reset", ""),
        ("llm", "solver", "Count to three.\n\nValid actions: inc, look"),
        ("env", "step", "inc"),
        ("llm", "solver", "Observation: The count is 1.\n\nValid actions: inc, look"),
        ("env", "step", "inc"),
        ("llm", "solver", "Observation: The count is 2.\n\nValid actions: inc, look"),
        ("env", "step", "inc"),
    ]
    system = dict(llm.calls[0].messages[0])["content"]
    assert "act[...]" in system and "finish[...]" in system


def test_invalid_actions_are_fed_back_as_observations() -> None:
    turns = ["Thought: hm.", "Action: dance[now]", *act("jump", "inc", "inc", "inc")]
    llm = scripted(turns)
    result = Agent(REACT, llm=llm).run("count", environment=CountToThree())
    assert result.episode is not None and result.episode.score == 1.0
    shown = [dict(call.messages[-1])["content"] for call in llm.calls[1:4]]
    assert shown[0].startswith("Observation: no action found")
    assert shown[1].startswith("Observation: unknown action 'dance'; use one of: act, finish")
    assert shown[2].startswith("Observation: Unknown action: jump")
    assert result.episode.steps == 4  # the environment counts the invalid 'jump'


def test_an_environment_action_written_without_act_brackets_is_played() -> None:
    turns = [
        "Thought: go.\nAction: inc",  # a listed action
        "Action: sing",  # not listed: the environment says so
        "Action: dance[now]",  # a bracket that is no listed action: a misspelt protocol action
        "Action: INC.",  # the listed spelling is used
        "Action: look[<answer>]",  # a listed action before its bracket is played
        "Action: inc[]",
    ]
    llm = scripted(turns)
    result = Agent(REACT, llm=llm).run("count", environment=CountToThree())
    assert result.episode is not None
    assert (result.episode.score, result.episode.steps) == (1.0, 5)
    assert [r.input for r in result.trace if r.role == "step"][3] == "look"
    shown = [dict(call.messages[-1])["content"] for call in llm.calls[2:4]]
    assert shown[0].startswith("Observation: Unknown action: sing")
    assert shown[1].startswith("Observation: unknown action 'dance'; use one of: act, finish")


def test_each_call_sees_the_problem_and_only_the_last_history_turns() -> None:
    llm = scripted(act("look", "look", "look", "inc", "inc", "inc"))
    spec = REACT.set_params(workflow__history_turns=2)
    result = Agent(spec, llm=llm).run("count", environment=CountToThree())
    assert result.episode is not None and result.episode.score == 1.0
    assert [len(call.messages) for call in llm.calls] == [2, 4, 6, 6, 6, 6]
    problem = (("content", "Count to three."), ("role", "user"))
    assert all(call.messages[1] == problem for call in llm.calls[1:])
    last = dict(llm.calls[-1].messages[-1])["content"]
    assert last.startswith("Observation: The count is 2.")


def test_only_the_latest_message_lists_the_valid_actions() -> None:
    llm = scripted(act("look", "inc", "inc", "inc"))
    Agent(REACT, llm=llm).run("count", environment=CountToThree())
    listing = "\n\nValid actions: inc, look"
    for call in llm.calls:
        users = [dict(m)["content"] for m in call.messages if dict(m)["role"] == "user"]
        assert users[-1].endswith(listing)
        assert not any(listing in earlier for earlier in users[:-1])


def test_a_repeated_action_with_the_same_result_is_pointed_out() -> None:
    llm = scripted(act("look", "look", "look", "inc", "inc", "inc"))
    Agent(REACT, llm=llm).run("count", environment=CountToThree())
    note = dict(REACT["workflow"].get_params())["repeat_note"]
    shown = [dict(call.messages[-1])["content"] for call in llm.calls]
    assert [note in s for s in shown] == [False, False, True, True, False, False]


def test_the_same_action_meeting_the_same_result_give_up_after_times_ends_the_task() -> None:
    llm = scripted(act("inc", "look"))  # 'look' from the second call on, for ever
    spec = REACT.set_params(workflow__give_up_after=3)
    result = Agent(spec, llm=llm).run("count", environment=CountToThree())
    assert result.error_kind is None
    assert result.episode is not None
    assert (result.episode.steps, result.episode.done) == (4, False)
    assert result.episode.score == pytest.approx(1 / 3)
    assert len(llm.calls) == 4


def test_a_repeat_that_changes_the_result_is_no_reason_to_give_up() -> None:
    spec = REACT.set_params(workflow__give_up_after=2)
    result = Agent(spec, llm=scripted(act("inc"))).run("count", environment=CountToThree())
    assert result.episode is not None
    assert (result.episode.score, result.episode.done) == (1.0, True)


def test_each_turn_stops_before_an_observation_the_model_invents() -> None:
    invents = "Thought: go.\nAction: inc\nObservation: The count is 3.\nAction: finish[x]"
    llm = scripted([invents])
    result = Agent(REACT, llm=llm).run("count", environment=CountToThree())
    assert all(call.stop == ("\nObservation:",) for call in llm.calls)
    assert result.episode is not None
    assert (result.episode.score, result.episode.steps) == (1.0, 3)


def test_the_step_limit_stops_the_episode_as_a_budget_stop_keeping_its_score() -> None:
    env = CountToThree(max_steps=2)
    result = Agent(REACT, llm=scripted(act("inc"))).run("count", environment=env)
    assert result.error_kind == "budget"
    assert result.error is not None and "step limit: 2 environment steps" in result.error
    assert result.episode is not None
    assert (result.episode.steps, result.episode.done) == (2, False)
    assert result.episode.score == pytest.approx(2 / 3)
    assert sum(1 for r in result.trace if r.role == "step") == 2


def test_giving_up_with_finish_ends_the_episode() -> None:
    turns = [*act("inc"), "Thought: stuck.\nAction: finish[done]"]
    result = Agent(REACT, llm=scripted(turns)).run("count", environment=CountToThree())
    assert result.error_kind is None and result.answer == "done"
    assert result.episode is not None
    assert (result.episode.steps, result.episode.done) == (1, False)


def test_a_failing_environment_fails_the_task_not_the_run() -> None:
    class Broken(CountToThree):
        def step(self, action: str) -> EnvState:
            raise EnvironmentFailed("the simulator died")

    result = Agent(REACT, llm=scripted(act("inc"))).run("count", environment=Broken())
    assert result.error_kind == "environment"
    assert result.trace[-1].error == "the simulator died"


def test_only_workflows_that_play_episodes_get_an_environment() -> None:
    single = AgentSpec.create(model="fake/model", workflow="single")
    with pytest.raises(ValueError, match="cannot play"):
        Agent(single, llm=scripted(["x"])).run("count", environment=CountToThree())
    with pytest.raises(BenchmarkError, match="workflow 'single' cannot play it"):
        get_benchmark("twx-coin").check_ready(single)


def test_the_search_narrows_the_space_to_playing_workflows() -> None:
    from agentdesign.search.config._resolve import _playable

    quick = SearchSpace(model="fake/model", **SPACE_PRESETS["quick"])
    assert _playable(quick, get_benchmark("twx-coin")).components("workflow") == ("react",)
    assert _playable(quick, get_benchmark("gsm8k")) is quick


def test_task_ids_are_stable_and_carry_what_builds_their_environment() -> None:
    for name in TWX_NAMES:
        bench = get_benchmark(name)
        assert isinstance(bench, InteractiveBenchmark)
        tasks = bench.tasks()
        assert len({t.id for t in tasks}) == len(tasks) == 100
        key = name.removeprefix("twx-")
        assert tasks[0].id == f"twx/{key}/20000" and tasks[-1].id == f"twx/{key}/20099"
        assert tasks[0].metadata["max_steps"] == bench.max_steps > 0
    sciworld = get_benchmark("scienceworld").tasks()
    assert len({t.id for t in sciworld}) == len(sciworld) == 30
    assert sciworld[0].id == "sciworld/find-living-thing/225"


def test_a_missing_simulator_package_names_the_install_command() -> None:
    with pytest.raises(BenchmarkError, match=r"pip install 'agentdesign\[envs\]'"):
        _check_simulator("no_such_simulator_package")


def test_missing_java_is_one_line_saying_how_to_install_it(tmp_path: Path) -> None:
    """With no `java` on PATH, a run stops before it writes anything."""
    db = tmp_path / "a.db"
    cli = "from agentdesign.search.cli import main; main()"
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env["PATH"] = str(tmp_path / "nowhere")
    args = ["run", "--benchmark", "twx-coin", "--model", "fake/m", "--storage", str(db)]
    result = subprocess.run(
        [sys.executable, "-c", cli, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Java" in lines[0] and "apt-get install openjdk-17-jre-headless" in lines[0]
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM ad_run").fetchone() == (0,)


# --- the real simulators (Java) ------------------------------------------------------------------


def _java_ready() -> str | None:
    for package in ("textworld_express", "scienceworld"):
        if importlib.util.find_spec(package) is None:
            return f"{package} is not installed (pip install 'agentdesign[envs]')"
    return None if shutil.which("java") else "Java is not on PATH"


_MISSING = _java_ready()
_F = TypeVar("_F", bound=Callable[..., object])


def java(test: _F) -> _F:
    """Marks a test that starts a simulator; skipped without Java, except in CI (CI=true)."""
    skip = pytest.mark.skipif(
        _MISSING is not None and os.environ.get("CI") != "true",
        reason=f"{_MISSING}; these tests need the simulators",
    )
    return pytest.mark.java(skip(test))


def gold_agent(bench: InteractiveBenchmark, task: Task) -> Agent:
    """An agent that plays the simulator's gold path, one that fits in the task's step limit:
    TextWorldExpress draws coin's gold path as a random walk (from an unseeded Random of its own),
    now and then longer than the limit (on seed 20000, 3 to 17 steps and more), which no agent
    could finish in it; such a walk is drawn again."""
    for _ in range(20):
        gold = bench.gold_actions(task)
        if len(gold) <= int(task.metadata["max_steps"]):
            break
    return Agent(REACT, llm=scripted(act(*gold)))


@java
@pytest.mark.parametrize("name", TWX_NAMES)
def test_twx_gold_path_through_react_scores_1(name: str) -> None:
    bench = get_benchmark(name)
    assert isinstance(bench, InteractiveBenchmark)
    for task in bench.tasks()[:2]:
        outcome = run_task(gold_agent(bench, task), bench, task)
        assert outcome.score == 1.0, (task.id, outcome.details)
        assert outcome.error_kind is None
        steps = [r for r in outcome.details["trace"] if r["kind"] == "env" and r["role"] == "step"]
        assert len(steps) == outcome.details["episode"]["steps"] > 0
        assert all(s["output"] for s in steps)


@java
def test_scienceworld_gold_path_through_react_scores_1() -> None:
    bench = get_benchmark("scienceworld")
    assert isinstance(bench, InteractiveBenchmark)
    for task_id in ("sciworld/find-non-living-thing/225", "sciworld/lifespan-longest-lived/93"):
        task = bench.task(task_id)
        outcome = run_task(gold_agent(bench, task), bench, task)
        assert outcome.score == 1.0, (task.id, outcome.details)
        first = outcome.details["trace"][0]
        assert first["role"] == "reset" and "Task Description" in first["output"]


@java
def test_twx_invalid_action_and_step_limit_on_the_real_game() -> None:
    bench = get_benchmark("twx-coin")
    task = bench.tasks()[0]
    alternating = act(*["fly to the moon", "swim"] * bench.max_steps)  # no repeat to give up on
    outcome = run_task(Agent(REACT, llm=scripted(alternating)), bench, task)
    assert outcome.error_kind == "budget" and outcome.score == 0.0
    assert outcome.details["episode"] == {"score": 0.0, "steps": bench.max_steps, "done": False}
    steps = [r for r in outcome.details["trace"] if r["role"] == "step"]
    assert len(steps) == bench.max_steps
    assert "Unknown action" in steps[0]["output"]


@java
def test_task_seeds_and_variations_are_in_the_simulators_test_folds() -> None:
    twx = get_benchmark("twx-coin")
    with twx.environment(twx.tasks()[0]) as episode:  # the pooled simulator, still unplayed
        test_seeds = set(episode.simulator.getValidSeedsTest())
    assert {t.metadata["seed"] for t in twx.tasks()} <= test_seeds
    sciworld = get_benchmark("scienceworld")
    for task in sciworld.tasks()[::5]:  # one per task name
        with sciworld.environment(task) as episode:
            episode.simulator.load(task.metadata["task_name"], 0, "easy")
            assert task.metadata["variation"] in episode.simulator.get_variations_test(), task.id


@java
def test_cli_lists_and_runs_an_interactive_benchmark(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentdesign.search.cli import app
    from agentdesign.search.config import _resolve

    monkeypatch.setattr(_resolve, "default_chat_model", lambda **_: scripted(act("look around")))
    runner = CliRunner()
    listed = runner.invoke(app, ["benchmarks"], env={"COLUMNS": "300"})
    assert listed.exit_code == 0
    for name in (*TWX_NAMES, "scienceworld"):
        assert name in listed.stdout
    db = tmp_path / "twx.db"
    args = ["run", "--name", "twx", "--benchmark", "twx-arithmetic", "--model", "openai/fake"]
    args += ["--max-agents", "1", "--n-search", "2", "--n-holdout", "1", "--storage", str(db)]
    args += ["--baseline", "none"]  # the winner's holdout episode only
    ran = runner.invoke(app, args, env={"COLUMNS": "300"})
    assert ran.exit_code == 0, ran.output
    assert "twx-arithmetic" in ran.stdout and "react" in ran.stdout
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT task_id, error_kind FROM ad_task_result").fetchall()
    assert sorted(task_id.split("/")[1] for task_id, _ in rows) == ["arithmetic"] * 3
    assert {kind for _, kind in rows} == {"budget"}  # 'look around' until the step limit


@java
@pytest.mark.embedded
def test_smollm2_plays_one_arithmetic_episode_end_to_end() -> None:
    """The real model, three short turns: it will likely score 0, but it must really play."""
    from agentdesign.components import build_agent
    from agentdesign.evaluators import TextWorldExpress

    bench = type(get_benchmark("twx-arithmetic"))(max_steps=3)
    assert isinstance(bench, TextWorldExpress)
    spec = AgentSpec.create(
        model="embedded/smollm2-135m",
        workflow="react",
        reasoning={"name": "direct", "params": {"max_tokens": 32}},
    )
    task = bench.tasks()[0]
    outcome = run_task(build_agent(spec, budget=TaskBudget(max_calls=3)), bench, task)
    trace = outcome.details["trace"]
    assert trace[0]["role"] == "reset" and "math problem" in trace[0]["output"]
    turns = [r for r in trace if r["kind"] == "llm"]
    assert turns and all(r["error"] is None and r["output"] for r in turns)
    assert all(r["input"].startswith("Observation: ") for r in turns[1:])  # each turn fed back
    steps = [r for r in trace if r["role"] == "step"]
    assert len(steps) == outcome.details["episode"]["steps"] <= 3
    assert outcome.error_kind in (None, "budget")
    assert 0.0 <= outcome.score <= 1.0
