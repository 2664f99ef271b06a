"""Patterns: the tags and words that many authors share, as counts only.

The rule, from the issue:

1. Only dreams whose signed consent says ``derivatives: true`` count, and by
   default only dreams signed with a ``member`` or ``maintainer`` key
   (``min_tier``), so a swarm of fresh guest keys can neither push a term
   over the threshold nor swell its counts.
2. A term is a pattern when counted dreams by at least ``k`` distinct authors
   hold it (``k`` from ``pool.yaml``). Authors are told apart by the name in
   the signed body, so one author with two rotated keys counts once. A dream
   under the reserved name ``anonymous`` (a one-time guest key, docs/protocol.md
   §1.2) counts as no author: any number of them may be one person. One
   anonymized before that rule, under its author's name, counts as that author.
3. A pattern shows its term, how many counted dreams hold it, how many
   authors (a number only) and how many entries of each type those dreams
   hold; never a text, a title, an author or a link to a dream.

Worked example, k = 3: ``ada`` and ``bob`` (members) and ``cy`` (guest) each
tag a dream ``postgres``. With the default ``min_tier="member"`` only two
authors count and nothing is shown; with ``min_tier="guest"`` the pattern is
``postgres · 3 dreams · 3 authors``.

4. Anything split over time or combined follows the same rule on its own:
   a tag pair is shown when counted dreams of at least ``k`` distinct authors
   hold both tags; a term's month is shown when counted dreams of at least
   ``k`` distinct authors hold the term in that month, else it is shown as
   suppressed. Since the term's total is shown, the suppressed months of a
   term together must be backed by ``k`` authors too (else the smallest
   shown months are suppressed with them), so subtracting the shown months
   from the total cannot single out one author's dreams. A month with no
   such dream shows 0: it names no one. Months come from the log (the time
   of the first checkpoint holding the dream, :class:`DreamView.date`),
   committed and signed data, never the build's clock.
5. The pool-wide chart of dreams admitted per month counts every dream in
   the log, unlimited by ``k``: each dream, with its date, is public on the
   log and dream pages already, so the count per month tells nothing new.

Keywords come from the title, summary and entry texts (never sources), as
:mod:`builder.site.keywords` tokenizes, folds (``workers`` → ``worker``) and
ranks them (TF-IDF over the counted dreams); a keyword is its folded word
and shows its commonest surface form. A dream contributes each word once.
English and Chinese keywords are ranked and listed apart, by script.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from markupsafe import Markup, escape

from builder import parallel
from builder.content import anonymity
from builder.formats.strictjson import as_int, as_list, as_str
from builder.site import charts, keywords
from builder.site.keywords import tokens
from builder.site.model import ENTRY_ORDER, TIER_RANK, DreamView, SiteModel, month_span

__all__ = [
    "TAGS_SHOWN",
    "Counts",
    "DreamWords",
    "Pair",
    "Pattern",
    "Patterns",
    "add_new",
    "compute_patterns",
    "count",
    "decode",
    "decode_counts",
    "derive",
    "encode",
    "encode_counts",
    "first_keywords",
    "inputs_key",
    "members_digest",
    "render_patterns_html",
    "stored",
    "suppress",
    "tokens",
    "words_for",
]

Buckets = tuple[tuple[str, int | None], ...]  # month → dreams, None when suppressed


@dataclass(frozen=True, slots=True)
class Pattern:
    kind: str  # "tag" | "keyword"
    term: str  # a tag, or a keyword's commonest surface form
    dreams: int  # counted dreams holding the term
    authors: int  # distinct counted authors (>= k); a number only, never names
    types: tuple[tuple[str, int], ...]  # entry type → count, canonical order, zeros omitted
    months: Buckets = ()  # every month of the pool, oldest first
    lang: str = ""  # a keyword's language by script: "en" or "zh"


@dataclass(frozen=True, slots=True)
class Pair:
    first: str  # two tags, in sorted order
    second: str
    dreams: int  # counted dreams holding both
    authors: int  # distinct counted authors of those (>= k)


@dataclass(frozen=True, slots=True)
class Patterns:
    k: int
    min_tier: str
    counted_dreams: int
    tags: tuple[Pattern, ...]  # dreams descending, then term
    keywords: tuple[Pattern, ...]  # by rank (keywords.rank); at most `limit` per language
    pairs: tuple[Pair, ...] = ()  # dreams descending, then authors, then tags
    admissions: tuple[tuple[str, int], ...] = ()  # month → dreams in the log, every month


# --- counting ---------------------------------------------------------------------------------


@dataclass(slots=True)
class _Tally:
    dreams: int = 0
    authors: set[str] = field(default_factory=set)
    types: Counter[str] = field(default_factory=Counter)
    # For keywords: dreams by how many of their entries hold the word; dreams by surface form.
    hits: Counter[int] = field(default_factory=Counter)
    surfaces: Counter[str] = field(default_factory=Counter)


@dataclass(slots=True)
class _Bucket:
    dreams: int = 0
    authors: set[str] = field(default_factory=set)


def _type_rank(entry_type: str) -> tuple[int, str]:
    # Unknown types cannot pass the schema; if one did, it sorts after the known ones.
    order = ENTRY_ORDER.index(entry_type) if entry_type in ENTRY_ORDER else len(ENTRY_ORDER)
    return (order, entry_type)


def _types(counts: Counter[str]) -> tuple[tuple[str, int], ...]:
    return tuple((ty, n) for ty, n in sorted(counts.items(), key=lambda i: _type_rank(i[0])) if n)


def suppress(months: Sequence[str], found: Mapping[str, tuple[int, set[str]]], k: int) -> Buckets:
    """Each month's count of dreams, or None where it may not be shown.

    ``found`` maps a month to (dreams, their distinct authors) for one term.
    A month backed by fewer than ``k`` authors is suppressed; then, while the
    suppressed months together are backed by fewer than ``k`` authors, the
    shown month with the fewest authors (the earliest of a tie) is suppressed
    too, so the total minus the shown months reveals no fewer than ``k``
    authors' dreams. Months with no dream show 0."""
    hidden = {m for m, (n, a) in found.items() if n and len(a) < k}
    while hidden and len(set().union(*(found[m][1] for m in hidden))) < k:
        rest = [m for m, (n, _) in found.items() if n and m not in hidden]
        if not rest:
            break
        hidden.add(min(rest, key=lambda m: (len(found[m][1]), m)))
    return tuple((m, None if m in hidden else found.get(m, (0, set()))[0]) for m in months)


