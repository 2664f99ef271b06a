"""The HTML pages: every kind exists, every link resolves, hostile text stays text."""

from __future__ import annotations

import dataclasses
import json
import posixpath
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from html.parser import HTMLParser
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from hypothesis import given
from hypothesis import strategies as st
from markupsafe import Markup

from builder import build as buildmod
from builder.content import pool
from builder.formats.note import parse_private_key
from builder.log import erase, logbuild
from builder.log.logstate import HistoryEntry, leaf_date
from builder.site import model, render
from tests.pools import key_id_of, make_pool

PAYLOADS = (
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "<javascript:alert(1)>",
    "[x](javascript:alert(1))",
    "<svg onload=alert(1)>",
    "{{ 7*7 }}",
    "{% raw %}",
    '"><b>',
    "[d](data:text/html,<script>alert(1)</script>)",
)
HOSTILE_TAGS = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "<svg onload=alert(1)>",
    "{{ 7*7 }}",
    "{% raw %}",
    '"><b>',
    "javascript:alert(1)",
    "[x](javascript:alert(1))",
]
SECRET_TITLE = "The lighthouse ledger that was erased"
PATTERNS = '<section class="pattern-list"><h2>Recurring tags</h2><p>fixture</p></section>'
BASES = ("/", "https://example.org/pool/")
# Pages that other modules write (feeds): linked, not rendered here.
ELSEWHERE = re.compile(r"(feed\.xml|(authors|tags)/[a-z0-9-]+/feed\.xml)")


@dataclass(frozen=True)
class Built:
    content: Path
    ids: dict[str, str]
    log_plan: dict[str, bytes]
    # render_for's real builds of the pool, by base URL, each built once
    root: Path = Path()
    sites: dict[str, dict[str, bytes]] = dataclasses.field(default_factory=dict)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Built]:
    root = tmp_path_factory.mktemp("render")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DREAMPOOL_HOME", str(root / "dphome"))
        tp = make_pool(root)
        (parent,) = tp.add("ada", 1, title="Root of a chain", lineage={"generation": 0})
        (child,) = tp.add(
            "ada",
            1,
            title="Child in the chain",
            summary="See [the docs](https://example.com/docs) and *this*.",
            lineage={"parent": parent, "generation": 1},
            entries=[
                {
                    "text": "A fact with a source.",
                    "type": "fact",
                    "confidence": "confirmed",
                    "source": "https://example.com/src",
                }
            ],
        )
        (grandchild,) = tp.add(
            "bob", 1, title="Grandchild", lineage={"parent": child, "generation": 2}
        )
        (orphan,) = tp.add(
            "bob", 1, title="Orphan", lineage={"parent": "feedfacefeedface", "generation": 4}
        )
        (chinese,) = tp.add("ada", 1, title="慢查询：复合索引的列顺序", tags=["数据库", "索引"])
        (anon,) = tp.add(
            "墨子",
            1,
            title="An anonymous dream",
            consent={"share": True, "derivatives": True, "anonymize": True},
        )
        (hostile,) = tp.add(
            "bob",
            1,
            title=" ".join(PAYLOADS[:4]),
            summary="\n\n".join(PAYLOADS),
            entries=[
                {"text": p, "type": t, "confidence": "unconfirmed", "source": p}
                for p, t in zip(PAYLOADS, ("fact", "warning", "rule", "lesson") * 3, strict=False)
            ],
            tags=HOSTILE_TAGS,
            lineage={"parent": "<script>alert(1)</script>", "generation": 1},
        )
        (gone,) = tp.add("ada", 1, title=SECRET_TITLE, summary="Vanishing summary text.")
        # Trust on first use registers keys as guest; make ada a member.
        ada_key = tp.content / "keys" / f"{key_id_of('ada').removeprefix('sha256:')}.yaml"
        ada_key.write_text(ada_key.read_text().replace("tier: guest", "tier: member"))
        signer = parse_private_key(tp.log_key)
        buildmod.build(tp.content, root / "site", signer=signer)
        for p in root.glob("in-*.json"):
            p.unlink()
        erase.erase(tp.content, gone, "author-request")
        buildmod.build(tp.content, root / "site", signer=signer)
        ids = dict(
            parent=parent,
            child=child,
            grandchild=grandchild,
            orphan=orphan,
            chinese=chinese,
            anon=anon,
            hostile=hostile,
            gone=gone,
        )
        _, log = load(tp.content, "/")
        yield Built(tp.content, ids, logbuild.publish(log), root)


