"""Feeds, sitemap, robots.txt and the JSON API, rendered from a real build."""

from __future__ import annotations

import dataclasses
import json
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import pytest

from builder import build as buildmod
from builder.content import pool
from builder.formats.note import parse_private_key
from builder.log import erase, logbuild
from builder.site import feeds
from builder.site.feeds import tag_uri
from builder.site.model import SiteModel, build_model
from tests.pools import key_id_of, make_pool
from tests.siteapi import api_dreams

A = "{http://www.w3.org/2005/Atom}"
SM = "{http://www.sitemaps.org/schemas/sitemap/0.9}"
XML_BASE = "{http://www.w3.org/XML/1998/namespace}base"
HOSTILE = '<script>&"]]>'
LONG_SUMMARY = "word " * 100  # 500 characters
ABSOLUTE = "https://example.org/pool/"


@dataclass
class Built:
    relative: SiteModel  # base_url "/"
    absolute: SiteModel  # base_url ABSOLUTE
    ada: list[str]  # ada's dreams, not anonymized
    ada_anon: str
    mozi_anon: str
    bob: str  # a member, so not third-party
    erased: str
    site: Path  # the fixture's real build (base_url "/")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    root = tmp_path_factory.mktemp("feeds")
    tp = make_pool(root)
    ada = tp.add("ada", 1, title=HOSTILE, tags=["python", "security"])
    ada += tp.add("ada", 1, summary=LONG_SUMMARY, tags=["python"])
    (ada_anon,) = tp.add(
        "ada", 1, consent={"share": True, "derivatives": True, "anonymize": True}, tags=["python"]
    )
    (mozi_anon,) = tp.add(
        "墨子",
        1,
        title="Unsigned by name",
        consent={"share": True, "derivatives": False, "anonymize": True},
        tags=["python"],
    )
    (bob,) = tp.add("bob", 1, tags=["packaging"])
    (gone,) = tp.add("bob", 1, title="Soon erased", tags=["packaging"])
    key_file = tp.content / "keys" / f"{key_id_of('bob')[7:]}.yaml"
    key_file.write_text(key_file.read_text().replace("tier: guest", "tier: member"))
    signer = parse_private_key(tp.log_key)
    buildmod.build(tp.content, root / "site", signer=signer)
    for p in root.glob("in-*.json"):
        p.unlink()  # the submitted copies, which erase would find as residue
    erase.erase(tp.content, gone, "author-request")
    buildmod.build(tp.content, root / "site", signer=signer)

    config = pool.load_config(tp.content)
    directory, _ = pool.load_keys(tp.content)
    scanned, _ = pool.scan_dreams(tp.content, directory)
    log = logbuild.update(tp.content, scanned, origin=config.origin, signer=None)
    return Built(
        relative=build_model(log, directory, config, base_url="/"),
        absolute=build_model(log, directory, config, base_url=ABSOLUTE),
        ada=ada,
        ada_anon=ada_anon,
        mozi_anon=mozi_anon,
        bob=bob,
        erased=gone,
        site=root / "site",
    )


def render_feeds(model: SiteModel) -> dict[str, bytes]:
    """Every machine-readable file of the site, as :func:`builder.site.feeds.feed_pages`
    gives them to the build (:func:`builder.site.assemble.write_site`), each rendered."""
    return {page.path: page.render() for page in feeds.feed_pages(model)}


def test_the_build_writes_exactly_these_files(built: Built) -> None:
    """What the tests below read is what ``dreampool build`` writes: its feeds,
    sitemap, robots.txt and API (with entries the build cached, and keys) are, byte
    for byte, :func:`render_feeds` of the same model."""
    plan = render_feeds(built.relative)
    assert plan and {path: (built.site / path).read_bytes() for path in plan} == plan
    written = {
        p.relative_to(built.site).as_posix()
        for p in built.site.rglob("*")
        if p.is_file() and (p.name.endswith((".xml", ".txt")) or "api" in p.parts)
    }
    assert written - set(plan) == {"llms.txt"}  # the agents' file (tests/test_agents.py)


