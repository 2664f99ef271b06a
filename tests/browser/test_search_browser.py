"""Search in a real browser, over an index split into shards (builder.site.render).

search.js reads search/index.json, then each shard it lists, newest first, and
searches what has arrived while the rest loads. These tests hold back one shard
to see that state, then let it through: the final results are those of one
whole index (title matches first, then newest first).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from builder.site import render
from tests.browser.conftest import Pool, Served, new_page, new_pool, own_home
from tests.siteapi import site_api_dreams


@pytest.fixture(scope="module")
def sharded(
    tmp_path_factory: pytest.TempPathFactory, home_dir: Path
) -> tuple[Pool, dict[str, str]]:
    """Eight dreams in shards of three log leaves; "lighthouse" is in the title of
    the oldest dream and in the summary of the newest."""
    root = tmp_path_factory.mktemp("sharded")
    with own_home(home_dir), pytest.MonkeyPatch.context() as mp:
        mp.setattr(render, "SEARCH_SHARD_LEAVES", 3)
        pool = new_pool(root)
        # One build each, so the log order (and with it the shards) is old, fillers,
        # new whatever the fillers' ids: one build admits its dreams in id order, and
        # the fillers' titles (so ids) depend on how many pools the session made first.
        (old,) = pool.fixture.add("ada", 1, title="The lighthouse keeper")
        pool.build(root / "site")
        pool.fixture.add("bob", 6, tags=["filler"])
        pool.build(root / "site")
        (new,) = pool.fixture.add("ada", 1, title="Harbour notes", summary="A lighthouse at dusk.")
        pool.build(root / "site")
    return pool, {"old": old, "new": new}


def shard_of(site: Path, dream_id: str) -> str:
    index = json.loads((site / "search" / "index.json").read_bytes())
    for shard in index["shards"]:
        rows = json.loads((site / "search" / shard["path"]).read_bytes())["dreams"]
        if any(r["id"] == dream_id for r in rows):
            return str(shard["path"])
    raise AssertionError(f"{dream_id} is in no shard")


def result_ids(page: Any) -> list[str]:
    hrefs = page.locator("#search-results li h2 a").evaluate_all(
        "links => links.map(a => a.getAttribute('href'))"
    )
    return [h.rstrip("/").rsplit("/", 1)[-1] for h in hrefs]


def test_results_come_while_older_shards_load_and_end_as_one_index(
    browser: Any, serve: Callable[[Path], Served], sharded: tuple[Pool, dict[str, str]]
) -> None:
    pool, ids = sharded
    index = json.loads((pool.site / "search" / "index.json").read_bytes())
    assert len(index["shards"]) >= 3 and index["dreams"] == 8
    held_path = shard_of(pool.site, ids["old"])
    assert held_path != index["shards"][0]["path"]  # not the newest shard
    served = serve(pool.site)
    context = browser.new_context()
    try:
        page = new_page(context)
        held: list[Any] = []

        def hold(route: Any) -> None:  # answered below, once the newer shards are searched
            held.append(route)

        page.route(f"**/search/{held_path}", hold)
        page.goto(f"{served.url}search/?q=Lighthouse")
        status = page.locator("#search-status")
        page.wait_for_function("() => document.querySelectorAll('#search-results li').length")
        assert result_ids(page) == [ids["new"]]
        assert "loading" in status.inner_text() and "of 8 dreams" in status.inner_text()
        assert page.locator("#q").input_value() == "Lighthouse"
        # The older shards are fetched one after another: on a loaded machine the
        # held one may not be asked for yet when the first results show.
        for _ in range(200):
            if held:
                break
            page.wait_for_timeout(50)
        assert len(held) == 1
        assert "loading" in status.inner_text()
        held[0].continue_()
        page.wait_for_function(
            "() => !document.getElementById('search-status').textContent.includes('loading')"
        )
        # The title match ranks first though it is older, as over one whole index.
        assert result_ids(page) == [ids["old"], ids["new"]]
        assert status.inner_text() == "2 matching dreams."
        page.fill("#q", "")
        assert status.inner_text() == "8 dreams indexed. Type to search."
        assert page.dialogs == [] and page.evaluate("() => window.__csp") == []
    finally:
        context.close()


def test_a_missing_shard_is_skipped_and_reported_for_as_long_as_the_page_lives(
    browser: Any, serve: Callable[[Path], Served], sharded: tuple[Pool, dict[str, str]]
) -> None:
    """A shard is gone: the shards after it still load, and every status after
    that, as the query changes, says the results leave part of the index out,
    and which file."""
    pool, ids = sharded
    shards = [
        s["path"] for s in json.loads((pool.site / "search" / "index.json").read_bytes())["shards"]
    ]
    holding = {shard_of(pool.site, ids["old"]), shard_of(pool.site, ids["new"])}
    # A shard without either result, loaded before one that holds a result.
    last = max(shards.index(p) for p in holding)
    gone = next(p for p in shards[:last] if p not in holding)
    served = serve(pool.site)
    (served.root / "search" / gone).unlink()
    context = browser.new_context()
    try:
        page = new_page(context)
        page.goto(f"{served.url}search/?q=lighthouse")
        status = page.locator("#search-status")
        rows = len(json.loads((pool.site / "search" / gone).read_bytes())["dreams"])
        searched = f"searched {8 - rows} of 8 dreams."
        page.wait_for_function(  # every shard tried: the status says what was searched
            "s => document.getElementById('search-status').textContent.endsWith(s)", arg=searched
        )
        assert result_ids(page) == [ids["old"], ids["new"]]  # the oldest shard loaded too
        for query in ("lighthouse", "harbour", ""):
            page.fill("#q", query)
            text = status.inner_text()
            assert "could not be loaded" in text and gone in text and searched in text, text
        assert page.locator("#q").is_enabled()
    finally:
        context.close()


@pytest.fixture(scope="module")
def written(
    tmp_path_factory: pytest.TempPathFactory, home_dir: Path
) -> tuple[Pool, dict[str, str]]:
    """Dreams whose text folding would change: capitals, Markdown, full-width
    Chinese punctuation, full-width Latin, a decomposed accent."""
    root = tmp_path_factory.mktemp("written")
    with own_home(home_dir):
        pool = new_pool(root)
        (en,) = pool.fixture.add(
            "ada",
            1,
            title="Parser pinning",
            summary="Upgrading the Parser **silently** changed OUTPUT, see `pip freeze`.",
        )
        (zh,) = pool.fixture.add(
            "ada",
            1,
            title="慢查询",
            summary="慢查询的笔记。",
            entries=[
                {
                    "text": "复合索引的列顺序：先等值，再范围。用 ＥＸＰＬＡＩＮ 看计划。",
                    "type": "lesson",
                    "confidence": "confirmed",
                },
                {
                    "text": "Cafe\u0301 menus changed too.",
                    "type": "fact",
                    "confidence": "confirmed",
                },
            ],
        )
        pool.build(root / "site")
    return pool, {"en": en, "zh": zh}


def snippet_of(page: Any, query: str) -> tuple[str, list[str], str]:
    """(the snippet's text, the marked texts, its HTML) for the only result of query."""
    page.fill("#q", query)
    page.wait_for_function(
        "() => document.getElementById('search-status').textContent.startsWith('1 matching')"
        " && document.querySelectorAll('#search-results > li').length === 1",
    )
    snip = page.locator("#search-results > li .snippet")
    marks = snip.locator("mark").all_inner_texts()
    return snip.inner_text(), marks, snip.inner_html()


def test_a_snippet_shows_the_text_as_written_with_the_match_marked(
    browser: Any, serve: Callable[[Path], Served], written: tuple[Pool, dict[str, str]]
) -> None:
    """Issue 18 (regression): snippets showed the folded index text: lower case,
    full-width punctuation made ASCII, Markdown's ** left in. They now show the
    dream's own text; the match, found case- and width-insensitively, is a
    <mark> around the characters the author wrote."""
    pool, _ = written
    served = serve(pool.site)
    context = browser.new_context()
    try:
        page = new_page(context)
        page.goto(f"{served.url}search/")
        page.wait_for_function("() => !document.getElementById('q').disabled")

        text, marks, html = snippet_of(page, "silently changed output")
        assert text.startswith(
            "Upgrading the Parser silently changed OUTPUT, see pip freeze. · Minor"
        )
        assert marks == ["silently"]
        assert "**" not in text and html.count("<mark>") == 1

        text, marks, _ = snippet_of(page, "output")
        assert marks == ["OUTPUT"]

        text, marks, _ = snippet_of(page, "先等值")
        assert "复合索引的列顺序：先等值，再范围。用 ＥＸＰＬＡＩＮ 看计划。" in text
        assert marks == ["先等值"]

        _, marks, _ = snippet_of(page, "explain")  # full-width in the text, ASCII asked
        assert marks == ["ＥＸＰＬＡＩＮ"]

        _, marks, _ = snippet_of(page, "café")  # precomposed asked, decomposed written
        assert marks == ["Cafe\u0301"]

        # Text stays text: the snippet holds only text nodes and the one mark.
        assert page.locator("#search-results .snippet *").count() == 1
        assert page.dialogs == [] and page.evaluate("() => window.__csp") == []
    finally:
        context.close()


def test_every_result_shows_its_tier(
    browser: Any, serve: Callable[[Path], Served], sample_site: Path
) -> None:
    """A guest's dream among a maintainer's in the results (as on the home and
    tag pages, where each card has its badge) showed no tier at all: a result
    now carries its tier badge, from the key directory via the index, and a
    guest's is marked as on a card (THREATS.md T71)."""
    api = site_api_dreams(sample_site)
    tiers = {d["id"]: d["tier"] for d in api}
    assert {"maintainer", "member", "guest"} <= set(tiers.values())
    served = serve(sample_site)
    page = new_page(browser)
    try:
        page.goto(f"{served.url}search/?q=the")
        page.locator("#search-results li").first.wait_for()
        shown = page.locator("#search-results li.card").evaluate_all(
            """items => items.map(li => [
                li.querySelector('h2 a').getAttribute('href'),
                li.querySelector('.meta .tier') && li.querySelector('.meta .tier').textContent,
                li.querySelector('.meta .tier') && li.querySelector('.meta .tier').className,
                li.classList.contains('card-guest')])"""
        )
    finally:
        page.close()
    seen = set()
    for href, text, cls, guest in shown:
        tier = tiers[href.rstrip("/").rsplit("/", 1)[-1]]
        assert (text, cls, guest) == (tier, f"tier tier-{tier}", tier == "guest"), href
        seen.add(tier)
    assert seen == {"maintainer", "member", "guest"}, shown
