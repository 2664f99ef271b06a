"""The site model: everything the pages show, as plain frozen values.

Built once per build from the log (:class:`builder.log.logbuild.Log`), the key
directory and the pool config; templates, feeds, search and patterns read it
and nothing else. No text here is escaped or rendered yet: that is the
templates' job (autoescape) and Markdown's (:mod:`builder.site.render`).

Anonymized dreams (``consent.anonymize: true``) carry no author name, slug or
key fingerprint here, so no page or feed can show them. Their record carries
the reserved author ``anonymous`` and a one-time key (docs/protocol.md §1.2),
which is listed nowhere; nor is an author whose every dream here is
anonymized (one logged under its name before that rule, whose record still
names it: ``dreampool check`` warns of those).

URL paths are derived from ids, or from names through :func:`slug`, never
used raw: a name that is not a short lowercase ASCII word becomes
``x-<hash>``, so no author or tag can pick a path, clash by case, or smuggle
``..``, ``/`` or invisible characters into one. The short hash is 48 bits,
so two names with one slug can be found in seconds (a birthday search of
2^24 hashes); :func:`slugs` gives such names the 128-bit :func:`long_slug`
instead, so a submitter can neither make two pages claim one path (which
would stop every build) nor take over another name's page.
"""

from __future__ import annotations

import hashlib
import re
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from builder.content import anonymity
from builder.content.pool import KeyDirectory, PoolConfig
from builder.formats.b64 import b64_encode
from builder.formats.dream import Dream
from builder.log.logbuild import Log

TIER_RANK = {"maintainer": 0, "member": 1, "guest": 2}
ENTRY_ORDER = ("fact", "decision", "preference", "lesson", "rule", "warning", "theory", "plan")
_SAFE_SLUG = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,40}[a-z0-9])?")
# Windows device names, which no folder may be called (COM0-9, LPT0-9 included).
_RESERVED = frozenset(
    {"index", "feed", "con", "prn", "aux", "nul"}
    | {f"{port}{n}" for port in ("com", "lpt") for n in range(10)}
)


def month_span(first: str, last: str) -> tuple[str, ...]:
    """Every month ``YYYY-MM`` from ``first`` to ``last``, both included, oldest first."""
    year, month = int(first[:4]), int(first[5:7])
    out = []
    while (current := f"{year:04d}-{month:02d}") <= last:
        out.append(current)
        year, month = (year + 1, 1) if month == 12 else (year, month + 1)
    return tuple(out)


def absolute_base(base_url: str) -> str | None:
    """``base_url`` ending in "/" when it is an absolute http(s) URL, else None
    (pages then link relative to the site's root)."""
    if not base_url.startswith(("https://", "http://")):
        return None
    return base_url if base_url.endswith("/") else base_url + "/"


def slug(name: str) -> str:
    """A URL path segment for a name: the name itself when it is a plain
    lowercase ASCII word, else ``x-`` and 12 hex of its SHA-256."""
    if _SAFE_SLUG.fullmatch(name) and name not in _RESERVED and not name.startswith("x-"):
        return name
    return "x-" + hashlib.sha256(name.encode("utf-8")).hexdigest()[:12]


def long_slug(name: str) -> str:
    """``x-`` and 32 hex (128 bits) of the name's SHA-256: for names whose short
    slugs collide, where no search can find a collision."""
    return "x-" + hashlib.sha256(name.encode("utf-8")).hexdigest()[:32]


def slugs(names: Iterable[str]) -> dict[str, str]:
    """Every name's slug, unique among ``names``: :func:`slug`, or
    :func:`long_slug` for each name whose short slug another name shares."""
    holders: dict[str, set[str]] = defaultdict(set)
    for name in names:
        holders[slug(name)].add(name)
    return {
        name: short if len(group) == 1 else long_slug(name)
        for short, group in holders.items()
        for name in group
    }


@dataclass(frozen=True, slots=True)
class KeyView:
    key_id: str
    tier: str
    added: str
    rotated_from: str | None
    log_index: int | None


@dataclass(frozen=True, slots=True)
class AuthorView:
    name: str
    slug: str
    keys: tuple[KeyView, ...]
    dream_ids: tuple[str, ...]  # newest first; anonymized dreams are not listed
    tier: str  # the highest tier of the author's keys
    # The log index at which the author first appears: their first logged key
    # or listed dream (see build_model). The authors index is paged in this
    # order, so a new author joins its last page (builder.site.render).
    joined: int


# Named tuples, not dataclasses: a model holds ten entries a dream, a million
# at 100k dreams, and a tuple is made in a fifth of the time.
class EntryView(NamedTuple):
    text: str
    type: str
    confidence: str
    source: str | None


class TagRef(NamedTuple):
    name: str
    slug: str


