"""Review of commit c47d946: the patterns' counts kept in the build's store
(section ``counts``, ``patterns.encode_counts`` / ``decode_counts``) and a
build's new counted dreams added to them (``patterns.add_new``,
``assemble._count``).

Each test is an attack or an accident the change must survive: a failing test
is a defect (the build fails, or the site shows what a cold build would not).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from builder.buildcache import BuildCache, Rows, row_key
from builder.site import assemble, patterns
from builder.site.model import SiteModel
from tests.test_patterns import D, model_of

AUTHORS = ("ada", "bob", "cy")


def _model(extra: int = 0) -> SiteModel:
    pool = [D(a, tags=["db"], entries=(("fact", "postgres vacuum"),)) for a in AUTHORS]
    pool += [D("dee", tags=["db"], entries=(("fact", "postgres"),)) for _ in range(extra)]
    return model_of(pool, k=3)


def _plant(folder: Path, row: list[object]) -> BuildCache:
    """A store whose ``counts`` row is ``row`` (behind a valid row digest: the
    BLAKE2b is key-less, anyone who can write the store can compute it)."""
    cache = BuildCache(folder)
    cache["counts"]  # loaded (empty), so that save writes the section
    cache.sections["counts"] = {patterns.MIN_TIER: json.dumps(row).encode("utf-8")}
    cache.save("counts")
    return BuildCache(folder)


def _forged(model: SiteModel, prefix: int, fake: str) -> list[object]:
    """A counts row whose members digest is that of the first ``prefix`` counted
    dreams of ``model`` (public data: ids, months, authors, tags, entry types),
    holding only a keyword ``fake`` that no counted dream holds, "by" the three
    authors, with self-consistent tallies, and tracking the months of every
    keyword (an empty tally: anyone can list a dictionary of words), so that
    ``derive`` never asks for a full count."""
    counted = patterns._counted(model, patterns.MIN_TIER)
    counted.reverse()
    digest = patterns.members_digest(counted[:prefix], patterns.MIN_TIER)
    terms = [[fake, 3, [0, 1, 2], [[0, 3]], [[fake, 3]], []]]
    months = [[fake, [["2025-01", 3, [0, 1, 2]]]]]
    months += [[key, []] for key in sorted(patterns.count(model).word_months)]
    return [
        "dreampool-pattern-counts/1",
        patterns.MIN_TIER,
        prefix,
        digest,
        list(AUTHORS),
        [],
        [],
        terms,
        months,
    ]


def test_a_counts_row_whose_tallies_cannot_be_ranked_is_a_miss_not_a_traceback(
    tmp_path: Path,
) -> None:
    """T116, T44 (robustness of the store's strict readers). ``decode_counts``
    checks the shape of a row but not that its tallies add up; ``add_new`` takes
    any row whose members digest matches, and the digest of *no* dreams
    (``dreams`` = 0) is the same for every pool, so a row needs no knowledge of
    the pool at all. A keyword "held" by 3 authors in 5 dreams of a pool of 3
    counted dreams reaches ``keywords.rank``, which raises ValueError: the
    patterns' process, and with it the build, fails on bytes read from the
    store, instead of the row being a miss (counted in full)."""
    model = _model()
    row = _forged(model, 0, "zzz")
    row[7] = [["zzz", 5, [0, 1, 2], [[0, 5]], [["zzz", 5]], []]]  # 5 dreams of 3
    cache = _plant(tmp_path / "cache", row)
    assert cache["counts"], "the planted row reads back (its row digest is valid)"
    assert assemble._count(model, cache, False) == patterns.compute_patterns(model)


def test_a_counts_row_for_no_dreams_can_carry_no_tally(tmp_path: Path) -> None:
    """T116 (a pool-agnostic forged row). The members digest of zero dreams is
    a constant (it hashes the tier rule only), so one planted row fits every
    pool and every later build: ``add_new`` adds all counted dreams on top of
    whatever it holds, and the keyword ``exfiltrated``, which no dream holds,
    is shown as held by 3 authors, build after build (each build re-encodes the
    counts it added to). A row that counted no dream can hold no tally."""
    model = _model()
    cache = _plant(tmp_path / "cache", _forged(model, 0, "exfiltrated"))
    found = assemble._count(model, cache, False)
    assert "exfiltrated" not in [p.term for p in found.keywords]
    assert found == patterns.compute_patterns(model)


# The row key of a log key (builder.buildcache.row_key): what the publish build tags with.
LOG_SEED = bytes(range(32))


def test_a_forged_counts_row_survives_new_dreams(tmp_path: Path) -> None:
    """T81, T116 (escalated by this change). A forged row matching the public
    members digest of the pool's counted dreams, with self-consistent tallies
    (no more authors than dreams, no more dreams than counted), shows a keyword
    no counted dream holds. Unlike a forged ``patterns`` row, which is dropped
    at the next change of the inputs, the counts are added to and written back
    by every build after a new dream: the forgery outlives every append.

    The forger can write the store (a cache restored by the publish workflow)
    and compute any public digest, but does not hold the log key: a build
    that does (the publish build) takes only rows tagged with its row key.
    Before rows were tagged, this row was believed (a strict xfail here)."""
    before = _model()
    # The build's own row for these dreams, and one keyword more, its tallies
    # adding up (3 dreams of the 3 counted, by their 3 authors, in their month).
    row = json.loads(patterns.encode_counts(patterns.count(before)))
    names = row[4]
    who = sorted(names.index(a) for a in AUTHORS)
    row[7] = sorted([*row[7], ["exfiltrated", 3, who, [[0, 3]], [["exfiltrated", 3]], []]])
    row[8] = sorted([*row[8], ["exfiltrated", [["2025-01", 3, who]]]])
    _plant(tmp_path / "cache", row)
    cache = BuildCache(tmp_path / "cache", key=row_key(LOG_SEED))
    after = _model(extra=1)  # a new member's dream: the patterns' inputs changed
    found = assemble._count(after, cache, False)
    assert found == patterns.compute_patterns(after)
    assert any("not tagged with this log key" in n for n in cache.notes), cache.notes
    assert "exfiltrated" not in [p.term for p in found.keywords]


def test_a_counts_row_of_another_tier_rule_is_not_taken(tmp_path: Path) -> None:
    """T116, T34, T81 (a guest swarm through the store). ``_count`` looks the row up
    under the build's tier rule (``MIN_TIER``) but ``add_new`` counts by the
    rule the row itself names. A row that is honest in every tally, made by
    ``count(model, min_tier="guest")`` (what any copy of the public pool gives,
    no forged number in it), matches its own members digest, so every later
    build counts guests: a swarm of fresh guest keys pushes its word over k,
    which rule 1 exists to prevent. The build writes only its own rule's row;
    any other is not its own and must be a miss."""
    pool = [D(a, tags=["db"], entries=(("fact", "postgres"),)) for a in AUTHORS]
    pool += [D(f"sybil{i}", tier="guest", entries=(("fact", "swarmword"),)) for i in range(3)]
    model = model_of(pool, k=3)
    assert "swarmword" not in [p.term for p in patterns.compute_patterns(model).keywords]
    cache = _plant(
        tmp_path / "cache",
        json.loads(patterns.encode_counts(patterns.count(model, min_tier="guest"))),
    )
    found = assemble._count(model, cache, False)
    assert "swarmword" not in [p.term for p in found.keywords]
    assert found == patterns.compute_patterns(model)


def _named(dreams: list[tuple[str, D]], k: int = 3) -> SiteModel:
    """model_of with the dreams' ids given (model_of numbers them by position,
    and an erased dream must not hand its id to the next one)."""
    model = model_of([d for _, d in dreams], k=k)
    ids = {f"id{i:04d}": name for i, (name, _) in enumerate(dreams)}
    views = tuple(dataclasses.replace(v, id=ids[v.id]) for v in model.dreams)
    heads = {ids[i]: b for i, b in model.heads.items()}
    return dataclasses.replace(model, dreams=views, by_id={v.id: v for v in views}, heads=heads)


class _Killed(BaseException):
    """The patterns' process killed (Ctrl-C on a local build, the OOM killer)."""


