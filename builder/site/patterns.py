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

Keywords come from the title, summary and entry texts (never sources): Latin
words are lowercased runs of letters and digits, at least three long, not
pure numbers and not English stopwords; Chinese runs are segmented by jieba
and keep words of two or more characters that are not stopwords. A dream
contributes each word once. URLs, entities and Markdown punctuation are
dropped before tokenizing, so link targets and ``**`` never become words.
"""

from __future__ import annotations

import functools
import re
import sys
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from markupsafe import Markup, escape

from builder import parallel
from builder.content import anonymity
from builder.site.model import ENTRY_ORDER, TIER_RANK, DreamView, SiteModel

__all__ = [
    "Pattern",
    "Patterns",
    "bar_chart_svg",
    "compute_patterns",
    "render_patterns_html",
    "tokens",
]


@dataclass(frozen=True, slots=True)
class Pattern:
    kind: str  # "tag" | "keyword"
    term: str
    dreams: int  # counted dreams holding the term
    authors: int  # distinct counted authors (>= k); a number only, never names
    types: tuple[tuple[str, int], ...]  # entry type → count, canonical order, zeros omitted


@dataclass(frozen=True, slots=True)
class Patterns:
    k: int
    min_tier: str
    counted_dreams: int
    tags: tuple[Pattern, ...]  # dreams descending, then term
    keywords: tuple[Pattern, ...]  # dreams descending, then term; at most `limit`


# --- tokenizing -------------------------------------------------------------------------------

# Kept as text so the lists read as lists; split once at import.
_EN_STOPWORD_TEXT = """
    a about above across after again against all almost along already also although always am
    among an and another any anyone anything are aren around as at away back be became because
    become been before being below between both but by can cannot could couldn did didn do does
    doesn doing don done down during each either else enough even ever every few first for from
    further get gets getting got had hadn has hasn have haven having he her here hers herself
    him himself his how however i if in instead into is isn it its itself just least less let
    like made make makes many may maybe me might more most much must my myself need needs
    neither never new next no nor not nothing now of off often on once one only onto or other
    others otherwise our ours ourselves out over own per rather really same see seen shall she
    should shouldn since so some something still such than that the their theirs them themselves
    then there these they thing things this those though through thus to too two under until up
    upon us use used uses using very via was wasn way we well were weren what whatever when
    where whether which while who whom whose why will with within without won would wouldn yes
    yet you your yours yourself
"""

_ZH_STOPWORD_TEXT = """
    的 了 和 是 在 我 也 就 都 而 及 与 或 一个 没有 我们 这个 可以 因为 所以 但是 如果 然后
    还是 不是 就是 这样 那样 那个 这些 那些 他们 你们 它们 自己 什么 怎么 为了 已经 而且 或者
    以及 之后 之前 时候 通过 进行 对于 关于 一些 一样 不要 只有 需要 不会 不能 可能 应该 还有
    其他 其中 一次 一下 这种 那种 每个 所有 只是 只用 无法 比如 例如 其实 这里 那里 现在 后来
    直接 全部 改为 改成 本身 必须 不同 每条 一直 同时 结果 出现 发现 之间 这次 那次 不再
"""
_EN_STOPWORDS = frozenset(_EN_STOPWORD_TEXT.split())
_ZH_STOPWORDS = frozenset(_ZH_STOPWORD_TEXT.split())

# Han ideographs: CJK Unified (and Extension A) and the compatibility block.
_HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
# Latin letters and digits after lowercasing; × (U+00D7) and ÷ (U+00F7) are not letters.
_LATIN = "a-z0-9\u00df-\u00f6\u00f8-\u00ff\u0100-\u024f"
_TOKEN_RE = re.compile(rf"(?P<han>[{_HAN}]+)|(?P<word>[{_LATIN}]+(?:['’][{_LATIN}]+)?)")
# Link targets, autolinks, bare URLs, addresses and entities carry no topic of the dream.
_NOISE_RE = re.compile(
    r"\]\([^)\s]*(?:\s+\"[^\"]*\")?\)"  # the target of a Markdown link: ](https://…)
    r"|(?:https?|mailto|ftp):\S+"  # autolinks and bare URLs
    r"|www\.\S+"
    r"|\S+@\S+\.[a-z]+"  # e-mail addresses
    r"|&(?:#\d+|#x[0-9a-f]+|[a-z]+);",  # HTML entities
    re.IGNORECASE,
)


@functools.cache
def _segmenter() -> Any:
    """A private jieba tokenizer, built on first use (loading the dictionary
    takes a second), so other code's ``jieba.add_word`` cannot change ours."""
    import jieba  # type: ignore[import-untyped]

    jieba.setLogLevel(60)
    seg = jieba.Tokenizer()
    seg.initialize()
    return seg


