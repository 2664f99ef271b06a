"""A dream's own files, made once and kept while their inputs stand still.

Most of a site is per dream: ``dreams/<id>/index.html``, ``record.json`` and
``proof.tlog-proof`` (docs/protocol.md §2, §5), plus the fragments that other
pages repeat: the dream's card (home, tags), its line in its author's diary,
its Atom ``<entry>`` (every feed that lists it) and its search index entry.
Together they are a *unit*, and a unit is a pure function of a few inputs,
hashed into its key:

* the dream's view (:class:`~builder.site.model.DreamView`: text, tier, tags, date,
  lineage), its children's titles and tiers, and its parent's title and tier
  or erasure. The view's text (title, summary, entries) is read from the
  signed body, which the dream's leaf hash binds (docs/protocol.md §2, §3:
  the leaf holds the commitment, a SHA-256 of the dream and its salt), so
  the key takes that 32-byte hash instead of the text: hashing the repr of
  every entry was the largest part of an incremental build's unit pass;
* the size of the checkpoint its proof is against, and that checkpoint's
  note, which the proof embeds and a witness may cosign later (the record
  never changes once published: docs/protocol.md §5; its salt is bound by the
  leaf hash above);
* the site's title, origin and base URL, the first checkpoint's date (feed
  entry ids), and the builder's code
  (:func:`builder.buildcache.code_digest`).

Units whose key is in the cache and whose files a generation of the output
still holds are kept (:meth:`builder.site.writer.SiteWriter.keep`) without being
rendered; the others are rendered on every core and written as they arrive.
The keys, and whether the generation being written holds each unit's files as
recorded, are found on every core too (:meth:`Units._check`, from
:data:`CHECK_FORK_MIN` dreams on); the build then claims what it keeps.
So a build after one new dream renders that dream, its parent (a new child
link) and nothing else of this kind; a cold build renders them all.

Cards and diary lines are stored with the placeholders ``<@root>`` and
``<@level>`` (the relative path to the site root, the heading level), filled
in per page by :meth:`Units.card_for` and :meth:`Units.diary_item_for`.
Neither can occur in rendered text: autoescape turns every ``<`` of user
data into ``&lt;``.

Fragments are kept in the build's store under their unit's key
(:class:`builder.buildcache.Rows`), not in memory: they are ≈3.8 KB a dream, and
holding them all until the list pages were written was the largest part of a
build's memory (37 MB of 147 at 10k dreams, almost 4 GB at a million). A
rendered unit's fragments are written as they arrive; a list page reads the
ones it shows, one query each, so a build after one new dream reads only
those of the pages it renders again. Above :data:`SQUEEZE_ABOVE` dreams each
is stored deflated (:func:`squeeze`), ≈1.4 KB a dream, for ≈90 µs of CPU a
dream on the workers and ≈5 µs each time a list page reads one back
(measured on the benchmark pool's fragments).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import operator
import zlib
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from markupsafe import Markup

from builder import parallel
from builder.buildcache import BuildCache, Findings, untagged_note
from builder.log import logbuild
from builder.site import feeds, render, unitbasis
from builder.site.model import DreamView, SiteModel
from builder.site.page import Page
from builder.site.writer import Entry, SiteWriter

Fragments = tuple[bytes, bytes, bytes, bytes]  # see Unit.fragments
# What a worker renders a unit from: the view, its key, the admitted dream and
# the views its page names by id (see Units.write).
Item = tuple[DreamView, str, logbuild.Admitted, dict[str, DreamView]]
ROOT = "<@root>"
LEVEL = "<@level>"
FILES = ("index.html", "record.json", "proof.tlog-proof")
# The fields of a DreamView that builder.site.model copies from the signed body
# unchanged; every other field (a new one too) is part of a unit's key.
BODY_FIELDS = frozenset({"title", "text"})
VIEW_FIELDS = tuple(f.name for f in dataclasses.fields(DreamView) if f.name not in BODY_FIELDS)
# The key's tuple of those but tags (keyed as plain tuples below), read by one
# C call instead of a generator of getattr calls; the tuple is the same.
_VIEW_VALUES = operator.attrgetter(*(name for name in VIEW_FIELDS if name != "tags"))

# Pools above this many dreams store their fragments deflated: from there on,
# the store's size (≈3.8 GB of fragments at a million dreams) and not time is
# what runs out; below it, deflating would add ≈4% to a build.
SQUEEZE_ABOVE = 200_000
# From this many dreams on, the units' keys and checks (Units._check) are
# found on every core: below it, forking costs more than the ≈50 µs a dream
# it saves on two cores.
CHECK_FORK_MIN = 2_000
# At most this many bytes of fragments are held for list pages beyond the page
# being rendered (Units.prefetch). A row is about 4 KB in the benchmark pool,
# but its search entry holds the dream's whole text: a long dream's row is up
# to about 50 KB (review r94), so the bound is on bytes, not rows.
RECENT_BYTES = 16 << 20
SQUEEZED = b"\0"  # first byte of a deflated fragment; a rendered one never starts with NUL
# A preset dictionary of the fragments' markup (zlib's deflateSetDictionary;
# raw deflate, RFC 1951, so no header names it: both ends use this one). A
# fragment of 1 KB shares little with itself: with this, the benchmark pool's
# fragments deflate to 37% of their size, without it to 52%. Any bytes are
# correct here; these only help.
_ZDICT = (
    b'{"id":"","title":"","author":"","tags":[""],"date":"","text":""}'
    b'<entry>\n    <id>tag:</id>\n    <title type="text"></title>\n'
    b"    <published></published>\n    <updated></updated>\n"
    b'    <link rel="alternate" type="text/html" href="dreams/"/>\n'
    b"    <author><name></name><uri>authors/</uri></author>\n"
    b'    <category term="" scheme="tag:"/>\n    <summary type="text"></summary>\n  </entry>\n'
    b'      <li class="tl-item">\n        <time class="tl-day" datetime=""></time>\n'
    b'        <div class="tl-body">\n'
    b'          <a class="tl-title" href="<@root>dreams/" dir="auto">'
    b'</a>\n          <p class="meta">\n</p>\n        </div>\n      </li>\n'
    b'<article class="card">\n  <h<@level> class="card-title"><a href="<@root>dreams/" dir="auto">'
    b'</a></h<@level>>\n  <p class="meta">\n'
    b'    <a class="author" href="<@root>authors/" dir="auto">'
    b'</a>\n    <span class="tier tier-member" title="key trust tier">member</span>\n'
    b'    <time datetime=""></time>\n  </p>\n  <p class="excerpt" dir="auto"></p>\n'
    b'  <p class="types">\n    <span class="etype etype-fact">fact</span>'
    b'<span class="etype etype-decision">decision</span><span class="etype etype-lesson">lesson'
    b'</span><span class="etype etype-warning">warning</span><span class="times">\xc3\x97</span>\n'
    b'  </p>\n  <ul class="taglist" aria-label="Tags">\n'
    b'  <li><a class="tag" href="<@root>tags/" dir="auto"></a></li>\n</ul>\n\n</article>\n'
)


def squeeze(fragment: bytes) -> bytes:
    """``fragment`` deflated (raw, with :data:`_ZDICT`), behind :data:`SQUEEZED`."""
    z = zlib.compressobj(6, zlib.DEFLATED, -15, 9, zlib.Z_DEFAULT_STRATEGY, _ZDICT)
    return SQUEEZED + z.compress(fragment) + z.flush()


def unsqueeze(stored: bytes) -> bytes:
    """A fragment as rendered, whether it was kept deflated or not."""
    if stored[:1] != SQUEEZED:
        return stored
    return zlib.decompressobj(-15, _ZDICT).decompress(stored[1:])


@dataclass(frozen=True, slots=True)
class Repairs:
    """What rendering a list page found the store lacking (Units.render_page):
    fragments rendered again, by unit key, and, from a forked worker, the
    rows it found damaged or untagged and a failure of the store
    (:meth:`builder.buildcache.Rows.take_findings`; what else it found wrong
    with the store comes back with its results: builder.parallel.report_back)."""

    made: tuple[tuple[str, Fragments], ...]
    findings: Findings


@dataclass(frozen=True, slots=True)
class Unit:
    """A rendered unit, its files already stored in the generation by the worker."""

    id: str
    key: str
    # card, diary line, feed entry, search entry; UTF-8, which holds markup in
    # half the memory of a str that also holds CJK text (a str is then UCS-2)
    fragments: Fragments
    files: tuple[tuple[str, Entry, bool], ...]  # path, manifest entry, written


class Units:
    """Renders or keeps every dream's unit; hands list pages the fragments, from the store."""

    def __init__(self, log: logbuild.Log, model: SiteModel, cache: BuildCache) -> None:
        self.log = log
        self.model = model
        self.cache = cache
        # Fragments by unit key, in the store (module doc); read back for list pages.
        self._rows = cache.rows("fragments")
        self._near: dict[str, Fragments | None] = {}  # the current page's (prefetch)
        # The fragments the last pages read, up to RECENT_BYTES of them (prefetch).
        self._recent: OrderedDict[str, Fragments] = OrderedDict()
        self._recent_bytes = 0
        # Fragments rendered again while a list page was rendered (their row
        # was damaged or missing), not yet put in the store: see render_page.
        self._made: dict[str, Fragments] = {}
        self.squeeze = len(model.dreams) > SQUEEZE_ABOVE
        self._writer: SiteWriter | None = None
        self._old: dict[str, tuple[str, tuple[tuple[str, bytes], ...]]] = {}  # the store's units
        self._local: SiteModel | None = None
        self._local_by_id: dict[str, DreamView] = {}
        self.keys: dict[str, str] = {}
        # How many keys write() computed (the rest stood: _standing).
        self.computed = 0
        # A proof embeds its checkpoint's note, cosignatures included, and a
        # witness may cosign a published size later (docs/operators.md): the
        # key takes the note's digest, not only its size.
        self.notes = {
            size: hashlib.blake2b(note, digest_size=16).digest()
            for size, note in log.state.checkpoints.items()
        }

    def key(self, d: DreamView) -> str:
        m = self.model
        parent = m.by_id.get(d.parent_id) if d.parent_id else None
        inputs = (
            self.log.tree.hash_at(0, d.index),  # the body (so the text) and the salt
            _VIEW_VALUES(d),
            tuple((t.name, t.slug) for t in d.tags),  # a dataclass repr costs 5x a tuple's
            # A child's or the parent's tier: the page and the diary line show
            # it, and sort a guest's reply apart (render.lineage_children).
            tuple((m.by_id[c].title, m.by_id[c].tier) for c in d.children),
            (parent.title, parent.tier) if parent else None,
            d.parent_id in m.erased_ids if d.parent_id else None,
            size := render.proof_size(m, d.index),
            self.notes.get(size) if size is not None else None,
            m.title,
            m.origin,
            m.base_url,
            m.history[0].date if m.history else None,  # the year in feed entry ids
        )
        return hashlib.blake2b(repr(inputs).encode(), digest_size=16).hexdigest()

    def write(self, w: SiteWriter) -> int:
        """Keep or render every unit into ``w``; returns how many were rendered."""
        old = self._old = self.cache["units"]
        self._writer = w  # the forked workers check and store the files themselves
        dreams = self.model.dreams
        standing = self._standing(old)
        checked: Sequence[tuple[str, bool | None]]
        if standing is None:
            # Each unit's key, and whether the generation holds its files as
            # the store says, found on every core (_check: a key and three
            # stats a dream, 5 s of a build after one new dream at 100k
            # dreams); what is kept is claimed here, in order, once the
            # workers have all ended (so an error below leaves none behind
            # holding the build's locks: r38).
            checked = parallel.map_ordered(
                self._check, range(len(dreams)), min_items=CHECK_FORK_MIN
            )
        else:
            # The stored keys that stand (module builder.site.unitbasis); the
            # few others are computed here. keep_all asks whether the
            # generation holds each kept unit's files.
            key_of = self.key
            checked = [(standing.get(d.id) or key_of(d), None) for d in dreams]
        self.computed = len(dreams) - (len(standing) if standing is not None else 0)
        new: dict[str, tuple[str, tuple[tuple[str, bytes], ...]]] = {}
        dirty: list[Item] = []
        keys = self.keys
        hits = [old.get(d.id) for d in dreams]
        keep: Callable[[tuple[tuple[str, bytes], ...], bool | None], bool]
        if standing is not None:
            # The files of each unit whose stored key stands, claimed in one
            # loop (SiteWriter.keep_each: the same claims, in the same order).
            kept = iter(
                w.keep_each(
                    hit[1]
                    for hit, (key, _) in zip(hits, checked, strict=True)
                    if hit is not None and hit[0] == key
                )
            )
            keep = lambda files, held: next(kept)  # noqa: E731
        else:
            keep = lambda files, held: w.keep_all(files, held=held)  # noqa: E731
        for d, (key, held), hit in zip(dreams, checked, hits, strict=True):
            keys[d.id] = key
            if hit is not None and hit[0] == key and keep(hit[1], held):
                new[d.id] = hit
            else:
                # The admitted dream and the views its page names (parent,
                # children) travel with the item (pickled), so a worker reads
                # its own copies: touching the parent's would make the fork
                # copy their memory pages (refcounts are writes), and at 1M
                # dreams each worker ended up with most of the parent's heap.
                named = (d.parent_id, *d.children) if d.parent_id else d.children
                related = {i: self.model.by_id[i] for i in named if i in self.model.by_id}
                dirty.append((d, key, self.log.dreams[d.id], related))
        for d, *_ in dirty:
            for path in self.paths(d):
                w.prepare(path)
        # Closed on any error: a generator left suspended would keep its forked
        # workers, and their copies of the build's locks, until collected (r38).
        with contextlib.closing(parallel.imap_ordered(self._render, dirty)) as rendered:
            for unit in rendered:
                for path, entry, changed in unit.files:
                    w.record(path, entry, changed)
                self._rows.put(unit.key, unit.fragments)
                new[unit.id] = (unit.key, tuple((p, e[0]) for p, e, _ in unit.files))
        self._rows.flush()
        self.cache.sections["units"] = new
        self._record_basis()
        return len(dirty)

    def _site(self) -> tuple[str, str, str, str | None]:
        m = self.model
        return (m.title, m.origin, m.base_url, m.history[0].date if m.history else None)

    def _standing(
        self, old: dict[str, tuple[str, tuple[tuple[str, bytes], ...]]]
    ) -> dict[str, str] | None:
        """Dream id → its stored unit key, for each dream whose key nothing
        it hashes can have moved since the build that stored it
        (:mod:`builder.site.unitbasis` says what that build recorded, and
        why each check below suffices); None when the stored basis does not
        hold (none, damaged, another site or log, a tier or slug moved, an
        erasure): then every key is computed.

        Not standing: a dream the basis does not cover (new, or then not yet
        in a signed checkpoint, so its date and proof were still to come),
        and the parent and children of each such dream (a child link, or a
        parent that now is in the pool); a dream whose proof's checkpoint a
        witness has cosigned since."""
        row = self.cache["unitbasis"].get(unitbasis.ROW)
        basis = unitbasis.decode(row)
        if basis is None:
            if row is not None:  # whole, but not what _record_basis writes: named (r73)
                self.cache.notes.append(
                    "the build store's unitbasis row was not one this build writes; "
                    "computed every unit's key and wrote it again"
                )
            return None
        m, tree = self.model, self.log.tree
        if basis.site != self._site() or basis.size > tree.size:
            return None
        if tree.root(basis.size) != basis.root:
            return None
        if tuple((h.size, h.date) for h in m.history[: len(basis.history)]) != basis.history:
            return None
        if basis.erased != tuple(sorted(m.erased_ids)):
            return None
        slugs = {t.name: t.slug for t in m.tags}
        if any(slugs.get(name, slug) != slug for name, slug in basis.tags):
            return None
        covered: list[DreamView] = []
        lines = []
        for d in reversed(m.dreams):  # oldest first
            if d.index >= basis.size:
                break
            hit = old.get(d.id)
            if hit is None:  # a row refused as read, or a dream that came back
                return None
            covered.append(d)
            lines.append(unitbasis.line(d.id, d.index, d.tier, d.author_slug, hit[0]))
        if unitbasis.digest(lines) != basis.digest:
            return None
        signed = basis.history[-1][0] if basis.history else 0
        edge = min(basis.size, signed)
        moved: set[str] = set()
        for d in m.dreams:  # newest first: those past the edge
            if d.index < edge:
                break
            moved.add(d.id)
            moved.update(d.children)
            if d.parent_id is not None:
                moved.add(d.parent_id)
        renoted = {size for size, note in basis.notes if self.notes.get(size) != note}
        if renoted:
            moved.update(d.id for d in covered if render.proof_size(m, d.index) in renoted)
        return {d.id: old[d.id][0] for d in covered if d.id not in moved}

    def _record_basis(self) -> None:
        """What this build's keys were computed under, for the next build's
        :meth:`_standing`; written only when it changed."""
        m, tree = self.model, self.log.tree
        keys = self.keys
        lines = [
            unitbasis.line(d.id, d.index, d.tier, d.author_slug, keys[d.id])
            for d in reversed(m.dreams)
        ]
        data = unitbasis.encode(
            unitbasis.Basis(
                size=tree.size,
                root=tree.root(),
                site=self._site(),
                history=tuple((h.size, h.date) for h in m.history),
                notes=tuple(sorted(self.notes.items())),
                erased=tuple(sorted(m.erased_ids)),
                tags=tuple((t.name, t.slug) for t in m.tags),
                digest=unitbasis.digest(lines),
            )
        )
        section = self.cache["unitbasis"]
        if section.get(unitbasis.ROW) != data:
            section[unitbasis.ROW] = data

    def _check(self, i: int) -> tuple[str, bool]:
        """The key of the ``i``-th dream's unit, and whether the generation being
        written holds the files the store names for that key (SiteWriter.holds_own).
        Reads only; run in forked workers."""
        d = self.model.dreams[i]
        key = self.key(d)
        hit = self._old.get(d.id)
        assert self._writer is not None
        return key, hit is not None and hit[0] == key and self._writer.holds_own(hit[1])

    def finish(self) -> None:
        """After the list pages: the store keeps the fragments of this build's
        units and no others (an erased dream's are deleted: THREATS.md T48)."""
        for key, fragments in self._made.items():  # made outside render_page
            self._rows.put(key, fragments)
        self._made = {}
        self._rows.retain(self.keys.values())
        if self._rows.damaged:
            self.cache.notes.append(
                f"the build store's fragments had {self._rows.damaged} damaged row(s); "
                "rendered them again"
            )
        if self._rows.untagged:
            # Said once with the other sections' (buildcache.merged_notes).
            self.cache.notes.append(untagged_note("fragments", self._rows.untagged))

    def close(self) -> None:
        """Close the store's reading connection (before the build forks again)."""
        self._near = {}
        self._recent.clear()
        self._recent_bytes = 0
        self._rows.close()

    def paths(self, d: DreamView) -> list[str]:
        # The record and proof are published only under a signed checkpoint.
        names = FILES if self.log.checkpoint is not None else FILES[:1]
        return [f"dreams/{d.id}/{name}" for name in names]

    def _render(self, item: Item) -> Unit:
        d, key, admitted, related = item
        assert self._writer is not None
        model = self._model_naming(related)
        paths = self.paths(d)
        files = [render.dream_page(model, d, self.card_for)]
        if len(paths) > 1:
            files.append(logbuild.record_bytes(admitted))
            files.append(logbuild.proof_bytes(self.log.state, self.log.tree, d.index))
        stored = []
        for path, data in zip(paths, files, strict=True):
            entry, written = self._writer.store(path, data)
            stored.append((path, entry, written))
        return Unit(d.id, key, self._fragments(d, model), tuple(stored))

    def _model_naming(self, related: dict[str, DreamView]) -> SiteModel:
        """The model, but with ``by_id`` holding only ``related``: all a dream's
        page and fragments look up (its parent's and children's titles). Made
        once per process and refilled per item."""
        if self._local is None:
            self._local = dataclasses.replace(self.model, by_id=self._local_by_id)
        self._local_by_id.clear()
        self._local_by_id.update(related)
        return self._local

    def _fragments(self, d: DreamView, model: SiteModel | None = None) -> Fragments:
        m = model or self.model
        made = (
            render.card_template(m, d, Markup(ROOT), Markup(LEVEL)).encode(),
            render.diary_item_template(m, d, Markup(ROOT)).encode(),
            feeds.entry_xml(m, d).encode(),
            render.search_entry(d).encode(),
        )
        if not self.squeeze:
            return made
        card, diary, entry, search = made
        return squeeze(card), squeeze(diary), squeeze(entry), squeeze(search)

    def prefetch(self, dreams: Sequence[DreamView]) -> None:
        """Read the fragments of ``dreams`` for the page about to be rendered
        (:attr:`builder.site.page.Page.shows`): those the last pages read are
        taken again, the others read from the store in one query. At most
        :data:`RECENT_BYTES` of them are held beside the page's.

        A dream is on many of the pages a build renders again (the home page,
        the archive's, its author's and its tags' last pages, feeds, search,
        the API): a +100 at 10k dreams read 9,956 rows, 2,583 of them
        distinct, and each read checks the row's tag over all its bytes.
        A unit's fragments are a function of its key, so a row read once
        stands for the rest of the build."""
        keys = [self.key_for(d) for d in dreams]
        recent = self._recent
        found = self._rows.get_many([k for k in keys if k not in recent])
        near: dict[str, Fragments | None] = {}
        for k in keys:
            hit = recent.get(k)
            if hit is not None:
                recent.move_to_end(k)
            else:
                hit = found.get(k)
                if hit is not None:
                    recent[k] = hit
                    self._recent_bytes += sum(map(len, hit))
            near[k] = hit
        while self._recent_bytes > RECENT_BYTES:
            self._recent_bytes -= sum(map(len, recent.popitem(last=False)[1]))
        self._near = near

    def render_page(self, page: Page) -> tuple[bytes, Repairs]:
        """``page``'s bytes, the fragments it shows read first (:meth:`prefetch`),
        and what the store was found to lack meanwhile. Run in a forked worker
        (builder.site.assemble), whose store connection ends with it, or in
        the build's process; either way the build's process hands the result
        to :meth:`repair`, which applies what a worker found (a failure of
        the store is the build's process's to apply: it discards the store)."""
        if page.shows:
            self.prefetch(page.shows)
        data = page.render()
        made, self._made = tuple(self._made.items()), {}
        return data, Repairs(made, self._rows.take_findings())

    def repair(self, repairs: Repairs) -> None:
        """Put the fragments :meth:`render_page` rendered again in the store, and
        count the rows it found damaged or untagged (:meth:`finish` says so)."""
        for key, fragments in repairs.made:
            self._rows.put(key, fragments)
        self._rows.absorb(repairs.findings)

    def _of(self, d: DreamView) -> Fragments:
        key = self.key_for(d)
        found = self._near[key] if key in self._near else self._rows.get(key)
        if found is None:  # a damaged row, or a dream write() did not see
            found = self._made.get(key)
            if found is None:
                found = self._made[key] = self._fragments(d)
        return found

    def card_for(self, d: DreamView, level: int, root: str) -> Markup:
        card = unsqueeze(self._of(d)[0]).decode()
        return Markup(card.replace(ROOT, root).replace(LEVEL, str(level)))

    def diary_item_for(self, d: DreamView, root: str) -> Markup:
        return Markup(unsqueeze(self._of(d)[1]).decode().replace(ROOT, root))

    def feed_entry_for(self, d: DreamView) -> str:
        return unsqueeze(self._of(d)[2]).decode()

    def search_entry_for(self, d: DreamView) -> bytes:
        return unsqueeze(self._of(d)[3])

    def key_for(self, d: DreamView) -> str:
        """The unit's key (computed by :meth:`write` for every dream of the model).
        List pages ask it for each dream they list (760,000 times at 100k dreams)."""
        try:
            return self.keys[d.id]
        except KeyError:
            return self.key(d)
