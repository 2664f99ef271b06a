"""Everything a reader sees, written into the new generation of the site.

The dreams' own files (:mod:`builder.site.units`: pages, records, proofs, cards,
kept or rendered on every core), the log's files
(:func:`builder.log.logbuild.publish_log`), the list pages (:mod:`builder.site.render`),
aggregate patterns (:mod:`builder.site.patterns`, computed in a forked process
while the rest is written, or after it, on every core, above
``BACKGROUND_PATTERNS_LIMIT``),
feeds, sitemap and the JSON API
(:mod:`builder.site.feeds`) and the agents' exports (:mod:`builder.agents`). Two
stages claiming one path is a bug: the writer refuses it rather than letting
one silently win.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Sequence

from builder import parallel
from builder.buildcache import BuildCache, Rows
from builder.log import logbuild
from builder.site import agentdocs as agents
from builder.site import feeds, patterns, writer
from builder.site import render as renderer
from builder.site.model import DreamView, SiteModel
from builder.site.page import Page
from builder.site.units import Units
from builder.site.writer import SiteWriter

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
            _write_pages(itertools.chain(feed_pages, agent_pages, pages), w, cache, units.prefetch)
            units.finish()
        finally:
            units.close()
    return rendered


def _write_pages(
    pages: Iterable[Page],
    w: SiteWriter,
    cache: BuildCache,
    prefetch: Callable[[Sequence[DreamView]], None],
) -> None:
    """Render each page, or keep its file when its key is the last build's;
    the fragments a page repeats are read in one go before it is rendered."""
    old = cache["pages"]
    new: dict[str, tuple[str, bytes]] = {}
    for page in pages:
        hit = old.get(page.path) if page.key is not None else None
        if hit is not None and hit[0] == page.key and w.keep_all(((page.path, hit[1]),)):
            new[page.path] = hit
            continue
        if page.shows:
            prefetch(page.shows)
        d = w.add(page.path, page.render())
        if page.key is not None:
            new[page.path] = (page.key, d)
    cache.sections["pages"] = new


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