def _latin_keyword(word: str) -> str | None:
    word = word.replace("’", "'")
    if word.endswith("'s"):
        word = word[:-2]
    if "'" in word:  # contractions (don't, it'll) are function words
        return None
    if len(word) < 3 or word.isdigit() or word in _EN_STOPWORDS:
        return None
    return word


def tokens(text: str) -> set[str]:
    """The keywords of a text: lowercased Latin words and jieba-segmented
    Chinese words, without stopwords, numbers and Markdown or URL debris."""
    found: set[str] = set()
    for match in _TOKEN_RE.finditer(_NOISE_RE.sub(" ", text).lower()):
        if han := match.group("han"):
            if len(han) < 2:
                continue
            for word in _segmenter().cut(han):
                if len(word) >= 2 and word not in _ZH_STOPWORDS:
                    found.add(word)
        elif (word := _latin_keyword(match.group("word"))) is not None:
            found.add(word)
    return found


# --- counting ---------------------------------------------------------------------------------


@dataclass(slots=True)
class _Tally:
    dreams: int = 0
    authors: set[str] = field(default_factory=set)
    types: Counter[str] = field(default_factory=Counter)


def _type_rank(entry_type: str) -> tuple[int, str]:
    # Unknown types cannot pass the schema; if one did, it sorts after the known ones.
    order = ENTRY_ORDER.index(entry_type) if entry_type in ENTRY_ORDER else len(ENTRY_ORDER)
    return (order, entry_type)


def _patterns(kind: str, tallies: dict[str, _Tally], k: int) -> list[Pattern]:
    out = [
        Pattern(
            kind,
            term,
            t.dreams,
            len(t.authors),
            tuple(
                (ty, n) for ty, n in sorted(t.types.items(), key=lambda i: _type_rank(i[0])) if n
            ),
        )
        for term, t in tallies.items()
        if len(t.authors) >= k
    ]
    out.sort(key=lambda p: (-p.dreams, p.term))
    return out


MIN_TIER = "member"
"""The least trusted tier whose dreams the site's patterns count (the default of
:func:`compute_patterns`, which the build uses)."""


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
    counted = ((d, str(model.bodies[d.id]["author"])) for d in model.dreams if counts(d, min_tier))
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


def compute_patterns(
    model: SiteModel,
    *,
    min_tier: str = MIN_TIER,
    limit: int = 40,
    words: dict[str, DreamWords] | None = None,
    spread: bool = False,
) -> Patterns:
    """The tag and keyword patterns of the pool, by the rule in the module doc.

    Requires ``min_tier`` in guest, member, maintainer and ``limit >= 0``
    (it bounds the keywords only: tags are few, words are many). ``words``,
    if given, holds :func:`dream_words` by dream id from an earlier build (a
    dream's words depend on its id alone); it is left holding exactly the
    counted dreams' words, for the next build. With ``spread``, the words
    not known yet are found on every core (:func:`builder.parallel.map_ordered`):
    jieba takes ≈330 µs a dream, 5 minutes on one core at a million dreams."""
    if limit < 0:
        raise ValueError(f"limit must be >= 0, is {limit}")
    counted = _counted(model, min_tier)
    known = dict(words or {})
    if spread:
        missing = [d for d, _ in counted if d.id not in known]
        if missing:
            _segmenter()  # its dictionary loaded once, here, and shared by the forks
            spread_out = parallel.map_ordered(dream_words, missing)
            known.update(zip((d.id for d in missing), spread_out, strict=True))
    if words is not None:
        words.clear()
    tags: dict[str, _Tally] = {}
    terms: dict[str, _Tally] = {}
    for dream, author in counted:
        for tag in {t.name for t in dream.tags}:
            t = tags.setdefault(tag, _Tally())
            t.dreams += 1
            t.authors.add(author)
            t.types.update(e.type for e in dream.entries)
        found = known.get(dream.id) or dream_words(dream)
        if words is not None:
            words[dream.id] = found
        own, entry_words = found
        for word in own:
            tally = terms.get(word)
            if tally is None:
                tally = terms[word] = _Tally()
            tally.dreams += 1
            tally.authors.add(author)
        # Each entry of a type counts once toward each of its words.
        for ty, ws in entry_words:
            for word in ws:
                terms[word].types[ty] += 1
    return Patterns(
        k=model.k,
        min_tier=min_tier,
        counted_dreams=len(counted),
        tags=tuple(_patterns("tag", tags, model.k)),
        keywords=tuple(_patterns("keyword", terms, model.k)[:limit]),
    )


