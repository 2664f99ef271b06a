"""Patterns: the k-author threshold, consent and tier rules, tokens, and what
the page may never show."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import pytest

from builder.site.model import DreamView, EntryView, SiteModel, TagRef, slug
from builder.site.patterns import (
    Pattern,
    Patterns,
    bar_chart_svg,
    compute_patterns,
    render_patterns_html,
    tokens,
)

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
    bodies: dict[str, dict[str, Any]] = {}
    for i, d in enumerate(dreams):
        dream_id = f"id{i:04d}"
        views.append(
            DreamView(
                id=dream_id,
                index=i,
                date=d.date,
                title=d.title,
                summary=d.summary,
                entries=tuple(EntryView(text, ty, "likely", None) for ty, text in d.entries),
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
        bodies[dream_id] = {
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
        bodies=bodies,
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
        author = m.bodies[d.id]["author"]
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


def test_svg_drops_characters_xml_forbids_and_survives_empty_input() -> None:
    ET.fromstring(bar_chart_svg([("a\x01b", 1)], title="t\x0c"))
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
