"""A phone's width: no page scrolls sideways at 390 px, charts are named and readable.

Every HTML page of the sample site is opened in Chromium at 390 px (the walk takes
the built site's ``.html`` files, nothing chosen by hand), and so are the script-built
states (search results, a verified dream) and every page of a pool of words as long
as the dream format allows (ids, titles, sources, tags, a chain of twelve
generations) built over four months. ``document.documentElement.scrollWidth`` must
not exceed ``window.innerWidth``: a table, a code block or a long chain may scroll
inside its own box, never the page. The patterns page is included like any other.

Every ``<svg>`` on these pages has an accessible name (``role="img"`` and a
``<title>`` it is labelled by) and a text alternative (a ``<desc>``); a chart's
text is at least 12 CSS px at 390 px; axe-core finds no serious or critical issue
on the archive's pages and the log page (the pool by month), light and dark.
Screenshots of the archive and the statistics at 1280 and 390 px go to
``SCREENSHOTS`` (tests/browser/conftest.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from builder import build as buildmod
from builder.formats.note import parse_private_key
from builder.site import render
from tests.browser.conftest import SCREENSHOTS, Served, new_page, own_home
from tests.browser.test_a11y import RUN_AXE
from tests.pools import make_pool

NARROW = {"width": 390, "height": 844}
WIDE = {"width": 1280, "height": 900}

# The page's width and, when it is too wide, the elements that stick out past
# the viewport without a scrolling box of their own that ends inside it.
WIDTH = """() => {
  const w = window.innerWidth;
  const out = [];
  if (document.documentElement.scrollWidth > w) {
    for (const el of document.querySelectorAll("body *")) {
      if (el.getBoundingClientRect().right <= w + 0.5) continue;
      let p = el.parentElement, held = false;
      for (; p; p = p.parentElement) {
        if (getComputedStyle(p).overflowX !== "visible" &&
            p.getBoundingClientRect().right <= w + 0.5) { held = true; break; }
      }
      if (!held) out.push(el.tagName.toLowerCase() + (el.className ? "." + el.className : ""));
    }
  }
  return [document.documentElement.scrollWidth, w, out.slice(0, 5)];
}"""

# Every <svg> of the page: its accessible name (role img, and aria-label, the text
# of what aria-labelledby names, or a <title>), its text alternative (a <desc> or
# what aria-describedby names) and its smallest text in CSS px.
SVGS = """() => [...document.querySelectorAll("svg")].map((svg) => {
  const text = (attr) => (svg.getAttribute(attr) || "").split(/\\s+/).filter(Boolean)
    .map((i) => document.getElementById(i)).filter(Boolean)
    .map((e) => e.textContent.trim()).join(" ");
  const title = svg.querySelector(":scope > title");
  const desc = svg.querySelector(":scope > desc");
  const sizes = [...svg.querySelectorAll("text")].map(
    (t) => parseFloat(getComputedStyle(t).fontSize) * t.getScreenCTM().a);
  return {
    id: svg.id || svg.outerHTML.slice(0, 80),
    hidden: svg.getAttribute("aria-hidden") === "true",
    role: svg.getAttribute("role"),
    name: (svg.getAttribute("aria-label") || text("aria-labelledby") ||
           (title ? title.textContent : "")).trim(),
    desc: (text("aria-describedby") || (desc ? desc.textContent : "")).trim(),
    smallest: sizes.length ? Math.min(...sizes) : null,
  };
})"""


def html_pages(site: Path) -> list[str]:
    """Every .html file of a built site, as the URL path that serves it."""
    live = site.resolve()
    return sorted(str(p.relative_to(live)).removesuffix("index.html") for p in live.rglob("*.html"))


@pytest.fixture
def narrow(browser: Any) -> Iterator[Any]:
    ctx = browser.new_context(viewport=NARROW)
    yield new_page(ctx)
    ctx.close()


def too_wide(page: Any, label: str) -> list[str]:
    width, viewport, offenders = page.evaluate(WIDTH)
    return [f"{label}: {width} px wide at {viewport} px: {offenders}"] if width > viewport else []


@pytest.fixture(scope="module")
def sample(sample_site: Path, serve: Callable[[Path], Served]) -> Served:
    return serve(sample_site)


@pytest.fixture(scope="module")
def long_words(
    tmp_path_factory: pytest.TempPathFactory, home_dir: Path, serve: Callable[[Path], Served]
) -> Served:
    """A pool of the longest words the format allows, built in four months, with the
    archive paged (3 a page)."""
    root = tmp_path_factory.mktemp("long-words")
    with pytest.MonkeyPatch.context() as mp, own_home(home_dir):
        mp.setattr(render, "ARCHIVE_PAGE_SIZE", 3)
        tp = make_pool(root)
        signer = parse_private_key(tp.log_key)
        month, gen = 1_780_000_000, 0
        for step in range(4):
            mp.setenv("SOURCE_DATE_EPOCH", str(month + step * 31 * 86_400))
            if step == 0:
                (parent,) = tp.add(
                    "ada",
                    1,
                    title="T" + "y" * 119,
                    summary="S" + "z" * 300 + " `" + "w" * 200 + "`",
                    entries=[
                        {
                            "text": "k" * 290,
                            "type": "fact",
                            "confidence": "confirmed",
                            "source": "https://example.org/" + "p" * 270,
                        },
                        {
                            "text": "```\n" + "q" * 280 + "\n```",
                            "type": "lesson",
                            "confidence": "confirmed",
                            "source": "s" * 290,
                        },
                    ],
                    tags=["t" + "u" * 31, "python"],
                )
            for _ in range(3):  # a chain of twelve generations, three a month
                gen += 1
                (parent,) = tp.add("ada", 1, lineage={"parent": parent, "generation": gen})
            tp.add("bob", step + 1, tags=["testing"])
            buildmod.build(tp.content, root / "site", signer=signer)
    return serve(root / "site")


def test_no_sample_page_scrolls_sideways_at_390_px(
    narrow: Any, sample: Served, sample_site: Path
) -> None:
    paths = html_pages(sample_site)
    assert len(paths) > 100 and "archive/" in paths and "patterns/" in paths
    problems: list[str] = []
    for path in paths:
        narrow.goto(sample.url + path)
        problems += too_wide(narrow, path or "home")
    # What scripts build: search results, and a dream's verification panel.
    narrow.goto(sample.url + "search/?q=the")
    narrow.locator("#search-results li").first.wait_for()
    problems += too_wide(narrow, "search results")
    dream = next(
        p
        for p in paths
        if p.startswith("dreams/") and (sample_site / p / "proof.tlog-proof").exists()
    )
    narrow.goto(sample.url + dream)
    narrow.locator('section.verify [data-part="run"]').click()
    narrow.wait_for_function(
        "() => document.querySelector('section.verify').dataset.verifyStatus === 'ok'"
    )
    problems += too_wide(narrow, "verified dream")
    assert not problems, "\n".join(problems)


def test_no_page_of_long_words_scrolls_sideways_at_390_px(narrow: Any, long_words: Served) -> None:
    paths = html_pages(long_words.root)
    assert {"archive/", "archive/1/", "lineage/", "log/"} <= set(paths)
    problems: list[str] = []
    for path in paths:
        narrow.goto(long_words.url + path)
        problems += too_wide(narrow, path or "home")
    narrow.goto(long_words.url + "search/?q=yyyy")
    narrow.locator("#search-results li").first.wait_for()
    problems += too_wide(narrow, "search results")
    assert not problems, "\n".join(problems)


def test_every_svg_is_named_described_and_readable_at_390_px(
    narrow: Any, sample: Served, sample_site: Path, long_words: Served
) -> None:
    problems: list[str] = []
    seen = 0
    pages = [(sample, p) for p in html_pages(sample_site)]
    pages += [(long_words, p) for p in html_pages(long_words.root)]
    for served, path in pages:
        file = served.root / (path if path.endswith(".html") else path + "index.html")
        if b"<svg" not in file.read_bytes():
            continue
        narrow.goto(served.url + path)
        for svg in narrow.evaluate(SVGS):
            seen += 1
            where = f"{path} {svg['id']}"
            if svg["hidden"]:
                continue  # decoration, named by the text beside it
            if svg["role"] != "img" or not svg["name"]:
                problems.append(f"{where}: no accessible name (role img and a label or <title>)")
            if not svg["desc"]:
                problems.append(f"{where}: no text alternative (a <desc> or aria-describedby)")
            if svg["smallest"] is not None and svg["smallest"] < 12:
                problems.append(f"{where}: text of {svg['smallest']:.1f} px")
    assert seen >= 6  # the log pages' three charts, twice
    # The charts' text alternative in full: the table beside them, a row a month.
    narrow.goto(long_words.url + "log/")
    rows = narrow.locator("table.timeline-table tbody tr").count()
    bars = narrow.locator('svg[aria-labelledby="chart-dreams-title"] rect.bar').count()
    assert rows == bars == 4
    assert not problems, "\n".join(problems)


@pytest.fixture(params=["light", "dark"])
def scheme(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.mark.parametrize("viewport", [NARROW, WIDE], ids=["390", "1280"])
def test_no_serious_violation_on_the_archive_and_the_statistics(
    browser: Any,
    axe_source: str,
    scheme: str,
    viewport: dict[str, int],
    long_words: Served,
    sample: Served,
) -> None:
    """The paged archive of the long-words pool (entry page, a full page, the open
    page) and its log page of four months, and the sample's archive and log page."""
    ctx = browser.new_context(color_scheme=scheme, viewport=viewport)
    ctx.add_init_script(axe_source)
    page = new_page(ctx)
    opened = max(int(p.parent.name) for p in (long_words.root / "archive").glob("*/index.html"))
    problems: list[str] = []
    try:
        paths = ("archive/", "archive/1/", f"archive/{opened}/", "log/")
        urls = [long_words.url + p for p in paths] + [sample.url + "archive/", sample.url + "log/"]
        for url in urls:
            path = url.removeprefix(long_words.url).removeprefix(sample.url)
            page.goto(url)
            problems += [
                f"{path} ({scheme}, {viewport['width']} px): {v['impact']} {v['id']}: "
                f"{v['help']} at {v['nodes']}"
                for v in page.evaluate(RUN_AXE)
            ]
    finally:
        ctx.close()
    assert not problems, "\n".join(problems)


def test_screenshots_of_the_archive_and_the_statistics(
    browser: Any, sample: Served, long_words: Served
) -> None:
    """For a person to review (the paths are in the report of issue 22)."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    for width, viewport in (("1280", WIDE), ("390", NARROW)):
        ctx = browser.new_context(viewport=viewport)
        page = new_page(ctx)
        try:
            page.goto(sample.url + "archive/")
            page.screenshot(path=str(SCREENSHOTS / f"archive-{width}.png"), full_page=True)
            page.goto(long_words.url + "archive/")
            page.screenshot(path=str(SCREENSHOTS / f"archive-paged-{width}.png"), full_page=True)
            for served, name in ((sample, "stats"), (long_words, "stats-months")):
                page.goto(served.url + "log/")
                section = page.locator("section", has=page.locator("#time-title"))
                section.screenshot(path=str(SCREENSHOTS / f"{name}-{width}.png"))
        finally:
            ctx.close()
    for name in ("archive", "archive-paged", "stats", "stats-months"):
        for width in ("1280", "390"):
            assert (SCREENSHOTS / f"{name}-{width}.png").stat().st_size > 1000
    print(f"\nscreenshots: {SCREENSHOTS}")
