"""What the browser verifier's "Verified" is about, whom it remembers, and what it
calls a fork (issue 19, items 5, 6, 12 and 13, browser part).

* **Verified means this text**: a dream page whose displayed title, entries, tags,
  author, summary, … differ from the verified record, or that shows text outside
  the dream's fields, hides a field, or points the verifier at another dream, gets
  the panel state ``differs`` naming the field, never ``ok``.
* **Pins per pool**: pins and remembered checkpoints are keyed by web origin, pool
  root path and log origin, so two pools on one host do not see each other's pins.
* **Only a proof makes a verdict**: a withheld, garbled or stale consistency file or
  checkpoint is ``unchecked`` ("could not check, try again"), never ``rewritten``.
* **Linear parsers and bounded fetches**: a megabyte of newlines dropped on the
  verify page is classified at once; a fetch that never ends or never stops is cut
  by its deadline or its size cap, with a message saying which.
"""

from __future__ import annotations

import base64
import json
import re
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from builder.formats import note
from tests.browser.conftest import (
    Pool,
    Served,
    local_storage,
    new_page,
    new_pool,
    own_home,
    steps_of,
    verify_by_hook,
    verify_dream,
)
from tests.pools import ORIGIN

DONE = (
    "() => ['ok', 'failed', 'unavailable', 'differs', 'incomplete'].includes("
    "document.querySelector('section.verify').dataset.verifyStatus)"
)


@pytest.fixture
def context(browser: Any) -> Iterator[Any]:
    ctx = browser.new_context()
    yield ctx
    ctx.close()


def dream_url(served: Served, dream_id: str) -> str:
    """The page's address with a fresh query: files swapped within one second keep
    their Last-Modified, and a revalidated page would be the one before the swap."""
    return f"{served.url}dreams/{dream_id}/?v={time.monotonic_ns()}"


def edit_page(root: Path, dream_id: str, edit: Callable[[str], str]) -> None:
    page = root / "dreams" / dream_id / "index.html"
    html = page.read_text(encoding="utf-8")
    changed = edit(html)
    assert changed != html, "the edit must change the page"
    page.write_text(changed, encoding="utf-8")


def verify_status(page: Any, url: str) -> Any:
    page.goto(url)
    page.evaluate("() => localStorage.clear()")
    return verify_by_hook(page, url)


@pytest.fixture(scope="module")
def edit_page_ctx(browser: Any, standard_pool: Pool, serve: Callable[[Path], Served]) -> Any:
    served = serve(standard_pool.site)
    ctx = browser.new_context()
    yield new_page(ctx), served
    ctx.close()


# --- 5. Verified means this text -------------------------------------------------------------


def title_of(html: str) -> str:
    match = re.search(r'<h1 id="dream-title"[^>]*>([^<]*)</h1>', html)
    assert match
    return match.group(1)


def retitle(html: str) -> str:
    return html.replace(f">{title_of(html)}</h1>", ">A title nobody signed</h1>", 1)


def reword_entry(html: str) -> str:
    return re.sub(
        r'(<p class="entry-text"[^>]*>)([^<]*)', r"\1The opposite is true.", html, count=1
    )


def insert_between(html: str) -> str:
    return html.replace(
        '<section class="entries"',
        '<p>Also: send your keys to the operator.</p>\n<section class="entries"',
        1,
    )


def hide_entry(html: str) -> str:
    return html.replace('<li class="entry ', '<li hidden class="entry ', 1)


def retag(html: str) -> str:
    return re.sub(r'(<a class="tag"[^>]*>)([^<]*)', r"\1urgent", html, count=1)


def reattribute(html: str) -> str:
    return re.sub(r'(<a class="author"[^>]*>)([^<]*)', r"\1bob", html, count=1)


def other_id(html: str) -> str:
    """The panel asks about another dream than the page shows."""
    return re.sub(r'data-dream-id="[0-9a-f]{16}"', 'data-dream-id="OTHER"', html, count=1)


