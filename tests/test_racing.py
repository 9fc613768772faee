"""Racing's stages and its test: a design is dropped only when it clearly trails the incumbent,
the error rate spent over the stages, each stage tested on the first items of the run's order
(also when tasks run at once finish out of order), and runs stored before keep their rule."""

from __future__ import annotations

import re
import sqlite3
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import pytest
from conftest import space_choices
from scipy import stats

from agentdesign.components import AgentDesignError, Message, extract_answer
from agentdesign.search import Racing, RunConfig, create_search, load_search

ITEMS = [{"question": f"What is {a} plus 1?", "answer": str(a + 1)} for a in range(8)]
SPACE = {
    "choices": space_choices(reasoning=["direct", "cot", "scratchpad"]),
    "limits": {"reasoning__max_tokens": [512, 512]},
}


def right(output: str, answer: str) -> bool:
    return extract_answer(output).strip() == answer


def scores(*values: float) -> dict[str, float]:
    return {f"t{i}": v for i, v in enumerate(values)}


def test_stages_double_below_the_full_count() -> None:
    racing = Racing()
    assert racing.stages(10) == (4, 8)
    assert racing.stages(30) == (4, 8, 16)
    assert racing.stages(40) == (5, 10, 20)
    assert racing.stages(4) == ()  # no stage below the full count: every item
    assert max(len(Racing(first_stage=2).stages(n)) for n in range(2, 3000)) == 4


def test_a_design_is_dropped_only_when_it_clearly_trails() -> None:
    racing = Racing(alpha=0.1)  # 8 items: one stage, at 4
    incumbent = scores(*[1.0] * 8)  # its lower bound: 0.05 ** (1 / 8) = 0.688
    assert racing.clearly_worse(scores(0, 0, 0, 0), incumbent, n_items=8)  # upper bound 0.527
    assert not racing.clearly_worse(scores(1, 0, 0, 0), incumbent, n_items=8)  # 0.751
    assert not racing.clearly_worse(incumbent, scores(0, 0, 0, 0), n_items=8)  # ahead: never
    assert not racing.clearly_worse(scores(0), incumbent, n_items=8)  # one item proves nothing


def test_the_incumbent_is_taken_at_its_lower_bound_not_at_its_scores() -> None:
    # The incumbent right on 6 of 8 (lower bound 0.39) and on all 4 the design lost: a paired
    # test at the full alpha drops the design (4 losses in a row, p = 1/16); the bounds do not.
    incumbent = scores(1, 1, 1, 1, 1, 1, 0, 0)
    lost_four = scores(0, 0, 0, 0)
    assert Racing(rule="paired").clearly_worse(lost_four, incumbent, n_items=8)
    assert not Racing().clearly_worse(lost_four, incumbent, n_items=8)


@pytest.mark.parametrize("first_stage", [4, 16])  # 30 items: stages 4, 8, 16, or 16 alone
def test_a_design_is_stopped_only_past_the_boundary_its_share_of_alpha_sets(
    first_stage: int,
) -> None:
    """At every stage and count right, the least incumbent total that stops the design is the
    one where the design's upper bound at level alpha / 2K falls below the incumbent's lower
    bound at alpha / 2 (Clopper-Pearson, from scipy's beta quantiles)."""
    racing, n_items = Racing(alpha=0.1, first_stage=first_stage), 30
    looks = len(racing.stages(n_items))
    assert looks == (3 if first_stage == 4 else 1)
    incumbent_low = [stats.beta.ppf(0.05, t, n_items - t + 1) if t else 0.0 for t in range(31)]
    for stage in racing.stages(n_items):
        for right in range(0, stage, 3):
            upper = stats.beta.ppf(1 - 0.1 / (2 * looks), right + 1, stage - right)
            least = next((t for t in range(31) if upper < incumbent_low[t]), None)
            mine = scores(*[1.0] * right + [0.0] * (stage - right))
            if least is None:
                assert not racing.clearly_worse(mine, scores(*[1.0] * 30), n_items=30)
                continue
            at, below = (scores(*[1.0] * t + [0.0] * (30 - t)) for t in (least, least - 1))
            assert racing.clearly_worse(mine, at, n_items=n_items), (stage, right, least)
            assert not racing.clearly_worse(mine, below, n_items=n_items), (stage, right, least)