def entries(feed: bytes) -> list[ET.Element]:
    root = ET.fromstring(feed)
    assert root.tag == A + "feed"
    return root.findall(A + "entry")


def dream_of(entry: ET.Element) -> str:
    href = entry.find(A + "link").get("href")  # type: ignore[union-attr]
    assert href is not None
    return href.rstrip("/").rsplit("/", 1)[-1]


def test_pool_feed_lists_the_newest_dreams_in_order(built: Built) -> None:
    m = built.relative
    plan = render_feeds(m)
    found = entries(plan["feed.xml"])
    assert [dream_of(e) for e in found] == [d.id for d in m.dreams]
    assert built.erased not in {dream_of(e) for e in found}
    feed = ET.fromstring(plan["feed.xml"])
    assert feed.findtext(A + "updated") == m.dreams[0].date
    for e, d in zip(found, m.dreams, strict=True):
        assert e.findtext(A + "published") == e.findtext(A + "updated") == d.date
        assert e.find(A + "title").get("type") == "text"  # type: ignore[union-attr]


def test_pool_feed_holds_at_most_50_entries(built: Built) -> None:
    many = dataclasses.replace(built.relative, dreams=built.relative.dreams * 20)
    assert len(many.dreams) > 50
    assert len(entries(render_feeds(many)["feed.xml"])) == 50


def test_anonymized_dreams_name_no_one(built: Built) -> None:
    plan = render_feeds(built.relative)
    by_id = {dream_of(e): e for e in entries(plan["feed.xml"])}
    for anon in (built.ada_anon, built.mozi_anon):
        author = by_id[anon].find(A + "author")
        assert author is not None
        assert author.findtext(A + "name") == "anonymous"
        assert author.find(A + "uri") is None  # no link to a diary either
    # 墨子 wrote only an anonymized dream, signed by a one-time key: the name
    # is nowhere, not even on a diary.
    for path, data in plan.items():
        assert "墨子".encode() not in data, path
    authors = {d["id"]: d["author"] for d in api_dreams(plan.__getitem__)}
    assert authors[built.ada_anon] is None and authors[built.mozi_anon] is None


def test_author_feed_leaves_out_anonymized_dreams(built: Built) -> None:
    m = built.relative
    plan = render_feeds(m)
    ada = next(a for a in m.authors if a.name == "ada")
    ids = [dream_of(e) for e in entries(plan[f"authors/{ada.slug}/feed.xml"])]
    assert sorted(ids) == sorted(built.ada) and built.ada_anon not in ids
    # 墨子's one dream is anonymized: signed by a one-time key under the name
    # anonymous (docs/protocol.md §1.2). Neither name has a diary or a feed.
    assert {a.name for a in m.authors} == {"ada", "bob"}
    assert not [
        p
        for p in plan
        if p.startswith("authors/")
        and p.count("/") > 1
        and p.split("/")[1] not in {a.slug for a in m.authors}
    ]


def test_tag_feeds_hold_the_tags_dreams(built: Built) -> None:
    m = built.relative
    plan = render_feeds(m)
    for tag in m.tags:
        ids = [dream_of(e) for e in entries(plan[f"tags/{tag.slug}/feed.xml"])]
        assert ids == list(tag.dream_ids)
    python = next(t for t in m.tags if t.name == "python")
    assert built.mozi_anon in python.dream_ids


def test_ids_are_absolute_tag_uris_stable_across_renders_and_hosts(built: Built) -> None:
    first = render_feeds(built.relative)
    assert render_feeds(built.relative) == first  # byte-identical
    moved = render_feeds(built.absolute)
    for path in (p for p in first if p.endswith("feed.xml")):
        ids = [el.text or "" for el in ET.fromstring(first[path]).iter(A + "id")]
        assert ids == [el.text for el in ET.fromstring(moved[path]).iter(A + "id")], path
        assert len(set(ids)) == len(ids)
        for i in ids:
            assert urlsplit(i).scheme == "tag" and i.startswith("tag:test.example,"), i
    entry = entries(first["feed.xml"])[0]
    year = built.relative.history[0].date[:4]
    assert entry.findtext(A + "id") == f"tag:test.example,{year}:pool/dreams/{dream_of(entry)}"