def other_root(html: str) -> str:
    """The panel is pointed at another folder for the pool's files."""
    return re.sub(r'data-root="[^"]*"', 'data-root="../../elsewhere/"', html, count=1)


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (retitle, "title"),
        (reword_entry, "entry"),
        (insert_between, "text outside"),
        (hide_entry, "hidden"),
        (retag, "tag"),
        (reattribute, "author"),
        (other_id, "dream"),
        (other_root, "root"),
    ],
)
def test_an_edited_dream_page_is_never_verified(
    edit_page_ctx: tuple[Any, Served],
    standard_pool: Pool,
    edit: Callable[[str], str],
    field: str,
) -> None:
    page, served = edit_page_ctx
    first = standard_pool.ids[0]
    other = standard_pool.ids[1]

    def mutate(root: Path) -> None:
        if edit is other_id:
            edit_page(root, first, lambda h: other_id(h).replace("OTHER", other))
        elif edit is other_root:
            shutil.copytree(root, root.parent / "copy", dirs_exist_ok=True)
            shutil.move(str(root.parent / "copy"), str(root / "elsewhere"))
            edit_page(root, first, other_root)
        else:
            edit_page(root, first, edit)

    served.swap(standard_pool.site, mutate)
    panel = verify_status(page, dream_url(served, first))
    status = panel.get_attribute("data-verify-status")
    assert status == "differs", panel.inner_text()
    outcome = panel.locator('[data-part="outcome"]').inner_text()
    assert "Verified" not in outcome.replace("Not verified", "")
    assert field in (panel.get_attribute("data-differs") or "") + " " + outcome


def test_an_unedited_page_is_verified_and_names_what_is_not_covered(
    edit_page_ctx: tuple[Any, Served], standard_pool: Pool
) -> None:
    page, served = edit_page_ctx
    served.swap(standard_pool.site)
    for dream_id in standard_pool.ids:
        panel = verify_status(page, dream_url(served, dream_id))
        assert panel.get_attribute("data-verify-status") == "ok", panel.inner_text()
    scope = panel.locator('[data-part="scope"]').inner_text()
    assert "tier" in scope and "admitted" in scope


def test_every_sample_dream_page_matches_its_record(
    browser: Any, sample_site: Path, serve: Callable[[Path], Served]
) -> None:
    """The shipped pool's Markdown summaries (lists, code, links, CJK) render in the
    verifier exactly as the build rendered them: no honest page is called edited."""
    served = serve(sample_site)
    ctx = browser.new_context()
    try:
        page = new_page(ctx)
        ids = sorted(
            p.name for p in (sample_site / "dreams").iterdir() if (p / "record.json").exists()
        )
        assert len(ids) >= 30
        bad = {}
        for dream_id in ids:
            panel = verify_by_hook(page, dream_url(served, dream_id))
            status = panel.get_attribute("data-verify-status")
            if status != "ok":
                bad[dream_id] = panel.locator('[data-part="outcome"]').inner_text()
        assert bad == {}
    finally:
        ctx.close()


# --- 6. pins per pool --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def two_pools(tmp_path_factory: pytest.TempPathFactory, home_dir: Path) -> dict[str, Any]:
    """Two pools of the same log origin and different keys, served from /a/ and /b/
    of one host, as two projects' pages on one GitHub Pages account are."""
    root = tmp_path_factory.mktemp("two-pools")
    host = root / "host"
    with own_home(home_dir):
        a = new_pool(root / "a")
        a.ids += a.fixture.add("ada", 1)
        a.build(host / "a")
        other_key, _ = note.generate_key(ORIGIN)
        b = new_pool(root / "b", log_key=other_key)
        b.ids += b.fixture.add("bob", 1)
        b.build(host / "b")
    return {"host": host, "a": a, "b": b}


def test_two_pools_on_one_host_keep_their_own_pins(
    context: Any, two_pools: dict[str, Any], serve: Callable[[Path], Served]
) -> None:
    served = serve(two_pools["host"])
    page = new_page(context)
    a_url = f"{served.url}a/dreams/{two_pools['a'].ids[0]}/"
    b_url = f"{served.url}b/dreams/{two_pools['b'].ids[0]}/index.html"
    for url in (a_url, b_url):
        panel = verify_dream(page, url)
        assert panel.get_attribute("data-verify-status") == "ok", panel.inner_text()
        assert panel.get_attribute("data-pin") == "first-use"
    for url in (a_url, b_url):
        panel = verify_dream(page, url)
        assert panel.get_attribute("data-pin") == "pinned"
        assert panel.get_attribute("data-history") == "unchanged"
    pins = [k for k in local_storage(page) if "/pin" in k or " pin" in k or "pin " in k]
    assert len(pins) == 2, pins
    assert any("/a/" in k for k in pins) and any("/b/" in k for k in pins)


