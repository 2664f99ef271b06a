"""Everything a reader sees, written into the new generation of the site.

The dreams' own files (:mod:`builder.site.units`: pages, records, proofs, cards,
kept or rendered on every core), the log's files
(:func:`builder.log.logbuild.publish_log`), the list pages (:mod:`builder.site.render`,
rendered on every core too: :func:`_write_pages`),
aggregate patterns (:mod:`builder.site.patterns`, computed in a forked process
while the rest is written, or after it, on every core, above
``BACKGROUND_PATTERNS_LIMIT``),
feeds, sitemap and the JSON API
(:mod:`builder.site.feeds`) and the agents' exports (:mod:`builder.agents`). Two
stages claiming one path is a bug: the writer refuses it rather than letting
one silently win.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterable, Sequence

from builder import parallel
from builder.buildcache import BuildCache, Rows
from builder.log import logbuild
from builder.site import agentdocs as agents
from builder.site import feeds, patterns, writer
from builder.site import render as renderer
from builder.site.model import DreamView, SiteModel
from builder.site.page import Page
from builder.site.units import Repairs, Units
from builder.site.writer import Entry, SiteWriter

# Above this many dreams the patterns are computed in this process, after the
# pages: a forked process reading every dream's text copies those memory pages
# (refcounts are writes), and at 1M dreams that copy alone was over 10 GB. The
# keywords not cached yet are then found by workers that get the dreams they
# need pickled (builder.parallel.map_ordered), as the unit workers do.
BACKGROUND_PATTERNS_LIMIT = 200_000


def write_site(log: logbuild.Log, model: SiteModel, w: SiteWriter, cache: BuildCache) -> int:
    """Write every file of the site into ``w``; returns how many dream units were rendered."""
    fork = len(model.dreams) <= BACKGROUND_PATTERNS_LIMIT
    with parallel.background(
        _patterns, (model, cache, not fork), enabled=fork, initializer=writer.drop_locks
    ) as pending:
        units = Units(log, model, cache)
        rendered = units.write(w)
        w.add_all(logbuild.publish_log(log))
        pages = renderer.list_pages(
            model,
            pending,
            units.card_for,
            units.diary_item_for,
            dream_key=units.key_for,
            search_entry=units.search_entry_for,
        )
        feed_pages = feeds.feed_pages(model, units.feed_entry_for, units.key_for)
        agent_pages = agents.agent_pages(model, units.key_for)
        try:
            _write_pages(itertools.chain(feed_pages, agent_pages, pages), w, cache, units)
            units.finish()
        finally:
            units.close()
    return rendered


def _write_pages(pages: Iterable[Page], w: SiteWriter, cache: BuildCache, units: Units) -> None:
    """Render each page, or keep its file when its key is the last build's.

    The pages to render are gathered, up to :data:`PAGE_WINDOW` at a time, and
    rendered on every core (:func:`builder.parallel.imap_ordered`; in this
    process below :data:`PAGES_FORK_MIN`): each worker reads the fragments a
    page shows, renders it and stores its file, as the units' workers do
    (:meth:`builder.site.writer.SiteWriter.store`, for a path claimed here);
    this process records each file in order and applies what the worker
    found the store lacking (:meth:`builder.site.units.Units.repair`). A page
    that ``waits`` is rendered here, after every page before it."""
    old = cache["pages"]
    new: dict[str, tuple[str, bytes]] = {}
    window: list[Page] = []
    for page in pages:
        hit = old.get(page.path) if page.key is not None else None
        if hit is not None and hit[0] == page.key and w.keep_all(((page.path, hit[1]),)):
            new[page.path] = hit
            continue
        if page.waits:
            _render_pages(window, w, units, new)
            window = []
            w.prepare(page.path)
            _record(page, *_render_one(page, w, units), w, units, new)
            continue
        w.prepare(page.path, folder=True)  # made here: workers may share a new folder
        window.append(page)
        if len(window) == PAGE_WINDOW:
            _render_pages(window, w, units, new)
            window = []
    _render_pages(window, w, units, new)
    cache.sections["pages"] = new


# Below this many pages to render, they are rendered in this process: forking
# costs more than it saves. Measured at 10k dreams (2 cores, medians of 3):
# a +1 renders 45 pages (28 of them rendered by every build: the
# home page, the indexes, feeds, sitemap, agents' files) and took 2.26 s
# forked vs 2.13 s here; a +100, 281 pages, 2.78 s vs 2.76 s. A list
# page takes 2–7 ms; a worker forked from a large build costs more than the
# ≈30 ms of a small one (its page tables, then its copied pages).
PAGES_FORK_MIN = 512
# At most this many pages are held waiting to be rendered: a cold build of a
# million dreams renders about 150,000.
PAGE_WINDOW = 2048


def _render_pages(
    window: Sequence[Page], w: SiteWriter, units: Units, new: dict[str, tuple[str, bytes]]
) -> None:
    done = parallel.imap_ordered(
        lambda i: _render_one(window[i], w, units),
        range(len(window)),
        min_items=PAGES_FORK_MIN,
        chunk=8,
    )
    # Closed on any error: its forked workers end then, with their copies of
    # the build's locks (as Units.write's).
    with contextlib.closing(done):
        for page, (entry, changed, repairs) in zip(window, done, strict=True):
            _record(page, entry, changed, repairs, w, units, new)


def _render_one(page: Page, w: SiteWriter, units: Units) -> tuple[Entry, bool, Repairs]:
    """Render ``page`` and store its file; a worker's (or this process's) part."""
    data, repairs = units.render_page(page)
    entry, changed = w.store(page.path, data)
    return entry, changed, repairs


def _record(
    page: Page,
    entry: Entry,
    changed: bool,
    repairs: Repairs,
    w: SiteWriter,
    units: Units,
    new: dict[str, tuple[str, bytes]],
) -> None:
    w.record(page.path, entry, changed)
    units.repair(repairs)
    if page.key is not None:
        new[page.path] = (page.key, entry[0])


def _patterns(arg: tuple[SiteModel, BuildCache, bool]) -> str:
    # In a forked process (or inline, after the pages, spreading the keyword
    # search over the cores): the words and counts sections of the store are
    # read and written here, never by the parent while the process runs.
    # Found again only when what they read changed (patterns.inputs_key): a
    # build after no new dream, or only dreams that do not count (a guest's),
    # neither reads the words nor counts them.
    model, cache, spread = arg
    key = patterns.inputs_key(model)
    row = cache["patterns"].get(key)
    kept = None if row is None else patterns.decode(row)
    if kept is not None:
        found = patterns.stored(kept, model)
    else:
        # The last build's row goes first: words written below by a process
        # killed before it saves would otherwise stay under a row whose inputs
        # an erasure can bring back (a hit reads and deletes nothing, T48).
        cache.sections["patterns"] = {}
        cache.save("patterns")
        found = _count(model, cache, spread)
        cache.sections["patterns"] = {key: patterns.encode(found)}
        cache.save("words", "counts", "patterns")
    # (What went wrong with the store here, the build's process notes and
    # applies: builder.buildcache.StoreReport, through builder.parallel.)
    return str(patterns.render_patterns_html(found))


def _count(model: SiteModel, cache: BuildCache, spread: bool) -> patterns.Patterns:
    """The patterns of ``model``: the last build's counts with the new counted
    dreams added (patterns.add_new), when the dreams it counted are all still
    counted as they were; else every counted dream counted again."""
    rows = cache["counts"]
    found = None
    last = rows.get(patterns.MIN_TIER)
    counts = None if last is None else patterns.decode_counts(last)
    if counts is not None and counts.min_tier != patterns.MIN_TIER:
        counts = None  # not a row this build writes: add_new would count by its rule
    if counts is not None:
        words = cache.rows("words")
        try:
            counts = patterns.add_new(counts, model, lambda new: _words_of(new, words, spread))
            if counts is not None:
                # Only counted dreams' words stay, as after a full count: a killed
                # build's may be there, an erased dream's among them (T48).
                words.retain([d.id for d in model.dreams if patterns.counts(d, counts.min_tier)])
            words.flush()
        finally:
            words.close()
        found = None if counts is None else patterns.derive(counts, model)
    if found is None:
        counts = patterns.count(model, words=cache["words"], spread=spread)
        found = patterns.derive(counts, model)
        assert found is not None, "a full count tallies every keyword it shows"
    assert counts is not None
    cache.sections["counts"] = {patterns.MIN_TIER: patterns.encode_counts(counts)}
    return found


def _words_of(dreams: Sequence[DreamView], words: Rows, spread: bool) -> list[patterns.DreamWords]:
    """The words of the dreams newly counted: the store's, or found (and kept)."""
    known = words.get_many([d.id for d in dreams])
    found = patterns.words_for(dreams, known, spread)
    for d, w in zip(dreams, found, strict=True):
        if d.id not in known:
            words.put(d.id, w)
    return found
