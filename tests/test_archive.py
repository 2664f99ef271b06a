"""The archive (archive/, archive/<n>/: builder.site.render._archive_pages) and the
pool by month on the log page (builder.site.timeline).

The archive lists every dream that is not erased exactly once, newest first
across its pages, and is paged as a tag is (docs/protocol.md §8): a build after
one new dream changes the entry page and the open numbered page, never a full
one, and a cold build of the same pool gives the same bytes.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest

from builder import build as buildmod
from builder.content import pool
from builder.formats.note import parse_private_key
from builder.log import erase, logbuild
from builder.site import feeds, render, timeline, writer
from builder.site.model import CheckpointView, DreamView, SiteModel, build_model
from tests.conftest import REPO
from tests.pools import PoolFixture, make_pool

PAGE = 5
_CARD = re.compile(r'<h[23] class="card-title"><a href="(?:\.\./)+dreams/([0-9a-f]{16})/"')


@pytest.fixture(autouse=True)
def _clock(monkeypatch: pytest.MonkeyPatch) -> None:
    # One clock for every build (a log date is in seconds): see test_append_stable.
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1780000000")


def listed(html: Path) -> list[str]:
    """The dreams a page shows as cards, in order."""
    return _CARD.findall(html.read_text(encoding="utf-8"))


def archive_files(site: Path) -> dict[str, bytes]:
    live = site.resolve()
    return {
        str(p.relative_to(live)): p.read_bytes()
        for p in sorted((live / "archive").rglob("*"))
        if p.is_file()
    }


def numbered(site: Path) -> list[Path]:
    """archive/<n>/index.html, n ascending (page 1 holds the oldest dreams)."""
    pages = sorted((site / "archive").glob("*/index.html"), key=lambda p: int(p.parent.name))
    assert [int(p.parent.name) for p in pages] == list(range(1, len(pages) + 1))
    return pages


def model_of(content: Path) -> SiteModel:
    config = pool.load_config(content)
    directory, _ = pool.load_keys(content)
    scanned, _ = pool.scan_dreams(content, directory)
    log = logbuild.update(content, scanned, origin=config.origin, signer=None)
    return build_model(log, directory, config, base_url="/")


def check_archive(site: Path, content: Path, erased: set[str]) -> list[str]:
    """Every dream of the pool but the erased ones, once, newest first, across
    the numbered pages (or on the entry page when there are none); returns them."""
    model = model_of(content)
    expected = [d.id for d in model.dreams]  # newest first (log index descending)
    kept = {p.name.removesuffix(".json") for p in (content / "dreams").glob("*.json")}
    assert set(expected) == kept - erased and erased.isdisjoint(expected)
    entry = listed(site / "archive" / "index.html")
    pages = numbered(site)
    if pages:
        shown = [i for page in reversed(pages) for i in listed(page)]
        assert entry == expected[: render.ARCHIVE_PAGE_SIZE]
    else:
        shown = entry
    assert shown == expected
    assert len(set(shown)) == len(shown)
    return shown


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("sample")
    shutil.copytree(REPO / "content", root / "content")
    yield root / "content"


def test_the_sample_archive_lists_every_dream_once_newest_first(
    sample: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    erased = {p.stem for p in (sample / "erasures").glob("*.json")}
    assert erased  # the sample pool has an erasure
    site = tmp_path / "whole"
    buildmod.build(sample, site, signer=None)
    assert not numbered(site)  # 45 dreams fit the entry page
    check_archive(site, sample, erased)
    # Paged: 45 dreams, 7 a page, make pages 1..7 (page 7 holds 3).
    monkeypatch.setattr(render, "ARCHIVE_PAGE_SIZE", 7)
    paged = tmp_path / "paged"
    buildmod.build(sample, paged, signer=None)
    shown = check_archive(paged, sample, erased)
    assert len(numbered(paged)) == 7 and len(listed(paged / "archive/7/index.html")) == 3
    assert len(shown) == 45


def _published(root: Path, n: int) -> tuple[Path, Path, str]:
    """A pool of n dreams by two authors, one of them erased; its content,
    site and log key."""
    tp = make_pool(root)
    ids = tp.add("ada", n - 3)
    ids += tp.add("bob", 2, tags=["testing"])
    ids += tp.add("ada", 1, consent={"share": True, "derivatives": False, "anonymize": True})
    site = root / "site"
    buildmod.build(tp.content, site, signer=parse_private_key(tp.log_key))
    for p in root.glob("in-*.json"):
        p.unlink()  # the submitted copies, which erase would find as residue
    erase.erase(tp.content, ids[1], "author-request")
    buildmod.build(tp.content, site, signer=parse_private_key(tp.log_key))
    return tp.content, site, tp.log_key


def test_a_generated_pool_with_an_erasure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(render, "ARCHIVE_PAGE_SIZE", PAGE)
    content, site, _ = _published(tmp_path, 13)
    erased = {p.stem for p in (content / "erasures").glob("*.json")}
    assert len(erased) == 1
    shown = check_archive(site, content, erased)
    # 12 dreams, 5 a page: two full pages and page 3 with the newest two.
    assert len(shown) == 12 and len(numbered(site)) == 3
    assert len(listed(site / "archive/3/index.html")) == 2
    entry = (site / "archive/index.html").read_text(encoding="utf-8")
    assert "12 dreams" in entry
    for k in (1, 2, 3):
        assert f'href="../archive/{k}/"' in entry
    first = (site / "archive/1/index.html").read_text(encoding="utf-8")
    assert 'rel="next" href="../../archive/2/"' in first and "12 dreams" not in first
    # The sitemap lists the numbered pages.
    sitemap = (site / "sitemap-archive-0.xml").read_text(encoding="utf-8")
    assert [f"archive/{k}/" for k in (1, 2, 3)] == re.findall(r"<loc>([^<]+)</loc>", sitemap)
    assert "<loc>archive/</loc>" in (site / "sitemap-pages-1.xml").read_text(encoding="utf-8")
    # The nav and the home page's "N more" line link the archive.
    home = (site / "index.html").read_text(encoding="utf-8")
    assert '<a href="./archive/">Archive</a>' in home
    assert (site / "log/index.html").read_text(encoding="utf-8").count('href="../archive/"') == 1


def test_the_home_page_links_the_archive_for_the_dreams_it_does_not_show(
    sample: Path, tmp_path: Path
) -> None:
    site = tmp_path / "site"
    buildmod.build(sample, site, signer=None)
    home = (site / "index.html").read_text(encoding="utf-8")
    more = re.search(r'<p class="more">(.*?)</p>', home, re.S)
    assert more is not None and more.group(1).startswith(f"{45 - render.LATEST} more: ")
    assert '<a href="./archive/">the archive</a>' in more.group(1)


def test_one_new_dream_changes_only_the_newest_archive_page(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(render, "ARCHIVE_PAGE_SIZE", PAGE)
    monkeypatch.setattr(feeds, "SHARD_LEAVES", 2)  # archive pages 1-2, 3-4: two sitemaps
    content, site, log_key = _published(tmp_path, 13)
    before = archive_files(site)
    maps = {k: (site / f"sitemap-archive-{k}.xml").read_bytes() for k in (0, 1)}
    PoolFixture(content, log_key, "").add("bob", 1)
    added: list[str] = []
    original = writer.SiteWriter.record

    # Every file rendered, by this process or a forked worker, is recorded here.
    def spy(self: writer.SiteWriter, rel: str, entry: writer.Entry, changed: bool) -> None:
        added.append(rel)
        original(self, rel, entry, changed)

    monkeypatch.setattr(writer.SiteWriter, "record", spy)
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1780086400")  # signed a day later
    buildmod.build(content, site, signer=parse_private_key(log_key))
    after = archive_files(site)
    changed = {p for p in after if before.get(p) != after[p]}
    # 13 dreams now: page 3 (open) gains the new one; pages 1 and 2 are full.
    assert set(before) <= set(after)
    assert changed == {"archive/index.html", "archive/3/index.html"}
    assert [p for p in added if p.startswith("archive/")] == [
        "archive/index.html",
        "archive/3/index.html",
    ]
    assert (site / "sitemap-archive-0.xml").read_bytes() == maps[0]  # pages 1, 2
    assert (site / "sitemap-archive-1.xml").read_bytes() != maps[1]  # page 3's lastmod: a day later
    # An incremental build and a cold one give the same bytes.
    cold = tmp_path / "cold" / "site"
    buildmod.build(content, cold, signer=None)
    assert archive_files(cold) == after
    for path in ("log/index.html", "sitemap.xml", "sitemap-archive-1.xml", "index.html"):
        assert (cold / path).read_bytes() == (site / path).read_bytes(), path


# --- statistics --------------------------------------------------------------------------


def _dream(index: int, date: str, author: str | None) -> DreamView:
    return DreamView(
        id=hashlib.sha256(str(index).encode()).hexdigest()[:16],
        index=index,
        date=date,
        title=f"dream {index}",
        text={"entries": []},
        entry_types=(),
        tags=(),
        author=author,
        author_slug=author,
        key_id=None,
        tier="member",
        anonymized=author is None,
        derivatives=False,
        generation=None,
        parent_id=None,
        parent_in_pool=False,
        children=(),
    )


def _model(dreams: list[DreamView], history: list[tuple[int, str]]) -> SiteModel:
    views = tuple(CheckpointView(size, "", date, "") for size, date in history)
    newest_first = tuple(sorted(dreams, key=lambda d: d.index, reverse=True))
    return SiteModel(
        title="t",
        origin="o",
        base_url="/",
        k=2,
        dreams=newest_first,
        by_id={d.id: d for d in dreams},
        authors=(),
        tags=(),
        erased=(),
        checkpoint=views[-1] if views else None,
        history=views,
        policy="",
        vkey="",
        heads={},
    )


def _small_pool() -> SiteModel:
    # Leaves 0 and 1 are keys; a dream's date is its first checkpoint's time.
    # Checkpoints: size 4 in 2025-11, sizes 6 and 7 in 2026-01, size 9 in 2026-02;
    # nothing is signed in 2025-12. Leaf 5 (a dream by carol) was erased: the
    # log counts it, the dreams do not. ada's second dream and an anonymized one
    # add no author.
    history = [
        (4, "2025-11-03T10:00:00Z"),
        (6, "2026-01-05T10:00:00Z"),
        (7, "2026-01-30T23:59:59Z"),
        (9, "2026-02-01T00:00:00Z"),
    ]
    dreams = [
        _dream(2, "2025-11-03T10:00:00Z", "ada"),
        _dream(3, "2025-11-03T10:00:00Z", "bob"),
        _dream(4, "2026-01-05T10:00:00Z", None),
        _dream(6, "2026-01-30T23:59:59Z", "ada"),
        _dream(7, "2026-02-01T00:00:00Z", "dan"),
        _dream(8, "2026-02-01T00:00:00Z", "bob"),
    ]
    return _model(dreams, history)


def test_the_pool_by_month_on_a_small_fixture() -> None:
    rows = timeline.months(_small_pool())
    M = timeline.Month
    assert rows == [
        M("2025-11", dreams=2, total_dreams=2, authors=2, total_authors=2, log_size=4),
        M("2025-12", dreams=0, total_dreams=2, authors=0, total_authors=2, log_size=4),
        M("2026-01", dreams=2, total_dreams=4, authors=0, total_authors=2, log_size=7),
        M("2026-02", dreams=2, total_dreams=6, authors=1, total_authors=3, log_size=9),
    ]
    assert timeline.months(_model([], [])) == []


def test_the_log_page_charts_are_column_charts_of_the_totals() -> None:
    """The log page draws each total with the site's one column chart
    (builder.site.charts.columns_svg): named, described month by month, a
    bar a month in proportion to the total."""
    rows, drawn = timeline.charts(_small_pool())
    assert [caption for caption, _ in drawn] == [
        "Dreams in the pool",
        "Authors with a dream",
        "Log entries",
    ]
    totals = (
        [r.total_dreams for r in rows],
        [r.total_authors for r in rows],
        [r.log_size for r in rows],
    )
    assert totals == ([2, 2, 4, 6], [2, 2, 2, 3], [4, 4, 7, 9])
    svg_ns = "{http://www.w3.org/2000/svg}"
    for (caption, svg), values, unit in zip(
        drawn, totals, ("dreams", "authors", "log entries"), strict=True
    ):
        root = ET.fromstring(str(svg))
        assert root.get("role") == "img" and "chart-columns" in (root.get("class") or "")
        assert root.findtext(svg_ns + "title") == f"{caption}, by month"
        months = [r.month for r in rows]
        says = "; ".join(f"{m}: {v} {unit}" for m, v in zip(months, values, strict=True))
        assert root.findtext(svg_ns + "desc") == says
        bars = [int(r.get("height") or 0) for r in root.iter(svg_ns + "rect")]
        plot = 150 - 19 - 21  # columns_svg: height, top and bottom margins
        assert bars == [plot * v // max(values) for v in values]


def test_the_log_page_shows_the_pool_by_month_as_charts_and_a_table(
    sample: Path, tmp_path: Path
) -> None:
    site = tmp_path / "site"
    buildmod.build(sample, site, signer=None)
    html = (site / "log/index.html").read_text(encoding="utf-8")
    assert html.count('<svg xmlns="http://www.w3.org/2000/svg" class="chart chart-columns"') == 3
    assert html.count('role="img"') == 3
    # The sample's two checkpoints are both of 2026-11: 45 dreams (one erased), 9
    # named authors, 58 log entries.
    row = re.search(r'<tr><th scope="row"><time datetime="2026-11">.*?</tr>', html)
    assert row is not None
    assert re.findall(r"<td>(\d+)</td>", row.group()) == ["45", "45", "9", "9", "58"]
    model = model_of(sample)
    authors = {d.author for d in model.dreams if d.author is not None}
    assert len(authors) == 9 and len(model.dreams) == 45
    assert model.history[-1].size == 58


def test_an_erasure_changes_the_pages_from_its_own_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/protocol.md §8: the erased dream leaves the count, so every later
    dream moves back by one; the pages before the erased dream's keep their bytes."""
    monkeypatch.setattr(render, "ARCHIVE_PAGE_SIZE", PAGE)
    tp = make_pool(tmp_path)
    tp.add("ada", 12)
    site = tmp_path / "site"
    signer = parse_private_key(tp.log_key)
    buildmod.build(tp.content, site, signer=signer)
    before = archive_files(site)
    second = listed(site / "archive/2/index.html")  # positions 9..5, newest first
    victim = second[-2]  # position 6
    for p in tmp_path.glob("in-*.json"):
        p.unlink()
    erase.erase(tp.content, victim, "author-request")
    buildmod.build(tp.content, site, signer=signer)
    after = archive_files(site)
    changed = {p for p in after if before.get(p) != after[p]}
    assert changed == {"archive/index.html", "archive/2/index.html", "archive/3/index.html"}
    # Page 2 now holds positions 5..9 of the 11: its old 5, 7, 8, 9 and page 3's oldest.
    assert listed(site / "archive/2/index.html")[1:] == [i for i in second if i != victim]