def test_a_pin_of_the_old_layout_is_adopted_for_its_log(
    context: Any, two_pools: dict[str, Any], serve: Callable[[Path], Served]
) -> None:
    """A pin an earlier verifier kept (one key per log origin) still guards the pool:
    the other pool's key is "changed", not a fresh first use."""
    served = serve(two_pools["host"])
    page = new_page(context)
    page.goto(served.url + "a/")
    policy = (two_pools["host"] / "a" / "log" / "policy").read_text()
    page.evaluate(
        "(p) => localStorage.setItem('dreampool/v1/pin/' + 'test.example/pool',"
        " JSON.stringify({policy: p, pinned: '2024-01-01T00:00:00Z'}))",
        policy,
    )
    panel = verify_dream(page, f"{served.url}a/dreams/{two_pools['a'].ids[0]}/")
    assert panel.get_attribute("data-pin") == "pinned", panel.inner_text()
    panel = verify_dream(page, f"{served.url}b/dreams/{two_pools['b'].ids[0]}/")
    assert panel.get_attribute("data-pin") == "changed"
    assert panel.get_attribute("data-verify-status") == "failed"


# --- 12. only a proof makes a verdict ----------------------------------------------------------


@pytest.fixture(scope="module")
def grown(tmp_path_factory: pytest.TempPathFactory, home_dir: Path) -> dict[str, Any]:
    """v1 (size 3), v2 (size 6, 3 more leaves) of one pool; ids of a v1 dream and of a
    v2 dream (whose proof is against v2's checkpoint, so step 5 needs no file)."""
    root = tmp_path_factory.mktemp("grown")
    with own_home(home_dir):
        pool = new_pool(root / "pool")
        old = pool.fixture.add("ada", 2)
        v1 = pool.build(root / "v1")
        new = pool.fixture.add("bob", 2)
        v2 = pool.build(root / "v2")
    return {"v1": v1, "v2": v2, "old": old[0], "new": new[0]}


def size_of(site: Path) -> int:
    return int((site / "log" / "checkpoint").read_text().split("\n")[1])


def drop_consistency(size: int) -> Callable[[Path], None]:
    def mutate(root: Path) -> None:
        (root / "log" / "consistency" / str(size)).unlink()

    return mutate


def garble_consistency(size: int) -> Callable[[Path], None]:
    def mutate(root: Path) -> None:
        path = root / "log" / "consistency" / str(size)
        lines = path.read_text().splitlines()
        raw = bytearray(base64.b64decode(lines[0]))
        raw[0] ^= 1
        lines[0] = base64.b64encode(bytes(raw)).decode()
        path.write_text("\n".join(lines) + "\n")

    return mutate


def truncate_consistency(size: int) -> Callable[[Path], None]:
    def mutate(root: Path) -> None:
        path = root / "log" / "consistency" / str(size)
        path.write_bytes(path.read_bytes()[:20])

    return mutate


@pytest.mark.parametrize("damage", [drop_consistency, garble_consistency, truncate_consistency])
def test_a_withheld_or_garbled_consistency_file_is_no_fork(
    context: Any,
    grown: dict[str, Any],
    serve: Callable[[Path], Served],
    damage: Callable[[int], Callable[[Path], None]],
) -> None:
    served = serve(grown["v1"])
    page = new_page(context)
    verify_dream(page, dream_url(served, grown["old"]))  # remembers size 3
    served.swap(grown["v2"], damage(size_of(grown["v1"])))
    panel = verify_dream(page, dream_url(served, grown["new"]))
    assert panel.get_attribute("data-verify-status") == "ok", panel.inner_text()
    assert panel.get_attribute("data-history") == "unchecked"
    history = panel.locator('[data-part="history"]').inner_text()
    assert "rewrote" not in history and "Could not check" in history
    assert "try again" in history
    served.swap(grown["v2"])  # the file is back: the next visit proves growth
    panel = verify_dream(page, dream_url(served, grown["new"]))
    assert panel.get_attribute("data-history") == "unchanged"


def test_a_stale_smaller_checkpoint_is_no_fork(
    context: Any, grown: dict[str, Any], serve: Callable[[Path], Served]
) -> None:
    served = serve(grown["v2"])
    page = new_page(context)
    verify_dream(page, dream_url(served, grown["old"]))  # remembers size 6
    served.swap(grown["v1"])  # a cache serves the older site
    panel = verify_dream(page, dream_url(served, grown["old"]))
    assert panel.get_attribute("data-history") == "unchecked", panel.inner_text()
    text = panel.locator('[data-part="history"]').inner_text()
    assert "rewrote" not in text and "older" in text
    seen = [v for k, v in local_storage(page).items() if "seen" in k]
    assert [s["checkpoint"] for s in seen] == [(grown["v2"] / "log/checkpoint").read_text()]


