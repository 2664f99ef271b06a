"""Feeds and sitemaps of a hostile corpus parse, and give back each dream's text.

Dream text is hostile input, and the feeds are templates (templates/*.xml,
builder.site.feeds): these tests build a model straight from text that no
admitted dream could hold (control characters, U+FFFE, lone surrogates) beside
text one could (markup, ``]]>``, quotes, bidi overrides, U+2028, very long),
in every field a feed or sitemap shows, and check that every file is
well-formed XML (:mod:`xml.etree.ElementTree`) whose text reads back as the
model's, with characters outside the XML 1.0 ``Char`` production as U+FFFD
(builder.text.xmltext).
"""

from __future__ import annotations

import itertools
import re
import xml.etree.ElementTree as ET

import pytest

from builder.site import feeds
from builder.site.model import (
    AuthorView,
    CheckpointView,
    DreamView,
    SiteModel,
    TagRef,
    TagView,
    absolute_base,
)
from builder.text.xmltext import xml, xml_safe

A = "{http://www.w3.org/2005/Atom}"
SM = "{http://www.sitemaps.org/schemas/sitemap/0.9}"
NOT_CHAR = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")

# Each a title, a summary, an author's name and a tag's name, in turn.
HOSTILE = (
    "<script>alert(1)</script>",
    "a & b &amp; &#60; &lt;",
    "]]> <![CDATA[ x ]]>",
    "\"double\" 'single' `back`",
    "".join(map(chr, range(0x20))) + "\x7f\x85",
    "\ufffe\uffff\ufffd end",
    "lone \ud800 and \udfff surrogates",
    "line\u2028separator\u2029para",
    "\u202eevil\u202c \u2066isolate\u2069 \u200f",
    "cr\r\nlf\ttab\n",
    "{{ 7*7 }} {% raw %} <?xml?> <!-- x -->",
    "astral 🦉 𝔘 \U0010ffff",
    "\ufeffBOM",
    "x" * 20_000 + "<&>",
    "   ",
    "",
)
BASES = ("/", 'https://ex.org/a&b"c<d>/')


def hostile_model(base_url: str) -> SiteModel:
    """A model whose every text field a feed shows is hostile (see HOSTILE)."""
    rotate = itertools.cycle(HOSTILE)
    history = (
        CheckpointView(1, "AA==", "2026-01-02T03:04:05Z", "note"),
        CheckpointView(len(HOSTILE), "AA==", "2026-02-02T03:04:05Z", "note"),
    )
    dreams = []
    for i, title in enumerate(HOSTILE):
        author = next(rotate) or "nameless"
        anonymized = i % 5 == 4
        tags = (TagRef(next(rotate), f"t{i % 3}"), TagRef(next(rotate), 'sl"ug&<'))
        dreams.append(
            DreamView(
                id=f"{i:016x}",
                index=i,
                date=f"2026-01-{1 + i:02d}T00:00:00Z",
                title=title,
                text={"summary": next(rotate), "entries": []},
                entry_types=(),
                tags=tags,
                author=None if anonymized else author,
                author_slug=None if anonymized else f"au{i % 4}",
                key_id=None,
                tier=("guest", "member", "maintainer")[i % 3],
                anonymized=anonymized,
                derivatives=True,
                generation=None,
                parent_id=None,
                parent_in_pool=False,
                children=(),
            )
        )
    newest = tuple(reversed(dreams))
    authors = tuple(
        AuthorView(
            name=HOSTILE[n],
            slug=f"au{n}",
            keys=(),
            dream_ids=tuple(d.id for d in newest if d.author_slug == f"au{n}"),
            tier="guest",
            joined=min(d.index for d in dreams if d.author_slug == f"au{n}"),
        )
        for n in range(4)
    )
    slugs = sorted({t.slug for d in dreams for t in d.tags})
    tags = tuple(
        TagView(
            name=HOSTILE[-3 - n],
            slug=s,
            dream_ids=tuple(d.id for d in newest if s in {t.slug for t in d.tags}),
            first=min(d.index for d in dreams if s in {t.slug for t in d.tags}),
        )
        for n, s in enumerate(slugs)
    )
    return SiteModel(
        title="Pool <&> ]]> \x01\ufffe \u202e",
        origin='ex.org/po"ol&<',
        base_url=base_url,
        k=2,
        dreams=newest,
        by_id={d.id: d for d in dreams},
        authors=authors,
        tags=tags,
        erased=(),
        checkpoint=history[-1],
        history=history,
        policy="",
        vkey="",
        heads={},
    )


