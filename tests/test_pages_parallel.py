"""List pages rendered by forked workers (builder.site.assemble._write_pages)
are the pages the build's own process renders, byte for byte, and what a
worker finds wrong with the store reaches the build's process.

Each test forces two workers and windows of a few pages, so a pool of a
handful of dreams goes through several forks; the witness is a build of the
same content with every page rendered in process."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from builder import build as buildmod
from builder import parallel
from builder.formats.note import parse_private_key
from builder.site import assemble
from builder.site.writer import SiteWriter
from tests.pools import PoolFixture, make_pool
from tests.test_store_restore import _store, site_files


def _forking(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every window of pages goes to two forked workers, three pages a window;
    returns the sizes of the windows that forked."""
    forked: list[int] = []
    real = parallel.imap_ordered

    def imap(func: Callable[[Any], Any], items: Any, **kw: Any) -> Any:
        if kw.get("min_items") == 1:
            forked.append(len(items))
        return real(func, items, **kw)

    monkeypatch.setattr(assemble, "PAGES_FORK_MIN", 1)
    monkeypatch.setattr(assemble, "PAGE_WINDOW", 3)
    monkeypatch.setattr(parallel, "workers", lambda: 2)
    monkeypatch.setattr(assemble.parallel, "imap_ordered", imap)
    return forked


def _in_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(assemble, "PAGES_FORK_MIN", 10**9)


def _pool(root: Path) -> PoolFixture:
    tp = make_pool(root)
    tp.add("ada", 4, tags=["memory", "tools"])
    tp.add("bob", 3, tags=["memory"])
    tp.add("墨子", 2)
    return tp


def _build(tp: PoolFixture, out: Path) -> buildmod.BuildReport:
    return buildmod.build(tp.content, out, signer=parse_private_key(tp.log_key))


def _witness(tp: PoolFixture, tmp_path: Path, name: str) -> dict[str, bytes]:
    """The site of ``tp`` as it stands, every page rendered in process, cold."""
    with pytest.MonkeyPatch.context() as m:
        _in_process(m)
        out = tmp_path / name / "site"
        out.parent.mkdir()
        buildmod.build(tp.content, out, signer=None)
    return site_files(out)


def test_pages_rendered_by_workers_are_those_rendered_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tp = _pool(tmp_path / "pool")
    forked = _forking(monkeypatch)
    out = tmp_path / "pool" / "site"
    _build(tp, out)
    assert len(forked) > 3 and max(forked) == 3, forked  # several windows, each forked
    assert site_files(out) == _witness(tp, tmp_path, "cold")
    # Then incrementally: one more dream, the changed pages rendered by workers.
    tp.add("ada", 1, tags=["tools"])
    forked.clear()
    _build(tp, out)
    assert forked
    assert site_files(out) == _witness(tp, tmp_path, "after")


def test_damaged_fragments_found_by_workers_are_counted_once_and_repaired(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker that finds a fragment's row damaged renders it again; the
    build's process counts the row once (however many pages and workers read
    it), puts the fragments back in the store, and the next build finds the
    store whole."""
    tp = _pool(tmp_path / "pool")
    out = tmp_path / "pool" / "site"
    _build(tp, out)
    db = sqlite3.connect(_store(out), isolation_level=None)
    rows = db.execute('SELECT k, v FROM "fragments"').fetchall()
    assert len(rows) == 9
    for k, v in rows:
        db.execute(
            'UPDATE "fragments" SET v = ? WHERE k = ?', (v[:20] + bytes([v[20] ^ 1]) + v[21:], k)
        )
    db.close()
    forked = _forking(monkeypatch)
    report = _build(tp, out)
    # The dreams' units are kept: only pages rendered anew (the home page,
    # the feeds: no key) read the fragments back, and those went to workers.
    assert report.rendered == 0 and forked
    assert any("fragments had 9 damaged row(s)" in n for n in report.notes), report.notes
    assert site_files(out) == _witness(tp, tmp_path, "cold")
    again = _build(tp, out)
    assert not any("fragments" in n for n in again.notes), again.notes


def test_prepare_makes_the_folder_workers_will_share(tmp_path: Path) -> None:
    """Two workers storing files in one new folder would race to make it
    (the loser's mkdir fails): the build's process makes it first."""
    out = tmp_path / "site"
    with SiteWriter(out) as w:
        w.prepare("authors/ada/2/index.html", folder=True)
        gen = Path(w._gen)
        assert (gen / "authors" / "ada" / "2").is_dir()
        entry, written = w.store("authors/ada/2/index.html", b"<p>2</p>")
        w.record("authors/ada/2/index.html", entry, written)
    assert (out / "authors" / "ada" / "2" / "index.html").read_bytes() == b"<p>2</p>"
