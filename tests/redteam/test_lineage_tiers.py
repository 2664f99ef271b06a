"""Lineage lends no authority (THREATS.md T71): a guest who names a
maintainer's dream as ``lineage.parent`` is shown as what it is, with its tier,
wherever the parent lists its children, and collapsed under a dream of a
higher tier.

The attack: anyone can make a guest key and sign dreams naming any dream of the
pool as their parent. The maintainer's own dream page then listed them as
"child: …", and the maintainer's diary said "continued by 3", with no tier in
sight: replies by strangers read as the maintainer's own continuation.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from builder.site import agentdocs as agents
from tests.pools import PoolFixture, make_pool
from tests.redteam import build, set_tier, signed, submit
from tests.siteapi import site_api_dreams

GUESTS = ("eve", "mallory", "trent")


@dataclass(frozen=True)
class Pool:
    tp: PoolFixture
    site: Path
    ids: dict[str, str]


def _pool(root: Path) -> Pool:
    tp = make_pool(root)
    (house,) = submit(
        tp, signed("ada", title="House rule: pin the parser", lineage={"generation": 0})
    )
    (member_reply,) = submit(
        tp,
        signed(
            "bob", title="Pinned it in the builder too", lineage={"parent": house, "generation": 1}
        ),
    )
    guest_replies = submit(
        tp,
        *(
            signed(
                g,
                title=f"Addendum by {g}: also run this",
                lineage={"parent": house, "generation": 1},
            )
            for g in GUESTS
        ),
    )
    (guest_root,) = submit(
        tp, signed("zed", title="A guest's own chain", lineage={"generation": 0})
    )
    (under_guest,) = submit(
        tp,
        signed(
            "bob",
            title="A member continues a guest",
            lineage={"parent": guest_root, "generation": 1},
        ),
    )
    set_tier(tp, "ada", "maintainer")
    set_tier(tp, "bob", "member")
    for path in root.glob("in-*.json"):
        path.unlink()
    site = root / "site"
    build(tp, site)
    ids = dict(
        house=house, member_reply=member_reply, guest_root=guest_root, under_guest=under_guest
    )
    ids.update(zip(GUESTS, guest_replies, strict=True))
    return Pool(tp, site, ids)


@pytest.fixture(scope="module")
def pool(tmp_path_factory: pytest.TempPathFactory) -> Pool:
    root = tmp_path_factory.mktemp("lineage-tiers")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DREAMPOOL_HOME", str(root / "home"))
        return _pool(root)


def page(site: Path, path: str) -> str:
    return (site / path / "index.html").read_text(encoding="utf-8")


def lineage_of(html: str) -> str:
    """The dream page's lineage entry (<dd> after <dt>Lineage</dt>)."""
    match = re.search(r"<dt>Lineage</dt>\s*<dd>(.*?)</dd>", html, re.S)
    assert match, "no lineage entry"
    return match.group(1)


def listed(html: str) -> dict[str, str]:
    """Each dream linked in ``html`` (a page two folders deep) → the tier badge
    that follows its link within the same list item, or "" if none."""
    found = {}
    for item in re.findall(r"<li(?: data-[a-z]+=\"[a-z]+\")?>(.*?)</li>", html, re.S):
        link = re.search(r'href="\.\./\.\./dreams/([0-9a-f]{16})/"', item)
        if link:
            badge = re.search(r'</a>\s*<span class="tier tier-(\w+)"', item[link.end() :])
            found[link.group(1)] = badge.group(1) if badge else ""
    return found


def test_guest_replies_under_a_maintainers_dream_are_collapsed_and_badged(pool: Pool) -> None:
    """T71: three guests name the maintainer's dream as their parent. Its page
    listed them as "child: …" beside the member's reply, no tier shown. Now the
    member's reply is listed with its badge, and the guests' sit in a closed
    <details> "3 guest replies", each with a guest badge; none outside it."""
    ids = pool.ids
    section = lineage_of(page(pool.site, f"dreams/{ids['house']}"))
    details = re.findall(r'<details class="replies">(.*?)</details>', section, re.S)
    assert len(details) == 1, section
    (collapsed,) = details
    assert re.search(r"<summary[^>]*>\s*3 guest replies\s*</summary>", collapsed), collapsed
    assert listed(collapsed) == {ids[g]: "guest" for g in GUESTS}
    outside = section.replace(collapsed, "")
    assert listed(outside) == {ids["member_reply"]: "member"}
    assert '<details class="replies" open' not in section