def load(content: Path, base_url: str) -> tuple[model.SiteModel, logbuild.Log]:
    cfg = pool.load_config(content)
    directory, _ = pool.load_keys(content)
    scanned, _ = pool.scan_dreams(content, directory)
    log = logbuild.update(content, scanned, origin=cfg.origin, signer=None)
    return model.build_model(log, directory, cfg, base_url=base_url), log


def build_site(built: Built, base_url: str, where: Path) -> dict[str, bytes]:
    """Every file ``dreampool build`` (:func:`builder.build.build`) writes for the
    fixture pool at ``base_url``, built from a copy of its content in ``where`` (a
    build with an absolute base URL adds the log's URL to content/log/policy)."""
    content = where / "content"
    shutil.copytree(built.content, content)
    buildmod.build(content, where / "site", signer=None, base_url=base_url)
    site = where / "site"
    return {
        p.relative_to(site).as_posix(): p.read_bytes()
        for p in sorted(site.rglob("*"))
        if p.is_file()
    }


def render_for(built: Built, base_url: str = "/") -> dict[str, bytes]:
    """The site as the build writes it (:func:`build_site`), built once per base URL."""
    if base_url not in built.sites:
        where = built.root / f"site-{len(built.sites)}"
        built.sites[base_url] = build_site(built, base_url, where)
    return built.sites[base_url]


def list_pages(m: model.SiteModel) -> dict[str, bytes]:
    """Every page but the dreams' own, the search index and the static assets, by
    :func:`builder.site.render.list_pages` as :func:`builder.site.assemble.write_site` calls it,
    with :data:`PATTERNS` for the patterns fragment: for tests that change the
    rendering's constants, or look at the fragment, where a real build would cost
    seconds or compute its own patterns."""

    def card_html(d: model.DreamView, level: int, root: str) -> Markup:
        return Markup(render.card_template(m, d, root, level))

    def diary_item(d: model.DreamView, root: str) -> Markup:
        return Markup(render.diary_item_template(m, d, root))

    return {
        page.path: page.render() for page in render.list_pages(m, PATTERNS, card_html, diary_item)
    }


def html_pages(plan: dict[str, bytes]) -> Iterator[tuple[str, str]]:
    for path, data in plan.items():
        if path.endswith(".html"):
            yield path, data.decode("utf-8")