def test_relative_links_resolve_through_xml_base(built: Built) -> None:
    m = built.relative
    plan = render_feeds(m)
    ada = next(a for a in m.authors if a.name == "ada")
    path = f"authors/{ada.slug}/feed.xml"
    feed = ET.fromstring(plan[path])
    xml_base = feed.get(XML_BASE)
    assert xml_base == "../../"
    served_at = "http://host/some/sub/path/"  # the site works under any path
    root = urljoin(served_at + path, xml_base)
    assert root == served_at
    for e in feed.iter(A + "entry"):
        href = e.find(A + "link").get("href")  # type: ignore[union-attr]
        assert urljoin(root, href) == f"{served_at}dreams/{dream_of(e)}/"
        assert urljoin(root, e.findtext(f"{A}author/{A}uri")) == f"{served_at}authors/ada/"
    assert ET.fromstring(plan["feed.xml"]).get(XML_BASE) == "./"


def test_absolute_base_url_gives_absolute_links(built: Built) -> None:
    plan = render_feeds(built.absolute)
    feed = ET.fromstring(plan["feed.xml"])
    assert feed.get(XML_BASE) is None
    hrefs = [el.get("href") or "" for el in feed.iter(A + "link")]
    assert hrefs and all(h.startswith(ABSOLUTE) for h in hrefs)
    assert f'href="{ABSOLUTE}feed.xml"' in plan["feed.xml"].decode()


def test_hostile_title_is_escaped_and_round_trips(built: Built) -> None:
    plan = render_feeds(built.relative)
    text = plan["feed.xml"].decode()
    assert "<script>" not in text and '&lt;script&gt;&amp;"]]&gt;' in text
    titles = {dream_of(e): e.findtext(A + "title") for e in entries(plan["feed.xml"])}
    assert titles[built.ada[0]] == HOSTILE
    assert {d["id"]: d["title"] for d in api_dreams(plan.__getitem__)}[built.ada[0]] == HOSTILE


def test_text_outside_xml_is_made_safe(built: Built) -> None:
    m = built.relative
    first = m.dreams[0]
    odd = dataclasses.replace(
        first, title='a\rb\x00c🦉d"\n', text={**first.text, "summary": "x\x1by"}
    )
    model = dataclasses.replace(m, dreams=(odd,), title='t"<\t>')
    feed = ET.fromstring(render_feeds(model)["feed.xml"])
    entry = feed.find(A + "entry")
    assert entry is not None
    assert entry.findtext(A + "title") == 'a\rb\ufffdc🦉d"\n'
    assert entry.findtext(A + "summary") == "x\ufffdy"
    assert feed.findtext(A + "title") == 't"<\t>'


def test_third_party_and_tag_categories(built: Built) -> None:
    m = built.relative
    found = {dream_of(e): e for e in entries(render_feeds(m)["feed.xml"])}
    scheme = tag_uri(m, "tags")
    for d in m.dreams:
        cats = found[d.id].findall(A + "category")
        tier_marks = [c for c in cats if c.get("scheme") is None]
        assert [c.get("term") for c in tier_marks] == (["third-party"] if d.third_party else [])
        tagged = [c.get("term") for c in cats if c.get("scheme") == scheme]
        assert tagged == [t.name for t in d.tags]
    assert not m.by_id[built.bob].third_party and m.by_id[built.ada[0]].third_party


def test_summary_is_plain_text_clipped_to_300(built: Built) -> None:
    found = {dream_of(e): e for e in entries(render_feeds(built.relative)["feed.xml"])}
    summary = found[built.ada[1]].find(A + "summary")
    assert summary is not None and summary.get("type") == "text"
    text = summary.text or ""
    assert len(text) <= 300 and text.endswith("…")
    assert LONG_SUMMARY.startswith(text[:-1])
    short = found[built.bob].findtext(A + "summary")
    assert short == built.relative.by_id[built.bob].summary