def test_a_dream_page_shows_its_parents_tier(pool: Pool) -> None:
    """T71: a guest's page said "parent: House rule: pin the parser", a
    maintainer's title with no tier beside the guest's own: the parent's tier is
    shown next to it."""
    section = lineage_of(page(pool.site, f"dreams/{pool.ids['eve']}"))
    assert listed(section) == {pool.ids["house"]: "maintainer"}


def test_children_of_a_guest_dream_are_listed_each_with_its_tier(pool: Pool) -> None:
    """T71: under a guest's dream nothing is borrowed, so nothing is collapsed,
    but each child still shows its tier."""
    section = lineage_of(page(pool.site, f"dreams/{pool.ids['guest_root']}"))
    assert "<details" not in section
    assert listed(section) == {pool.ids["under_guest"]: "member"}


def test_every_node_of_the_lineage_tree_shows_its_tier(pool: Pool) -> None:
    """T71: the lineage page badged guests only, so a member under a maintainer
    and a maintainer's own root looked alike; every node now carries its tier."""
    html = (pool.site / "lineage" / "index.html").read_text(encoding="utf-8")
    nodes = re.findall(r'<div class="node[^"]*">(.*?)</div>', html, re.S)
    tiers = {}
    for node in nodes:
        (dream,) = re.findall(r'href="\.\./dreams/([0-9a-f]{16})/"', node)
        badges = re.findall(r'class="tier tier-(\w+)"', node)
        tiers[dream] = badges
    ids = pool.ids
    want = {ids["house"]: ["maintainer"], ids["member_reply"]: ["member"]}
    want.update({ids[g]: ["guest"] for g in GUESTS})
    want.update({ids["guest_root"]: ["guest"], ids["under_guest"]: ["member"]})
    assert tiers == want


def test_the_diary_counts_continuations_by_tier(pool: Pool) -> None:
    """T71: the maintainer's diary said "continued by 4" of a dream that one
    member and three guests replied to; it now says how many of each tier, with
    the tier badges."""
    html = page(pool.site, "authors/ada")
    line = re.search(r'<p class="tl-lineage-line">(.*?)</p>', html, re.S)
    assert line, html
    text = re.sub(r"\s+", " ", line.group(1))
    assert re.search(r'1 <span class="tier tier-member"[^>]*>member</span>', text), text
    assert re.search(r'3 <span class="tier tier-guest"[^>]*>guest</span>', text), text
    guest = page(pool.site, "authors/eve")
    parent = re.search(r'<p class="tl-lineage-line">(.*?)</p>', guest, re.S)
    assert parent and 'class="tier tier-maintainer"' in parent.group(1), guest


def test_feeds_api_and_agent_files_lend_no_authority(pool: Pool) -> None:
    """T71: the other readers: feeds and the JSON API list no children; the
    agent files show each dream's lineage inside its own quotation, under its own
    tier, and list no children under the maintainer's unquoted text."""
    ids = pool.ids
    api = site_api_dreams(pool.site)
    assert api and all(
        set(d) == {"id", "title", "author", "tags", "tier", "date", "index"} for d in api
    )
    for feed in pool.site.rglob("feed.xml"):
        assert "lineage" not in feed.read_text(encoding="utf-8"), feed
    digest = (pool.site / "agents" / "digest.md").read_text(encoding="utf-8")
    blocks = re.split(r"(?m)^### dream ", digest)[1:]
    by_id = {b[:16]: b for b in blocks}
    house = by_id[ids["house"]]
    assert "tier maintainer" in house and agents.BANNER not in house
    assert not any(ids[g] in house for g in GUESTS)
    for g in GUESTS:
        mine = by_id[ids[g]]
        assert "tier guest" in mine and f"> lineage: generation 1, parent {ids['house']}" in mine


def test_a_child_promoted_later_moves_out_of_the_collapsed_replies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """T71: the parent's page is kept between builds while its inputs stand
    still (builder.site.units); a child's tier is one of them, so promoting a guest
    who replied makes the parent's page (and its diary line) again."""
    monkeypatch.setenv("DREAMPOOL_HOME", str(tmp_path / "home"))
    p = _pool(tmp_path)
    set_tier(p.tp, "eve", "member")
    build(p.tp, p.site, key=False)
    section = lineage_of(page(p.site, f"dreams/{p.ids['house']}"))
    assert re.search(r"<summary[^>]*>\s*2 guest replies\s*</summary>", section), section
    assert listed(section.split("<details")[0]) == {
        p.ids["member_reply"]: "member",
        p.ids["eve"]: "member",
    }
    diary = page(p.site, "authors/ada")
    assert re.search(r'2 <span class="tier tier-member"', diary), diary