class Page(HTMLParser):
    """Every start tag with its attributes, and the text inside scripts."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.script_text: list[str] = []
        self._in_script = False
        self.text: list[str] = []
        self.feed(html)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        self._in_script = tag == "script"

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._in_script = False

    def handle_data(self, data: str) -> None:
        (self.script_text if self._in_script else self.text).append(data)

    def links(self) -> Iterator[str]:
        for _, attrs in self.tags:
            for name in ("href", "src"):
                value = attrs.get(name)
                if value is not None:
                    yield value

    def ids(self) -> set[str]:
        return {a["id"] or "" for _, a in self.tags if "id" in a}


# --- page kinds ---------------------------------------------------------------


def test_every_page_kind_exists(built: Built) -> None:
    plan = render_for(built)
    m, _ = load(built.content, "/")
    expected = {
        "index.html",
        "archive/index.html",  # a small pool's archive fits its entry page
        "authors/index.html",
        "tags/index.html",
        "lineage/index.html",
        "patterns/index.html",
        "log/index.html",
        "search/index.html",
        "search/index.json",
        "search/shard-0.json",  # a small pool's log fits one shard
        "verify/index.html",
        "404.html",
        "favicon.ico",
        *(f"static/{name}" for name in render.STATIC),
    }
    expected |= {f"dreams/{d.id}/index.html" for d in m.dreams}
    expected |= {f"dreams/{e.id}/index.html" for e in m.erased}
    expected |= {f"authors/{a.slug}/index.html" for a in m.authors}
    expected |= {f"tags/{t.slug}/index.html" for t in m.tags}
    # What the build writes beside the pages: the log's files, the feeds, and the
    # agents' files (tests/test_feeds.py, tests/test_agents.py).
    others = set(built.log_plan) | {"llms.txt", "robots.txt"}
    others |= {
        p for p in plan if p.endswith("feed.xml") or p.startswith(("agents/", "api/", "sitemap"))
    }
    assert set(plan) - others == expected
    assert set(built.log_plan) <= set(plan)
    assert not expected & set(built.log_plan), "pages never overwrite log files"
    assert [e.id for e in m.erased] == [built.ids["gone"]]
    static = resources.files("builder.templates") / "static"
    for name in render.STATIC:
        assert plan[f"static/{name}"] == (static / name).read_bytes(), name


def test_every_page_has_the_layout(built: Built) -> None:
    for path, html in html_pages(render_for(built)):
        page = Page(html)
        tags = {t for t, _ in page.tags}
        assert html.startswith('<!DOCTYPE html>\n<html lang="en">'), path
        assert {"main", "nav", "header", "footer"} <= tags, path
        metas = [a for t, a in page.tags if t == "meta"]
        assert {"charset": "utf-8"} in metas, path
        assert any(a.get("name") == "viewport" for a in metas), path
        csp = [a["content"] for a in metas if a.get("http-equiv") == "Content-Security-Policy"]
        assert csp == [render.CSP], path
        feeds = [a for t, a in page.tags if t == "link" and a.get("rel") == "alternate"]
        assert any((a["href"] or "").endswith("feed.xml") for a in feeds), path
        assert ("a", {"class": "skip", "href": "#main"}) in page.tags, path
        # The footer names the origin, never the log size: a page that lists
        # no new dream keeps its bytes when the log grows (incremental builds).
        assert "Origin <code>test.example/pool</code>" in html, path
        assert "Log size" not in html, path


@pytest.mark.parametrize("base_url", BASES)
def test_every_internal_link_resolves(built: Built, base_url: str) -> None:
    plan = render_for(built, base_url)
    files = set(plan) | set(built.log_plan)
    base_path = urlsplit(base_url).path
    checked = 0
    for path, html in html_pages(plan):
        page = Page(html)
        for url in page.links():
            parts = urlsplit(url)
            if parts.scheme in ("http", "https", "mailto"):
                continue
            assert not parts.scheme and not parts.netloc, (path, url)
            if not parts.path:
                assert parts.fragment in page.ids(), (path, url)
                continue
            if path == "404.html":  # served at any path: links from the base path
                assert parts.path.startswith(base_path), (path, url)
                rel = parts.path[len(base_path) :]
            else:
                assert not parts.path.startswith("/"), (path, url)
                rel = posixpath.join(posixpath.dirname(path), parts.path)
            target = posixpath.normpath(rel) if rel not in ("", ".") else "."
            if parts.path.endswith("/") or target == ".":
                target = posixpath.join(target, "index.html").removeprefix("./")
            assert not target.startswith("../"), (path, url)
            assert target in files or ELSEWHERE.fullmatch(target), (path, url, target)
            checked += 1
    assert checked > 500


def expected_script(path: str) -> str | None:
    """The one external script a page loads, if any: search, or the verifier."""
    if path == "search/index.html":
        return "static/search.js"
    if path == "verify/index.html" or re.fullmatch(r"dreams/[0-9a-f]{16}/index\.html", path):
        return "static/verify.js"
    return None


def test_no_inline_script_style_or_handlers(built: Built) -> None:
    m, _ = load(built.content, "/")
    erased = {f"dreams/{e.id}/index.html" for e in m.erased}
    for path, html in html_pages(render_for(built)):
        page = Page(html)
        want = None if path in erased else expected_script(path)
        for tag, attrs in page.tags:
            assert tag != "style", path
            assert "style" not in attrs, (path, tag)
            handlers = [a for a in attrs if a.startswith("on")]
            assert not handlers, (path, tag, handlers)
            if tag == "script":
                assert want and (attrs.get("src") or "").endswith(want), path
                # ES modules for the verifier; CSP script-src 'self' covers them.
                assert attrs.get("type") == ("module" if want == "static/verify.js" else None)
        assert not "".join(page.script_text).strip(), path
        scripts = sum(1 for t, _ in page.tags if t == "script")
        assert len(re.findall(r"<script", html, re.I)) == scripts, path
        assert scripts == (1 if want else 0), path


# --- privacy and hostile text ----------------------------------------------------


def test_anonymized_dream_shows_no_author_or_key(built: Built) -> None:
    plan = render_for(built)
    anon = built.ids["anon"]
    html = plan[f"dreams/{anon}/index.html"].decode()
    key_id = key_id_of("墨子")
    assert "An anonymous dream" in html and "anonymous author" in html
    for needle in ("墨子", key_id, key_id.removeprefix("sha256:"), model.slug("墨子")):
        assert needle not in html, needle
    (entry,) = [d for d in search_rows(plan) if d["id"] == anon]
    assert entry["author"] is None
    blob = json.dumps(entry, ensure_ascii=False)
    assert "墨子" not in blob and key_id.removeprefix("sha256:") not in blob
    for path, page in html_pages(plan):  # listed as anonymous wherever it appears
        if anon in page and not path.startswith("authors/"):
            assert "墨子" not in page, path


def test_hostile_dream_renders_as_inert_text(built: Built) -> None:
    plan = render_for(built)
    hostile = built.ids["hostile"]
    dream_page = plan[f"dreams/{hostile}/index.html"].decode()
    pages_with_it = [(p, h) for p, h in html_pages(plan) if hostile in h]
    assert len(pages_with_it) >= 4  # dream, home, diary, tag pages
    for path, html in pages_with_it:
        page = Page(html)
        tags = {t for t, _ in page.tags}
        assert not tags & {"img", "svg", "b", "iframe", "object"}, path
        for _, attrs in page.tags:
            assert not [a for a in attrs if a.startswith("on")], path
        for url in page.links():
            scheme = url.strip().lower().split(":", 1)[0]
            assert scheme not in ("javascript", "data", "vbscript"), (path, url)
        for bad in ('href="javascript:', 'href="data:', "onerror=alert(1)>", "<svg", "<img"):
            assert bad not in html, (path, bad)
        scripts = re.findall(r"<script[^>]*>", html, re.I)
        assert len(scripts) == (expected_script(path) is not None), path
        assert all('src="' in tag and "static/" in tag for tag in scripts), path
    assert "{{ 7*7 }}" in dream_page and "{% raw %}" in dream_page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in dream_page
    assert "&lt;img src=x onerror=alert(1)&gt;" in dream_page
    assert "[x](javascript:alert(1))" in dream_page
    assert "&#34;&gt;&lt;b&gt;" in dream_page
    text = "".join(Page(dream_page).text)
    for payload in PAYLOADS[:2] + PAYLOADS[4:8]:
        assert payload in text, payload  # shown as the author wrote it, not dropped
    assert "Third-party content (guest key)" in dream_page


def test_erased_dream_leaves_a_bare_tombstone(built: Built) -> None:
    plan = render_for(built)
    gone = built.ids["gone"]
    html = plan[f"dreams/{gone}/index.html"].decode()
    assert gone in html and "author-request" in html and "Erased dream" in html
    m, _ = load(built.content, "/")
    (e,) = m.erased
    assert f"<dd>{e.index}</dd>" in html and e.date[:10] in html
    for path, data in plan.items():
        assert b"lighthouse" not in data and b"Vanishing" not in data, path


def test_the_erased_ids_follow_the_model(built: Built) -> None:
    # Pages ask the model's set, made once per model, whether a parent was erased.
    m, _ = load(built.content, "/")
    assert m.erased_ids == {built.ids["gone"]}
    assert dataclasses.replace(m, erased=()).erased_ids == frozenset()


@given(
    sizes=st.lists(st.integers(1, 10_000), max_size=40, unique=True).map(sorted),
    index=st.integers(0, 10_001),
)
def test_a_proof_is_against_the_first_checkpoint_holding_its_leaf(
    sizes: list[int], index: int
) -> None:
    # The binary search over the model's sizes, against a plain scan of its
    # history (docs/protocol.md §5: the proof of the build that admitted the leaf).
    history = tuple(model.CheckpointView(n, "", "", "") for n in sizes)
    m = dataclasses.replace(_EMPTY, history=history, checkpoint=history[-1] if history else None)
    assert render.proof_size(m, index) == next((n for n in sizes if n > index), None)
    entries = [HistoryEntry(n, f"t{n}") for n in sizes]
    assert leaf_date(entries, index) == next((f"t{n}" for n in sizes if n > index), None)


_EMPTY = model.SiteModel(
    title="",
    origin="",
    base_url="/",
    k=2,
    dreams=(),
    by_id={},
    authors=(),
    tags=(),
    erased=(),
    checkpoint=None,
    history=(),
    policy="",
    vkey="",
    heads={},
)


# --- page content -------------------------------------------------------------------


def test_lineage_pages_hold_the_chains_oldest_first(
    built: Built, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One chain a page: the pages, read in order, show the chains of one page.
    m, _ = load(built.content, "/")
    whole = list_pages(m)["lineage/index.html"].decode()
    assert whole == render_for(built)["lineage/index.html"].decode()
    monkeypatch.setattr(render, "LINEAGE_PAGE_TREES", 1)
    plan = list_pages(m)
    paths = ["lineage/index.html", "lineage/2/index.html", "lineage/3/index.html"]
    # Three full pages and the open one new chains join (render.archive_pages).
    opened = "lineage/4/index.html"
    assert sorted(p for p in plan if p.startswith("lineage/")) == sorted([*paths, opened])
    chain = re.compile(
        r'<section class="tree panel" aria-label="Chain (\d+)">(.*?)</section>', re.S
    )
    # Links from lineage/<n>/ climb one folder more than those from lineage/.
    found = [
        (n, body.replace('href="../../', 'href="../'))
        for path in paths
        for n, body in chain.findall(plan[path].decode())
    ]
    assert [n for n, _ in found] == ["1", "2", "3"]
    assert [body for _, body in found] == [b for _, b in chain.findall(whole)]
    first, middle, last = (plan[p].decode() for p in paths)
    # Only page 1 knows the total: a full later page never changes when chains are added.
    assert "page 1 of 4" in first and "Pages of chains" not in whole
    assert "page 2, oldest chains first" in middle and " of 4" not in middle
    assert 'rel="next" href="../lineage/2/"' in first and 'rel="prev"' not in first
    assert 'rel="prev" href="../../lineage/"' in middle
    assert 'rel="next" href="../../lineage/3/"' in middle
    assert 'rel="prev" href="../../lineage/2/"' in last
    assert 'rel="next" href="../../lineage/4/"' in last
    empty = plan[opened].decode()
    assert "No chain on this page yet" in empty and 'rel="next"' not in empty


def test_dream_page_shows_author_key_lineage_and_verify_panel(built: Built) -> None:
    plan = render_for(built)
    ids = built.ids
    html = plan[f"dreams/{ids['child']}/index.html"].decode()
    assert key_id_of("ada") in html and 'class="tier tier-member"' in html
    assert 'href="../../authors/ada/"' in html
    assert f'href="../../dreams/{ids["parent"]}/"' in html
    assert f'href="../../dreams/{ids["grandchild"]}/"' in html
    assert "gen 1" in html
    assert f'data-dream-id="{ids["child"]}"' in html and 'id="verify"' in html
    assert 'href="record.json"' in html and 'href="proof.tlog-proof"' in html
    assert 'href="../../log/policy"' in html
    assert "dreampool verify-proof proof.tlog-proof --record record.json --policy policy" in html
    assert "Third-party content" not in html  # ada is a member
    assert '<a href="https://example.com/docs" rel="nofollow ugc noopener">' in html
    assert 'href="https://example.com/src" rel="nofollow ugc noopener"' in html
    orphan = plan[f"dreams/{ids['orphan']}/index.html"].decode()
    assert "feedfacefeedface" in orphan and "not in this pool" in orphan


def test_dream_panel_and_verify_page_load_the_browser_verifier(built: Built) -> None:
    plan = render_for(built)
    html = plan[f"dreams/{built.ids['child']}/index.html"].decode()
    assert '<script type="module" src="../../static/verify.js"></script>' in html
    assert 'data-origin="test.example/pool" data-root="../../"' in html
    assert 'data-part="run"' in html and "hidden" in html  # shown by the script only
    page = plan["verify/index.html"].decode()
    assert '<script type="module" src="../static/verify.js"></script>' in page
    assert 'aria-current="page">Verify<' in page and "data-verify-files" in page
    for slot in ("proof", "record", "policy", "checkpoint", "consistency"):
        assert f'id="file-{slot}" data-slot="{slot}"' in page, slot
    tombstone = plan[f"dreams/{built.ids['gone']}/index.html"].decode()
    assert "<script" not in tombstone


def test_lineage_nests_descendants_under_roots(built: Built) -> None:
    html = render_for(built)["lineage/index.html"].decode()
    ids = built.ids
    i_parent, i_child, i_grand = (
        html.index(f"dreams/{ids[k]}/") for k in ("parent", "child", "grandchild")
    )
    assert i_parent < i_child < i_grand
    # the grandchild sits two lists deeper than its root
    between = html[i_parent:i_grand]
    assert between.count("<ul>") == 2
    assert f"dreams/{ids['orphan']}/" in html and "feedfacefeedface" in html
    assert ids["chinese"] not in html  # no lineage declared, no children: not a chain


def test_diary_lists_keys_and_months(built: Built) -> None:
    m, _ = load(built.content, "/")
    html = render_for(built)["authors/ada/index.html"].decode()
    assert key_id_of("ada") in html
    month = m.by_id[built.ids["child"]].month
    assert f'<time datetime="{month}">' in html
    assert "gen 1" in html and "continues" in html
    bob = render_for(built)["authors/bob/index.html"].decode()
    assert "Third-party content (guest key)" in bob


def test_home_tags_log_and_patterns(built: Built) -> None:
    plan = render_for(built, "https://example.org/pool/")
    m, _ = load(built.content, "https://example.org/pool/")
    assert m.checkpoint is not None
    home = plan["index.html"].decode()
    assert m.checkpoint.root in home and 'href="./log/"' in home
    assert '<link rel="canonical" href="https://example.org/pool/">' in home
    tags = plan["tags/index.html"].decode()
    assert f'href="../tags/{model.slug("数据库")}/"' in tags
    log = plan["log/index.html"].decode()
    assert "dreampool monitor --policy policy --state state https://example.org/pool/" in log
    first = m.history[0].size
    assert f'href="checkpoints/{first}"' in log and f'href="consistency/{first}"' in log
    assert m.vkey in log
    patterns = plan["patterns/index.html"].decode()
    assert "k = 2" in patterns and "derivatives" in patterns
    assert PATTERNS in list_pages(m)["patterns/index.html"].decode()
    assert 'href="/pool/static/style.css"' in plan["404.html"].decode()


def search_rows(plan: dict[str, bytes]) -> list[dict[str, Any]]:
    """Every dream of the search index, in the order search.js reads them."""
    index = json.loads(plan["search/index.json"])
    rows: list[dict[str, Any]] = []
    for shard in index["shards"]:
        data = json.loads(plan[f"search/{shard['path']}"])
        assert data["format"] == index["format"] and len(data["dreams"]) == shard["dreams"]
        rows += data["dreams"]
    assert len(rows) == index["dreams"]
    return rows


def test_search_index(built: Built) -> None:
    plan = render_for(built)
    raw = plan["search/shard-0.json"]
    assert b": " not in raw.split(b'"text"')[0]  # compact
    assert json.loads(plan["search/index.json"]) == {
        "dreams": len(json.loads(raw)["dreams"]),
        "format": "dreampool-search/v4",
        "shards": [{"dreams": len(json.loads(raw)["dreams"]), "path": "shard-0.json"}],
    }
    rows = {d["id"]: d for d in search_rows(plan)}
    assert set(rows[built.ids["child"]]) == {
        "id",
        "title",
        "author",
        "tags",
        "tier",
        "date",
        "text",
    }
    assert {r["tier"] for r in rows.values()} == {"member", "guest"}
    chinese = rows[built.ids["chinese"]]
    assert chinese["author"] == "ada" and chinese["tags"] == ["数据库", "索引"]
    assert chinese["title"] == "慢查询：复合索引的列顺序"
    # The text as written (search.js folds it to match and shows it as it is):
    # the summary without its Markdown syntax, then each entry, joined by " · "
    # (a line break would show as a space and join two texts into one token).
    child = rows[built.ids["child"]]
    assert child["text"] == "See the docs and this. · A fact with a source."
    assert built.ids["gone"] not in rows


def test_search_shards_split_the_log_newest_first(
    built: Built, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Shard k holds the dreams of log leaves [k·n, (k+1)·n): read in the
    # index's order they are every dream, newest first, as with one shard.
    m, _ = load(built.content, "/")
    whole = search_rows(list_pages(m))
    assert whole == search_rows(render_for(built))
    monkeypatch.setattr(render, "SEARCH_SHARD_LEAVES", 3)
    plan = list_pages(m)
    index = json.loads(plan["search/index.json"])
    assert len(index["shards"]) > 2
    assert search_rows(plan) == whole == [json.loads(render.search_entry(d)) for d in m.dreams]
    for shard in index["shards"]:
        k = int(shard["path"].removeprefix("shard-").removesuffix(".json"))
        rows = json.loads(plan[f"search/{shard['path']}"])["dreams"]
        assert {m.by_id[r["id"]].index // 3 for r in rows} == {k}


def test_rendering_is_deterministic(built: Built, tmp_path: Path) -> None:
    """Two builds of the same pool write the same bytes (a build reads the time only
    from the log's history)."""
    assert build_site(built, "/", tmp_path) == render_for(built)
    m, _ = load(built.content, "/")
    assert list_pages(m) == list_pages(m)


# --- Markdown --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "source",
    [
        "[x](javascript:alert(1))",
        "[x](JaVaScRiPt:alert(1))",
        "[x](&#106;avascript:alert(1))",
        "[x]( javascript:alert(1))",
        "<javascript:alert(1)>",
        "[x](data:text/html,hi)",
        "[x](vbscript:msgbox)",
        "[x](file:///etc/passwd)",
        "[x](/local/path)",
        "[x](../../log/)",
        "[x][r]\n\n[r]: javascript:alert(1)",
    ],
)
def test_markdown_refuses_unsafe_links(source: str) -> None:
    html = render.render_markdown(source)
    assert "href" not in html, html