# --- SVG --------------------------------------------------------------------------------------

# Mid-tone colours, each at least 3:1 against both white and near-black pages
# (WCAG 1.4.11, non-text contrast); a stylesheet may override them by class.
_BAR_FILL = "#3d8bd9"
_TYPE_COLOURS = {
    "fact": "#3d8bd9",
    "decision": "#d9822b",
    "preference": "#a66cc9",
    "lesson": "#2e9e6a",
    "rule": "#8a8a8a",
    "warning": "#d4524a",
    "theory": "#b59a22",
    "plan": "#2a9fa6",
}
_OTHER_FILL = "#8a8a8a"
# Characters XML 1.0 forbids even as references; a label holding one would
# make the SVG unparseable, so they are dropped rather than escaped.
_XML_INVALID_RE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
_FONT = 'font-family="system-ui, sans-serif" font-size="12"'


def _esc(text: str) -> str:
    return str(escape(_XML_INVALID_RE.sub("", text)))


def _text_width(text: str) -> int:
    """A rough width in pixels at 12px: wide (CJK) characters count double."""
    return sum(12 if unicodedata.east_asian_width(c) in "WF" else 7 for c in text)


def _fit(text: str, width: int) -> str:
    if _text_width(text) <= width:
        return text
    while text and _text_width(text + "…") > width:
        text = text[:-1]
    return text + "…"


def bar_chart_svg(items: Sequence[tuple[str, int]], *, title: str, width: int = 480) -> str:
    """A horizontal bar chart as one self-contained SVG: ``role="img"`` with a
    ``<title>`` and a ``<desc>`` listing every value (screen readers do not
    read the bars), visible labels, no scripts, styles or external references.

    Requires counts >= 0 and ``width >= 160``. Labels longer than their column
    are cut with an ellipsis on screen; the ``<desc>`` and each row's
    ``<title>`` keep them whole."""
    if width < 160:
        raise ValueError(f"width must be >= 160, is {width}")
    row, top, pad = 22, 28, 6
    label_w = width * 2 // 5
    count_w = 48
    bar_max = width - label_w - count_w - pad
    peak = max((n for _, n in items), default=0)
    height = top + row * max(len(items), 1) + pad
    desc = "; ".join(f"{label}: {n}" for label, n in items) or "no data"
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" role="img" '
        f'width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        f'aria-label="{_esc(title)}" {_FONT}>',
        f"<title>{_esc(title)}</title>",
        f"<desc>{_esc(desc)}</desc>",
        f'<text class="chart-title" x="0" y="16" font-weight="bold" fill="currentColor">'
        f"{_esc(_fit(title, width))}</text>",
    ]
    if not items:
        out.append(f'<text x="0" y="{top + 14}" fill="currentColor">no data</text>')
    for i, (label, n) in enumerate(items):
        y = top + i * row
        bar = bar_max * n // peak if peak else 0
        out.append(
            f'<g class="chart-row"><title>{_esc(f"{label}: {n}")}</title>'
            f'<text x="{label_w - pad}" y="{y + 13}" text-anchor="end" fill="currentColor">'
            f"{_esc(_fit(label, label_w - 2 * pad))}</text>"
            f'<rect class="chart-bar" x="{label_w}" y="{y + 2}" width="{bar}" height="14" '
            f'rx="2" fill="{_BAR_FILL}"/>'
            f'<text x="{label_w + bar + pad}" y="{y + 13}" fill="currentColor">{n}</text></g>'
        )
    out.append("</svg>")
    return "".join(out)


