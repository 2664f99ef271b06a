"""Sybil attacks on patterns (THREATS.md T34–T37), through the whole build.

``tests/test_patterns.py`` proves the counting rule on site models; here the
swarm goes through submit (trust on first use registers each fresh key as a
guest) and the build, and the published ``patterns/index.html`` is read.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from builder.content import pool
from tests.pools import PoolFixture, make_pool
from tests.redteam import build, set_tier, signed, submit

SWARM = [f"sock{n}" for n in range(8)]


@pytest.fixture
def tp(tmp_path: Path) -> PoolFixture:
    return make_pool(tmp_path)  # k = 2


def _rows(site: Path) -> dict[str, tuple[int, int]]:
    """term → (dreams, authors), as the published patterns page shows them."""
    html = (site / "patterns" / "index.html").read_text(encoding="utf-8")
    found = re.findall(
        r'<tr><th scope="row"><span class="term"[^>]*>([^<]*)</span>.*?</th>'
        r'<td class="num">(\d+)</td><td class="num">(\d+)</td>',
        html,
    )
    # Every row is read, or a change of markup would make the "not in" tests vacuous.
    assert len(found) == html.count('<tr><th scope="row">'), "patterns rows not parsed"
    return {term: (int(dreams), int(authors)) for term, dreams, authors in found}


def _dream(author: str, n: int = 0) -> dict[str, object]:
    return signed(
        author,
        title=f"Sybilword notes {n} from {author}",
        tags=["sybiltag"],
        consent={"share": True, "derivatives": True, "anonymize": False},
    )


def test_a_guest_swarm_cannot_push_a_pattern_over_k(tp: PoolFixture, tmp_path: Path) -> None:
    """T34: one member and eight fresh guest keys (each registered by trust on
    first use) share a tag and a word: with k = 2 neither is a pattern, because
    only member and maintainer keys count by default."""
    submit(tp, _dream("ada"), *(_dream(sock) for sock in SWARM))
    set_tier(tp, "ada", "member")
    keys, _ = pool.load_keys(tp.content)
    assert sorted(k.tier for k in keys.keys.values()) == ["guest"] * len(SWARM) + ["member"]
    build(tp, tmp_path / "site")
    rows = _rows(tmp_path / "site")
    assert "sybiltag" not in rows and "sybilword" not in rows, rows


def test_the_swarm_does_not_swell_a_real_pattern(tp: PoolFixture, tmp_path: Path) -> None:
    """T34: once two members share the tag it is a pattern, counted over their two
    dreams and two authors; the eight guests add nothing to either count."""
    submit(tp, _dream("ada"), _dream("bob"), *(_dream(sock) for sock in SWARM))
    set_tier(tp, "ada", "member")
    set_tier(tp, "bob", "maintainer")
    build(tp, tmp_path / "site")
    rows = _rows(tmp_path / "site")
    assert rows["sybiltag"] == (2, 2) and rows["sybilword"] == (2, 2), rows


def test_one_member_with_many_dreams_counts_once(tp: PoolFixture, tmp_path: Path) -> None:
    """T35: one member repeating a tag over six dreams is one author, not a crowd."""
    submit(tp, *(_dream("ada", n) for n in range(6)))
    set_tier(tp, "ada", "member")
    build(tp, tmp_path / "site")
    assert "sybiltag" not in _rows(tmp_path / "site")


def test_a_submission_never_sets_or_raises_a_tier(tp: PoolFixture) -> None:
    """T37: the tier comes from content/keys, written by maintainers: a new key is
    a guest whatever the file says, and submitting again never changes a tier."""
    submit(tp, _dream("ada"))
    set_tier(tp, "ada", "member")
    submit(tp, _dream("ada", 1), _dream("eve"))
    tiers = {k.author: k.tier for k in pool.load_keys(tp.content)[0].keys.values()}
    assert tiers == {"ada": "member", "eve": "guest"}