def test_markdown_links_are_nofollow_and_images_are_not_loaded() -> None:
    html = render.render_markdown(
        "[a](https://example.com/a) <http://example.com/b> [m](mailto:x@example.com) "
        "![pic](https://example.com/p.png)"
    )
    assert html.count('rel="nofollow ugc noopener"') == 4
    assert "<img" not in html and 'href="https://example.com/p.png"' in html
    assert 'href="mailto:x@example.com"' in html


def test_markdown_escapes_raw_html_and_demotes_headings() -> None:
    html = render.render_markdown(
        "# Title\n\n<script>alert(1)</script>\n\n<b onmouseover=x>hi</b> {{ 7*7 }}"
    )
    assert "<h3>Title</h3>" in html and "<h1>" not in html
    assert "<script" not in html and "&lt;script&gt;" in html
    assert "<b" not in html and "{{ 7*7 }}" in html


def test_excerpt_is_plain_text() -> None:
    assert render.excerpt("**bold** and [link](https://x.org)\n\n# h") == "bold and link h"
    assert render.excerpt("<b>x</b>") == "<b>x</b>"  # escaped later by the template
    assert len(render.excerpt("word " * 100)) == 180


def test_a_dream_text_says_its_language_and_the_interface_stays_english(built: Built) -> None:
    """Issue 18 (regression): a Chinese dream's page said lang="en" for its
    Chinese text. Each piece of the author's text now says its own script's
    language; the page, whose interface is English, stays en."""
    plan = render_for(built)
    chinese = plan[f"dreams/{built.ids['chinese']}/index.html"].decode()
    assert chinese.startswith('<!DOCTYPE html>\n<html lang="en">')
    title = (
        '<h1 id="dream-title" dir="auto" lang="zh" data-field="title">慢查询：复合索引的列顺序</h1>'
    )
    assert title in chinese
    # Its summary and entries (the fixture's) are English: they inherit en.
    assert chinese.count('lang="zh"') == 1
    english = plan[f"dreams/{built.ids['child']}/index.html"].decode()
    assert 'lang="zh"' not in english and 'lang="ja"' not in english