def test_a_stage_is_due_once_the_first_items_of_the_order_all_have_a_result() -> None:
    racing = Racing()
    order = [f"t{i}" for i in range(10)]  # stages 4 and 8
    assert racing.due(order, {"t1", "t2", "t3", "t4", "t5"}) == 0  # t0 still running
    assert racing.due(order, {"t0", "t1", "t2", "t3", "t5"}) == 4
    assert racing.due(order, {"t0", "t1", "t2", "t3", "t5"}, after=4) == 0  # tested already
    assert racing.due(order, set(order[:9])) == 8  # a resumed design: the largest stage
    assert racing.due(order, set(order[:9]), after=8) == 0


def test_a_stage_is_tested_on_the_run_s_first_items_when_tasks_finish_out_of_order(
    tmp_path: Path,
) -> None:
    """Four tasks at once; the design answers the run's first two items right, slowly, and the
    other six wrong at once. The first four results are four wrong answers, but the stage of 4
    is the run's first 4 items, 2 of them right: not clearly worse, so it is scored on all 8."""
    slow: set[str] = set()
    lock = threading.Lock()

    def reply(messages: Sequence[Message]) -> str:
        asked = re.search(r"What is (\d+) plus 1\?", messages[-1]["content"])
        assert asked is not None
        with lock:
            is_slow = asked[0] in slow
        if is_slow:
            time.sleep(1.5)
            return f"Answer: {int(asked[1]) + 1}"
        return "Answer: -1"

    with create_search(
        ITEMS,
        scorer=right,
        name="prefix",
        storage=tmp_path / "prefix.db",
        model=reply,
        model_name="slow-first",
        strategy="random",
        space=SPACE,
        n_search=8,
        n_holdout=0,
        concurrency=4,
    ) as search:
        first = search.ask()
        search.tell(first, [1.0] * 8)  # the incumbent: every item right
        second = search.ask()
        slow.update(t.question for t in second.tasks[:2])
        evaluation = search.evaluate(second)
        assert (evaluation.status, evaluation.mean) == ("complete", 0.25)


def test_a_stored_config_without_a_racing_rule_races_by_the_paired_test() -> None:
    stored = RunConfig(name="old").to_dict()
    assert RunConfig.from_dict(stored).racing() == Racing(rule="bounds")
    del stored["race_rule"]
    assert RunConfig.from_dict(stored).racing() == Racing(rule="paired")
    with pytest.raises(AgentDesignError, match="unknown racing rule"):
        RunConfig.of(name="bad", race_rule="hunch")


@pytest.mark.parametrize(("stored_before", "status"), [(True, "pruned"), (False, "complete")])
def test_a_run_stored_before_the_racing_rules_resumes_racing_by_the_paired_test(
    tmp_path: Path, stored_before: bool, status: str
) -> None:
    """The incumbent right on 6 of 8, its first 4 among them; a design wrong on every item:
    the paired test drops it at 4 items, the bounds let it on (see the unit test above)."""
    options = {
        "scorer": right,
        "storage": tmp_path / "runs.db",
        "model": lambda messages: "Answer: -1",
        "model_name": "wrong",
    }
    create_search(
        ITEMS, name="old", strategy="random", space=SPACE, n_search=8, n_holdout=0, **options
    ).close()
    if stored_before:  # as a run stored before the rules holds its config
        with sqlite3.connect(tmp_path / "runs.db") as connection:
            connection.execute("UPDATE ad_run SET config = json_remove(config, '$.race_rule')")
    with load_search("old", benchmark=ITEMS, **options) as search:
        first = search.ask()
        search.tell(first, [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0, 0.0])
        assert search.evaluate(search.ask()).status == status


@pytest.mark.parametrize("options", [{"alpha": 0.0}, {"alpha": 1.0}, {"first_stage": 1}])
def test_bad_settings_are_refused(options: dict[str, float]) -> None:
    with pytest.raises(AgentDesignError):
        Racing(**options)  # type: ignore[arg-type]