@dataclass(frozen=True, slots=True)
class DreamView:
    id: str
    index: int
    date: str  # RFC 3339 UTC, the time of the first checkpoint holding it
    title: str
    # The signed body (or a mapping of its "summary" and "entries"), read only
    # by the properties below: a deferred dream's (builder.formats.dream.Dream.deferred)
    # is loaded when a page shows its text, never to list it.
    text: Mapping[str, Any] = field(repr=False, compare=False)
    entry_types: tuple[str, ...]  # each entry's type, in order
    tags: tuple[TagRef, ...]
    author: str | None  # None when anonymized
    author_slug: str | None
    key_id: str | None  # None when anonymized
    tier: str
    anonymized: bool
    derivatives: bool
    generation: int | None
    parent_id: str | None
    parent_in_pool: bool
    children: tuple[str, ...]

    @property
    def summary(self) -> str:
        """Markdown source; empty if the dream has none."""
        return str(self.text.get("summary", ""))

    @property
    def entries(self) -> tuple[EntryView, ...]:
        return tuple(
            EntryView(e["text"], e["type"], e["confidence"], e.get("source"))
            for e in self.text["entries"]
        )

    @property
    def month(self) -> str:
        return self.date[:7]

    @property
    def day(self) -> str:
        return self.date[:10]

    @property
    def third_party(self) -> bool:
        return self.tier == "guest"

    def entries_by_type(self) -> list[tuple[str, list[EntryView]]]:
        groups: dict[str, list[EntryView]] = defaultdict(list)
        for entry in self.entries:
            groups[entry.type].append(entry)
        return [(t, groups[t]) for t in ENTRY_ORDER if t in groups]


@dataclass(frozen=True, slots=True)
class TagView:
    name: str
    slug: str
    dream_ids: tuple[str, ...]  # newest first
    first: int  # its oldest dream's log index: the tags index's order (builder.site.render)


@dataclass(frozen=True, slots=True)
class ErasedView:
    id: str
    index: int
    erasure_index: int
    reason: str
    date: str  # when the erasure was logged


@dataclass(frozen=True, slots=True)
class CheckpointView:
    size: int
    root: str  # standard base64, as in the checkpoint
    date: str
    note: str  # the signed note text, as published


@dataclass(frozen=True, slots=True)
class SiteModel:
    title: str
    origin: str
    base_url: str
    k: int
    dreams: tuple[DreamView, ...]  # newest first (log index descending)
    by_id: Mapping[str, DreamView]
    authors: tuple[AuthorView, ...]  # by name
    tags: tuple[TagView, ...]  # most used first, then by name
    erased: tuple[ErasedView, ...]
    checkpoint: CheckpointView | None
    history: tuple[CheckpointView, ...]  # oldest first
    policy: str
    vkey: str
    # id → the signed dream's head fields (builder.formats.dream.HEAD_FIELDS):
    # the patterns count its signed author, which the view hides if anonymized
    heads: Mapping[str, Mapping[str, Any]]
    # The erased ids, made once: every page, card and diary line asks whether
    # a parent was erased, and a set per question cost O(erasures) a dream.
    erased_ids: frozenset[str] = field(init=False, repr=False, compare=False)
    # The checkpoints' sizes, oldest first, for a binary search: every dream
    # page and unit key asks which checkpoint first holds its leaf, and a pool
    # signs a checkpoint per build that admits something, so a scan of the
    # history cost O(checkpoints) a dream.
    checkpoint_sizes: tuple[int, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "erased_ids", frozenset(e.id for e in self.erased))
        object.__setattr__(self, "checkpoint_sizes", tuple(h.size for h in self.history))


class DeferredBody(Mapping[str, Any]):
    """A deferred dream's body as a mapping, loaded when first read
    (:attr:`builder.formats.dream.Dream.body`); a view pickled to a forked
    worker takes the dream as it is, and the worker loads the body itself if
    it was not loaded here."""

    __slots__ = ("_dream",)

    def __init__(self, dream: Dream) -> None:
        self._dream = dream

    def __getitem__(self, key: str) -> Any:
        return self._dream.body[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._dream.body)

    def __len__(self) -> int:
        return len(self._dream.body)

    # The body's own, not Mapping's (a Python-level try/except around
    # __getitem__): templates ask .get of each dream they render, and in a
    # cold build Mapping.get was 4% of all samples.
    def get(self, key: str, default: Any = None) -> Any:
        return self._dream.body.get(key, default)

    def __contains__(self, key: object) -> bool:
        return key in self._dream.body