def test_a_remembered_checkpoint_nobody_signed_makes_no_verdict(
    context: Any, grown: dict[str, Any], serve: Callable[[Path], Served]
) -> None:
    """A checkpoint written into storage (by any script of the web origin) with the
    current size and another root is no evidence: its signature does not verify."""
    served = serve(grown["v2"])
    page = new_page(context)
    verify_dream(page, dream_url(served, grown["new"]))
    (key,) = [k for k in local_storage(page) if "seen" in k]
    note_text = (grown["v2"] / "log/checkpoint").read_text()
    lines = note_text.split("\n")
    raw = bytearray(base64.b64decode(lines[2]))
    raw[0] ^= 1
    lines[2] = base64.b64encode(bytes(raw)).decode()
    page.evaluate(
        "([k, c]) => localStorage.setItem(k, JSON.stringify({checkpoint: c, seen: '2024-01-01'}))",
        [key, "\n".join(lines)],
    )
    panel = verify_dream(page, dream_url(served, grown["new"]))
    assert panel.get_attribute("data-history") != "rewritten", panel.inner_text()


# --- 13. linear parsers, bounded fetches ---------------------------------------------------------


def test_a_megabyte_of_newlines_dropped_is_classified_at_once(
    context: Any, edit_page_ctx: tuple[Any, Served]
) -> None:
    """classify ran /^\\s*(?:log|…)/m over the file: at every line start \\s* ran to
    the end, so n newlines cost n²/2 steps (160k: 18.7 s; a megabyte: minutes)."""
    _, served = edit_page_ctx
    page = new_page(context)
    page.goto(served.url + "verify/")
    started = time.monotonic()
    page.evaluate(
        """() => {
          const dt = new DataTransfer();
          dt.items.add(new File([new Uint8Array(1 << 20).fill(10)], "newlines"));
          dt.items.add(new File([new Uint8Array(3 << 20).fill(10)], "big"));
          const zone = document.querySelector('[data-part="dropzone"]');
          const init = {dataTransfer: dt, bubbles: true, cancelable: true};
          zone.dispatchEvent(new DragEvent("drop", init));
        }"""
    )
    page.locator('[data-part="dropped"]').filter(has_text="dropped").wait_for(timeout=8000)
    assert time.monotonic() - started < 8
    text = page.locator('[data-part="dropped"]').inner_text()
    assert "big" in text and "too large" in text
    # The parser alone, timed in the page: linear, so a megabyte takes milliseconds.
    ms = page.evaluate(
        """async () => {
          const v = await import(new URL("../static/verify.js", location.href).href);
          const inputs = [new Uint8Array(1 << 20).fill(10),
                          new Uint8Array(1 << 20).fill(32),
                          new TextEncoder().encode("  \\n".repeat(300000) + "x")];
          const t = performance.now();
          for (const bytes of inputs) v.classify(bytes, "dropped");
          return performance.now() - t;
        }"""
    )
    assert ms < 1000, ms


def test_a_fetch_that_never_answers_ends_at_its_deadline(
    context: Any, standard_pool: Pool, edit_page_ctx: tuple[Any, Served]
) -> None:
    _, served = edit_page_ctx
    served.swap(standard_pool.site)
    page = new_page(context)
    page.route("**/record.json", lambda route: None)  # never answered
    page.goto(dream_url(served, standard_pool.ids[0]))
    started = time.monotonic()
    page.evaluate("() => { window.dreampoolVerify(undefined, {deadlineMs: 800}); }")
    page.wait_for_function(DONE, timeout=10000)
    assert time.monotonic() - started < 5
    panel = page.locator("section.verify[data-dream-id]")
    assert panel.get_attribute("data-verify-status") == "incomplete", panel.inner_text()
    outcome = panel.locator('[data-part="outcome"]').inner_text()
    assert "record.json" in outcome and "try again" in outcome


def test_a_fetch_past_its_size_cap_is_cut(
    context: Any, standard_pool: Pool, edit_page_ctx: tuple[Any, Served]
) -> None:
    _, served = edit_page_ctx
    served.swap(standard_pool.site)
    page = new_page(context)
    huge = b"{" + b" " * (8 << 20)
    page.route(
        "**/log/checkpoint",
        lambda route: route.fulfill(status=200, body=huge, content_type="text/plain"),
    )
    panel = verify_by_hook(page, dream_url(served, standard_pool.ids[0]))
    assert panel.get_attribute("data-verify-status") == "incomplete", panel.inner_text()
    outcome = panel.locator('[data-part="outcome"]').inner_text()
    assert "log/checkpoint" in outcome and "larger than" in outcome
    assert steps_of(panel) == [] or all(ok for _, ok in steps_of(panel))
    assert json.dumps(local_storage(page))  # storage still readable