@pytest.mark.parametrize("then", ["nothing else", "a new dream"])
def test_an_erased_dream_whose_words_a_killed_build_stored_leaves_no_trace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, then: str
) -> None:
    """T48 (erasure leaves nothing). ``add_new`` writes the new dreams' words to
    the store through ``Rows`` (flushed every ``Rows.FLUSH`` rows while jieba
    runs, and before the counts and patterns rows are saved); a patterns'
    process killed after that (here: right after the flush; a local build
    interrupted, or the OOM killer: the publish workflow saves the store when
    the build fails, though not when it is cancelled) leaves the words of a
    dream the counts and patterns rows do not hold. Since c47d946 (before, the
    words were written with the rows, at the end). Erase that dream: the next
    build either takes the old
    patterns row (same inputs as before the dream), or adds a newer dream to
    the old counts with ``add_new``, which never deletes a words row. Either
    way the erased dream's words stay in the store, build after build, until
    some change forces a full count."""
    base = [
        (f"p{i}", D(a, tags=["db"], entries=(("fact", "postgres"),))) for i, a in enumerate(AUTHORS)
    ]
    gone = ("gone", D("zed", title="zedtitlecanary", entries=(("fact", "zedentrycanary"),)))
    folder = tmp_path / "cache"
    assemble._patterns((_named(base), BuildCache(folder), False))

    flush = Rows.flush

    def killed(self: Rows) -> None:  # right after the new dream's words are written
        flush(self)
        raise _Killed

    with monkeypatch.context() as m:
        m.setattr(Rows, "flush", killed)
        with pytest.raises(_Killed):
            assemble._patterns((_named([*base, gone]), BuildCache(folder), False))
    after = base if then == "nothing else" else [*base, ("new", D("ada", title="later"))]
    assemble._patterns((_named(after), BuildCache(folder), False))  # "gone" is erased
    raw = (folder / "store.sqlite").read_bytes()
    assert b"zedtitlecanary" not in raw and b"zedentrycanary" not in raw
