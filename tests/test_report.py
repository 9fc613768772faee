"""The HTML report: one self-contained page with every section, from full runs and bare ones."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from agentdesign.archive import Archive
from agentdesign.components import AgentSpec, Message
from agentdesign.components.testing import FakeChatModel
from agentdesign.evaluators import TaskOutcome, get_benchmark, summarize
from agentdesign.search import Budget, RunConfig, run_search
from agentdesign.search.cli._report import write_report

GOLD = {t.question: t.answer for t in get_benchmark("gsm8k").tasks()}
SECTIONS = (
    "verdict",
    "leaderboard",
    "progress",
    "pareto",
    "items",
    "baselines",
    "value-model",
    "lineage",
)
PLOTS = ("progress", "pareto", "items", "baselines", "value-model", "lineage")


def noisy(model: str, messages: Sequence[Message], temperature: float, seed: int | None) -> str:
    """Right more often for some designs (by their first prompt) and on some items (easy ones),
    as on a real benchmark; the same request always gets the same answer, in a form every
    workflow reads (a final line, and a ReAct finish)."""
    question = next(
        (part for m in messages for part in m["content"].split("\n") if part in GOLD), ""
    )
    skill, ease, luck = (
        hashlib.sha256(repr(key).encode()).digest()[0] / 255
        for key in ((messages[0]["content"], temperature), question, (messages, seed))
    )
    answer = GOLD[question] if luck < (0.2 + 0.6 * skill) * (0.4 + ease) else "-1"
    return f"Thought: done.\nAction: finish[{answer}]\nAnswer: {answer}"


def searched_report(factory: pytest.TempPathFactory) -> Path:
    """The report of an evolution run on the fake model: enough designs for every plot, the
    baselines, and a second design confirmed on the holdout (exploratory). Made once a session:
    this module and the browser test read the same file."""
    directory = factory.getbasetemp() / "searched-report"
    path = directory / "report.html"
    if path.exists():
        return path
    directory.mkdir()
    with Archive(str(directory / "report.db")) as archive:
        run_search(
            archive,
            RunConfig(
                name="full",
                model="fake/model",
                strategy="evolution",
                budget=Budget(max_agents=10),
                n_search=8,
                n_holdout=6,
                confirm_top=2,
            ),
            llm=FakeChatModel(noisy),
        )
        write_report(archive, "full", path)
    return path


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> str:
    return searched_report(tmp_path_factory).read_text(encoding="utf-8")


def assert_self_contained(page: str) -> None:
    """No script, style sheet, image or frame from the network: the page must open offline."""
    sources = re.findall(r"""<(?:script|link|img|iframe)\b[^>]*\b(?:src|href)\s*=""", page, re.I)
    assert sources == [], sources
    assert "cdn.plot.ly" not in page.split("</script>", 1)[1]  # only inside plotly.js itself
    assert page.count("* plotly.js v") == 1  # plotly.js inlined once, not once per figure


def test_a_full_run_has_every_section_and_plot_and_embeds_plotly_once(page: str) -> None:
    assert_self_contained(page)
    for section in SECTIONS:
        assert f'<section id="{section}">' in page, section
    for plot in PLOTS:
        assert f'id="plot-{plot}"' in page, plot
    assert 'class="skip"' not in page  # every plot had what it needs
    assert "Plotly.newPlot" in page and page.count('class="plotly-graph-div"') == len(PLOTS)


def test_the_verdict_and_table_say_how_far_to_trust_each_score(page: str, tmp_path: Path) -> None:
    verdict = page.split('<section id="verdict">')[1].split("</section>")[0]
    assert "baseline cot" in verdict and "unseen items" in verdict
    table = page.split('<section id="leaderboard">')[1].split("</section>")[0]
    assert '<span class="tag winner">winner</span>' in table
    assert '<span class="tag exploratory">exploratory</span>' in table
    assert '<span class="tag baseline">baseline cot</span>' in table
    text = re.sub(r"<[^>]+>", "", table)
    method = re.escape(summarize([0.0, 1.0]).method)
    for n in (8, 6):  # search items, holdout items
        assert re.search(rf"\d\.\d\d \[\d\.\d\d, \d\.\d\d\] {method} n={n}", text)


def hand_run(archive: Archive, name: str, designs: Mapping[str, Sequence[float]]) -> None:
    """A run written straight into the archive: one search evaluation per design (any scores
    in [0, 1]), each design bred from the one before, the last by a crossover with a partner the
    run never scored; no holdout, no baseline and no recorded winner."""
    tasks = [f"t{i}" for i in range(len(next(iter(designs.values()), [0.0])))]
    archive.create_run(
        name=name,
        benchmark="gsm8k",
        model="fake/model",
        strategy="random",
        budget={},
        config={},
        split_seed=0,
        search_task_ids=tasks,
        holdout_task_ids=[],
    )
    partner = AgentSpec.create(model="fake/model", workflow="debate")
    archive.add_agent(spec=partner.to_dict(), spec_hash=partner.spec_hash)
    parent: str | None = None
    for n, (workflow, scores) in enumerate(designs.items(), start=1):
        spec = AgentSpec.create(model="fake/model", workflow=workflow)
        last = n == len(designs) and parent is not None
        archive.add_agent(
            spec=spec.to_dict(),
            spec_hash=spec.spec_hash,
            parent_hash=parent,
            co_parent_hash=partner.spec_hash if last else None,
            operator=None if parent is None else "crossover" if last else "mutation",
        )
        parent = spec.spec_hash
        evaluation = archive.get_or_create_evaluation(
            agent_hash=spec.spec_hash, benchmark="gsm8k", task_ids=tasks, split="search"
        )
        for task, score in zip(tasks, scores, strict=True):
            archive.add_task_result(
                evaluation.id, TaskOutcome(task, "out", "1", score, 10 * n, 5, 0.0, 0.1)
            )
        summary = summarize(scores)
        archive.finish_evaluation(
            evaluation.id,
            status="complete",
            mean=summary.mean,
            ci_low=summary.ci_low,
            ci_high=summary.ci_high,
        )
        archive.add_run_entry(
            run_name=name,
            agent_hash=spec.spec_hash,
            evaluation_id=evaluation.id,
            trial_number=None,
        )


@pytest.mark.parametrize(
    ("designs", "drawn"),
    [
        ({}, ()),
        ({"single": [0.25, 0.5, 1.0]}, ("progress", "pareto", "items", "lineage")),
        (
            {"single": [0.25, 0.5, 0.0], "self_consistency": [0.75, 0.0, 0.6]},
            ("progress", "pareto", "items", "lineage"),
        ),
    ],
    ids=["no-evaluation", "one-evaluation", "partial-scores"],
)
def test_a_bare_run_says_what_is_missing_instead_of_failing(
    tmp_path: Path, designs: Mapping[str, Sequence[float]], drawn: Sequence[str]
) -> None:
    path = tmp_path / "bare.html"
    with Archive(str(tmp_path / "bare.db")) as archive:
        hand_run(archive, "bare", designs)
        write_report(archive, "bare", path)
    page = path.read_text(encoding="utf-8")
    assert_self_contained(page)
    for section in SECTIONS:
        assert f'<section id="{section}">' in page, section
    for plot in PLOTS:
        assert (f'id="plot-{plot}"' in page) == (plot in drawn), plot
    assert "no winner recorded yet" in page
    assert "No baseline scored on the holdout yet" in page
    assert "Not enough designs to judge the value model" in page
    if len(designs) == 2:  # the leader, bred from the other design and an unscored partner
        assert "not scored in this run" in page and '"text":"crossover"' in page
