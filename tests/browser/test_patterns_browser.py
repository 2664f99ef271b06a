"""The patterns page in a real browser, at a phone's width (390 px) and a desktop's
(1280 px), light and dark: the page never scrolls sideways, every chart has an
accessible name and a text alternative, chart text renders at 12 px or more on the
phone, and axe-core finds no serious or critical violation.

Two sites: the shipped sample pool (all its dreams in one month, so no trend column)
and a small pool built over three months (SOURCE_DATE_EPOCH, the log's clock), whose
tables carry a sparkline per tag and keyword. Screenshots of each are written to
SCREENSHOTS for a person to review.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.browser.conftest import SCREENSHOTS, Served, new_page, new_pool, own_home
from tests.browser.test_a11y import RUN_AXE

# 2025-01-15, 2025-02-15 and 2025-03-15, noon UTC: three builds, three months.
EPOCHS = (1736942400, 1739620800, 1742040000)

CHART_REPORT = """() => [...document.querySelectorAll("svg.chart")].map((svg) => {
  const named = document.getElementById(svg.getAttribute("aria-labelledby") || "");
  const described = document.getElementById(svg.getAttribute("aria-describedby") || "");
  const scale = svg.getScreenCTM() ? svg.getScreenCTM().a : 0;
  return {
    role: svg.getAttribute("role"),
    name: named && named.parentNode === svg && named.tagName === "title"
      ? named.textContent.trim() : "",
    desc: described && described.parentNode === svg && described.tagName === "desc"
      ? described.textContent.trim() : "",
    texts: [...svg.querySelectorAll("text")].map((t) => ({
      text: t.textContent,
      px: parseFloat(getComputedStyle(t).fontSize) * scale,
    })),
    width: svg.getBoundingClientRect().width,
  };
})"""


@pytest.fixture(scope="module")
def trend_site(
    tmp_path_factory: pytest.TempPathFactory, home_dir: Path, serve: Callable[[Path], Served]
) -> Iterator[Served]:
    """Three member authors tag dreams database and ops, one build a month."""
    root = tmp_path_factory.mktemp("trends")
    with own_home(home_dir), pytest.MonkeyPatch.context() as mp:
        pool = new_pool(root)
        for epoch in EPOCHS:
            for author in ("ada", "bob", "墨子"):
                pool.fixture.add(
                    author,
                    1,
                    tags=["database", "ops"],
                    entries=[
                        {
                            "type": "lesson",
                            "confidence": "confirmed",
                            "text": "Vacuum the replicas.",
                        },
                        {
                            "type": "rule",
                            "confidence": "confirmed",
                            "text": "索引 rebuild replicas",
                        },
                    ],
                )
            for key in (pool.fixture.content / "keys").glob("*.yaml"):
                key.write_text(key.read_text().replace("tier: guest", "tier: member"))
            mp.setenv("SOURCE_DATE_EPOCH", str(epoch))
            pool.build(root / "site")
    yield serve(pool.site)


@pytest.fixture(scope="module")
def sample(sample_site: Path, serve: Callable[[Path], Served]) -> Served:
    return serve(sample_site)


def look(browser: Any, axe_source: str, url: str, width: int, scheme: str, shot: str) -> Any:
    """The patterns page at url, at width and in scheme; a full-page screenshot saved."""
    ctx = browser.new_context(color_scheme=scheme, viewport={"width": width, "height": 900})
    ctx.add_init_script(axe_source)
    page = new_page(ctx)
    page.goto(url + "patterns/")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{shot}-{width}-{scheme}.png"), full_page=True)
    return page


def problems_of(page: Any, width: int) -> list[str]:
    problems = []
    scroll, inner = page.evaluate("[document.documentElement.scrollWidth, innerWidth]")
    if scroll > inner:
        problems.append(f"the page scrolls sideways: {scroll} px wide in {inner}")
    charts = page.evaluate(CHART_REPORT)
    if not charts:
        problems.append("no chart")
    for i, c in enumerate(charts):
        if c["role"] != "img" or not c["name"] or not c["desc"]:
            problems.append(f"chart {i} has no role, name or description: {c}")
        if c["width"] <= 0:
            problems.append(f"chart {i} is not drawn")
        if width <= 390:
            small = [t for t in c["texts"] if t["px"] < 12]
            if small:
                problems.append(f"chart {i} ({c['name']}) has text under 12 px: {small[:3]}")
    for v in page.evaluate(RUN_AXE):
        problems.append(f"axe: {v['impact']} {v['id']}: {v['help']} at {v['nodes']}")
    return problems


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("width", [390, 1280])
def test_sample_patterns_page(
    browser: Any, axe_source: str, sample: Served, width: int, scheme: str
) -> None:
    page = look(browser, axe_source, sample.url, width, scheme, "patterns")
    problems = problems_of(page, width)
    # The sample pool's sections: the admissions chart and the tags' entry types.
    ids = page.evaluate("[...document.querySelectorAll('svg.chart')].map((s) => s.id || "
                        "s.getAttribute('aria-labelledby'))")  # fmt: skip
    assert "chart-admissions-title" in ids and "chart-tag-types-title" in ids
    assert page.locator("table.patterns-table").count() == 3
    page.context.close()
    print(f"\nscreenshots: {SCREENSHOTS}")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("width", [390, 1280])
def test_patterns_page_over_three_months(
    browser: Any, axe_source: str, trend_site: Served, width: int, scheme: str
) -> None:
    page = look(browser, axe_source, trend_site.url, width, scheme, "patterns-trends")
    problems = problems_of(page, width)
    sparks = page.locator("svg.chart-spark").count()
    months = page.locator("svg.chart-columns rect.bar").count()
    pairs = page.locator("ol.tag-pairs li").all_inner_texts()
    page.context.close()
    assert months == 3
    # A sparkline per tag (2) and per keyword (replicas, rebuild, vacuum, 索引).
    assert sparks >= 4
    assert pairs == ["#database + #ops 9 dreams · 3 authors"]
    assert not problems, "\n".join(problems)