def sitemap_urls(plan: dict[str, bytes], prefix: str) -> dict[str | None, str | None]:
    """Every URL the sitemaps list (loc: lastmod): sitemap.xml is an index of
    urlsets, each at most SITEMAP_LIMIT URLs and dated by its newest page."""
    index = ET.fromstring(plan["sitemap.xml"])
    assert index.tag == SM + "sitemapindex"
    urls: dict[str | None, str | None] = {}
    for part in index:
        loc, lastmod = part.findtext(SM + "loc"), part.findtext(SM + "lastmod")
        assert loc is not None and loc.startswith(prefix)
        urlset = ET.fromstring(plan[loc.removeprefix(prefix)])
        assert urlset.tag == SM + "urlset" and 1 <= len(urlset) <= feeds.SITEMAP_LIMIT
        listed = {u.findtext(SM + "loc"): u.findtext(SM + "lastmod") for u in urlset}
        assert lastmod == max((mod for mod in listed.values() if mod), default=None)
        assert not set(listed) & set(urls)
        urls.update(listed)
    return urls


def test_sitemap_lists_every_page(built: Built) -> None:
    for m, prefix in ((built.relative, ""), (built.absolute, ABSOLUTE)):
        urls = sitemap_urls(render_feeds(m), prefix)
        for d in m.dreams:
            assert urls[f"{prefix}dreams/{d.id}/"] == d.date
        (tomb,) = m.erased
        assert tomb.id == built.erased
        assert urls[f"{prefix}dreams/{tomb.id}/"] == tomb.date
        for a in m.authors:
            assert f"{prefix}authors/{a.slug}/" in urls
        for t in m.tags:
            assert f"{prefix}tags/{t.slug}/" in urls
        pages = ("archive/", "authors/", "tags/", "lineage/", "patterns/", "log/", "search/")
        pages += ("verify/",)
        for page in pages:
            assert prefix + page in urls
        assert (prefix or "./") in urls
        assert len(urls) == len(m.dreams) + 1 + len(m.authors) + len(m.tags) + 1 + len(pages)
        assert f"{prefix}authors/anonymous/" not in urls  # one-time keys: no diary


