"""A pool whose every field is an attack runs no script in a real browser.

Script, event-handler, ``javascript:`` link, SVG, MathML and CSS payloads sit in the
author name, title, summary, entry texts and sources, tags and lineage parent. Each
payload that ran would set the canary ``window.__pwned`` or open a dialog. The pages
must show them as text, and the CSP (``script-src 'self'``) must never have to block
anything: there is no inline script for it to block in the first place.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

import pytest

from builder.content import pool as poolmod
from builder.formats import dream as dreamfmt
from tests.browser.conftest import (
    Pool,
    Served,
    new_page,
    new_pool,
    own_home,
    steps_of,
    verify_dream,
)
from tests.conftest import draft

CANARY = "window.__pwned=1"
PAYLOADS = (
    f"<script>{CANARY}</script>",
    f"<img src=x onerror={CANARY}>",
    f"<svg onload={CANARY}><circle r=9 /></svg>",
    f"<a href=javascript:{CANARY}>click</a>",
    f"[link](javascript:{CANARY})",
    "<style>body{background:url(javascript:alert(1))}</style>",
    '"><script>alert(1)</script>',
    f"</textarea><script>{CANARY}</script>",
    "<iframe srcdoc='<script>parent.__pwned=1</script>'></iframe>",
    "<math><mtext><table><mglyph><style><img src=x onerror=alert(1)>",
    "{{ 7*7 }} ${alert(1)}",
)
TAGS = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "<svg onload=alert(1)>",
    "javascript:alert(1)",
    '"><b onmouseover=alert(1)>',
    "<style>*{x:y}</style>",
    "{{ 7*7 }}",
    "[x](javascript:alert(1))",
]
AUTHOR = f"<img src=x onerror={CANARY}>"
HOSTILE_SEED = bytes([9] * 32)


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory, home_dir: Path) -> tuple[Pool, str]:
    root = tmp_path_factory.mktemp("hostile")
    with own_home(home_dir):
        pool = new_pool(root)
        pool.fixture.add("ada", 1, title="A calm dream")
        body = draft(
            author=AUTHOR,
            title=" ".join(PAYLOADS[:3])[:120],
            summary="\n\n".join(PAYLOADS)[:800],
            entries=[
                {"text": p[:300], "type": t, "confidence": "unconfirmed", "source": p[:300]}
                for p, t in zip(PAYLOADS, ("fact", "warning", "rule", "lesson") * 3, strict=False)
            ],
            tags=TAGS,
            lineage={"parent": f"<script>{CANARY}</script>", "generation": 1},
        )
        signed = dreamfmt.sign(body, HOSTILE_SEED)
        path = root / "hostile.json"
        path.write_text(json.dumps(signed, ensure_ascii=False), encoding="utf-8")
        poolmod.submit(pool.fixture.content, [path])
        dream_id = dreamfmt.parse(path.read_bytes(), "hostile.json").id
        pool.build(pool.site)
    return pool, dream_id


@pytest.fixture(scope="module")
def hostile_site(hostile: tuple[Pool, str], serve: Callable[[Path], Served]) -> Served:
    return serve(hostile[0].site)


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    ctx = browser.new_context()
    page = new_page(ctx)
    console: list[str] = []
    page.on("console", lambda m: console.append(m.text))
    page.console = console
    yield page
    ctx.close()


def assert_inert(page: Any, where: str) -> None:
    assert page.evaluate("() => window.__pwned") is None, where
    assert page.dialogs == [], (where, page.dialogs)
    assert page.evaluate("() => window.__csp") == [], where
    csp = [m for m in page.console if "Content Security Policy" in m]
    assert csp == [], (where, csp)


def internal_links(page: Any, base: str) -> set[str]:
    hrefs = page.locator("a[href]").evaluate_all("els => els.map(a => a.getAttribute('href'))")
    out = set()
    for href in hrefs:
        url = urljoin(page.url, href).split("#")[0]
        parts = urlsplit(url)
        if url.startswith(base) and not parts.path.endswith(
            (".xml", ".json", "policy", ".tlog-proof")
        ):
            out.add(url)
    return out


def test_hostile_pool_runs_no_script(
    page: Any, hostile: tuple[Pool, str], hostile_site: Served
) -> None:
    _, dream_id = hostile
    base = hostile_site.url
    dream = f"{base}dreams/{dream_id}/"
    page.goto(dream)
    # Shown as text, as the author wrote it.
    assert PAYLOADS[0] in page.locator("section.summary").inner_text()
    assert AUTHOR in page.locator("header.page-head").inner_text()
    pages = {base, dream, f"{base}search/?q=script", f"{base}verify/"} | internal_links(page, base)
    page.goto(base)
    pages |= internal_links(page, base)
    assert len(pages) >= 12
    for url in sorted(pages):
        page.goto(url)
        assert_inert(page, url)
    # The search results are built from the index by script: still text.
    page.goto(f"{base}search/?q=script")
    page.locator("#search-results li").first.wait_for()
    assert_inert(page, "search results")

    # Verifying shows the dream's author in step 4's detail: as text.
    panel = verify_dream(page, dream)
    assert panel.get_attribute("data-verify-status") == "ok", panel.inner_text()
    assert steps_of(panel) == [(n, True) for n in range(1, 6)]
    assert AUTHOR in panel.locator('li[data-step="4"] .step-detail').inner_text()
    assert_inert(page, "verified dream page")


def test_pasted_hostile_policy_stays_text(
    page: Any, hostile: tuple[Pool, str], hostile_site: Served
) -> None:
    _, dream_id = hostile
    panel = verify_dream(page, f"{hostile_site.url}dreams/{dream_id}/")
    panel.locator("details.pin-paste summary").click()
    panel.locator('[data-part="paste"]').fill(f"<img src=x onerror={CANARY}>\n")
    panel.locator('[data-part="paste-save"]').click()
    panel.locator('[data-part="paste-message"]').filter(has_text="Not pinned").wait_for()
    assert_inert(page, "pasted policy")


def test_the_probes_would_see_an_attack(
    page: Any, hostile: tuple[Pool, str], serve: Callable[[Path], Served]
) -> None:
    """The harness has teeth: an inline script is blocked and reported by the CSP, and
    one on a page without the CSP sets the canary."""
    pool, _ = hostile

    def inject(root: Path) -> None:
        index = root / "index.html"
        html = index.read_text(encoding="utf-8")
        index.write_text(
            html.replace("</main>", f"<script>{CANARY}</script></main>"), encoding="utf-8"
        )
        bare = html.replace('<meta http-equiv="Content-Security-Policy"', '<meta name="x-no-csp"')
        (root / "bare.html").write_text(
            bare.replace("</main>", f"<script>{CANARY}</script></main>"), encoding="utf-8"
        )

    served = serve(pool.site).swap(pool.site, inject)
    page.goto(served.url)
    assert page.evaluate("() => window.__pwned") is None
    assert page.evaluate("() => window.__csp") == ["script-src-elem inline"]
    page.goto(served.url + "bare.html")
    assert page.evaluate("() => window.__pwned") == 1
