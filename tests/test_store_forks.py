"""The build store as forked processes find it (review r47): whatever a worker,
a unit's, a list page's, a keyword's, or the patterns' background process,
finds wrong with the store comes back to the build's process
(builder.parallel.report_back, BuildCache.take_report), which notes it once
and applies it: never the worker itself. Each test forks real processes, and
each failed before the fix it names."""

from __future__ import annotations

import os
import re
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from builder import buildcache, parallel
from builder.site import assemble, patterns
from tests.pools import PoolFixture, key_id_of, make_pool
from tests.test_buildcache import (
    FRAGMENTS,
    _blob,
    _in_a_fork,
    _key,
    _keyed,
    _long_dream,
    _sha,
    _unit,
    break_table,
)
from tests.test_pages_parallel import _build, _in_process, _witness
from tests.test_store_restore import _store, site_files

BUSY = "database is locked"


def _counted_pool(root: Path) -> tuple[PoolFixture, list[str]]:
    """A pool whose ada and bob are members (their dreams' words are counted)."""
    from tests.test_agents import set_tier

    tp = make_pool(root)
    ids = tp.add("ada", 4, tags=["memory", "tools"])
    ids += tp.add("bob", 3, tags=["memory"])
    tp.add("墨子", 2)
    for author in ("ada", "bob"):
        set_tier(tp.content, key_id_of(author), "member")
    return tp, ids


def _bodies_unreadable(monkeypatch: pytest.MonkeyPatch, where: Callable[[], bool]) -> None:
    """_StoredBodies' connection (the only one opened with any_thread) fails
    as a damaged store does, in the processes ``where`` says."""
    opened = buildcache.BuildCache._open

    def failing(self: buildcache.BuildCache, *, any_thread: bool = False) -> sqlite3.Connection:
        if any_thread and where():
            raise sqlite3.DatabaseError("database disk image is malformed")
        return opened(self, any_thread=any_thread)

    monkeypatch.setattr(buildcache.BuildCache, "_open", failing)


@pytest.mark.parametrize("where", ["in process", "forked"])
def test_an_erased_dreams_words_leave_the_store_when_the_patterns_writes_were_busy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """T48. A dream is erased; while the patterns are counted the store is
    busy for writes (another process holds it past the timeout), and free
    again by the build's end. In process, the sections the patterns could not
    save stay in the cache and the build's final save writes them: the erased
    dream's words row is deleted. In the patterns' own process (any pool up
    to BACKGROUND_PATTERNS_LIMIT on 2+ cores) the same failure comes back as
    a busy note only (take_report): its sections and _retain end with the
    process, and the erased dream's words (and the old counts and patterns
    rows, made from its text) stayed in the store after the build. Now the
    process reports, with the failure, which rows of those sections to keep
    (StoreReport.retain), and the build's final save deletes the others."""
    from builder.log import erase

    tp, ids = _counted_pool(tmp_path / "pool")
    out = tmp_path / "pool" / "site"
    _build(tp, out)
    gone = ids[0]

    def words() -> set[str]:
        db = sqlite3.connect(_store(out))
        try:
            return {k for (k,) in db.execute('SELECT k FROM "words"')}
        finally:
            db.close()

    assert gone in words()
    for path in (tmp_path / "pool").glob("in-*.json"):
        path.unlink()
    erase.erase(tp.content, gone, "author-request")
    busy = {"now": False}
    real_patterns = assemble._patterns

    def patterns_(arg: Any) -> Any:
        busy["now"] = True  # in whichever process computes the patterns
        try:
            return real_patterns(arg)
        finally:
            busy["now"] = False

    real_save, real_delete = buildcache.BuildCache._save, buildcache._delete_except

    def save(self: buildcache.BuildCache, db: sqlite3.Connection, name: str) -> None:
        if busy["now"]:
            raise sqlite3.OperationalError(BUSY)
        real_save(self, db, name)

    def delete(db: sqlite3.Connection, name: str, wanted: Any) -> None:
        if busy["now"]:
            raise sqlite3.OperationalError(BUSY)
        real_delete(db, name, wanted)

    monkeypatch.setattr(assemble, "_patterns", patterns_)
    monkeypatch.setattr(buildcache.BuildCache, "_save", save)
    monkeypatch.setattr(buildcache, "_delete_except", delete)
    monkeypatch.setattr(parallel, "workers", lambda: 2 if where == "forked" else 1)
    report = _build(tp, out)
    monkeypatch.undo()
    assert sum("was busy" in n for n in report.notes) == 1, report.notes
    assert gone not in words(), "the erased dream's words outlived the build (T48)"