def plan(model: SiteModel) -> dict[str, bytes]:
    return {p.path: p.render() for p in feeds.feed_pages(model) if not p.path.startswith("api/")}


@pytest.mark.parametrize("base_url", BASES)
def test_every_feed_parses_and_round_trips_each_text_field(base_url: str) -> None:
    model = hostile_model(base_url)
    files = plan(model)
    feeds_seen = [path for path in files if path.endswith("feed.xml")]
    assert len(feeds_seen) == 1 + len(model.authors) + len(model.tags)
    titles = {"feed.xml": model.title}
    titles |= {f"authors/{a.slug}/feed.xml": f"{a.name} — {model.title}" for a in model.authors}
    titles |= {f"tags/{t.slug}/feed.xml": f"#{t.name} — {model.title}" for t in model.tags}
    for path in feeds_seen:
        root = ET.fromstring(files[path])
        assert root.findtext(A + "title") == xml_safe(titles[path]), path
        found = root.findall(A + "entry")
        assert found, path
        for entry in found:
            href = entry.find(A + "link").get("href")  # type: ignore[union-attr]
            assert href is not None
            d = model.by_id[href.rstrip("/").rsplit("/", 1)[-1]]
            assert entry.findtext(A + "title") == xml_safe(d.title)
            summary = feeds._clip(d.summary)
            assert (entry.findtext(A + "summary") or "") == xml_safe(summary)
            name = entry.findtext(f"{A}author/{A}name")
            assert name == ("anonymous" if d.anonymized else xml_safe(d.author or ""))
            terms = [c.get("term") for c in entry.findall(A + "category") if c.get("scheme")]
            assert terms == [xml_safe(t.name) for t in d.tags]
            for element in entry.iter():
                for text in (element.text or "", *element.attrib.values()):
                    assert not NOT_CHAR.search(text)


@pytest.mark.parametrize("base_url", BASES)
def test_every_sitemap_parses_and_lists_its_links(base_url: str) -> None:
    model = hostile_model(base_url)
    files = plan(model)
    index = ET.fromstring(files["sitemap.xml"])
    listed = [loc.text for loc in index.iter(SM + "loc")]
    base = absolute_base(base_url) or ""
    assert listed and all(loc and loc.startswith(base) for loc in listed)
    for loc in listed:
        assert loc is not None
        urls = ET.fromstring(files[loc.removeprefix(base)])
        assert urls.tag == SM + "urlset" and len(urls)
        assert all((u.text or "").startswith(base) for u in urls.iter(SM + "loc"))
    robots = files["robots.txt"].decode()
    assert robots.startswith("User-agent: *\nAllow: /\n")
    assert ("Sitemap: " + base + "sitemap.xml\n" in robots) == bool(base)


def test_xml_filter_escapes_text_and_attributes() -> None:
    """The one filter: text keeps quotes and whitespace as they are but a
    carriage return; an attribute value references them too."""
    raw = '<a href="x">&</a>\r\n\t\'\x00\ud800\ufffe]]>'
    assert xml(raw) == '&lt;a href="x"&gt;&amp;&lt;/a&gt;&#13;\n\t\'\ufffd\ufffd\ufffd]]&gt;'
    assert xml(raw, attribute=True) == (
        "&lt;a href=&quot;x&quot;&gt;&amp;&lt;/a&gt;&#13;&#10;&#9;'\ufffd\ufffd\ufffd]]&gt;"
    )
    for value in (raw, *HOSTILE):
        quoted = f'<e a="{xml(value, attribute=True)}">{xml(value)}</e>'
        parsed = ET.fromstring(quoted.encode())
        assert (parsed.text or "") == xml_safe(value)
        assert parsed.get("a") == xml_safe(value)
