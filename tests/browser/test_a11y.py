"""Accessibility: axe-core finds no serious or critical violation, light and dark.

axe-core comes from the npm registry (``axe_source`` installs it into a cache outside
the repository) and is injected as an init script, which the page's CSP does not
govern, so the pages are checked exactly as served. The verifier's result states
(verified, failed with a warning) are checked too, since they add colour and text.
Screenshots of every page checked are written for a person to review; the path is
printed (``pytest -s`` shows it).
"""

from __future__ import annotations

import base64
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from builder import build as buildmod
from builder.formats import note
from builder.site import render
from tests.browser.conftest import SCREENSHOTS, Pool, Served, new_page, own_home
from tests.conftest import REPO

RUN_AXE = """async () => {
  const result = await axe.run(document, { resultTypes: ["violations"] });
  return result.violations
    .filter((v) => v.impact === "serious" || v.impact === "critical")
    .map((v) => ({ id: v.id, impact: v.impact, help: v.help,
                   nodes: v.nodes.slice(0, 5).map((n) => n.target.join(" ")) }));
}"""


@pytest.fixture(scope="module")
def site(sample_site: Path, serve: Callable[[Path], Served]) -> Served:
    return serve(sample_site)


def pages(sample_site: Path) -> dict[str, str]:
    """The main pages, by name: what the issue asks to check, and search (script-built)."""
    dream = sorted(
        p.name for p in (sample_site / "dreams").iterdir() if (p / "record.json").exists()
    )[0]
    diary = sorted(p.name for p in (sample_site / "authors").iterdir() if p.is_dir())[0]
    # A maintainer's or member's dream with guest replies (collapsed, badged).
    replies = sorted(
        p.parent.name
        for p in (sample_site / "dreams").glob("*/index.html")
        if b'<details class="replies">' in p.read_bytes()
    )[0]
    return {
        "home": "",
        "dream": f"dreams/{dream}/",
        "dream-replies": f"dreams/{replies}/",
        "diary": f"authors/{diary}/",
        "lineage": "lineage/",
        "patterns": "patterns/",
        "log": "log/",
        "search": "search/?q=the",
        "verify": "verify/",
    }


@pytest.fixture(params=["light", "dark"])
def scheme_page(
    request: pytest.FixtureRequest, browser: Any, axe_source: str
) -> Iterator[tuple[str, Any]]:
    ctx = browser.new_context(color_scheme=request.param, viewport={"width": 1280, "height": 900})
    ctx.add_init_script(axe_source)
    page = new_page(ctx)
    yield request.param, page
    ctx.close()


def check(page: Any, scheme: str, name: str, shots: bool = True) -> list[str]:
    if shots:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SCREENSHOTS / f"{name}-{scheme}.png"), full_page=True)
    return [
        f"{name} ({scheme}): {v['impact']} {v['id']}: {v['help']} at {v['nodes']}"
        for v in page.evaluate(RUN_AXE)
    ]


def test_no_serious_violation_on_any_page(
    scheme_page: tuple[str, Any], site: Served, sample_site: Path
) -> None:
    scheme, page = scheme_page
    page.emulate_media(color_scheme=scheme)
    problems: list[str] = []
    for name, path in pages(sample_site).items():
        page.goto(site.url + path)
        if name == "search":
            page.locator("#search-results li").first.wait_for()
        if name == "dream-replies":  # the replies opened, as a reader opens them
            page.locator("details.replies summary").first.click()
        problems += check(page, scheme, name)
    # The verifier's states: verified, then the verify page with its files shown.
    page.goto(site.url + pages(sample_site)["dream"])
    page.locator('section.verify [data-part="run"]').click()
    page.wait_for_function(
        "() => document.querySelector('section.verify').dataset.verifyStatus === 'ok'"
    )
    page.locator("details.pin-paste summary").click()
    problems += check(page, scheme, "dream-verified")
    print(f"\nscreenshots: {SCREENSHOTS}")
    assert not problems, "\n".join(problems)