def _month_span(model: SiteModel) -> tuple[str, ...]:
    """Every month from the pool's first dream's to its last's, oldest first."""
    months = sorted({d.month for d in model.dreams if len(d.month) == 7})
    return month_span(months[0], months[-1]) if months else ()


TAGS_SHOWN = 50
"""The most tags the page charts and lists (those most dreams hold): every row
carries a sparkline of every month of the pool, so a pool whose members share
thousands of tags made a page of megabytes. The page says how many are shared."""

MIN_TIER = "member"
"""The least trusted tier whose dreams the site's patterns count (the default of
:func:`compute_patterns`, which the build uses)."""
PAIRS_LIMIT = 12
KEYWORDS_LIMIT = 40
"""The most keywords of each language the patterns page lists (the default of
:func:`compute_patterns`); ``dream_stats`` shows the first of them."""


def counts(d: DreamView, min_tier: str = MIN_TIER) -> bool:
    """Whether ``d`` counts toward the patterns: its author consented to
    derivatives and its key's tier is ``min_tier`` or higher. A dream page says
    so by this same rule."""
    # A lower rank is a higher tier.
    return d.derivatives and TIER_RANK[d.tier] <= TIER_RANK[min_tier]


def _counted(model: SiteModel, min_tier: str) -> list[tuple[DreamView, str]]:
    """The dreams that count, each with its author's name from the signed body
    (the view has none for anonymized dreams); the name is only ever counted."""
    if min_tier not in TIER_RANK:
        raise ValueError(f"min_tier must be one of {sorted(TIER_RANK)}, is {min_tier!r}")
    counted = ((d, str(model.heads[d.id]["author"])) for d in model.dreams if counts(d, min_tier))
    # One-time keys under the reserved name may all be one person, perhaps an
    # author counted already: they count as no author (docs/protocol.md §1.2).
    return [(d, author) for d, author in counted if author != anonymity.NAME]


DreamWords = tuple[tuple[str, ...], tuple[tuple[str, tuple[str, ...]], ...]]


def dream_words(dream: DreamView) -> DreamWords:
    """A dream's keywords, and each entry's (type, keywords), sorted (tuples
    pickle and load faster than sets, and the cache keeps them). Words are
    interned: a pool repeats a small vocabulary, and one str per occurrence
    made the words of a million dreams several gigabytes."""
    entry_words = tuple(
        (e.type, tuple(sorted(map(sys.intern, tokens(e.text))))) for e in dream.entries
    )
    own = tokens(dream.title) | tokens(dream.summary)
    for _, ws in entry_words:
        own.update(ws)
    return tuple(sorted(map(sys.intern, own))), entry_words


def _count_words(terms: dict[str, _Tally], found: DreamWords, author: str) -> set[str]:
    """Add one dream's words to ``terms`` by folded key; its keys."""
    own, entry_words = found
    keys: dict[str, list[str]] = {}
    for word in own:
        keys.setdefault(keywords.fold(word), []).append(word)
    entries: Counter[str] = Counter()
    for _, ws in entry_words:
        entries.update({keywords.fold(w) for w in ws})
    for key, surfaces in keys.items():
        tally = terms.get(key)
        if tally is None:
            tally = terms[key] = _Tally()
        tally.dreams += 1
        tally.authors.add(author)
        tally.hits[entries[key]] += 1
        tally.surfaces.update(surfaces)
    # Each entry of a type counts once toward each of its words.
    for ty, ws in entry_words:
        for key in {keywords.fold(w) for w in ws}:
            terms[key].types[ty] += 1
    return set(keys)


