"""The report as a reader sees it: rendered in headless Chromium with the network cut off.

Chromium comes from the system (Debian's `chromium`, which `.ci/setup` installs where apt is at
hand) and is driven by playwright; playwright's own browser download is never used. Without
Chromium the test is skipped, except in CI (`CI=true`), where that is a failure. The screenshot is
kept in build/test-artifacts/report.png.
"""

from __future__ import annotations

import base64
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import pytest
from test_report import INJECTED, PLOTS, meta_report, searched_report

from agentdesign.archive import Archive

if TYPE_CHECKING:
    from playwright.sync_api import Browser, ConsoleMessage, Page, Route

CHROMIUM = Path("/usr/bin/chromium")
ARTEFACTS = Path(__file__).resolve().parents[1] / "build" / "test-artifacts"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
# Decodes a PNG in the page and returns the variance of its grey levels: 0 for a blank image.
PIXEL_VARIANCE = """async (png) => {
    const image = new Image();
    image.src = "data:image/png;base64," + png;
    await image.decode();
    const canvas = document.createElement("canvas");
    canvas.width = image.width;
    canvas.height = image.height;
    const context = canvas.getContext("2d");
    context.drawImage(image, 0, 0);
    const data = context.getImageData(0, 0, image.width, image.height).data;
    let sum = 0, squares = 0;
    for (let i = 0; i < data.length; i += 4) {
        const grey = (data[i] + data[i + 1] + data[i + 2]) / 3;
        sum += grey;
        squares += grey * grey;
    }
    const n = data.length / 4;
    return squares / n - (sum / n) ** 2;
}"""
# Plots whose SVG holds a drawn trace (a scatter's `.trace`, a heat map's `.hm`).
DRAWN = """() => Array.from(document.querySelectorAll(".js-plotly-plot"))
    .filter((plot) => plot.querySelector("svg.main-svg .trace, svg.main-svg .hm") !== null)
    .length"""


def unavailable(reason: str) -> NoReturn:
    if os.environ.get("CI") == "true":
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def chromium() -> Iterator[Browser]:
    if not CHROMIUM.exists():
        unavailable(f"{CHROMIUM} is missing: `apt-get install chromium` (as .ci/setup does)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        unavailable("playwright is missing: install agentdesign's dev extra")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        yield browser
        browser.close()


def open_offline(browser: Browser, report: Path) -> tuple[Page, list[str], list[str]]:
    """`report` loaded in a new page that reaches no network: the page, the errors its console and
    scripts report as it goes on, and the addresses it tried to fetch (each refused)."""
    page = browser.new_page(viewport={"width": 1200, "height": 900})
    errors: list[str] = []
    fetched: list[str] = []

    def console(message: ConsoleMessage) -> None:
        if message.type == "error":
            errors.append(message.text)

    def offline(route: Route) -> None:
        if route.request.url.startswith(("file:", "data:", "blob:", "about:")):
            route.continue_()
        else:
            fetched.append(route.request.url)
            route.abort()

    page.on("console", console)
    page.on("pageerror", lambda err: errors.append(str(err)))
    page.route("**/*", offline)
    page.goto(report.as_uri(), wait_until="load")
    return page, errors, fetched


def test_the_report_renders_every_plot_offline_without_errors(
    chromium: Browser, tmp_path_factory: pytest.TempPathFactory
) -> None:
    report = searched_report(tmp_path_factory)
    page, errors, fetched = open_offline(chromium, report)
    try:
        page.wait_for_function(f"({DRAWN})() >= {len(PLOTS)}", timeout=30_000)
    finally:  # kept to look at, above all when a plot is missing
        screenshot = page.screenshot(full_page=True)
        ARTEFACTS.mkdir(parents=True, exist_ok=True)
        (ARTEFACTS / "report.png").write_bytes(screenshot)
        shutil.copy(report, ARTEFACTS / "report.html")
    assert errors == [], errors
    assert fetched == [], fetched
    assert page.evaluate(DRAWN) == len(PLOTS)
    for plot in PLOTS:
        drawn = page.locator(f"#plot-{plot}").screenshot()
        variance = page.evaluate(PIXEL_VARIANCE, base64.b64encode(drawn).decode())
        assert variance > 50, f"plot {plot} looks blank (grey-level variance {variance:.1f})"
    variance = page.evaluate(PIXEL_VARIANCE, base64.b64encode(screenshot).decode())
    assert variance > 50, f"the page looks blank (grey-level variance {variance:.1f})"


def test_the_meta_agents_text_is_folded_text_not_markup(
    chromium: Browser, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The meta agent's prompts and responses are model-written: in the page they are text in
    closed <details>, whatever markup they hold; opening one shows the text as the model wrote
    it."""
    report, database = meta_report(tmp_path_factory)
    with Archive(str(database)) as archive:
        n_calls = archive.search_call_totals("meta")["meta"][0]
    page, errors, _ = open_offline(chromium, report)
    folded = page.locator("#meta-agent details")
    assert folded.count() == 2 * n_calls  # each reply's prompt and response, once
    assert page.evaluate("document.querySelectorAll('#meta-agent details[open]').length") == 0
    assert page.locator("#injected").count() == 0
    response = folded.nth(1)
    assert not response.locator("pre").is_visible()
    response.locator("summary").click()
    assert response.locator("pre").is_visible()
    assert response.locator("pre").inner_text().startswith(INJECTED)
    assert errors == [], errors
