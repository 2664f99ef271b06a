"""Patterns: the k-author threshold, consent and tier rules, tokens, and what
the page may never show."""

from __future__ import annotations

import json
import re
import shutil
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import pytest

from builder.content import anonymity
from builder.site import charts, keywords
from builder.site.model import DreamView, SiteModel, TagRef, slug
from builder.site.patterns import (
    Pair,
    Pattern,
    Patterns,
    compute_patterns,
    decode,
    encode,
    first_keywords,
    inputs_key,
    render_patterns_html,
    stored,
    suppress,
    tokens,
)
from tests.conftest import REPO

SVG = "{http://www.w3.org/2000/svg}"


@dataclass
class D:
    """A dream of a synthetic model; author is the signed name, always kept
    in the body even when the view is anonymized."""

    author: str
    tags: Sequence[str] = ()
    entries: Sequence[tuple[str, str]] = (("fact", "ok"),)  # "ok" is no keyword
    title: str = "untitled"
    summary: str = ""
    tier: str = "member"
    derivatives: bool = True
    anonymized: bool = False
    key: str = field(default="")
    date: str = "2025-01-01T00:00:00Z"  # the log's date of the dream (DreamView.date)


def model_of(dreams: Sequence[D], *, k: int = 3) -> SiteModel:
    views = []
    heads: dict[str, dict[str, Any]] = {}
    for i, d in enumerate(dreams):
        dream_id = f"id{i:04d}"
        views.append(
            DreamView(
                id=dream_id,
                index=i,
                date=d.date,
                title=d.title,
                text={
                    "summary": d.summary,
                    "entries": [
                        {"text": text, "type": ty, "confidence": "likely"} for ty, text in d.entries
                    ],
                },
                entry_types=tuple(ty for ty, _ in d.entries),
                tags=tuple(TagRef(t, slug(t)) for t in d.tags),
                author=None if d.anonymized else d.author,
                author_slug=None if d.anonymized else slug(d.author),
                key_id=None if d.anonymized else (d.key or f"key-{d.author}"),
                tier=d.tier,
                anonymized=d.anonymized,
                derivatives=d.derivatives,
                generation=None,
                parent_id=None,
                parent_in_pool=False,
                children=(),
            )
        )
        heads[dream_id] = {
            "author": d.author,
            "title": d.title,
            "consent": {"derivatives": d.derivatives, "anonymize": d.anonymized},
        }
    views.reverse()  # the model holds dreams newest first
    return SiteModel(
        title="t",
        origin="test.example/pool",
        base_url="/",
        k=k,
        dreams=tuple(views),
        by_id={v.id: v for v in views},
        authors=(),
        tags=(),
        erased=(),
        checkpoint=None,
        history=(),
        policy="",
        vkey="",
        heads=heads,
    )


def tag_terms(p: Patterns) -> dict[str, Pattern]:
    return {q.term: q for q in p.tags}


def kw_terms(p: Patterns) -> dict[str, Pattern]:
    return {q.term: q for q in p.keywords}


# --- the threshold and who counts ---------------------------------------------------------------


def test_a_tag_needs_k_distinct_authors() -> None:
    m = model_of(
        [D("ann", ["two"]), D("ben", ["two"])] + [D(a, ["three"]) for a in ("ann", "ben", "cat")]
    )
    got = tag_terms(compute_patterns(m))
    assert "two" not in got
    assert got["three"] == Pattern("tag", "three", 3, 3, (("fact", 3),), (("2025-01", 3),))


def test_one_author_counts_once_however_many_dreams_or_keys() -> None:
    many = [D("ann", ["t"], key=f"rotated-{i}") for i in range(6)]
    m = model_of([*many, D("ben", ["t"])])
    assert compute_patterns(m).tags == ()
    got = tag_terms(compute_patterns(model_of([*many, D("ben", ["t"]), D("cat", ["t"])])))
    assert (got["t"].dreams, got["t"].authors) == (8, 3)


def test_dreams_without_derivatives_consent_never_count() -> None:
    m = model_of(
        [D("ann", ["t"]), D("ben", ["t"]), D("cat", ["t"], derivatives=False)]
        + [D(f"x{i}", ["t"], derivatives=False, tier="maintainer") for i in range(5)]
    )
    p = compute_patterns(m, min_tier="guest")
    assert p.tags == ()
    assert p.counted_dreams == 2


def test_guest_keys_count_only_when_asked() -> None:
    m = model_of(
        [D("ann", ["t"]), D("ben", ["t"], tier="maintainer"), D("gus", ["t"], tier="guest")]
    )
    assert compute_patterns(m).tags == ()
    assert compute_patterns(m).counted_dreams == 2
    assert tag_terms(compute_patterns(m, min_tier="guest"))["t"].authors == 3
    assert compute_patterns(m, min_tier="maintainer").counted_dreams == 1