def test_no_serious_violation_in_the_warning_states(
    scheme_page: tuple[str, Any],
    site: Served,
    sample_site: Path,
    standard_pool: Pool,
    serve: Callable[[Path], Served],
) -> None:
    """A failed step 1 with the changed-key warning, and the rewritten-history warning
    (a remembered checkpoint of the current size with another root, signed by the
    pool's log key: only two signed checkpoints make that verdict)."""
    scheme, page = scheme_page
    origin = (sample_site / "log" / "checkpoint").read_text().split("\n")[0]
    _, other_key = note.generate_key(origin)
    dream = site.url + pages(sample_site)["dream"]
    page.goto(dream)
    page.evaluate(
        """([origin, vkey]) => localStorage.setItem(`dreampool/v1/pin/${origin}`,
             JSON.stringify({ policy: `log ${vkey}\nquorum none\n`,
                              pinned: "2026-01-01T00:00:00Z" }))""",
        [origin, other_key],
    )
    page.locator('section.verify [data-part="run"]').click()
    page.wait_for_function(
        "() => document.querySelector('section.verify').dataset.pin === 'changed'"
    )
    problems = check(page, scheme, "dream-key-changed")
    # The standard pool's key signs a second tree of the current size.
    served = serve(standard_pool.site)
    checkpoint = (standard_pool.site / "log" / "checkpoint").read_text()
    lines = checkpoint.split("\n")
    text = "\n".join([lines[0], lines[1], base64.b64encode(bytes(32)).decode()]) + "\n"
    signer = note.parse_private_key(standard_pool.fixture.log_key)
    forged = note.sign_note(text, [signer]).decode()
    page.goto(f"{served.url}dreams/{standard_pool.ids[-1]}/")
    page.evaluate(
        """([origin, note]) => {
          localStorage.clear();
          localStorage.setItem(`dreampool/v1/seen/${origin}`,
            JSON.stringify({ checkpoint: note, seen: "2026-01-01T00:00:00Z" }));
        }""",
        [lines[0], forged],
    )
    page.locator('section.verify [data-part="run"]').click()
    page.wait_for_function(
        "() => document.querySelector('section.verify').dataset.history === 'rewritten'"
    )
    problems += check(page, scheme, "dream-history-rewritten")
    assert not problems, "\n".join(problems)


def test_no_page_asks_for_a_file_the_site_lacks(
    browser: Any, site: Served, sample_site: Path
) -> None:
    """Issue 18 (regression): every page view asked for /favicon.ico and got a
    404. No request of any main page fails; Chromium fetches the icon outside
    the page's requests, but reports a failed load on the console."""
    ctx = browser.new_context()
    page = new_page(ctx)
    failed: list[str] = []

    def response(r: Any) -> None:
        if r.status >= 400:
            failed.append(f"{r.status} {r.url}")

    def console(m: Any) -> None:
        if m.type == "error" and "Failed to load resource" in m.text:
            failed.append(f"{m.text} {m.location.get('url', '')}")

    page.on("response", response)
    page.on("console", console)
    page.on("requestfailed", lambda r: failed.append(f"failed {r.url}"))
    try:
        for name, path in pages(sample_site).items():
            page.goto(site.url + path)
            if name == "search":
                page.locator("#search-results li").first.wait_for()
            page.wait_for_load_state("networkidle")
            page.wait_for_timeout(200)  # the icon's load is reported after the page's
        assert failed == []
    finally:
        ctx.close()


@pytest.fixture(scope="module")
def paged_site(
    tmp_path_factory: pytest.TempPathFactory, home_dir: Path, serve: Callable[[Path], Served]
) -> Served:
    """The sample pool built with two dreams a tag page and a diary page, so it
    has numbered pages (builder.site.render, "Pages that stay put")."""
    root = tmp_path_factory.mktemp("paged")
    shutil.copytree(REPO / "content", root / "content")
    with pytest.MonkeyPatch.context() as mp, own_home(home_dir):
        mp.setattr(render, "TAG_PAGE_SIZE", 2)
        mp.setattr(render, "DIARY_PAGE_SIZE", 2)
        buildmod.build(root / "content", root / "site", signer=None)
    return serve(root / "site")


def test_no_serious_violation_on_numbered_pages(
    scheme_page: tuple[str, Any], paged_site: Served
) -> None:
    """A tag's and a diary's entry pages with their page lists, a full numbered
    page (prev, newest, next links) and the open one."""
    scheme, page = scheme_page
    page.emulate_media(color_scheme=scheme)
    site = paged_site.root
    tag = max((site / "tags").iterdir(), key=lambda p: sum(1 for _ in p.glob("*/index.html")))
    diary = max(
        (p for p in (site / "authors").iterdir() if p.is_dir()),
        key=lambda p: sum(1 for _ in p.glob("*/index.html")),
    )
    opened = max(int(p.parent.name) for p in tag.glob("*/index.html"))
    assert opened >= 3, "the sample's largest tag should make at least two full pages"
    problems: list[str] = []
    for name, path in {
        "tag-paged": f"tags/{tag.name}/",
        "tag-page-2": f"tags/{tag.name}/2/",
        "tag-page-open": f"tags/{tag.name}/{opened}/",
        "diary-paged": f"authors/{diary.name}/",
        "diary-page-1": f"authors/{diary.name}/1/",
    }.items():
        page.goto(paged_site.url + path)
        problems += check(page, scheme, name)
    assert not problems, "\n".join(problems)
