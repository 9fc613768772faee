"""Racing's stages and its test: a design is dropped only when it clearly trails the incumbent."""

from __future__ import annotations

import pytest

from agentdesign.components import AgentDesignError
from agentdesign.search import Racing


def test_stages_double_below_the_full_count() -> None:
    racing = Racing()
    assert racing.stages(10) == (4, 8)
    assert racing.stages(40) == (5, 10, 20)
    assert racing.stages(4) == ()  # no stage below the full count: every item


def test_a_design_is_dropped_only_when_it_clearly_trails() -> None:
    racing = Racing(alpha=0.1)
    incumbent = {f"t{i}": 1.0 for i in range(8)}
    lost_four = {f"t{i}": 0.0 for i in range(4)}
    lost_three = {f"t{i}": 0.0 for i in range(3)}
    assert racing.clearly_worse(lost_four, incumbent)  # one-sided exact p = 1/16
    assert not racing.clearly_worse(lost_three, incumbent)  # p = 1/8: could be chance
    assert not racing.clearly_worse(incumbent, lost_four)  # ahead is never dropped
    assert not racing.clearly_worse({"t0": 0.0}, incumbent)  # one shared item proves nothing
    assert not racing.clearly_worse(lost_four, {"x": 1.0})  # nothing shared


@pytest.mark.parametrize("options", [{"alpha": 0.0}, {"alpha": 1.0}, {"first_stage": 1}])
def test_bad_settings_are_refused(options: dict[str, float]) -> None:
    with pytest.raises(AgentDesignError):
        Racing(**options)  # type: ignore[arg-type]