@dataclass(slots=True)
class Counts:
    """What :func:`count` tallies over the counted dreams, before ``k`` decides
    what may be shown (:func:`derive`): kept in the build's store so that a build
    that only adds counted dreams adds theirs (:func:`add_new`) instead of
    reading every counted dream's words and counting them all again.

    Authors are sets: a tally only ever grows here. Any other change of the
    counted dreams (an erased dream, a tier or consent that changed, another
    ``min_tier``) is found by :attr:`digest` and counted afresh. The months of
    a keyword are tallied only for the keywords in ``word_months`` (those that
    ranked near the top when last counted in full, :data:`TRACKED_FACTOR`): a
    keyword outside them that would be shown makes :func:`derive` give None,
    and the caller counts in full."""

    min_tier: str
    dreams: int  # how many dreams are counted
    digest: str  # members_digest of those dreams, oldest first
    tags: dict[str, _Tally] = field(default_factory=dict)
    tag_months: dict[str, dict[str, _Bucket]] = field(default_factory=dict)
    pairs: dict[tuple[str, str], _Bucket] = field(default_factory=dict)
    terms: dict[str, _Tally] = field(default_factory=dict)
    word_months: dict[str, dict[str, _Bucket]] = field(default_factory=dict)


TRACKED_FACTOR = 2
""":func:`count` tallies the months of this many times ``limit`` keywords of each
language, the first by rank among all words (shared by ``k`` authors or not), and of
every keyword it shows: enough that a few new dreams seldom lift an untracked word
into the shown ones, which would cost a full count."""

_MEMBERS = "dreampool-pattern-members/1"