def test_a_damaged_store_met_after_a_busy_one_in_a_fork_is_started_afresh(
    tmp_path: Path,
) -> None:
    """THREATS T44: "Any SQLite error but a busy store starts the store
    afresh". A forked process that first found the store busy, then (the lock
    gone) found it damaged, reported only the first, so the build's process
    noted "busy" and kept a damaged store; the same two failures met in the
    build's own process discard it. A damaged store's failure now replaces a
    busy one."""

    def made(folder: Path) -> tuple[buildcache.BuildCache, Path]:
        cache = _keyed(folder)
        cache["units"].update({f"id{i}": _unit(i) for i in range(3)})
        cache.save()
        store = folder / buildcache.STORE
        break_table(store, "words")
        return cache, store

    def busy_then_damaged(cache: buildcache.BuildCache, store: Path) -> None:
        real = sqlite3.connect
        sqlite3.connect = lambda *a, **kw: real(*a, **{**kw, "timeout": 0.05})
        try:
            holder = real(store, isolation_level=None)
            holder.execute("BEGIN EXCLUSIVE")
            assert cache["counts"] == {}  # busy
            holder.execute("ROLLBACK")
            holder.close()
            assert cache["words"] == {}  # damaged
        finally:
            sqlite3.connect = real

    here, here_store = made(tmp_path / "here")
    busy_then_damaged(here, here_store)
    assert not here_store.exists()  # in process: started afresh

    cache, store = made(tmp_path / "forked")

    def worker() -> object:
        busy_then_damaged(cache, store)
        return cache.take_report()

    report = _in_a_fork(worker)
    assert isinstance(report, buildcache.StoreReport) and report.failure is not None
    cache.absorb_report(report)
    assert not store.exists(), f"a damaged store kept; the build noted {cache.notes}"


@pytest.mark.parametrize("where", ["in process", "forked"])
def test_a_keyword_worker_that_cannot_read_a_text_back_is_noted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """Above BACKGROUND_PATTERNS_LIMIT the patterns are computed in the build's
    process, the keywords not stored found by forked workers that read the
    dreams' texts (patterns.words_for -> parallel.map_ordered). A worker that
    cannot read a text back from the store reads the file (the site is
    right); its note stayed in the worker, and now comes back with its
    results (builder.parallel.report_back). Made small here: the limit 0,
    and map_ordered forking from one item."""
    tp, _ = _counted_pool(tmp_path / "pool")
    out = tmp_path / "pool" / "site"
    _build(tp, out)
    db = sqlite3.connect(_store(out), isolation_level=None)
    for table in ("words", "counts", "patterns"):  # every counted dream's words found again
        db.execute(f'DELETE FROM "{table}"')
    db.close()
    _in_process(monkeypatch)
    monkeypatch.setattr(assemble, "BACKGROUND_PATTERNS_LIMIT", 0)
    monkeypatch.setattr(parallel, "workers", lambda: 2)
    monkeypatch.setattr(parallel, "MIN_ITEMS", 1)  # words_for: prepare_all, texts unread here
    real = parallel.map_ordered
    forked: list[int] = []

    def map_ordered(func: Callable[[Any], Any], items: Any, **kw: Any) -> Any:
        if func is patterns.dream_words:
            forked.append(len(items))
            kw["min_items"] = 1 if where == "forked" else 10**9
        return real(func, items, **kw)

    monkeypatch.setattr(parallel, "map_ordered", map_ordered)  # patterns.parallel
    _bodies_unreadable(monkeypatch, lambda: True)
    report = _build(tp, out)
    assert forked  # the keywords were found by map_ordered
    monkeypatch.undo()
    assert sum("could not be read again" in n for n in report.notes) == 1, report.notes
    assert site_files(out) == _witness(tp, tmp_path, "witness")


