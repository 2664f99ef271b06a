"""Pages that stay put: a build after one new dream rewrites a bounded set of
files, the same whatever the pool's size (builder.site.render, "Pages that stay
put"; builder.site.feeds, "Shards stay put").

Each test builds a pool, builds it again after one new dream, and compares the
two generations of the site (``site`` is a symlink to one of them) by the
digest of every file.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest

from builder import build as buildmod
from builder.formats.note import parse_private_key
from builder.site import feeds, render
from tests.pools import make_pool

# Small enough that a few dozen dreams paginate and shard; PAGE and SHARD
# divide STEP, so pools N and N + STEP put the new dream at the same place of
# its page and of its shard.
PAGE = 5
SHARD = 8
STEP = 80


@pytest.fixture(autouse=True)
def _small_pages(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(render, "TAG_PAGE_SIZE", PAGE)
    monkeypatch.setattr(render, "ARCHIVE_PAGE_SIZE", PAGE)
    monkeypatch.setattr(render, "DIARY_PAGE_SIZE", PAGE)
    monkeypatch.setattr(render, "SEARCH_SHARD_LEAVES", SHARD)
    monkeypatch.setattr(feeds, "SHARD_LEAVES", SHARD)
    # One clock for every build: which files a build changes must not depend
    # on whether two builds fell in the same second (a log date is in seconds).
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1780000000")


def digests(site: Path) -> dict[str, str]:
    """Every file of the live generation ``site`` points to, by its SHA-256."""
    live = site.resolve()
    return {
        str(p.relative_to(live)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(live.rglob("*"))
        if p.is_file()
    }


def plus_one(root: Path, n: int) -> tuple[dict[str, str], dict[str, str], list[str]]:
    """The site of a pool of ``n`` dreams by one author (log leaves 1..n, tags
    python and packaging), that site after one more dream, and the paths whose
    bytes the second build changed or made."""
    tp = make_pool(root)
    signer = parse_private_key(tp.log_key)
    tp.add("ada", n)
    site = root / "site"
    buildmod.build(tp.content, site, signer=signer)
    before = digests(site)
    tp.add("ada", 1)
    buildmod.build(tp.content, site, signer=signer)
    after = digests(site)
    assert set(before) <= set(after)  # nothing removed
    return before, after, sorted(p for p in after if before.get(p) != after[p])


def shape(path: str) -> str:
    """A path with dream ids and numbers made generic, to compare two pools."""
    return re.sub(r"\d+", "<n>", re.sub(r"\b[0-9a-f]{16}\b", "<id>", path))


def test_one_new_dream_rewrites_the_same_files_whatever_the_pool_size(tmp_path: Path) -> None:
    small, large = 42, 42 + STEP
    _, _, changed_small = plus_one(tmp_path / "small", small)
    _, after, changed_large = plus_one(tmp_path / "large", large)
    assert len(changed_small) == len(changed_large), (changed_small, changed_large)
    assert sorted(map(shape, changed_small)) == sorted(map(shape, changed_large))
    # The numbered pages of a tag: only the open one changes.
    pages = [p for p in changed_large if re.fullmatch(r"tags/python/\d+/index\.html", p)]
    newest = render.archive_page_of(large, PAGE)  # the new dream is the tag's (large+1)-th
    assert pages == [render.tag_page_path("python", newest)]
    assert render.tag_page_path("python", newest - 1) in after
    # So do an author's diary pages.
    diary = [p for p in changed_large if re.fullmatch(r"authors/ada/\d+/index\.html", p)]
    assert diary == [f"authors/ada/{newest}/index.html"]
    # And the archive's; of its sitemaps, only the one listing the open page may
    # change (with the open page's lastmod: not here, one clock for both builds).
    archive = [p for p in changed_large if re.fullmatch(r"archive/\d+/index\.html", p)]
    assert archive == [render.archive_page_path(newest)]
    maps = {p for p in changed_large if p.startswith("sitemap-archive-")}
    assert maps <= {f"sitemap-archive-{(newest - 1) // SHARD}.xml"}


def test_a_full_page_and_a_full_shard_keep_their_bytes(tmp_path: Path) -> None:
    before, after, changed = plus_one(tmp_path, 42)
    # Tag pages 1..8 hold the tag's 40 oldest dreams; page 9 is open.
    full = [render.tag_page_path("python", k) for k in range(1, 9)]
    full += [f"authors/ada/{k}/index.html" for k in range(1, 9)]
    full += [render.archive_page_path(k) for k in range(1, 9)]
    full += ["sitemap-archive-0.xml"]  # archive pages 1..8, SHARD a sitemap
    # Leaves 0..39 are in shards 0..4; the new dream is leaf 43, in shard 5.
    full += [f"api/dreams/{k}.json" for k in range(5)]
    full += [f"sitemap-dreams-{k}.xml" for k in range(5)]
    full += [f"search/shard-{k}.json" for k in range(5)]
    for path in full:
        assert path in before and after[path] == before[path], path
    assert not set(full) & set(changed)
    for path in (
        render.tag_page_path("python", 9),
        "tags/python/index.html",
        "authors/ada/9/index.html",
        "authors/ada/index.html",
        render.archive_page_path(9),
        "archive/index.html",
        "api/dreams/5.json",
        "api/dreams.json",
        "sitemap-dreams-5.xml",  # (the index changes only with a new shard or date)
        "search/shard-5.json",
    ):
        assert path in changed, path


def test_a_full_tag_page_links_on_by_number_and_knows_no_total(tmp_path: Path) -> None:
    tp = make_pool(tmp_path)
    tp.add("ada", 2 * PAGE)
    site = tmp_path / "site"
    buildmod.build(tp.content, site, signer=parse_private_key(tp.log_key))
    # 10 dreams, 5 a page: two full pages and the open, empty page 3.
    first = (site / "tags/python/1/index.html").read_text(encoding="utf-8")
    second = (site / "tags/python/2/index.html").read_text(encoding="utf-8")
    opened = (site / "tags/python/3/index.html").read_text(encoding="utf-8")
    entry = (site / "tags/python/index.html").read_text(encoding="utf-8")
    assert 'rel="next" href="../../../tags/python/2/"' in first and 'rel="prev"' not in first
    assert 'rel="prev" href="../../../tags/python/1/"' in second
    assert 'rel="next" href="../../../tags/python/3/"' in second
    assert "No dream on this page yet" in opened and 'rel="next"' not in opened
    for page in (first, second):
        assert "10 dreams" not in page and " of 3" not in page
        assert page.count('<article class="card') == PAGE
    # The entry page shows the newest PAGE dreams and links every page.
    assert "10 dreams" in entry and entry.count('<article class="card') == PAGE
    assert 'rel="next" href="../../tags/python/1/"' in entry
    for k in (1, 2, 3):
        assert f'href="../../tags/python/{k}/"' in entry
    # A diary pages its timeline the same way; its keys are on its first page only.
    diary = (site / "authors/ada/2/index.html").read_text(encoding="utf-8")
    assert 'rel="next" href="../../../authors/ada/3/"' in diary and "10 dreams" not in diary
    assert diary.count('<li class="tl-item') == PAGE and "Key ID" not in diary
    whole = (site / "authors/ada/index.html").read_text(encoding="utf-8")
    assert "10 dreams" in whole and whole.count('<li class="tl-item') == PAGE
    assert "Key ID" in whole and 'href="../../authors/ada/3/"' in whole
    # Page 1 holds the oldest dreams (log order), newest first on the page.
    api = json.loads((site / "api" / "dreams" / "0.json").read_bytes())["dreams"]
    oldest = [d["id"] for d in sorted(api, key=lambda d: d["index"])[:PAGE]]
    card = r'<h2 class="card-title"><a href="\.\./\.\./\.\./dreams/([0-9a-f]{16})/"'
    cards = re.findall(card, first)
    assert cards == oldest[::-1]


def test_the_api_index_lists_shards_that_hold_every_dream_in_log_order(tmp_path: Path) -> None:
    tp = make_pool(tmp_path)
    tp.add("ada", 20)
    site = tmp_path / "site"
    buildmod.build(tp.content, site, signer=parse_private_key(tp.log_key))
    index = json.loads((site / "api" / "dreams.json").read_bytes())
    assert index["format"] == "dreampool-api/v2" and index["shard_leaves"] == SHARD
    assert index["dreams"] == 20
    got = []
    for shard in index["shards"]:
        data = json.loads((site / "api" / shard["path"]).read_bytes())
        first, end = shard["leaves"]
        assert data["leaves"] == [first, end] and len(data["dreams"]) == shard["dreams"]
        assert all(first <= d["index"] < end for d in data["dreams"])
        got += data["dreams"]
    indexes = [d["index"] for d in got]
    assert indexes == sorted(indexes) and len(set(d["id"] for d in got)) == 20