@pytest.mark.parametrize(
    ("text", "lang"),
    [
        ("慢查询：复合索引的列顺序写反了", "zh"),
        ("用 pytest-xdist 跑测试时要隔离临时目录", "zh"),
        ("Code review 评论的中英混排与语气", "zh"),
        ("テストは先に書く", "ja"),
        ("캐시 만료 시간을 분산하라", "ko"),
        ("Pin the parser version", None),
        ("An English note quoting 联系我 once", None),
        ("Café, naïve, Zürich", None),
        ("", None),
    ],
)
def test_content_lang_reads_the_script(text: str, lang: str | None) -> None:
    from builder.text.textlang import content_lang

    assert content_lang(text) == lang


def test_the_patterns_line_follows_the_patterns_rule(built: Built) -> None:
    """Issue 18 (regression): a guest's dream said it "counts toward aggregate
    patterns"; patterns count dreams by members or higher with consent to
    derivatives only. The line now says what patterns.counts says."""
    from builder.site import patterns

    m, _ = load(built.content, "/")
    plan = render_for(built)
    by_id = {d.id: d for d in m.dreams}
    child, guest = by_id[built.ids["child"]], by_id[built.ids["grandchild"]]
    assert patterns.counts(child) and child.tier == "member"
    assert guest.tier == "guest" and guest.derivatives and not patterns.counts(guest)
    for d in m.dreams:
        html = plan[f"dreams/{d.id}/index.html"].decode()
        line = html.split("<dt>Patterns</dt>", 1)[1].split("</dd>", 1)[0]
        assert ("counts toward" in line) == patterns.counts(d), (d.tier, line)
    guest_line = plan[f"dreams/{guest.id}/index.html"].decode()
    assert "not counted in" in guest_line and "members and maintainers only" in guest_line
    private = dataclasses.replace(child, derivatives=False)
    page = render.dream_page(m, private, lambda d, level, root: render.Markup(""))
    assert b"excluded from patterns (no consent to derivatives)" in page