def test_a_unit_worker_that_cannot_read_a_text_back_is_noted_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A changed site title renders every dream page again, in two forked
    unit workers that read the dreams' texts back from the store. When only
    the workers fail to (the build's process reads fine), the note comes
    back from them once, and the site is the one built cold."""
    tp, _ = _counted_pool(tmp_path / "pool")
    out = tmp_path / "pool" / "site"
    _build(tp, out)
    config = tp.content / "pool.yaml"
    config.write_text(config.read_text().replace("Test pool", "Test pool, renamed"))
    build_pid = os.getpid()
    real = parallel.imap_ordered
    forked: list[int] = []

    def imap(func: Callable[[Any], Any], items: Any, **kw: Any) -> Any:
        if getattr(func, "__name__", "") == "_render":
            forked.append(len(items))
            kw.update(min_items=1, chunk=1)
        return real(func, items, **kw)

    _in_process(monkeypatch)
    monkeypatch.setattr(parallel, "workers", lambda: 2)
    monkeypatch.setattr(parallel, "imap_ordered", imap)  # units.parallel
    _bodies_unreadable(monkeypatch, lambda: os.getpid() != build_pid)
    report = _build(tp, out)
    assert forked and forked[0] >= 9 and report.rendered >= 9, (forked, report.rendered)
    monkeypatch.undo()
    assert sum("could not be read again" in n for n in report.notes) == 1, report.notes
    assert site_files(out) == _witness(tp, tmp_path, "witness")


def test_after_a_discard_a_rows_neither_reads_the_old_store_nor_writes_the_new(
    tmp_path: Path,
) -> None:
    """After a discard no Rows reads or writes the store again: a
    fork's failure, applied by absorb_report, discards the store while a Rows
    of the cache holds a connection to it. That Rows then answers from memory
    only: not the discarded file's rows (its open connection still reads
    them), and none of its rows goes into the store the build starts anew."""
    cache = _keyed(tmp_path)
    rows = cache.rows("fragments")
    rows.put(_key(1), FRAGMENTS)
    rows.flush()
    assert rows.get(_key(1)) == FRAGMENTS  # its connection is open now
    store = tmp_path / buildcache.STORE
    break_table(store, "words")

    def worker() -> object:
        assert cache["words"] == {}
        return cache.take_report()

    report = _in_a_fork(worker)
    assert isinstance(report, buildcache.StoreReport)
    rows.get(_key(1))  # (the fork closed it: opened again, on the old file)
    cache.absorb_report(report)
    assert not store.exists() and rows.failed
    cache["units"].update({"id0": _unit(0)})
    cache.save()  # the new store
    assert rows.get(_key(1)) is None  # not read from the discarded file
    rows.put(_key(2), FRAGMENTS)
    rows.flush()
    db = sqlite3.connect(store)
    try:
        assert db.execute('SELECT count(*) FROM "fragments"').fetchone() == (0,)
    finally:
        db.close()
    assert sum(bool(re.search("started it afresh", n)) for n in cache.notes) == 1, cache.notes


def _busy_in_forks(monkeypatch: pytest.MonkeyPatch) -> None:
    """The store is busy (another process holds it) for every process forked
    from this one, and free here."""
    here = os.getpid()
    opened = buildcache.BuildCache._open

    def busy_in_child(self: buildcache.BuildCache, *, any_thread: bool = False) -> Any:
        if os.getpid() != here:
            raise sqlite3.OperationalError(BUSY)
        return opened(self, any_thread=any_thread)

    monkeypatch.setattr(buildcache.BuildCache, "_open", busy_in_child)


def _fork_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parallel, "workers", lambda: 2)


@pytest.mark.parametrize("where", ["in process", "forked"])
def test_a_rows_failure_in_the_patterns_process_comes_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """The patterns' background process reads the words through a Rows
    made in that process (assemble._words_of -> Rows.get_many): not _child,
    so its failure goes to BuildCache._damaged, which records it for
    take_report; the build discards the damaged store, as in process."""
    _fork_on(monkeypatch)
    cache = _keyed(tmp_path)
    words = cache.rows("words")
    words.put("a", (("x",), ()))
    words.flush()
    words.close()
    store = tmp_path / buildcache.STORE
    break_table(store, "words")

    def work(c: buildcache.BuildCache) -> str:
        rows = c.rows("words")
        rows.get_many(["a"])  # "database disk image is malformed"
        rows.close()
        return "done"

    with parallel.background(work, cache, enabled=where == "forked") as pending:
        assert pending() == "done"
    assert not store.exists(), f"a damaged store was kept; notes: {cache.notes}"


def test_a_retain_inherited_from_the_parent_comes_back_stale(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review r48: take_report sent the child's _retain with any failure, and
    that held the parent's own _retain as it was at the fork. The parent
    applied it meanwhile (a save) and wrote new rows; absorbing the child's
    report set the stale set again and the next save deleted the new rows.
    Latent in the build's present order of forks, real for report_back: a
    forked process now starts with no deletions of its own to make."""
    _fork_on(monkeypatch)
    cache = _keyed(tmp_path)
    rows = cache.rows("fragments")
    for i in (0, 1):
        rows.put(_key(i), FRAGMENTS)
    rows.flush()
    rows.close()
    cache._retain["fragments"] = {_key(1)}  # as after a Rows.retain([_key(1)]) that was busy
    _busy_in_forks(monkeypatch)

    def work(c: buildcache.BuildCache) -> int:
        return len(c["units"])  # busy: a failure to report

    with parallel.background(work, cache) as pending:
        cache.save()  # applies _retain: row 0 goes
        rows.put(_key(2), FRAGMENTS)  # a new unit's row
        rows.flush()
        assert pending() == 0
    cache.save()
    db = sqlite3.connect(tmp_path / buildcache.STORE)
    try:
        keys = {k for (k,) in db.execute('SELECT k FROM "fragments"')}
    finally:
        db.close()
    assert _key(2) in keys, f"a row written after the fork was deleted: {keys}"


