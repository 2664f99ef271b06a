"""The patterns' counts kept between builds (patterns.Counts): a build that only
adds counted dreams adds theirs to the last build's counts, and must show
exactly what counting every dream again shows (compute_patterns is the
reference); any other change of the counted dreams is refused, and the
stored form reads back only as it was written."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from builder.site import patterns
from builder.site.model import DreamView
from builder.site.patterns import (
    Counts,
    DreamWords,
    add_new,
    compute_patterns,
    count,
    decode_counts,
    derive,
    dream_words,
    encode_counts,
)
from tests.test_patterns import D, model_of

WORDS = ["postgres", "index", "vacuum", "replica", "cache", "queries", "worker", "workers"]
WORDS += ["timeout", "deploy", "rollback", "migration", "数据库索引", "缓存失效"]
DATES = ["2025-01-03T00:00:00Z", "2025-02-10T00:00:00Z", "2025-04-01T00:00:00Z"]


def _text(draw: st.DrawFn) -> str:
    return " ".join(draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=4)))


@st.composite
def dreams(draw: st.DrawFn) -> D:
    return D(
        author=draw(st.sampled_from(["ada", "bob", "cy", "dee", "eve", "fay"])),
        tags=draw(st.lists(st.sampled_from(["db", "ops", "perf", "sql"]), max_size=3)),
        entries=tuple(
            (draw(st.sampled_from(["fact", "lesson", "warning"])), _text(draw))
            for _ in range(draw(st.integers(1, 3)))
        ),
        title=_text(draw),
        summary=draw(st.sampled_from(["", "cache timeout", "replica lag 数据库索引"])),
        tier=draw(st.sampled_from(["member", "member", "maintainer", "guest"])),
        derivatives=draw(st.booleans()) or draw(st.booleans()),
        date=draw(st.sampled_from(DATES)),
    )


def _words(new: Sequence[DreamView]) -> list[DreamWords]:
    return [dream_words(d) for d in new]


def _same_counts(a: Counts, b: Counts) -> None:
    """Everything but which keywords' months are tallied is equal, and the
    months of a keyword both tally are equal."""
    assert (a.min_tier, a.dreams, a.digest) == (b.min_tier, b.dreams, b.digest)
    assert a.tags == b.tags and a.tag_months == b.tag_months and a.pairs == b.pairs
    assert a.terms == b.terms
    for key in a.word_months.keys() & b.word_months.keys():
        assert a.word_months[key] == b.word_months[key], key


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    old=st.lists(dreams(), max_size=14),
    new=st.lists(dreams(), max_size=6),
    k=st.sampled_from([1, 2, 3]),
    limit=st.sampled_from([1, 3, 40]),
)
def test_counts_with_new_dreams_added_show_what_a_full_count_shows(
    old: list[D], new: list[D], k: int, limit: int
) -> None:
    before, after = model_of(old, k=k), model_of(old + new, k=k)
    kept = decode_counts(encode_counts(count(before, limit=limit)))  # as the store keeps them
    assert kept is not None
    grown = add_new(kept, after, _words)
    assert grown is not None
    _same_counts(grown, count(after, limit=limit))
    found = derive(grown, after, limit=limit)
    if found is None:  # a keyword not tallied would be shown: the build counts in full
        found = derive(count(after, limit=limit), after, limit=limit)
    assert found == compute_patterns(after, limit=limit)


def test_a_new_word_that_would_be_shown_untallied_asks_for_a_full_count() -> None:
    """Only the top keywords' months are tallied: one that climbs into the
    shown ones from outside them makes derive give None, never a chart of
    months it did not count."""
    base = [D(a, title="ok", entries=(("fact", "index vacuum"),)) for a in ("ada", "bob")]
    base += [D("cy", title="ok", entries=(("fact", "replica"),))]
    counts = count(model_of(base, k=2), limit=1)
    assert set(counts.word_months) == {"index", "vacuum"}  # 2 × limit, by rank
    grown = [*base, *(D(a, title="ok", entries=(("fact", "replica"),)) for a in ("ada", "bob"))]
    grown += [D(a, title="replica", entries=(("lesson", "replica"),)) for a in ("dee", "eve")]
    kept = add_new(counts, model_of(grown, k=2), _words)
    assert kept is not None and kept.terms["replica"].dreams == 5
    assert derive(kept, model_of(grown, k=2), limit=1) is None
    full = derive(count(model_of(grown, k=2), limit=1), model_of(grown, k=2), limit=1)
    assert full == compute_patterns(model_of(grown, k=2), limit=1)
    assert [p.term for p in full.keywords] == ["replica"]


def _changed(pool: list[D], how: str) -> tuple[list[D], str]:
    if how == "erased":
        return pool[:1] + pool[2:], patterns.MIN_TIER
    if how == "tier":
        return [pool[0], replace(pool[1], tier="guest"), *pool[2:]], patterns.MIN_TIER
    if how == "consent":
        return [pool[0], replace(pool[1], derivatives=False), *pool[2:]], patterns.MIN_TIER
    if how == "tags":
        return [pool[0], replace(pool[1], tags=["other"]), *pool[2:]], patterns.MIN_TIER
    if how == "month":
        return [pool[0], replace(pool[1], date=DATES[2]), *pool[2:]], patterns.MIN_TIER
    return pool, "guest"


@pytest.mark.parametrize("how", ["erased", "tier", "consent", "tags", "month", "min_tier"])
def test_any_change_but_new_counted_dreams_is_counted_in_full(how: str) -> None:
    """An erased dream, a tier or consent that changed, a dream's tags or month,
    another tier rule: the counts cannot take those back (authors are sets),
    so add_new refuses them and the build counts every dream again."""
    pool = [D(a, tags=["db"], entries=(("fact", "postgres"),)) for a in ("ada", "bob", "cy")]
    counts = count(model_of(pool), min_tier=patterns.MIN_TIER)
    changed, tier = _changed(pool, how)
    counts.min_tier = tier if how == "min_tier" else counts.min_tier
    assert add_new(counts, model_of([*changed, D("dee")]), _words) is None


def test_stored_counts_read_back_only_as_written() -> None:
    pool = [D(a, tags=["db", "ops"], entries=(("fact", "postgres cache"),)) for a in "abc"]
    c = count(model_of(pool, k=2))
    data = encode_counts(c)
    back = decode_counts(data)
    assert back is not None and encode_counts(back) == data
    value = json.loads(data)
    bad = [
        b"",
        b"null",
        b"[]",
        data + b"x",
        json.dumps(["dreampool-pattern-counts/0", *value[1:]]).encode(),
        json.dumps([value[0], "root", *value[2:]]).encode(),  # no such tier
        json.dumps([*value[:2], -1, *value[3:]]).encode(),  # a negative count
        json.dumps([*value[:2], True, *value[3:]]).encode(),  # a bool for a number
        json.dumps([*value[:5], [[*value[5][0][:2], [99], *value[5][0][3:]]], *value[6:]]).encode(),
    ]
    for data in bad:
        assert decode_counts(data) is None, data