def test_every_page_links_an_icon_the_site_has(built: Built) -> None:
    """Issue 18 (regression): /favicon.ico was a 404 on every page view. The
    build writes favicon.ico at the root (where a browser asks when a page
    names no icon) and static/favicon.svg, and every page links both."""
    import struct

    plan = render_for(built, "https://example.org/pool/")
    ico = plan["favicon.ico"]
    reserved, kind, count = struct.unpack_from("<HHH", ico)
    assert (reserved, kind, count) == (0, 1, 2)  # an icon file with two images
    for i in range(count):
        width, height, _, _, planes, bpp, size, offset = struct.unpack_from(
            "<BBBBHHII", ico, 6 + 16 * i
        )
        assert (width, height, planes, bpp) == ((16, 32)[i],) * 2 + (1, 32)
        assert struct.unpack_from("<I", ico, offset)[0] == 40  # a BITMAPINFOHEADER
        assert offset + size <= len(ico)
    assert plan["static/favicon.svg"].startswith(b'<svg xmlns="http://www.w3.org/2000/svg"')
    # The shipped file is the generator's drawing, the mark the ICO is drawn from.
    from builder.site import favicon

    assert plan["static/favicon.svg"] == favicon.svg()
    pages = list(html_pages(plan))
    assert len(pages) > 10
    for path, html in pages:
        icons = [
            a["href"] for tag, a in Page(html).tags if tag == "link" and a.get("rel") == "icon"
        ]
        assert len(icons) == 2, path
        for href in icons:
            assert href is not None
            if path == "404.html":  # served at any depth: links from the site's root path
                target = href.removeprefix("/pool/")
            else:
                target = posixpath.normpath(posixpath.join(posixpath.dirname(path), href))
            assert target in ("favicon.ico", "static/favicon.svg") and target in plan, (path, href)