@pytest.mark.parametrize("where", ["in process", "forked"])
def test_a_planted_row_of_a_section_saved_unchanged_in_value_goes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """Review r48 (T81): a child that rewrote counts with an equal value and
    could not save reported nothing for the section (it compared the
    sections by equality), so the row _load had refused (planted) was never
    deleted; in process the build's final save deletes it (_refused). Every
    section a save did not finish is now reported, keeping only the rows
    that hold what it meant to write."""
    _fork_on(monkeypatch)
    store = tmp_path / buildcache.STORE
    seed = _keyed(tmp_path)
    seed["counts"]["member"] = b"counts-row"
    seed.save()
    planted = buildcache.BuildCache(tmp_path)  # no row key: untagged
    planted["counts"]["guest"] = b"planted"
    planted.save()
    cache = _keyed(tmp_path)
    parent = os.getpid()
    real_save = buildcache.BuildCache._save
    busy = {"now": True}

    def save(self: buildcache.BuildCache, db: sqlite3.Connection, name: str) -> None:
        if busy["now"] and (where == "in process" or os.getpid() != parent):
            raise sqlite3.OperationalError(BUSY)
        real_save(self, db, name)

    monkeypatch.setattr(buildcache.BuildCache, "_save", save)

    def work(c: buildcache.BuildCache) -> str:
        old = c["counts"]["member"]
        c.sections["counts"] = {"member": bytes(bytearray(old))}  # equal, a new object
        c.save("counts")  # busy
        return "done"

    with parallel.background(work, cache, enabled=where == "forked") as pending:
        assert pending() == "done"
    busy["now"] = False
    cache.save()  # the build's final save, the store free again
    db = sqlite3.connect(store)
    try:
        keys = {k for (k,) in db.execute('SELECT k FROM "counts"')}
    finally:
        db.close()
    assert keys == {"member"}, f"the planted row outlived the build: {keys}"


_REAL_CONNECT = sqlite3.connect


def _keys(store: Path, table: str) -> set[str]:
    db = _REAL_CONNECT(store)
    try:
        return {k for (k,) in db.execute(f'SELECT k FROM "{table}"')}
    finally:
        db.close()