def test_dream_sitemaps_are_shards_by_log_leaf(
    built: Built, monkeypatch: pytest.MonkeyPatch
) -> None:
    """sitemap-dreams-<k>.xml lists the pages (and tombstones) of the dreams of
    leaves [k·SHARD_LEAVES, (k+1)·SHARD_LEAVES), in log order."""
    monkeypatch.setattr(feeds, "SHARD_LEAVES", 2)
    m = built.relative
    plan = render_feeds(m)
    at = {f"dreams/{d.id}/": d.index for d in m.dreams}
    at |= {f"dreams/{e.id}/": e.index for e in m.erased}
    shards = sorted(p for p in plan if p.startswith("sitemap-dreams-"))
    assert shards == sorted(f"sitemap-dreams-{k}.xml" for k in {i // 2 for i in at.values()})
    for path in shards:
        k = int(path.removeprefix("sitemap-dreams-").removesuffix(".xml"))
        locs = [u.findtext(SM + "loc") for u in ET.fromstring(plan[path])]
        assert [at[str(loc)] for loc in locs] == sorted(at[str(loc)] for loc in locs)
        assert all(at[str(loc)] // 2 == k for loc in locs)


def test_robots_names_the_sitemap_only_when_absolute(built: Built) -> None:
    absolute = render_feeds(built.absolute)["robots.txt"].decode()
    assert absolute.startswith("User-agent: *\nAllow: /\n")
    assert f"Sitemap: {ABSOLUTE}sitemap.xml\n" in absolute
    assert "Sitemap" not in render_feeds(built.relative)["robots.txt"].decode()


def test_api_matches_the_model(built: Built, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(feeds, "SHARD_LEAVES", 2)
    m = built.relative
    plan = render_feeds(m)
    data = plan["api/dreams.json"]
    api = json.loads(data)
    shards = sorted(p for p in plan if p.startswith("api/dreams/"))
    for path in ("api/dreams.json", *shards):
        doc = json.loads(plan[path])
        compact = json.dumps(doc, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
        assert plan[path] == (compact + "\n").encode()
        assert doc["format"] == "dreampool-api/v2"
        assert "墨子".encode() not in plan[path]
        assert built.erased not in plan[path].decode()
    assert m.checkpoint is not None
    assert api["pool"] == {
        "title": m.title,
        "origin": m.origin,
        "checkpoint": {"size": m.checkpoint.size, "root": m.checkpoint.root},
    }
    assert api["dreams"] == len(m.dreams) and api["shard_leaves"] == 2
    # Shards in log order, each holding its leaves' dreams, only those that hold one.
    ks = sorted({d.index // 2 for d in m.dreams})
    assert api["shards"] == [
        {
            "dreams": sum(1 for d in m.dreams if d.index // 2 == k),
            "leaves": [2 * k, 2 * k + 2],
            "path": f"dreams/{k}.json",
        }
        for k in ks
    ]
    assert shards == sorted(f"api/dreams/{k}.json" for k in ks)
    for k in ks:
        assert json.loads(plan[f"api/dreams/{k}.json"])["leaves"] == [2 * k, 2 * k + 2]
    listed = api_dreams(plan.__getitem__)
    in_log_order = sorted(m.dreams, key=lambda d: d.index)
    assert [d["id"] for d in listed] == [d.id for d in in_log_order]
    for got, d in zip(listed, in_log_order, strict=True):
        assert got == {
            "id": d.id,
            "title": d.title,
            "author": None if d.anonymized else d.author,
            "tags": [t.name for t in d.tags],
            "tier": d.tier,
            "date": d.date,
            "index": d.index,
        }


def test_plan_paths_are_the_url_scheme(built: Built) -> None:
    m = built.relative
    plan = render_feeds(m)
    want = {"feed.xml", "sitemap.xml", "robots.txt", "api/dreams.json", "sitemap-pages-1.xml"}
    leaves = [d.index for d in m.dreams] + [e.index for e in m.erased]
    shards = {i // feeds.SHARD_LEAVES for i in leaves}
    want |= {f"sitemap-dreams-{k}.xml" for k in shards}
    parts = -(-len(feeds.sitemap_pages(m)) // feeds.SITEMAP_PAGES_PART)  # diaries, tags
    want |= {f"sitemap-pages-{j}.xml" for j in range(2, 2 + parts)}
    want |= {f"api/dreams/{d.index // feeds.SHARD_LEAVES}.json" for d in m.dreams}
    want |= {f"authors/{a.slug}/feed.xml" for a in m.authors}
    want |= {f"tags/{t.slug}/feed.xml" for t in m.tags}
    assert set(plan) == want
    for path in plan:
        assert not Path(path).is_absolute() and ".." not in path


def test_no_sitemap_passes_the_protocol_limit(
    built: Built, monkeypatch: pytest.MonkeyPatch
) -> None:
    # sitemaps.org: at most 50,000 URLs a file; a pool of 100k dreams has more.
    for m, prefix in ((built.relative, ""), (built.absolute, ABSOLUTE)):
        whole = sitemap_urls(render_feeds(m), prefix)
        own = len(feeds.site_pages(m))  # one part of their own, 9 URLs
        monkeypatch.setattr(feeds, "SITEMAP_LIMIT", own)
        monkeypatch.setattr(feeds, "SHARD_LEAVES", 4)
        monkeypatch.setattr(feeds, "SITEMAP_PAGES_PART", 2)
        plan = render_feeds(m)
        assert sitemap_urls(plan, prefix) == whole  # each part at most `own` URLs
        pages = len(feeds.sitemap_pages(m))
        assert pages > 2 and f"sitemap-pages-{1 + -(-pages // 2)}.xml" in plan
        monkeypatch.undo()