def test_a_swarm_of_guest_keys_makes_no_pattern_and_swells_no_count() -> None:
    swarm = [D(f"sybil{i}", ["spam"], tier="guest") for i in range(10)]
    assert compute_patterns(model_of(swarm)).tags == ()
    members = [D(a, ["spam"]) for a in ("ann", "ben", "cat")]
    got = tag_terms(compute_patterns(model_of(swarm + members)))
    assert (got["spam"].dreams, got["spam"].authors) == (3, 3)


def test_anonymized_dreams_count_by_their_signed_author() -> None:
    m = model_of([D("ann", ["t"]), D("ben", ["t"]), D("cat", ["t"], anonymized=True)])
    assert tag_terms(compute_patterns(m))["t"].authors == 3
    # The anonymous author is still one author: a second anonymous dream adds no one.
    m = model_of([D("ann", ["t"]), D("cat", ["t"], anonymized=True)] * 2)
    assert compute_patterns(m).tags == ()


def test_k_comes_from_the_model() -> None:
    dreams = [D("ann", ["t"]), D("ben", ["t"])]
    assert compute_patterns(model_of(dreams, k=2)).tags[0].authors == 2
    assert compute_patterns(model_of(dreams, k=2)).k == 2
    assert compute_patterns(model_of(dreams, k=3)).tags == ()


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="min_tier"):
        compute_patterns(model_of([]), min_tier="admin")
    with pytest.raises(ValueError, match="limit"):
        compute_patterns(model_of([]), limit=-1)


# --- counts and types ---------------------------------------------------------------------------


def test_type_distribution_in_canonical_order() -> None:
    entries = [
        ("plan", "migrate tables tonight"),
        ("fact", "backups exist"),
        ("warning", "locks block writes"),
        ("fact", "tables are large"),
    ]
    m = model_of([D(a, ["db"], entries=entries) for a in ("ann", "ben", "cat")])
    p = compute_patterns(m)
    assert p.tags[0].types == (("fact", 6), ("warning", 3), ("plan", 3))
    # A keyword counts only the entries whose own text holds it.
    assert kw_terms(p)["tables"].types == (("fact", 3), ("plan", 3))
    assert kw_terms(p)["backups"].types == (("fact", 3),)


def test_keyword_only_in_titles_has_no_types() -> None:
    m = model_of([D(a, title="Vacuum notes") for a in ("ann", "ben", "cat")])
    got = kw_terms(compute_patterns(m))
    assert got["vacuum"].types == ()
    assert got["vacuum"].dreams == 3


def test_a_dream_contributes_a_keyword_once() -> None:
    loud = [("fact", "cache cache cache"), ("rule", "cache again")]
    m = model_of(
        [D(a, title="Cache", summary="cache", entries=loud) for a in ("ann", "ben", "cat")]
    )
    got = kw_terms(compute_patterns(m))["cache"]
    assert (got.dreams, got.authors) == (3, 3)
    assert got.types == (("fact", 3), ("rule", 3))


def test_tags_by_dreams_keywords_by_rank_and_limited() -> None:
    dreams = [D(a, ["b", "a"], title="alpha beta") for a in ("ann", "ben", "cat")]
    dreams += [D("dan", ["b"], title="beta"), D("eve", title="gamma"), D("fay", title="gamma")]
    p = compute_patterns(model_of(dreams))
    assert [q.term for q in p.tags] == ["b", "a"]
    assert [q.term for q in p.keywords[:2]] == ["beta", "alpha"]
    assert len(compute_patterns(model_of(dreams), limit=1).keywords) == 1
    assert compute_patterns(model_of(dreams), limit=0).keywords == ()
    assert len(p.tags) == 2  # the limit is for keywords only


# --- tokens -------------------------------------------------------------------------------------


def test_english_tokens() -> None:
    got = tokens("The parser's Tokenization CHANGED in 2024, and we don't pin it.")
    assert got == {"parser", "tokenization", "pin"}  # "changed" is a generic verb


def test_chinese_tokens() -> None:
    got = tokens("数据库迁移需要先备份")
    assert {"数据库", "迁移", "备份"} <= got
    got = tokens("我们的数据库也是在迁移，因为所以没有一个备份")
    assert {"数据库", "迁移", "备份"} <= got
    assert got.isdisjoint({"我们", "的", "也", "是", "在", "因为", "所以", "没有", "一个"})
    assert all(len(w) >= 2 for w in got)