def _member_row(dream: DreamView, author: str) -> bytes:
    """What a counted dream adds to the counts but its words (which depend on its
    id alone: :func:`dream_words`), one line of :func:`members_digest`."""
    row = [dream.id, dream.month, author, [t.name for t in dream.tags]]
    row.append(list(dream.entry_types))
    return json.dumps(row, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"


def _members_hash(min_tier: str) -> hashlib._Hash:
    h = hashlib.sha256()
    h.update(json.dumps([_MEMBERS, min_tier]).encode("ascii") + b"\n")
    return h


def members_digest(counted: Sequence[tuple[DreamView, str]], min_tier: str) -> str:
    """A SHA-256 (hex) of ``counted`` (oldest first) as :func:`count` tallies them."""
    h = _members_hash(min_tier)
    for dream, author in counted:
        h.update(_member_row(dream, author))
    return h.hexdigest()


def _add(c: Counts, dream: DreamView, author: str, found: DreamWords) -> set[str]:
    """Add one counted dream to ``c``; its words' folded keys."""
    names = sorted({t.name for t in dream.tags})
    for tag in names:
        t = c.tags.get(tag)
        if t is None:
            t = c.tags[tag] = _Tally()
        t.dreams += 1
        t.authors.add(author)
        t.types.update(dream.entry_types)
        b = c.tag_months.setdefault(tag, {}).setdefault(dream.month, _Bucket())
        b.dreams += 1
        b.authors.add(author)
    for pair in itertools.combinations(names, 2):
        b = c.pairs.setdefault(pair, _Bucket())
        b.dreams += 1
        b.authors.add(author)
    keys = _count_words(c.terms, found, author)
    _add_months(c, dream, author, keys)
    c.dreams += 1
    return keys


def _add_months(c: Counts, dream: DreamView, author: str, keys: Iterable[str]) -> None:
    for key in c.word_months.keys() & keys:
        b = c.word_months[key].setdefault(dream.month, _Bucket())
        b.dreams += 1
        b.authors.add(author)


def words_for(
    dreams: Sequence[DreamView], known: Mapping[str, DreamWords], spread: bool
) -> list[DreamWords]:
    """The words of each of ``dreams``: from ``known`` (by id), else found (on
    every core with ``spread``)."""
    missing = [d for d in dreams if d.id not in known]
    found: dict[str, DreamWords] = {}
    # The dictionary's entries for all their characters in one read, not one a
    # dream (keywords.prepare); before forking, the whole of it, which every
    # worker then shares instead of reading its own.
    if spread and len(missing) >= parallel.MIN_ITEMS:
        keywords.prepare_all()
    else:
        keywords.prepare(t for d in missing for t in _texts(d))
    if spread and missing:
        found = dict(
            zip((d.id for d in missing), parallel.map_ordered(dream_words, missing), strict=True)
        )
    return [known.get(d.id) or found.get(d.id) or dream_words(d) for d in dreams]


def _texts(dream: DreamView) -> Iterator[str]:
    """The texts :func:`dream_words` reads."""
    yield dream.title
    yield dream.summary
    for e in dream.entries:
        yield e.text


def count(
    model: SiteModel,
    *,
    min_tier: str = MIN_TIER,
    limit: int = KEYWORDS_LIMIT,
    words: dict[str, DreamWords] | None = None,
    spread: bool = False,
) -> Counts:
    """The counts of every counted dream of ``model`` (see :func:`compute_patterns`
    for ``words`` and ``spread``), with the months of the keywords that rank
    near the top (:data:`TRACKED_FACTOR`) for ``model.k`` and ``limit``."""
    if limit < 0:
        raise ValueError(f"limit must be >= 0, is {limit}")
    counted = _counted(model, min_tier)
    counted.reverse()  # oldest first: the order add_new extends
    found = words_for([d for d, _ in counted], words or {}, spread)
    if words is not None:
        words.clear()
        words.update(zip((d.id for d, _ in counted), found, strict=True))
    c = Counts(min_tier, 0, members_digest(counted, min_tier))
    # Each dream's keys for the months' pass, as a tuple: a set of them held for
    # every counted dream was 2.3 KB a dream, most of this process's own memory.
    keys_of = [tuple(_add(c, d, author, w)) for (d, author), w in zip(counted, found, strict=True)]
    # The months of the chosen words only: a second pass, not a bucket per word of the pool.
    tracked = _tracked(c, model.k, limit)
    c.word_months = {key: {} for key in tracked}
    for (dream, author), keys in zip(counted, keys_of, strict=True):
        _add_months(c, dream, author, keys)
    return c


def _tracked(c: Counts, k: int, limit: int) -> set[str]:
    """The keys :func:`count` tallies the months of: those :func:`derive` would
    show, and the first ``TRACKED_FACTOR * limit`` of each language among all."""
    shown = {r.key for r, _ in _chosen(c, k, limit)}
    top = _first_of_each_language(_ranked(c, c.terms), TRACKED_FACTOR * limit)
    return shown | {r.key for r, _ in top}


def _ranked(c: Counts, terms: Mapping[str, _Tally]) -> list[keywords.Ranked]:
    """``terms`` (of ``c``) ranked over the counted dreams (:func:`keywords.rank`)."""
    hits = {key: t.hits for key, t in terms.items()}
    return keywords.rank(hits, {key: t.surfaces for key, t in terms.items()}, c.dreams)


def _first_of_each_language(
    ranked: Iterable[keywords.Ranked], limit: int
) -> list[tuple[keywords.Ranked, str]]:
    """The first ``limit`` of ``ranked`` of each language, in rank order, with it."""
    per_lang: Counter[str] = Counter()
    first = []
    for r in ranked:
        lang = keywords.language(r.surface)
        if per_lang[lang] < limit:
            per_lang[lang] += 1
            first.append((r, lang))
    return first


def add_new(
    kept: Counts,
    model: SiteModel,
    words: Callable[[Sequence[DreamView]], Sequence[DreamWords]],
) -> Counts | None:
    """``kept`` with the dreams counted since it was made added, if the counted
    dreams of ``model`` are those of ``kept`` (as :func:`members_digest` saw
    them, oldest first) followed by new ones; else None (count in full).
    ``words`` gives the words of the new dreams. ``kept`` is changed in place."""
    counted = _counted(model, kept.min_tier)
    counted.reverse()
    if len(counted) < kept.dreams:
        return None
    h = _members_hash(kept.min_tier)
    for dream, author in counted[: kept.dreams]:
        h.update(_member_row(dream, author))
    if h.hexdigest() != kept.digest:
        return None
    new = counted[kept.dreams :]
    for (dream, author), found in zip(new, words([d for d, _ in new]), strict=True):
        h.update(_member_row(dream, author))
        _add(kept, dream, author, found)
    kept.digest = h.hexdigest()
    return kept


def _chosen(c: Counts, k: int, limit: int) -> list[tuple[keywords.Ranked, str]]:
    """The keywords shown, by rank, with their language: at most ``limit`` of
    each, among the words counted dreams of ``k`` or more authors hold."""
    shared = {key: t for key, t in c.terms.items() if len(t.authors) >= k}
    return _first_of_each_language(_ranked(c, shared), limit)


def derive(c: Counts, model: SiteModel, *, limit: int = KEYWORDS_LIMIT) -> Patterns | None:
    """The patterns shown from the counts ``c`` of ``model``'s counted dreams, by
    the rule in the module doc; None if a keyword to show is one whose months
    ``c`` does not tally (count in full)."""
    if limit < 0:
        raise ValueError(f"limit must be >= 0, is {limit}")
    k = model.k
    months = _month_span(model)
    chosen = _chosen(c, k, limit)
    if any(r.key not in c.word_months for r, _ in chosen):
        return None
    shown_tags = [
        Pattern(
            "tag",
            tag,
            t.dreams,
            len(t.authors),
            _types(t.types),
            suppress(months, {m: (b.dreams, b.authors) for m, b in c.tag_months[tag].items()}, k),
        )
        for tag, t in c.tags.items()
        if len(t.authors) >= k
    ]
    shown_tags.sort(key=lambda p: (-p.dreams, p.term))
    shown_words = tuple(
        Pattern(
            "keyword",
            r.surface,
            c.terms[r.key].dreams,
            len(c.terms[r.key].authors),
            _types(c.terms[r.key].types),
            suppress(
                months, {m: (b.dreams, b.authors) for m, b in c.word_months[r.key].items()}, k
            ),
            lang,
        )
        for r, lang in chosen
    )
    shown_pairs = sorted(
        (
            Pair(a, b, v.dreams, len(v.authors))
            for (a, b), v in c.pairs.items()
            if len(v.authors) >= k
        ),
        key=lambda p: (-p.dreams, -p.authors, p.first, p.second),
    )
    return Patterns(
        k=k,
        min_tier=c.min_tier,
        counted_dreams=c.dreams,
        tags=tuple(shown_tags),
        keywords=shown_words,
        pairs=tuple(shown_pairs[:PAIRS_LIMIT]),
        admissions=_admissions(model, months),
    )


def compute_patterns(
    model: SiteModel,
    *,
    min_tier: str = MIN_TIER,
    limit: int = KEYWORDS_LIMIT,
    words: dict[str, DreamWords] | None = None,
    spread: bool = False,
) -> Patterns:
    """The tag, tag pair and keyword patterns of the pool, by the rule in the
    module doc, each with its counts per month: :func:`count`, then :func:`derive`.

    Requires ``min_tier`` in guest, member, maintainer and ``limit >= 0``
    (it bounds the keywords of each language only: tags are few, words are
    many). ``words``, if given, holds :func:`dream_words` by dream id from an
    earlier build (a dream's words depend on its id alone); it is left holding
    exactly the counted dreams' words, for the next build. With ``spread``,
    the words not known yet are found on every core
    (:func:`builder.parallel.map_ordered`): jieba takes ≈330 µs a dream, 5
    minutes on one core at a million dreams."""
    found = derive(
        count(model, min_tier=min_tier, limit=limit, words=words, spread=spread), model, limit=limit
    )
    assert found is not None, "count tallies the months of every keyword derive shows"
    return found


def _admissions(model: SiteModel, months: Sequence[str]) -> tuple[tuple[str, int], ...]:
    """Dreams in the log per month, every month of ``months`` (rule 5: every dream)."""
    admitted = Counter(d.month for d in model.dreams)
    return tuple((m, admitted.get(m, 0)) for m in months)


def first_keywords(found: Patterns, limit: int) -> Patterns:
    """``found`` with at most ``limit`` keywords of each language, the first by
    rank: what :func:`compute_patterns` gives with that smaller ``limit``, since
    it chooses each language's keywords in rank order and counts each one alone."""
    if limit < 0:
        raise ValueError(f"limit must be >= 0, is {limit}")
    per_lang: Counter[str] = Counter()
    kept = []
    for p in found.keywords:
        if per_lang[p.lang] < limit:
            per_lang[p.lang] += 1
            kept.append(p)
    return dataclasses.replace(found, keywords=tuple(kept))


def inputs_key(model: SiteModel, *, min_tier: str = MIN_TIER, limit: int = KEYWORDS_LIMIT) -> str:
    """A SHA-256 (hex) of what :func:`compute_patterns` reads from ``model`` with
    these arguments, but for the admissions per month (:func:`stored`): ``k``, the
    tier rule, the limit, the pool's first and last month, and of each dream that
    counts (:func:`_counted`), in the model's order, its id, month, signed author,
    tags and entries' types. A result stored under it (the build's store,
    :mod:`builder.buildcache`) is taken only for the same inputs; a dream that
    does not count (a guest's, one without consent to derivatives) changes it only
    if it widens the months.
    A dream's words are not read: they depend on its id alone (:func:`dream_words`),
    as the store's words section already assumes."""
    span = _month_span(model)
    rows: list[Any] = [
        ["dreampool-patterns-inputs/1", model.k, min_tier, limit, span[:1], span[-1:]]
    ]
    rows += (
        [d.id, d.month, author, [t.name for t in d.tags], list(d.entry_types)]
        for d, author in _counted(model, min_tier)
    )
    text = json.dumps(rows, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def stored(found: Patterns, model: SiteModel) -> Patterns:
    """The patterns of ``model`` from ``found``, which :func:`compute_patterns` gave
    for inputs of the same :func:`inputs_key`: the same but for the dreams admitted
    per month, which count every dream (rule 5) and are counted here again."""
    return dataclasses.replace(found, admissions=_admissions(model, _month_span(model)))


# --- kept in the build's store ---------------------------------------------------------------
#
# ``encode`` writes the patterns as JSON arrays in field order; ``decode`` reads
# back only what it would have written (THREATS.md T44: derived state is data,
# read as hostile), and any other bytes are None, a miss: found again.


def encode(p: Patterns) -> bytes:
    """``p`` as the store keeps it (:mod:`builder.buildcache`, section ``patterns``)."""

    def row(q: Pattern) -> list[Any]:
        return [q.kind, q.term, q.dreams, q.authors, q.types, q.months, q.lang]

    value = [
        p.k,
        p.min_tier,
        p.counted_dreams,
        [row(q) for q in p.tags],
        [row(q) for q in p.keywords],
        [[q.first, q.second, q.dreams, q.authors] for q in p.pairs],
        p.admissions,
    ]
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def decode(data: bytes) -> Patterns | None:
    """The patterns :func:`encode` wrote as ``data``, or None for any other bytes."""
    try:
        k, min_tier, counted, tags, words, pairs, admissions = as_list(json.loads(data), 7)
        return Patterns(
            k=as_int(k),
            min_tier=as_str(min_tier),
            counted_dreams=as_int(counted),
            tags=tuple(_pattern(q, "tag") for q in as_list(tags)),
            keywords=tuple(_pattern(q, "keyword") for q in as_list(words)),
            pairs=tuple(
                Pair(as_str(a), as_str(b), as_int(n), as_int(m))
                for a, b, n, m in (as_list(q, 4) for q in as_list(pairs))
            ),
            admissions=_counts(admissions),
        )
    except (ValueError, TypeError, UnicodeDecodeError, RecursionError):
        return None


# ``encode_counts`` writes the counts as JSON arrays, each author's name once
# (a set of authors is a sorted list of indices into that list); ``decode_counts``
# reads back only that shape (THREATS.md T44), and any other bytes are None.

_COUNTS = "dreampool-pattern-counts/1"


def encode_counts(c: Counts) -> bytes:
    """``c`` as the store keeps it (:mod:`builder.buildcache`, section ``counts``)."""
    everyone: set[str] = set()
    for t in itertools.chain(c.tags.values(), c.terms.values()):
        everyone |= t.authors
    for p in c.pairs.values():
        everyone |= p.authors
    for by_month in itertools.chain(c.tag_months.values(), c.word_months.values()):
        for b in by_month.values():
            everyone |= b.authors
    names = {a: i for i, a in enumerate(sorted(everyone))}  # the same bytes for equal counts

    def who(authors: set[str]) -> list[int]:
        return sorted(names[a] for a in authors)

    def items(counter: Mapping[Any, int]) -> list[list[Any]]:
        return sorted([key, n] for key, n in counter.items() if n)

    def buckets(by_month: Mapping[str, _Bucket]) -> list[list[Any]]:
        return [[m, b.dreams, who(b.authors)] for m, b in sorted(by_month.items())]

    tags = [
        [tag, t.dreams, who(t.authors), items(t.types), buckets(c.tag_months.get(tag, {}))]
        for tag, t in sorted(c.tags.items())
    ]
    pairs = [[a, b, v.dreams, who(v.authors)] for (a, b), v in sorted(c.pairs.items())]
    terms = [
        [key, t.dreams, who(t.authors), items(t.hits), items(t.surfaces), items(t.types)]
        for key, t in sorted(c.terms.items())
    ]
    months = [[key, buckets(by_month)] for key, by_month in sorted(c.word_months.items())]
    value = [_COUNTS, c.min_tier, c.dreams, c.digest, list(names), tags, pairs, terms, months]
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def decode_counts(data: bytes) -> Counts | None:
    """The counts :func:`encode_counts` wrote as ``data``, or None for any other bytes."""
    try:
        form, min_tier, dreams, digest, names, tags, pairs, terms, months = as_list(
            json.loads(data), 9
        )
        if form != _COUNTS or as_str(min_tier) not in TIER_RANK:
            raise ValueError("not pattern counts")
        authors = [as_str(a) for a in as_list(names)]

        def who(v: Any) -> set[str]:
            return {authors[_natural(i, len(authors))] for i in as_list(v)}

        def counter(v: Any, key: Callable[[Any], Any]) -> Counter[Any]:
            return Counter({key(a): _natural(n) for a, n in (as_list(x, 2) for x in as_list(v))})

        def buckets(v: Any) -> dict[str, _Bucket]:
            rows = (as_list(x, 3) for x in as_list(v))
            return {as_str(m): _Bucket(_natural(n), who(a)) for m, n, a in rows}

        c = Counts(as_str(min_tier), _natural(dreams), as_str(digest))
        for tag, n, who_, types, by_month in (as_list(x, 5) for x in as_list(tags)):
            c.tags[as_str(tag)] = _Tally(_natural(n), who(who_), counter(types, as_str))
            c.tag_months[as_str(tag)] = buckets(by_month)
        for a, b, n, who_ in (as_list(x, 4) for x in as_list(pairs)):
            c.pairs[(as_str(a), as_str(b))] = _Bucket(_natural(n), who(who_))
        for key, n, who_, hits, surfaces, types in (as_list(x, 6) for x in as_list(terms)):
            c.terms[as_str(key)] = _Tally(
                _natural(n),
                who(who_),
                counter(types, as_str),
                counter(hits, _natural),
                counter(surfaces, as_str),
            )
        c.word_months = {
            as_str(key): buckets(v) for key, v in (as_list(x, 2) for x in as_list(months))
        }
        _check_counts(c)
        return c
    except (ValueError, TypeError, IndexError, UnicodeDecodeError, RecursionError):
        return None


def _check_counts(c: Counts) -> None:
    """ValueError unless the tallies of ``c`` add up as :func:`count` and
    :func:`add_new` leave them: every tally of 1 to ``c.dreams`` dreams by 1 to
    that many authors, a term's dreams by entries (``hits``) and a tag's or a
    tracked keyword's months adding up to its dreams, by its authors. A row that
    counted no dream holds no tally, so no row fits every pool; and
    :func:`keywords.rank` never sees a word held by more dreams than counted."""

    def tally(n: int, authors: set[str]) -> None:
        if not 1 <= n <= c.dreams or not 1 <= len(authors) <= n:
            raise ValueError("a tally does not add up")

    def months(by_month: Mapping[str, _Bucket], n: int, authors: set[str]) -> None:
        for b in by_month.values():
            tally(b.dreams, b.authors)
            if not b.authors <= authors:
                raise ValueError("a month names an author its term has not")
        if sum(b.dreams for b in by_month.values()) != n:
            raise ValueError("the months do not add up")

    for tag, t in c.tags.items():
        tally(t.dreams, t.authors)
        months(c.tag_months[tag], t.dreams, t.authors)
    for v in c.pairs.values():
        tally(v.dreams, v.authors)
    for t in c.terms.values():
        tally(t.dreams, t.authors)
        if sum(t.hits.values()) != t.dreams:
            raise ValueError("a term's dreams by entries do not add up")
    for key, by_month in c.word_months.items():
        term = c.terms.get(key)
        if term is None:
            raise ValueError("the months of a word not counted")
        months(by_month, term.dreams, term.authors)


def _natural(v: Any, below: int | None = None) -> int:
    """``v`` if it is an int >= 0 (and < ``below``), else ValueError."""
    n = as_int(v)
    if n < 0 or (below is not None and n >= below):
        raise ValueError(f"{n} is out of range")
    return n


def _pattern(v: Any, kind: str) -> Pattern:
    kind_, term, dreams, authors, types, months, lang = as_list(v, 7)
    if kind_ != kind:
        raise ValueError(f"not a {kind} pattern")
    return Pattern(
        kind,
        as_str(term),
        as_int(dreams),
        as_int(authors),
        _counts(types),
        tuple(
            (as_str(m), None if n is None else as_int(n))
            for m, n in (as_list(x, 2) for x in as_list(months))
        ),
        as_str(lang),
    )


def _counts(v: Any) -> tuple[tuple[str, int], ...]:
    return tuple((as_str(a), as_int(n)) for a, n in (as_list(x, 2) for x in as_list(v)))


# --- HTML -------------------------------------------------------------------------------------

# Fallbacks of a page without the stylesheet, each at least 3:1 against a white
# page (WCAG 1.4.11, non-text contrast); style.css sets each theme's by class.
_TYPE_COLOURS = {
    "fact": "#2f6fb8",
    "decision": "#b45f10",
    "preference": "#9a4fc0",
    "lesson": "#23804f",
    "rule": "#6b7280",
    "warning": "#c2413a",
    "theory": "#8a7300",
    "plan": "#1f7f86",
}
_TIER_PHRASE = {
    "guest": "keys of any tier",
    "member": "member and maintainer keys",
    "maintainer": "maintainer keys",
}
_LANG_NAME = {"en": ("English", "Latin-script words"), "zh": ("Chinese", "中文")}


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _types_text(types: Iterable[tuple[str, int]]) -> str:
    # A type and its count never part at a line break (a no-break space).
    return " · ".join(f"{ty}\u00a0{n}" for ty, n in types) or "titles and summaries only"


def _legend() -> str:
    items = "".join(
        f'<li><svg xmlns="http://www.w3.org/2000/svg" class="swatch" width="12" height="12" '
        f'viewBox="0 0 12 12" aria-hidden="true" focusable="false"><rect class="seg-{t}" '
        f'width="12" height="12" fill="{_TYPE_COLOURS[t]}"/></svg>{t}</li>'
        for t in ENTRY_ORDER
    )
    return f'<ol class="type-legend" aria-label="Entry type colours, in bar order">{items}</ol>'


def _trend(p: Pattern, chart_id: str, k: int) -> str:
    name = ("#" if p.kind == "tag" else "") + p.term
    return charts.columns_svg(
        p.months,
        chart_id=chart_id,
        title=f"{name}: counted dreams per month",
        unit="dreams",
        suppressed=f"fewer than {k} authors, not shown",
        spark=True,
    )


def _table(
    caption: str, head: str, rows: Sequence[Pattern], prefix: str, k: int, trends: bool
) -> str:
    body = []
    for i, p in enumerate(rows):
        lang = ' lang="zh"' if p.lang == "zh" else ""
        term = f'<span class="term" dir="auto"{lang}>{escape(p.term)}</span>'
        term += f'<span class="types">{escape(_types_text(p.types))}</span>'
        trend = f'<td class="trend">{_trend(p, f"{prefix}-{i}", k)}</td>' if trends else ""
        body.append(
            f'<tr><th scope="row">{term}</th>'
            f'<td class="num">{p.dreams}</td><td class="num">{p.authors}</td>{trend}</tr>'
        )
    trend_head = '<th scope="col">Per month</th>' if trends else ""
    return (
        f'<div class="table-wrap" role="region" tabindex="0" aria-label="{escape(caption)}">'
        f'<table class="patterns-table"><caption>{escape(caption)}</caption>'
        f'<thead><tr><th scope="col">{escape(head)} · entry types</th>'
        f'<th scope="col" class="num">Dreams</th><th scope="col" class="num">Authors</th>'
        f"{trend_head}</tr></thead><tbody>{''.join(body)}</tbody></table></div>"
    )


def _figure(svg: str, caption: str) -> str:
    return f'<figure class="chart-figure">{svg}<figcaption>{caption}</figcaption></figure>'


def render_patterns_html(p: Patterns) -> str:
    """The patterns page body as trusted HTML (a :class:`markupsafe.Markup`,
    so a template inserts it unescaped): every term is escaped here, and no
    text, author or link to a dream or author appears."""
    k = p.k
    trends = len(p.admissions) >= 2
    parts = [
        '<section class="patterns">',
        f'<p class="patterns-intro">Counted: {_plural(p.counted_dreams, "dream")} whose '
        f"authors consented to derivatives, signed with "
        f"{_TIER_PHRASE.get(p.min_tier, escape(p.min_tier))}. A tag, pair or word is shown "
        f"once dreams by at least {_plural(k, 'different author')} use it, and a month of it "
        f"only when that month's dreams holding it are by {k} or more authors: counts only, "
        f"no dream text, title or author appears here.</p>",
        '<h2 id="over-time">The pool over time</h2>',
    ]
    total = sum(n for _, n in p.admissions)
    if p.admissions:
        svg = charts.columns_svg(
            p.admissions,
            chart_id="chart-admissions",
            title="Dreams admitted to the log per month",
            unit="dreams",
        )
        parts.append(
            _figure(
                svg,
                f"All {_plural(total, 'dream')} in the log, by the month of the first "
                "checkpoint holding each: every dream and its date are public on the log, "
                "so this count is not limited to k authors.",
            )
        )
        if not trends:
            parts.append(
                '<p class="patterns-note">Every dream so far is from '
                f"{escape(p.admissions[0][0])}: the tables show a trend per month once "
                "the pool spans two months.</p>"
            )
    else:
        parts.append('<p class="empty">No dream is in the log yet.</p>')

    parts.append('<h2 id="tag-patterns">Shared tags</h2>')
    if p.tags:
        listed = p.tags[:TAGS_SHOWN]
        rows = [("#" + q.term, q.types) for q in listed]
        svg = charts.stacked_bars_svg(
            rows,
            chart_id="chart-tag-types",
            title="Entry types in the dreams of each shared tag",
            fills=_TYPE_COLOURS,
        )
        parts.append(_legend())
        parts.append(
            _figure(
                svg,
                "Each bar is one tag's entries, by type in the legend's order; the number is "
                "its entries in counted dreams.",
            )
        )
        if len(p.tags) > len(listed):
            parts.append(
                f'<p class="patterns-note">{len(p.tags)} tags are used by at least '
                f"{_plural(k, 'author')}: the {len(listed)} that most dreams hold are shown.</p>"
            )
        parts.append(
            _table(f"Tags used by at least {k} authors", "Tag", listed, "trend-tag", k, trends)
        )
    else:
        parts.append(f'<p class="empty">No tag is used by {k} authors yet.</p>')

    parts.append('<h2 id="tag-pairs">Tags that go together</h2>')
    if p.pairs:
        items = "".join(
            f'<li><span class="term" dir="auto">#{escape(q.first)}</span> + '
            f'<span class="term" dir="auto">#{escape(q.second)}</span> '
            f'<span class="counts">{_plural(q.dreams, "dream")} · '
            f"{_plural(q.authors, 'author')}</span></li>"
            for q in p.pairs
        )
        parts.append(
            '<p class="patterns-note">Pairs of tags that counted dreams of at least '
            f'{k} authors carry together, most dreams first.</p><ol class="tag-pairs">{items}</ol>'
        )
    else:
        parts.append(f'<p class="empty">No two tags go together in dreams of {k} authors yet.</p>')

    parts.append('<h2 id="keyword-patterns">Keywords</h2>')
    parts.append(
        '<p class="patterns-note">Ranked by TF-IDF over the counted dreams: a word many '
        "dreams use, and repeat through their entries, ranks high; one nearly every "
        "dream uses is held back. Function words and generic verbs are left out; plurals "
        "count with their singular, under the form most dreams use.</p>"
    )
    for lang in ("en", "zh"):
        name, native = _LANG_NAME[lang]
        rows_of = [q for q in p.keywords if q.lang == lang]
        lang_attr = ' lang="zh"' if lang == "zh" else ""
        parts.append(
            f'<h3 id="keywords-{lang}">{name} <span class="muted"{lang_attr}>{native}</span></h3>'
        )
        if rows_of:
            parts.append(
                _table(
                    f"{name} words used by at least {k} authors, by rank",
                    "Keyword",
                    rows_of,
                    f"trend-{lang}",
                    k,
                    trends,
                )
            )
        else:
            parts.append(f'<p class="empty">No {name} word is used by {k} authors yet.</p>')
    parts.append("</section>")
    return Markup("\n".join(parts))