def _short_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    """The store's connections wait 0.05 s, not 60, for a lock held elsewhere."""

    def connect(*a: Any, **kw: Any) -> sqlite3.Connection:
        kw["timeout"] = 0.05
        return _REAL_CONNECT(*a, **kw)

    monkeypatch.setattr(buildcache.sqlite3, "connect", connect)


def _planted_counts(tmp_path: Path) -> Path:
    seed = _keyed(tmp_path)
    seed["counts"]["member"] = b"counts-row"
    seed.save()
    planted = buildcache.BuildCache(tmp_path)  # no row key: untagged (T81)
    planted["counts"]["guest"] = b"planted"
    planted.save()
    return tmp_path / buildcache.STORE


@pytest.mark.parametrize("where", ["in process", "forked"])
def test_a_planted_row_goes_when_a_real_busy_store_refused_the_first_save(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """Review r49 (T81; T48 if the row holds an erased dream's text): busy as
    SQLite is busy, another connection holding the write lock, so BEGIN
    IMMEDIATE failed inside _save after _save had dropped _refused["counts"].
    In process (the inline patterns path, above BACKGROUND_PATTERNS_LIMIT)
    the build's final save, the store free again, no longer knew the
    planted row and left it. What _save deletes is now forgotten only once
    it is committed."""
    monkeypatch.setattr(parallel, "workers", lambda: 2)
    store = _planted_counts(tmp_path)
    cache = _keyed(tmp_path)
    _short_timeout(monkeypatch)
    holder = _REAL_CONNECT(store, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process writing: the store is busy

    def work(c: buildcache.BuildCache) -> str:
        old = c["counts"]["member"]  # read: "guest" refused
        c.sections["counts"] = {"member": bytes(bytearray(old))}  # equal, a new object
        c.save("counts")  # busy
        return "done"

    try:
        with parallel.background(work, cache, enabled=where == "forked") as pending:
            assert pending() == "done"
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert any("busy" in n for n in cache.notes), cache.notes
    cache.save()  # the build's final save, the store free again
    assert _keys(store, "counts") == {"member"}, "the planted row outlived the build"


def test_a_forked_save_of_an_unchanged_section_deletes_the_parents_later_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review r49: 15d5075 reported every section a forked save did not
    finish, changed or not, with the rows to keep as the section was at the
    fork; a section the parent wrote after the fork then lost those rows
    (deleted by its next save, and never written again, being in _loaded).
    Only a section the fork changed, or that holds refused rows, is now
    reported. Here a fork saves with no names (every section it holds)."""
    monkeypatch.setattr(parallel, "workers", lambda: 2)
    cache = _keyed(tmp_path)
    cache["units"]["id0"] = _unit(0)
    cache.save()
    _busy_in_forks(monkeypatch)

    def work(c: buildcache.BuildCache) -> str:
        c.save()  # "units" unchanged here; busy
        return "done"

    with parallel.background(work, cache) as pending:
        cache["units"]["id1"] = _unit(1)  # the parent's own, after the fork
        cache.save()
        assert "id1" in _keys(tmp_path / buildcache.STORE, "units")
        assert pending() == "done"
    cache.save()
    assert "id1" in _keys(tmp_path / buildcache.STORE, "units"), "a good row was deleted"


def test_a_forked_processs_own_deletions_are_not_sent_twice(tmp_path: Path) -> None:
    """Review r49: take_report sent _retain with a failure but never cleared
    it, so a worker reporting again (map_ordered: once per chunk) after
    another failure sent the same deletions again, which the parent, having
    applied them and written rows since, applied a second time. The fork is
    simulated in one process: `child` is the worker's copy (_forked),
    `parent` the build's cache."""
    store = tmp_path / buildcache.STORE
    parent = _keyed(tmp_path)
    rows = parent.rows("fragments")
    for i in (0, 1):
        rows.put(_key(i), FRAGMENTS)
    rows.flush()
    rows.close()
    child = _keyed(tmp_path)
    child._forked()
    busy = {"now": True}
    opened = buildcache.BuildCache._open

    def open_(self: buildcache.BuildCache, *, any_thread: bool = False) -> Any:
        if self is child and busy["now"]:
            raise sqlite3.OperationalError(BUSY)
        return opened(self, any_thread=any_thread)

    mp = pytest.MonkeyPatch()
    mp.setattr(buildcache.BuildCache, "_open", open_)
    try:
        child.rows("fragments").retain([_key(1)])  # busy: kept in child._retain
        parent.absorb_report(child.take_report())  # chunk 1's report
        parent.save()  # applies it: row 0 goes
        assert _keys(store, "fragments") == {_key(1)}
        rows = parent.rows("fragments")
        rows.put(_key(2), FRAGMENTS)  # a new row, written after
        rows.flush()
        rows.close()
        child["units"]  # chunk 2: busy again (a read)
        second = child.take_report()
        parent.absorb_report(second)
        parent.save()
    finally:
        mp.undo()
    assert _key(2) in _keys(store, "fragments"), f"stale deletions came back: {second.retain}"


def _plant(folder: Path, name: str, key: Any, value: Any) -> None:
    """A row written by a cache without the row key: untagged, refused by a
    keyed cache as read (T81)."""
    planted = buildcache.BuildCache(folder)
    planted[name][key] = value
    planted.save()


def test_a_fork_does_not_report_refused_rows_the_parent_read_and_deletes_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review r50 (latent): a1dab14 reported a section a fork saved unchanged
    if it held refused rows, and ``_refused`` is inherited through the fork:
    a section the parent read (refusing a planted row) came back with the
    rows to keep as at the fork, and the parent's next save deleted the rows
    it wrote after the fork. Rows the parent refused are the parent's to
    delete (its own _refused); only those refused in the fork are reported."""
    monkeypatch.setattr(parallel, "workers", lambda: 2)
    seed = _keyed(tmp_path)
    seed["units"]["id0"] = _unit(0)
    seed.save()
    _plant(tmp_path, "units", "guest", _unit(9))
    cache = _keyed(tmp_path)
    cache["units"]  # read before the fork: "guest" refused, in the parent too
    assert cache._refused["units"] == ["guest"]
    _busy_in_forks(monkeypatch)

    def work(c: buildcache.BuildCache) -> str:
        c.save("units")  # unchanged here; busy
        return "done"

    with parallel.background(work, cache) as pending:
        cache["units"]["id1"] = _unit(1)  # the parent's own, after the fork
        cache.save()  # deletes "guest" itself
        assert _keys(tmp_path / buildcache.STORE, "units") == {"id0", "id1"}
        assert pending() == "done"
    cache.save()
    assert "id1" in _keys(tmp_path / buildcache.STORE, "units"), "a good row was deleted"


def test_scan_rows_put_before_the_store_was_busy_are_written_by_the_next_save(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review r50 (T81): kept_scan marks a key _streamed when it puts the row
    in the Rows, not when the row is written. When the Rows' flush found the
    store busy (its rows then stay in memory), the entry was in _loaded, so
    _save never wrote it, and, streamed, its refused row was never deleted:
    a store busy during the scan and free by the final save kept the planted
    row at the dream's key and no row of the dream. The final save now
    writes what the failed Rows holds."""
    store = tmp_path / buildcache.STORE
    seed = _keyed(tmp_path)
    seed["scan"]
    seed.save()
    _plant(tmp_path, "scan", _blob(0), (_sha(7), _long_dream(7)))  # forged for blob 0
    monkeypatch.setattr(buildcache.Rows, "FLUSH", 2)
    c = _keyed(tmp_path)
    c["scan"]  # blob 0 refused
    assert c._refused["scan"] == [_blob(0)]
    _short_timeout(monkeypatch)
    holder = _REAL_CONNECT(store, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process writing
    try:
        kept = {i: c.kept_scan(_blob(i), (_sha(i), _long_dream(i))) for i in (1, 0)}  # flush: busy
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert any("busy" in n for n in c.notes), c.notes
    c["scan"].update({_blob(i): e for i, e in kept.items()})
    c.save()  # the store free again
    again = _keyed(tmp_path)
    section = again["scan"]
    assert again._refused["scan"] == [], "the planted row outlived the build (T81)"
    assert {k: v[1].id for k, v in section.items()} == {
        _blob(0): _long_dream(0).id,
        _blob(1): _long_dream(1).id,
    }, "a verified dream's row was never written"


def test_held_a_streamed_refused_key_survives_a_busy_save_then_a_good_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review r50, what held: the scan rows written (flushed), then _save's
    BEGIN IMMEDIATE busy (a real lock); _refused and _streamed are both kept,
    and the good save deletes the other planted row and keeps the row
    written again at the refused key (failed on 15d5075)."""
    store = tmp_path / buildcache.STORE
    seed = _keyed(tmp_path)
    seed["scan"]
    seed.save()
    _plant(tmp_path, "scan", _blob(0), (_sha(7), _long_dream(7)))
    _plant(tmp_path, "scan", _blob(5), (_sha(5), _long_dream(5)))
    c = _keyed(tmp_path)
    c["scan"]
    assert sorted(c._refused["scan"]) == [_blob(0), _blob(5)]
    kept = c.kept_scan(_blob(0), (_sha(0), _long_dream(0)))
    assert c._scan_rows is not None
    c._scan_rows.flush()
    c["scan"][_blob(0)] = kept
    _short_timeout(monkeypatch)
    holder = _REAL_CONNECT(store, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        c.save()  # busy at _save's BEGIN IMMEDIATE
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert any("busy" in n for n in c.notes), c.notes
    assert c._streamed.get("scan") == {_blob(0)} and c._refused.get("scan")
    c.save()
    again = _keyed(tmp_path)
    assert {k: v[1].id for k, v in again["scan"].items()} == {_blob(0): _long_dream(0).id}
    assert again._refused["scan"] == []


SCAN = "scan"


def _busy_while(store: Path, work: Any) -> Any:
    """``work()`` while another process holds the store's write lock."""
    holder = _REAL_CONNECT(store, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        return work()
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def _seeded(tmp_path: Path, *blobs: int) -> Path:
    """A store whose scan section holds sound rows (this row key) for ``blobs``."""
    seed = _keyed(tmp_path)
    for i in blobs:
        seed[SCAN][_blob(i)] = (_sha(i), _long_dream(i))
    seed.save()
    return tmp_path / buildcache.STORE


def test_a_kept_row_dropped_from_the_section_is_deleted_though_the_buffer_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review r51 (T48; not reachable from the build). kept_scan sets _loaded["scan"]
    [blob] to the kept entry; 856e7d6's save() popped it for every unwritten blob,
    whether or not the section still holds the blob. A blob the store held a
    sound row for (from an earlier build), kept again and then no longer in
    the section, is then in neither _loaded nor the section: _save deletes
    nothing, and the old row (its dream's text) stays. On a1dab14 it was
    deleted (loaded, not in the section)."""
    store = _seeded(tmp_path, 0)
    monkeypatch.setattr(buildcache.Rows, "FLUSH", 1)
    c = _keyed(tmp_path)
    assert set(c[SCAN]) == {_blob(0)}
    _short_timeout(monkeypatch)
    kept = _busy_while(store, lambda: c.kept_scan(_blob(0), (_sha(0), _long_dream(0))))
    assert c._scan_rows is not None and c._scan_rows.failed
    c[SCAN][_blob(0)] = kept
    del c[SCAN][_blob(0)]  # the dream is gone from the section before the save
    c.save()
    assert _blob(0) not in _keys(store, SCAN), "a row the section no longer holds outlived the save"


def test_a_second_save_deletes_a_row_the_first_wrote_from_the_failed_buffer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review r51 (T48; latent: the build saves "scan" once). The Rows stays
    failed and keeps its entries (unwritten() is never emptied), so every
    save() pops them from _loaded again: a second save rewrites each of them,
    and one dropped from the section between the saves is never deleted."""
    store = _seeded(tmp_path)
    monkeypatch.setattr(buildcache.Rows, "FLUSH", 2)
    c = _keyed(tmp_path)
    c[SCAN]
    _short_timeout(monkeypatch)
    kept = _busy_while(
        store, lambda: {i: c.kept_scan(_blob(i), (_sha(i), _long_dream(i))) for i in (1, 2)}
    )
    assert c._scan_rows is not None and c._scan_rows.failed
    c[SCAN].update({_blob(i): e for i, e in kept.items()})
    c.save()
    assert _keys(store, SCAN) == {_blob(1), _blob(2)}
    del c[SCAN][_blob(2)]
    c.save()
    assert _keys(store, SCAN) == {_blob(1)}, "the row of an entry no longer held survived"


def test_a_buffered_scan_row_is_written_after_the_store_was_started_afresh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review r51 (a cost, no wrong row). After a _discard (another
    section damaged) the Rows is stopped with its entries, full ones, still
    buffered; _loaded["scan"] is {} so the put-back finds nothing to pop and
    leaves the section's deferred entries, whose value_out raises: the dreams
    verified this build get no row in the fresh store, though save() holds
    their bodies."""
    seed = _keyed(tmp_path)
    seed[SCAN]
    seed["units"]["id0"] = _unit(0)
    seed.save()
    store = tmp_path / buildcache.STORE
    c = _keyed(tmp_path)
    kept = c.kept_scan(_blob(1), (_sha(1), _long_dream(1)))  # buffered (FLUSH 1024)
    c[SCAN][_blob(1)] = kept
    break_table(store, "units")
    c["units"]  # damaged: the store is started afresh
    assert any("afresh" in n for n in c.notes), c.notes
    c.save()
    assert _blob(1) in _keys(store, SCAN), "a verified dream's buffered row was not written"


def test_held_put_back_entry_replaces_a_refused_row_and_keeps_no_streamed_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review r51, what held: a planted row at a buffered key is replaced by the dream's
    row; a planted row at a key streamed (flushed) before the failure is kept
    as written (not deleted); a planted row at no kept key is deleted."""
    store = _seeded(tmp_path)
    from tests.test_store_forks import _plant

    for i in (0, 1, 5):
        _plant(tmp_path, SCAN, _blob(i), (_sha(7), _long_dream(7)))
    monkeypatch.setattr(buildcache.Rows, "FLUSH", 1)
    c = _keyed(tmp_path)
    c[SCAN]
    assert sorted(c._refused[SCAN]) == [_blob(0), _blob(1), _blob(5)]
    first = c.kept_scan(_blob(0), (_sha(0), _long_dream(0)))  # written
    _short_timeout(monkeypatch)
    second = _busy_while(store, lambda: c.kept_scan(_blob(1), (_sha(1), _long_dream(1))))
    c[SCAN].update({_blob(0): first, _blob(1): second})
    c.save()
    again = _keyed(tmp_path)
    assert {k: v[1].id for k, v in again[SCAN].items()} == {
        _blob(0): _long_dream(0).id,
        _blob(1): _long_dream(1).id,
    }
    assert again._refused[SCAN] == []


def test_a_row_put_back_by_a_busy_save_is_deleted_when_its_entry_then_leaves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review r52, T48 (latent: the build saves "scan" once). The
    put-back pops the blob from _loaded["scan"] *before* the save is known to
    succeed. When that save finds the store busy, nothing is written, and
    _loaded no longer says the store holds a row at the blob: the entry then
    leaving the section (an erased dream) deletes nothing at the next save,
    and the row an earlier build wrote there, the dream's text, stays.
    Not popping at all (loaded keeps the kept entry, which the put-back entry
    is not) writes the entry as well and keeps the deletion."""
    store = _seeded(tmp_path, 0)  # an earlier build's sound row at blob 0
    monkeypatch.setattr(buildcache.Rows, "FLUSH", 1)
    c = _keyed(tmp_path)
    assert set(c[SCAN]) == {_blob(0)}
    _short_timeout(monkeypatch)
    kept = _busy_while(store, lambda: c.kept_scan(_blob(0), (_sha(0), _long_dream(0))))
    assert c._scan_rows is not None and c._scan_rows.failed
    c[SCAN][_blob(0)] = kept
    _busy_while(store, c.save)  # the put-back, then busy at _save: nothing written
    assert sum("busy" in n for n in c.notes) >= 1, c.notes
    del c[SCAN][_blob(0)]  # the dream is gone (erased) before the next save
    c.save()  # the store free again
    assert _blob(0) not in _keys(store, SCAN), "an erased dream's row outlived the save (T48)"