def test_the_segmenter_never_runs_jiebas_initialize(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tokenizer.initialize reads a jieba.cache it finds (marshal, T115) and writes
    one after building the dictionary; the build never calls it."""
    import jieba

    def refused(self: Any, dictionary: Any = None) -> None:
        raise AssertionError("jieba's initialize was called")

    monkeypatch.setattr(jieba.Tokenizer, "initialize", refused)
    keywords._segmenter.cache_clear()
    try:
        assert {"数据库", "索引", "重建"} <= tokens("数据库索引重建")
    finally:
        keywords._segmenter.cache_clear()


def test_mixed_tokens() -> None:
    got = tokens("共享分支上只用 git revert 撤销提交")
    assert {"git", "revert", "撤销", "提交", "共享", "分支"} <= got


def test_markdown_and_urls_leave_no_debris() -> None:
    text = (
        "## Heading\n- **Bold** and _slanted_ `codeword` > quoted\n"
        "[RFC 9110](https://www.rfc-editor.org/rfc/rfc9110#name-retry-after) "
        "<https://example.com/path> mail ops@example.org &amp; &#42; 12345 ***"
    )
    got = tokens(text)
    assert got == {"heading", "bold", "slanted", "codeword", "quoted", "rfc", "mail"}
    assert all(re.fullmatch(r"\w+", w) for w in got)


# --- what the page shows ------------------------------------------------------------------------


def _sentinel_model() -> SiteModel:
    """Every title, summary and entry is a unique sentence; only the shared
    words (marmot, lantern, 数据库) may surface as keywords."""
    dreams = []
    for i, author in enumerate(["Zorbauthorone", "Zorbauthortwo", "Zorbauthorthree"]):
        dreams.append(
            D(
                author,
                ["shared-tag"],
                title=f"Titleqx{i} marmot lantern",
                summary=f"Summaryqx{i} lantern marmot 数据库",
                entries=[
                    ("fact", f"Entryqx{i}a marmot"),
                    ("lesson", f"Entryqx{i}b lantern 数据库"),
                ],
                anonymized=(i == 2),
            )
        )
    dreams.append(
        D(
            "Zorbguestsybil",
            ["shared-tag"],
            title="Titleqxguest marmot",
            summary="Summaryqxguest",
            entries=[("rule", "Entryqxguest lantern")],
            tier="guest",
        )
    )
    return model_of(dreams)


def test_html_never_shows_texts_titles_or_authors() -> None:
    m = _sentinel_model()
    p = compute_patterns(m)
    assert {q.term for q in p.keywords} == {"marmot", "lantern", "数据库"}
    html = render_patterns_html(p)
    for d in m.dreams:
        author = m.heads[d.id]["author"]
        for text in [d.title, d.summary, author, author.lower(), *(e.text for e in d.entries)]:
            assert text not in html
    # No unique word of any text, in any case, and no id or link.
    for word in ["titleqx", "summaryqx", "entryqx", "zorb"]:
        assert word not in html.lower()
    assert "href" not in html
    assert "id0" not in html
    assert "marmot" in html and "数据库" in html


def test_html_has_no_scripts_styles_or_handlers_and_is_well_formed() -> None:
    html = render_patterns_html(compute_patterns(_sentinel_model()))
    assert "<script" not in html
    assert not re.search(r"\sstyle\s*=", html)
    assert not re.search(r"\son[a-z]+\s*=", html)
    root = ET.fromstring(f"<div>{html}</div>")
    assert len(root.findall(".//table")) == 3  # tags, English and Chinese keywords
    assert all(svg.get("role") in ("img", None) for svg in root.iter(f"{SVG}svg"))


def bar_chart_svg(items: list[tuple[str, int]], *, title: str) -> str:
    """One plain bar a label: stacked_bars_svg with a single series."""
    rows = [(label, (("n", n),)) for label, n in items]
    return charts.stacked_bars_svg(rows, chart_id="chart", title=title)


def test_svg_is_well_formed_and_escapes_labels() -> None:
    evil = '<script>&"'
    svg = bar_chart_svg([(evil, 3), ("ok", 1), ("", 0)], title="Top <b> & 'more'")
    root = ET.fromstring(svg)
    assert root.tag == f"{SVG}svg"
    assert root.get("role") == "img"
    assert root.findtext(f"{SVG}title") == "Top <b> & 'more'"
    labels = [t.text for t in root.iter(f"{SVG}text")]
    assert evil in labels and "ok" in labels and "3" in labels
    assert "<script" not in svg and "style=" not in svg and "href" not in svg
    assert evil in (root.findtext(f"{SVG}desc") or "")


def test_svg_replaces_characters_xml_forbids_and_survives_empty_input() -> None:
    root = ET.fromstring(bar_chart_svg([("a\x01b\ufffe", 1)], title="t\x0c"))
    assert root.findtext(f"{SVG}title") == "t\ufffd"
    assert "a\ufffdb\ufffd" in [t.text for t in root.iter(f"{SVG}text")]
    empty = ET.fromstring(bar_chart_svg([], title="nothing"))
    assert "no data" in [t.text for t in empty.iter(f"{SVG}text")]


def test_long_labels_are_cut_on_screen_but_whole_for_readers() -> None:
    long = "a" * 200
    root = ET.fromstring(bar_chart_svg([(long, 1), ("数据库" * 40, 2)], title="t"))
    shown = [t.text or "" for t in root.iter(f"{SVG}text")]
    assert any(s.endswith("…") and len(s) < 60 for s in shown)
    assert long in (root.findtext(f"{SVG}desc") or "")


def test_evil_tag_is_escaped_in_the_page() -> None:
    evil = '<script>&"'
    m = model_of([D(a, [evil]) for a in ("ann", "ben", "cat")])
    html = render_patterns_html(compute_patterns(m))
    assert "<script" not in html
    root = ET.fromstring(f"<div>{html}</div>")
    assert evil in ["".join(th.itertext()) for th in root.iter("span")]


def test_output_is_deterministic() -> None:
    m = _sentinel_model()
    shuffled = replace(m, dreams=tuple(reversed(m.dreams)))
    first = render_patterns_html(compute_patterns(m))
    assert render_patterns_html(compute_patterns(m)) == first
    assert render_patterns_html(compute_patterns(shuffled)) == first
    items = [("x", 2), ("y", 5)]
    assert bar_chart_svg(items, title="t") == bar_chart_svg(items, title="t")


def test_an_empty_pool_renders() -> None:
    p = compute_patterns(model_of([]))
    assert p == Patterns(3, "member", 0, (), (), (), ())
    html = render_patterns_html(p)
    ET.fromstring(f"<div>{html}</div>")
    assert "No tag" in html and "No English word" in html and "No Chinese word" in html
    assert "No two tags" in html and "No dream is in the log" in html


def test_words_found_on_every_core_are_the_words_found_here() -> None:
    # 260 dreams: past parallel.MIN_ITEMS, so spread=True forks its workers.
    texts = ["缓存在部署后失效", "the parser doubled its memory", "索引重建 slowed rebuild"]
    m = model_of(
        [
            D(
                f"a{i % 7}",
                [f"t{i % 3}"],
                [("fact", texts[i % 3]), ("lesson", f"lesson {i} about retries")],
                title=f"dream {texts[(i + 1) % 3]}",
            )
            for i in range(260)
        ]
    )
    here: dict[str, Any] = {}
    spread: dict[str, Any] = {"id0003": (("stale",), ())}  # a cached entry is kept as it is
    want = compute_patterns(m, words=here)
    assert compute_patterns(m, words=spread, spread=True) != want  # "stale" is counted once
    assert spread.keys() == here.keys() and spread["id0003"] == (("stale",), ())
    del spread["id0003"]
    assert compute_patterns(m, words=spread, spread=True) == want
    assert spread == here


# --- kept between builds: the key of what the patterns read ---------------------------------------


def test_fewer_keywords_are_the_first_of_more(sample_patterns: Patterns) -> None:
    """dream_stats shows 20 keywords a language, the page 40: the first 20 of the
    page's patterns are exactly what computing with 20 gives, so the stored ones serve."""
    model = model_of(
        [
            D(a, title=f"迁移 数据库 migration index {w}", entries=[("fact", f"索引 {w} rebuild")])
            for a in ("ann", "ben", "cat")
            for w in ("cache", "parser", "queue", "缓存", "队列")
        ]
    )
    for m in (model, None):
        full = compute_patterns(m) if m is not None else sample_patterns
        assert len(full.keywords) > 4
        for n in (0, 1, 2, 20, 40):
            want = compute_patterns(m, limit=n) if m is not None else None
            got = first_keywords(full, n)
            if want is not None:
                assert got == want, n
            per_lang = [q.lang for q in got.keywords]
            assert all(per_lang.count(lang) <= n for lang in ("en", "zh"))
            assert got.keywords == tuple(
                q for q in full.keywords if q in got.keywords
            )  # the same order
    with pytest.raises(ValueError, match="limit"):
        first_keywords(sample_patterns, -1)


def test_the_inputs_key_changes_with_whatever_the_patterns_read() -> None:
    """A stored result is taken only under the key of the very inputs it was
    computed from: k, the tier rule, the limit, the pool's months, and of every
    dream that counts its id, month, signed author, tags and entry types."""
    dreams = [
        D("ann", ["db"], [("fact", "index rebuild")], date=JAN),
        D("ben", ["db", "ops"], [("lesson", "cache warmup")], date=FEB),
        D("cat", ["ops"], tier="guest", date=FEB),
        D("dan", ["db"], derivatives=False, date=FEB),
    ]
    base = model_of(dreams)
    key = inputs_key(base)
    assert inputs_key(model_of(dreams)) == key and len(key) == 64
    ben = 1  # a dream that counts
    changed = {
        "k": inputs_key(model_of(dreams, k=2)),
        "min_tier": inputs_key(base, min_tier="guest"),
        "limit": inputs_key(base, limit=20),
        "order": inputs_key(replace(base, dreams=tuple(reversed(base.dreams)))),
        "a guest widens the months": inputs_key(
            model_of([*dreams[:2], replace(dreams[2], date=MAR), dreams[3]])
        ),
        "a guest becomes a member": inputs_key(
            model_of([*dreams[:2], replace(dreams[2], tier="member"), dreams[3]])
        ),
        "consent": inputs_key(model_of([*dreams[:3], replace(dreams[3], derivatives=True)])),
        "a counted dream more": inputs_key(model_of([*dreams, D("eve", date=FEB)])),
        "a counted month": inputs_key(model_of([replace(dreams[0], date=FEB), *dreams[1:]])),
        "author": inputs_key(model_of([dreams[0], replace(dreams[ben], author="bo"), *dreams[2:]])),
        "tags": inputs_key(model_of([dreams[0], replace(dreams[ben], tags=["db"]), *dreams[2:]])),
        "types": inputs_key(
            model_of(
                [dreams[0], replace(dreams[ben], entries=[("fact", "cache warmup")]), *dreams[2:]]
            )
        ),
    }
    for what, other in changed.items():
        assert other != key, what
    assert len(set(changed.values())) == len(changed)
    with pytest.raises(ValueError, match="min_tier"):
        inputs_key(base, min_tier="owner")


def test_a_dream_that_does_not_count_keeps_the_key_and_the_stored_result_serves() -> None:
    """A guest's dream, one without consent, or one under the reserved name, within
    the pool's months: the key stays, and the stored patterns with the admissions
    counted again are what computing them afresh gives."""
    dreams = [
        D(a, ["db", "ops"], [("fact", "index rebuild cache")], date=d)
        for a, d in (("ann", JAN), ("ben", FEB), ("cat", MAR), ("dan", MAR))
    ]
    base = model_of(dreams)
    found = compute_patterns(base)
    assert found.tags and found.keywords
    for more in (
        D("eve", ["db"], [("fact", "index")], tier="guest", date=FEB),
        D("fay", ["db"], [("fact", "index")], derivatives=False, date=FEB),
        D(anonymity.NAME, ["db"], [("fact", "index")], date=FEB),
    ):
        grown = model_of([*dreams, more])
        assert inputs_key(grown) == inputs_key(base), more.author
        want = compute_patterns(grown)
        assert want.admissions != found.admissions
        assert stored(found, grown) == want, more.author


def test_stored_patterns_read_back_as_found(sample_patterns: Patterns) -> None:
    assert sample_patterns.keywords and sample_patterns.tags
    for p in (sample_patterns, compute_patterns(model_of([]))):
        assert decode(encode(p)) == p
    data = encode(sample_patterns)
    assert decode(data[:-1]) is None and decode(b"\xff" + data) is None
    assert decode(b"[" * 100_000 + b"]" * 100_000) is None  # too deep for json: a miss


@pytest.mark.parametrize(
    "value",
    [
        [3, "member", 7, [], [], [], [["2025-01", True]]],  # a boolean for a count
        [3, "member", 7, [["keyword", "db", 1, 1, [], [], ""]], [], [], []],  # a word as a tag
        [3, "member", 7, [], [], [["a", "b", 1]], []],  # a pair short of a count
        [3, "member", 7, [], [], [], [], "more"],  # a field the build does not write
        {"k": 3},
        [3, "member", 7.0, [], [], [], []],
        [3, "member", 7, [], [], [], [], [["2025-01", 1]]],
    ],
)
def test_stored_patterns_of_another_shape_are_a_miss(value: object) -> None:
    """T44: the build store's patterns row reads back only as encode writes it."""
    assert decode(json.dumps(value).encode()) is None


# --- over time: every shown month is backed by k authors ---------------------------------------

JAN, FEB, MAR = "2025-01-15T00:00:00Z", "2025-02-15T00:00:00Z", "2025-03-15T00:00:00Z"


def months_of(p: Pattern) -> dict[str, int | None]:
    return dict(p.months)


def test_a_month_backed_by_k_minus_one_authors_is_suppressed() -> None:
    jan = [D(a, ["t"], date=JAN) for a in ("ann", "ben", "cat")]
    # February: two authors hold the tag, and their own subtraction is guarded too.
    feb = [D(a, ["t"], date=FEB) for a in ("dan", "eve")]
    march = [D(a, ["t"], date=MAR) for a in ("fay", "gus", "hal")]
    p = compute_patterns(model_of(jan + feb + march))
    got = months_of(tag_terms(p)["t"])
    assert got["2025-02"] is None  # 2 authors < k = 3
    # Alone, February's count would be the total (8) minus the shown months (3 + 3):
    # so one more month is suppressed with it, and together they are 5 authors.
    assert list(got.values()).count(None) == 2
    assert sum(n or 0 for n in got.values()) < 8
    assert p.admissions == (("2025-01", 3), ("2025-02", 2), ("2025-03", 3))


def test_months_with_k_authors_are_shown_and_empty_months_are_zero() -> None:
    dreams = [D(a, ["t"], date=JAN) for a in ("ann", "ben", "cat")]
    dreams += [D(a, ["t"], date=MAR) for a in ("ann", "ben", "cat", "dan")]
    got = months_of(tag_terms(compute_patterns(model_of(dreams)))["t"])
    assert got == {"2025-01": 3, "2025-02": 0, "2025-03": 4}


def test_guests_and_non_consenting_dreams_back_no_month() -> None:
    base = [D(a, ["t"], date=JAN) for a in ("ann", "ben", "cat")]
    extra = [
        D("gus", ["t"], date=FEB, tier="guest"),
        D("nox", ["t"], date=FEB, derivatives=False),
        D("ann", ["t"], date=FEB),
        D("ben", ["t"], date=FEB),
    ]
    p = compute_patterns(model_of(base + extra))
    got = months_of(tag_terms(p)["t"])
    # February's counted authors are ann and ben: 2 < k, so it is suppressed, and
    # January with it (the suppressed months together must reach k authors).
    assert got == {"2025-01": None, "2025-02": None}
    # With the guest counted, February has 3 authors and both months show.
    g = months_of(tag_terms(compute_patterns(model_of(base + extra), min_tier="guest"))["t"])
    assert g == {"2025-01": 3, "2025-02": 3}
    # The pool-wide chart counts every dream in the log, guests and all.
    assert p.admissions == (("2025-01", 3), ("2025-02", 4))


def test_one_author_with_two_keys_backs_a_month_once() -> None:
    jan = [D(a, ["t"], date=JAN) for a in ("ann", "ben", "cat")]
    feb = [D("ann", ["t"], date=FEB, key="k1"), D("ann", ["t"], date=FEB, key="k2")]
    feb += [D("ben", ["t"], date=FEB)]
    got = months_of(tag_terms(compute_patterns(model_of(jan + feb)))["t"])
    assert got["2025-02"] is None


def test_keyword_months_follow_the_same_rule() -> None:
    jan = [D(a, title="marmot", date=JAN) for a in ("ann", "ben", "cat")]
    feb = [D(a, title="marmot", date=FEB) for a in ("ann", "dan")]
    mar = [D(a, title="marmot", date=MAR) for a in ("eve", "fay", "gus")]
    got = months_of(kw_terms(compute_patterns(model_of(jan + feb + mar)))["marmot"])
    assert got["2025-02"] is None and list(got.values()).count(None) == 2


def test_suppress_alone() -> None:
    a, b, c, d = ({"a"}, {"a", "b"}, {"a", "b", "c"}, {"d", "e", "f"})
    months = ("m1", "m2", "m3", "m4")
    assert suppress(months, {"m1": (3, c), "m3": (3, d)}, 3) == (
        ("m1", 3),
        ("m2", 0),
        ("m3", 3),
        ("m4", 0),
    )
    # m2 alone (1 author) is suppressed; the smallest shown month (m1, 3 authors; ties go to
    # the earliest) joins it, and together they reach 3 authors.
    got = suppress(months, {"m1": (3, c), "m2": (1, a), "m3": (4, d)}, 3)
    assert got == (("m1", None), ("m2", None), ("m3", 4), ("m4", 0))
    # Two suppressed months of the same two authors still make fewer than 3: all go.
    got = suppress(months, {"m1": (2, b), "m2": (1, a), "m4": (5, d)}, 3)
    assert got == (("m1", None), ("m2", None), ("m3", 0), ("m4", None))


# --- what goes together --------------------------------------------------------------------------


def test_a_pair_needs_k_authors_holding_both_tags() -> None:
    both = [D(a, ["db", "ops"]) for a in ("ann", "ben")]
    apart = [D("cat", ["db"]), D("cat", ["ops"])]  # cat never holds both in one dream
    p = compute_patterns(model_of(both + apart))
    assert {q.term for q in p.tags} == {"db", "ops"}
    assert p.pairs == ()
    p = compute_patterns(model_of([*both, *apart, D("dan", ["ops", "db", "db"])]))
    assert p.pairs == (Pair("db", "ops", 3, 3),)


def test_pairs_count_no_guest_no_refusal_and_an_author_once() -> None:
    both = [D(a, ["db", "ops"]) for a in ("ann", "ben")]
    others = [
        D("gus", ["db", "ops"], tier="guest"),
        D("nox", ["db", "ops"], derivatives=False),
        D("ann", ["db", "ops"], key="rotated"),
    ]
    assert compute_patterns(model_of(both + others)).pairs == ()
    with_guest = compute_patterns(model_of(both + others), min_tier="guest").pairs
    assert with_guest == (Pair("db", "ops", 4, 3),)


def test_pairs_are_ranked_and_bounded() -> None:
    dreams = [D(a, ["a", "b", "c"]) for a in ("ann", "ben", "cat", "dan")]
    dreams += [D(a, ["a", "b"]) for a in ("eve",)]
    p = compute_patterns(model_of(dreams))
    assert [(q.first, q.second, q.dreams) for q in p.pairs] == [
        ("a", "b", 5),
        ("a", "c", 4),
        ("b", "c", 4),
    ]
    html = render_patterns_html(p)
    assert "#a</span> + <span" in html and "5 dreams · 5 authors" in html


# --- keywords: folding, language, ranking ---------------------------------------------------------


def test_fold_merges_plurals_conservatively() -> None:
    pairs = {
        "workers": "worker",
        "days": "day",
        "queries": "query",
        "fixes": "fix",
        "caches": "cache",
        "branches": "branch",
        "databases": "database",
        "status": "status",
        "class": "class",
        "analysis": "analysis",
        "metrics": "metrics",
        "alias": "alias",
        "bus": "bus",
        "数据库": "数据库",
    }
    assert {w: keywords.fold(w) for w in pairs} == pairs


def test_inflections_are_one_keyword_under_the_commonest_form() -> None:
    dreams = [
        D("ann", title="workers stalled"),
        D("ben", title="the workers"),
        D("cat", title="a worker"),
    ]
    got = kw_terms(compute_patterns(model_of(dreams)))
    assert "worker" not in got
    assert (got["workers"].dreams, got["workers"].authors) == (3, 3)
    # The other form is counted, never shown: one author alone may have written it.
    html = render_patterns_html(compute_patterns(model_of(dreams)))
    assert "workers" in html and not re.search(r"\bworker\b", html)
    # days is filler as day is: the stop list is consulted after folding.
    assert tokens("three days, one day") == set()


def test_languages_are_split_by_script_and_listed_apart() -> None:
    dreams = [
        D(a, title="迁移 数据库 migration", entries=[("fact", "索引 index")])
        for a in ("ann", "ben", "cat")
    ]
    p = compute_patterns(model_of(dreams))
    assert {q.term: q.lang for q in p.keywords} == {
        "迁移": "zh",
        "数据库": "zh",
        "索引": "zh",
        "migration": "en",
        "index": "en",
    }
    assert keywords.language("数据库") == "zh" and keywords.language("café") == "en"
    assert keywords.split_by_language(["a1", "数据", "b2"]) == {"en": ["a1", "b2"], "zh": ["数据"]}
    root = ET.fromstring(f"<div>{render_patterns_html(p)}</div>")
    tables = {
        t.findtext("caption"): [
            "".join(s.itertext()) for s in t.iter("span") if s.get("class") == "term"
        ]
        for t in root.iter("table")
    }
    en = next(v for c, v in tables.items() if c and c.startswith("English"))
    zh = next(v for c, v in tables.items() if c and c.startswith("Chinese"))
    assert set(en) == {"migration", "index"} and set(zh) == {"迁移", "数据库", "索引"}
    # The limit holds per language.
    assert len(compute_patterns(model_of(dreams), limit=1).keywords) == 2


def test_rank_is_tf_idf() -> None:
    # 10 dreams: "common" in 9 of them once, "rare" in 3 but through 4 entries each,
    # "plain" in 3 once. Near-universal words are held back; repetition lifts a word.
    hits = {"common": {1: 9}, "rare": {4: 3}, "plain": {1: 3}}
    got = keywords.rank(hits, {"rare": {"rares": 2, "rare": 1}}, 10)
    assert [r.key for r in got] == ["rare", "common", "plain"]
    assert got[0].surface == "rares" and got[0].forms == ("rares", "rare")
    assert got == keywords.rank(dict(reversed(hits.items())), {"rare": {"rares": 2, "rare": 1}}, 10)
    # A tie goes to the word more dreams hold, then alphabetically.
    tie = keywords.rank({"b": {1: 3}, "a": {1: 3}}, {}, 3)
    assert [r.key for r in tie] == ["a", "b"]
    with pytest.raises(ValueError, match="hits"):
        keywords.rank({"x": {1: 5}}, {}, 4)


KEYWORDS_FIXTURE = REPO / "tests" / "fixtures" / "patterns_keywords.json"
# The examples of filler and generic verbs, which must never rank.
GENERIC = {
    "en": {"fixed", "code", "rate", "shared", "add", "day", "use", "make", "get", "need", "run"}
    # and verbs any lesson uses, whatever its topic
    | {"fails", "failed", "write", "answers", "comment"},
    "zh": {"的", "了", "使用", "进行", "需要"},
}


@pytest.fixture(scope="module")
def sample_patterns(tmp_path_factory: pytest.TempPathFactory) -> Patterns:
    """The patterns of the shipped sample pool, read from a copy."""
    from tests.test_render import load

    content = tmp_path_factory.mktemp("sample") / "content"
    shutil.copytree(REPO / "content", content)
    model, _ = load(content, "/")
    return compute_patterns(model)


def test_sample_pool_keyword_ranking_matches_the_fixture(sample_patterns: Patterns) -> None:
    want = json.loads(KEYWORDS_FIXTURE.read_text(encoding="utf-8"))
    for lang in ("en", "zh"):
        ranked = [q.term for q in sample_patterns.keywords if q.lang == lang]
        top = ranked[:20]
        assert top == want[lang], lang  # the list and its order
        stop = keywords.EN_STOPWORDS if lang == "en" else keywords.ZH_STOPWORDS
        for term in top:
            assert term not in stop and keywords.fold(term) not in stop, term
            assert term not in GENERIC[lang] and keywords.fold(term) not in GENERIC[lang], term
    # The filler words no longer appear at all, nor a plural beside its singular.
    terms = {q.term for q in sample_patterns.keywords}
    assert terms.isdisjoint(GENERIC["en"] | {"days", "workers"})
    assert "worker" in terms


# --- charts ---------------------------------------------------------------------------------------


def _accessible(svg: str) -> ET.Element:
    root = ET.fromstring(svg)
    assert root.get("role") == "img"
    assert root.get("width") is None and root.get("viewBox")
    title = root.find(f"{SVG}title")
    desc = root.find(f"{SVG}desc")
    assert title is not None and desc is not None
    assert root.get("aria-labelledby") == title.get("id")
    assert root.get("aria-describedby") == desc.get("id")
    return root


def test_columns_say_every_month_and_suppression_in_words() -> None:
    svg = charts.columns_svg(
        [("2025-01", 3), ("2025-02", None), ("<b>", 0)],
        chart_id="c1",
        title="t & <i>",
        unit="dreams",
        suppressed="fewer than 3 authors",
        mark="<3",
    )
    root = _accessible(svg)
    desc = root.findtext(f"{SVG}desc") or ""
    assert desc == "2025-01: 3 dreams; 2025-02: fewer than 3 authors; <b>: 0 dreams"
    shown = [t.text for t in root.iter(f"{SVG}text")]
    assert "<3" in shown and "<b>" in shown and "3" in shown
    assert len([r for r in root.iter(f"{SVG}rect") if r.get("class") == "suppressed"]) == 1
    spark = _accessible(
        charts.columns_svg([("m", 1)], chart_id="s", title="t", unit="d", spark=True)
    )
    assert list(spark.iter(f"{SVG}text")) == []  # a sparkline has no text to be too small


def test_stacked_bars_keep_the_series_order_and_numbers() -> None:
    svg = charts.stacked_bars_svg(
        [("#db", (("fact", 2), ("lesson", 1))), ("#ops", (("lesson", 4),))],
        chart_id="c2",
        title="types",
        fills={"fact": "#000000", "lesson": "#111111"},
    )
    root = _accessible(svg)
    assert root.findtext(f"{SVG}desc") == "#db: 3 (fact 2, lesson 1); #ops: 4 (lesson 4)"
    classes = [r.get("class") for r in root.iter(f"{SVG}rect")]
    assert classes == ["seg seg-fact", "seg seg-lesson", "seg seg-lesson"]


def test_chart_ids_are_checked() -> None:
    with pytest.raises(ValueError, match="chart_id"):
        charts.columns_svg([], chart_id='x" onload="y', title="t", unit="d")


def test_every_chart_on_the_page_is_named_and_described() -> None:
    dreams = [D(a, ["t", "u"], title="marmot", date=JAN) for a in ("ann", "ben", "cat")]
    dreams += [D(a, ["t", "u"], title="marmot", date=FEB) for a in ("ann", "ben", "dan")]
    html = render_patterns_html(compute_patterns(model_of(dreams)))
    root = ET.fromstring(f"<div>{html}</div>")
    svgs = [s for s in root.iter(f"{SVG}svg") if s.get("aria-hidden") != "true"]
    # admissions, the tag types, a trend per tag (2) and per keyword (1)
    assert len(svgs) == 5
    ids = [e.get("id") for e in root.iter() if e.get("id")]
    assert len(ids) == len(set(ids))
    for s in svgs:
        _accessible(ET.tostring(s, encoding="unicode"))
    assert "Per month" in html


def test_counting_keeps_each_dream_s_keys_as_a_tuple_not_a_set() -> None:
    """patterns.count keeps each counted dream's keyword keys for the months'
    pass: as a set, 2.3 KB a dream at 10k (the patterns' process held them all,
    most of its memory beyond the inherited build's at 100k); as a tuple, a
    fifth of that. Same counts either way (the other tests)."""
    import random
    import tracemalloc

    from builder.site import patterns

    rng = random.Random(7)
    vocabulary = [f"term{i}" for i in range(300)]
    dreams = [
        D(author=f"a{i % 5}", summary=" ".join(rng.sample(vocabulary, 40))) for i in range(400)
    ]
    model = model_of(dreams, k=2)
    words = {d.id: patterns.dream_words(d) for d in model.dreams}
    patterns.count(model, words=dict(words))  # warm: interned words, caches
    tracemalloc.start()
    try:
        patterns.count(model, words=dict(words))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak / len(dreams) < 2600, f"{peak / len(dreams):.0f} bytes a dream"