def build_model(
    log: Log, directory: KeyDirectory, config: PoolConfig, *, base_url: str
) -> SiteModel:
    keys_by_author: dict[str, list[KeyView]] = defaultdict(list)
    for entry in directory.keys.values():
        keys_by_author[entry.author].append(
            KeyView(
                entry.key_id,
                entry.tier,
                entry.added,
                entry.rotated_from,
                log.key_index.get(entry.key_id),
            )
        )
    admitted = sorted(log.dreams.values(), key=lambda a: a.index, reverse=True)
    # Only each dream's head (builder.formats.dream.HEAD_FIELDS) is read here:
    # the text of a dream the store deferred stays unread unless a page shows it.
    children: dict[str, list[str]] = defaultdict(list)
    for a in admitted:
        parent = (a.dream.head.get("lineage") or {}).get("parent")
        if parent in log.dreams:
            children[parent].append(a.dream.id)

    # Slugs are unique within their namespace (authors/, tags/): see slugs().
    author_names = {a.dream.head["author"] for a in admitted}
    author_slug = slugs(author_names | set(keys_by_author))
    tag_slug = slugs({t for a in admitted for t in a.dream.head.get("tags", [])})
    # One TagRef per tag, shared by every dream that holds it (a tuple: never
    # changed): 350,000 of them at 100k dreams were a tenth of this function.
    tag_ref = {t: TagRef(t, s) for t, s in tag_slug.items()}.__getitem__

    dreams: list[DreamView] = []
    # Keys that signed an anonymized dream here: their authors are not listed
    # for it (docs/protocol.md §1.2). Found in this loop: a pass of its own
    # over 100k heads was a sixth of this function.
    hidden: set[str] = set()
    for a in admitted:
        head = a.dream.head
        anonymized = bool(head["consent"].get("anonymize"))
        if anonymized and anonymity.is_anonymized(head):
            hidden.add(a.dream.key_id)
        lineage = head.get("lineage") or {}
        parent = lineage.get("parent")
        tier = directory.keys[a.dream.key_id].tier
        # Appended newest first (``admitted``'s order): reversed, in log order.
        kids = children.get(a.dream.id)
        dreams.append(
            DreamView(
                id=a.dream.id,
                index=a.index,
                date=a.date,
                title=head["title"],
                text=a.dream.body if a.dream.loaded else DeferredBody(a.dream),
                entry_types=a.dream.entry_types,
                tags=tuple(map(tag_ref, head.get("tags", ()))),
                author=None if anonymized else head["author"],
                author_slug=None if anonymized else author_slug[head["author"]],
                key_id=None if anonymized else a.dream.key_id,
                tier=tier,
                anonymized=anonymized,
                derivatives=bool(head["consent"].get("derivatives", False)),
                generation=lineage.get("generation"),
                parent_id=parent,
                parent_in_pool=parent in log.dreams,
                children=tuple(reversed(kids)) if kids else (),
            )
        )

    by_author: dict[str, list[str]] = defaultdict(list)  # newest first, as dreams
    oldest: dict[str, int] = {}  # each author's oldest listed dream's log index
    for d in dreams:
        if d.author is not None:
            by_author[d.author].append(d.id)
            oldest[d.author] = d.index
    authors = []
    for name in sorted(author_names | set(keys_by_author)):
        keys = sorted(keys_by_author.get(name, []), key=lambda k: (k.added, k.key_id))
        own = tuple(by_author.get(name, ()))
        if not keys or (not own and not any(k.log_index is not None for k in keys)):
            continue
        if name == anonymity.NAME or (not own and any(k.key_id in hidden for k in keys)):
            continue
        tier = min((k.tier for k in keys), key=lambda t: TIER_RANK[t])
        # When the author became listable: their first listed dream or logged
        # key, leaving out a key that signed an anonymized dream under their own
        # name (pools from before one-time keys; admission refuses such dreams
        # now): its author is listed only once they sign openly, so they join
        # then, at the end, not back at that key's leaf. A listed author has a
        # listed dream or a logged key no such dream used (the test above).
        logged = [k.log_index for k in keys if k.log_index is not None and k.key_id not in hidden]
        joined = min([*logged, oldest[name]]) if own else min(logged)
        authors.append(AuthorView(name, author_slug[name], tuple(keys), own, tier, joined))

    tag_ids: dict[str, list[str]] = defaultdict(list)
    for d in dreams:
        for t in d.tags:
            tag_ids[t.name].append(d.id)
    tags = sorted(
        (
            TagView(name, tag_slug[name], tuple(ids), log.dreams[ids[-1]].index)
            for name, ids in tag_ids.items()
        ),
        key=lambda t: (-len(t.dream_ids), t.name),
    )

    erased = tuple(
        ErasedView(e.id, e.index, e.erasure_index, e.reason, e.date)
        for e in sorted(log.erased.values(), key=lambda e: e.index)
    )
    history = tuple(
        CheckpointView(
            h.size,
            b64_encode(log.tree.root(h.size)),
            h.time,
            log.state.checkpoints[h.size].decode("utf-8"),
        )
        for h in log.state.history
    )
    policy = log.state.policy or ""
    vkey = log.policy.logs[0].verifier.vkey if log.policy.logs else ""
    return SiteModel(
        title=config.title,
        origin=config.origin,
        base_url=base_url,
        k=config.k,
        dreams=tuple(dreams),
        by_id={d.id: d for d in dreams},
        authors=tuple(authors),
        tags=tuple(tags),
        erased=erased,
        checkpoint=history[-1] if history else None,
        history=history,
        policy=policy,
        vkey=vkey,
        heads={a.dream.id: a.dream.head for a in admitted},
    )