def _type_bar_svg(types: Sequence[tuple[str, int]], *, width: int = 120, height: int = 12) -> str:
    """One stacked bar of a pattern's entry types, labelled for screen readers."""
    label = ", ".join(f"{t} {n}" for t, n in types) or "no entries"
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="type-bar" role="img" '
        f'width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        f'aria-label="{_esc("entry types: " + label)}">',
        f"<title>{_esc('entry types: ' + label)}</title>",
    ]
    total = sum(n for _, n in types)
    done = 0
    for entry_type, n in types:
        # Cumulative rounding, so the segments tile the bar without gaps.
        x0, x1 = width * done // total, width * (done + n) // total
        done += n
        fill = _TYPE_COLOURS.get(entry_type, _OTHER_FILL)
        out.append(
            f'<rect class="type-{_esc(entry_type)}" x="{x0}" y="0" width="{x1 - x0}" '
            f'height="{height}" fill="{fill}"><title>{_esc(f"{entry_type}: {n}")}</title></rect>'
        )
    out.append("</svg>")
    return "".join(out)


# --- HTML -------------------------------------------------------------------------------------

_TIER_PHRASE = {
    "guest": "keys of any tier",
    "member": "member and maintainer keys",
    "maintainer": "maintainer keys",
}
_CHART_TOP = 12


def _table(caption: str, head: str, patterns: Iterable[Pattern], css: str) -> str:
    rows = "".join(
        f'<tr><td dir="auto">{escape(p.term)}</td>'
        f'<td class="num">{p.dreams}</td><td class="num">{p.authors}</td>'
        f"<td>{_type_bar_svg(p.types)}</td></tr>"
        for p in patterns
    )
    return (
        f'<table class="patterns-table {css}"><caption>{escape(caption)}</caption>'
        f'<thead><tr><th scope="col">{escape(head)}</th><th scope="col">Dreams</th>'
        f'<th scope="col">Authors</th><th scope="col">Entry types</th></tr></thead>'
        f"<tbody>{rows}</tbody></table>"
    )


def _legend() -> str:
    items = "".join(
        f'<li><svg xmlns="http://www.w3.org/2000/svg" class="swatch" width="10" height="10" '
        f'viewBox="0 0 10 10" aria-hidden="true"><rect class="type-{t}" width="10" height="10" '
        f'fill="{_TYPE_COLOURS[t]}"/></svg> {t}</li>'
        for t in ENTRY_ORDER
    )
    return f'<ul class="type-legend" aria-label="entry type colours">{items}</ul>'


def render_patterns_html(p: Patterns) -> str:
    """The patterns page body as trusted HTML (a :class:`markupsafe.Markup`,
    so a template inserts it unescaped): every term is escaped here, and no
    text, author or link to a dream or author appears."""
    intro = (
        f'<p class="patterns-intro">Counted: {p.counted_dreams} '
        f"dream{'' if p.counted_dreams == 1 else 's'} whose authors consented to derivatives, "
        f"signed with {_TIER_PHRASE.get(p.min_tier, escape(p.min_tier))}. "
        f"A tag or word is shown once dreams by at least {p.k} different "
        f"author{'' if p.k == 1 else 's'} use it, with counts only: "
        f"no dream text, title or author appears here.</p>"
    )
    parts = ['<section class="patterns">', intro]
    top = sorted([*p.tags, *p.keywords], key=lambda q: (-q.dreams, q.kind != "tag", q.term))[
        :_CHART_TOP
    ]
    if top:
        chart = bar_chart_svg(
            [("#" + q.term if q.kind == "tag" else q.term, q.dreams) for q in top],
            title="Top patterns by number of dreams (# marks a tag)",
        )
        parts.append(f'<figure class="patterns-chart">{chart}</figure>')
    parts.append(_legend())
    parts.append('<h2 id="tag-patterns">Tags</h2>')
    if p.tags:
        parts.append(_table(f"Tags used by at least {p.k} authors", "Tag", p.tags, "tags"))
    else:
        parts.append(f'<p class="empty">No tag is used by {p.k} authors yet.</p>')
    parts.append('<h2 id="keyword-patterns">Keywords</h2>')
    if p.keywords:
        parts.append(
            _table(f"Words used by at least {p.k} authors", "Keyword", p.keywords, "keywords")
        )
    else:
        parts.append(f'<p class="empty">No word is used by {p.k} authors yet.</p>')
    parts.append("</section>")
    return Markup("\n".join(parts))
