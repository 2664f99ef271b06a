"""Attacks on readers' browsers (THREATS.md T20–T24): hostile text in every field
of a dream, and in author names and tags, against every file of the built site.

``tests/test_render.py`` checks hostile dreams on the pages one by one; here one
pool holds the payloads everywhere a submitter controls text (author names
included, which reach diaries, feeds, the API and the search index), and every
HTML, XML and JSON file the build writes is parsed and checked.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from html.parser import HTMLParser
from importlib import resources
from pathlib import Path

import pytest

from tests.pools import make_pool
from tests.redteam import build, seed_of, set_tier, signed, submit

AUTHORS = [
    "<script>alert(1)</script>",
    '"><img src=x onerror=alert(1)>',
    "<svg onload=alert(1)>",
    "{{ 7*7 }}{% raw %}",
    "javascript:alert(1)",
    "</style><style>*{color:red}</style>",
    "[me](javascript:alert(1))",
    "'onmouseover='alert(1)",
]
TAGS = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "<svg onload=alert(1)>",
    "{{ 7*7 }}",
    "{% raw %}",
    "javascript:alert(1)",
    '"><b>bold',
    "</title><script>x</script>",
]
MARKDOWN_TRICKS = [
    "[a](javascript:alert(1))",
    "[b](JaVaScRiPt:alert(1))",
    "[c](javascript&#58;alert(1))",
    "[d](&#106;avascript:alert(1))",
    "[e]( javascript:alert(1))",
    "[f](<javascript:alert(1)>)",
    "<javascript:alert(1)>",
    "[g](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
    "[h](vbscript:msgbox(1))",
    "[i](file:///etc/passwd)",
    "[j][ref]\n\n[ref]: javascript:alert(1)",
    "![k](https://evil.example/pixel.png)",
    "![l](javascript:alert(1))",
    '[m](https://example.org "t" onclick=alert(1))',
    '[n](https://example.org"onmouseover="alert(1))',
]
RAW_HTML = [
    '<a href="javascript:alert(1)">x</a>',
    "<img src=x onerror=alert(1)>",
    "<svg><script>alert(1)</script></svg>",
    "<style>body{display:none}</style>",
    "<iframe src=https://evil.example></iframe>",
    "<details open ontoggle=alert(1)>",
    "<base href=https://evil.example/>",
    "<meta http-equiv=refresh content=0;url=https://evil.example>",
    "<form action=https://evil.example><button>go</button></form>",
    "<object data=x></object><embed src=x>",
    "<math><mi xlink:href=javascript:alert(1)>x</mi></math>",
    "```html\n<script>alert(1)</script>\n```",
]
TEMPLATES = ["{{ 7*7 }}", "{% raw %}", "{{ config }}", "{{ ''.__class__ }}", "${7*7}", "<%= 7*7 %>"]
BAD_SCHEMES = ("javascript", "data", "vbscript", "file")
URL_ATTRS = {
    "href",
    "src",
    "action",
    "formaction",
    "xlink:href",
    "poster",
    "data",
    "srcset",
    "cite",
    "background",
    "ping",
}
FORBIDDEN_TAGS = {
    "iframe",
    "frame",
    "frameset",
    "object",
    "embed",
    "applet",
    "base",
    "style",
    "img",
    "form",
    "math",
    "foreignobject",
    "template",
    "audio",
    "video",
    "portal",
}


def _chunks(items: list[str], limit: int) -> list[str]:
    """Join items with blank lines into texts of at most ``limit`` characters."""
    out, current = [], ""
    for item in items:
        joined = f"{current}\n\n{item}" if current else item
        if len(joined) > limit:
            out.append(current)
            joined = item
        current = joined
    return [*out, current]


@dataclass
class Site:
    root: Path
    ids: list[str] = field(default_factory=list)


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Site:
    root = tmp_path_factory.mktemp("readers")
    tp = make_pool(root)
    dreams = []
    summaries = _chunks(MARKDOWN_TRICKS + RAW_HTML + TEMPLATES, 800)
    for n, author in enumerate(AUTHORS):
        # Dream 3 is anonymized, so signed as `dreampool sign` signs it: by a
        # one-time key under the name anonymous (its author's name is in its title).
        dreams.append(
            signed(
                "anonymous" if n == 3 else author,
                seed=seed_of(f"one-time {author}") if n == 3 else None,
                title=f"{author} {TEMPLATES[n % len(TEMPLATES)]}"[:120],
                summary=summaries[n % len(summaries)],
                entries=[
                    {"text": text[:300], "type": kind, "confidence": "unconfirmed", "source": src}
                    for text, kind, src in zip(
                        RAW_HTML[n::2] + MARKDOWN_TRICKS[n::3],
                        ("fact", "warning", "rule", "lesson", "plan", "theory") * 3,
                        (
                            "javascript:alert(1)",
                            "data:text/html,<script>alert(1)</script>",
                            'https://example.org/"onmouseover=alert(1)',
                            "<script>x</script>",
                            "vbscript:x",
                            " javascript:alert(1)",
                        )
                        * 3,
                        strict=False,
                    )
                ],
                tags=TAGS,
                lineage={"parent": AUTHORS[(n + 1) % len(AUTHORS)], "generation": n},
                consent={"share": True, "derivatives": True, "anonymize": n == 3},
            )
        )
    site = Site(root / "site")
    site.ids = submit(tp, *dreams)
    for n, author in enumerate(AUTHORS):
        if n != 3:  # a one-time key is always a guest
            set_tier(tp, author, "member")  # so the hostile tags become patterns (k = 2)
    build(tp, site.root)
    return site


class Page(HTMLParser):
    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.script_text: list[str] = []
        self.text: list[str] = []
        self._in_script = False
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        self._in_script = tag == "script"

    def handle_endtag(self, tag: str) -> None:
        self._in_script = False

    def handle_data(self, data: str) -> None:
        (self.script_text if self._in_script else self.text).append(data)


def _scheme(url: str) -> str:
    cleaned = re.sub(r"[\x00-\x20]", "", url).lower()
    return cleaned.split(":", 1)[0] if ":" in cleaned.split("/", 1)[0] else ""


def _files(site: Site, suffix: str) -> list[Path]:
    files = sorted(site.root.rglob(f"*{suffix}"))
    assert files, suffix
    return files


def test_no_page_runs_a_payload(hostile: Site) -> None:
    """T20, T21, T22: on every HTML page, no element a payload could have made
    (script without src, img, iframe, style, base, form, object …), no event
    handler or style attribute, and no javascript:, data:, vbscript: or file: URL
    in any attribute that loads or links."""
    for path in _files(hostile, ".html"):
        page = Page(path.read_text(encoding="utf-8"))
        where = path.relative_to(hostile.root)
        for tag, attrs in page.tags:
            assert tag not in FORBIDDEN_TAGS, (where, tag, attrs)
            if tag == "meta":
                assert (attrs.get("http-equiv") or "").lower() != "refresh", where
            if tag == "script":
                assert attrs.get("src") and _scheme(attrs["src"] or "") == "", (where, attrs)
            for name, value in attrs.items():
                assert not name.startswith("on"), (where, tag, name)
                assert name != "style", (where, tag)
                if name in URL_ATTRS:
                    assert _scheme(value or "") not in BAD_SCHEMES, (where, tag, name, value)
        assert not "".join(page.script_text).strip(), (where, "inline script")


def test_every_page_carries_a_strict_csp(hostile: Site) -> None:
    """T24: a second wall should an escape ever slip through: every page forbids
    inline script, plugins and a foreign <base> by its Content-Security-Policy."""
    for path in _files(hostile, ".html"):
        metas = [
            a
            for t, a in Page(path.read_text(encoding="utf-8")).tags
            if t == "meta" and (a.get("http-equiv") or "").lower() == "content-security-policy"
        ]
        assert len(metas) == 1, path
        policy = metas[0].get("content") or ""
        directives = {d.split()[0]: d.split()[1:] for d in policy.split(";") if d.strip()}
        assert "script-src" in directives, policy
        for source in directives["script-src"]:
            assert source not in (
                "'unsafe-inline'",
                "'unsafe-eval'",
                "*",
                "data:",
                "http:",
                "https:",
            ), policy
        assert directives.get("object-src") == ["'none'"] and directives.get("base-uri") == [
            "'none'"
        ], policy


def test_payloads_are_shown_as_text_not_dropped(hostile: Site) -> None:
    """T20, T22: escaping keeps what the author wrote visible: each hostile author
    name and template string is on its dream page as text."""
    for n, dream_id in enumerate(hostile.ids):
        html = (hostile.root / "dreams" / dream_id / "index.html").read_text(encoding="utf-8")
        text = " ".join(Page(html).text)
        assert TEMPLATES[n % len(TEMPLATES)] in text
        if n != 3:  # anonymized: no name at all
            assert AUTHORS[n] in text, AUTHORS[n]


def test_markdown_links_are_only_http_https_or_mailto(hostile: Site) -> None:
    """T21: whatever the Markdown trick (entities, case, spaces, angle brackets,
    reference definitions, images), a summary's links are http, https or mailto,
    marked nofollow, and no image is ever loaded."""
    author_links = 0
    for dream_id in hostile.ids:
        html = (hostile.root / "dreams" / dream_id / "index.html").read_text(encoding="utf-8")
        for tag, attrs in Page(html).tags:
            if tag == "a" and "rel" in attrs and "ugc" in (attrs["rel"] or ""):
                author_links += 1
                assert _scheme(attrs.get("href") or "") in ("http", "https", "mailto"), attrs
        assert "evil.example/pixel.png" not in " ".join(
            str(a.get("src")) for t, a in Page(html).tags
        )
    assert author_links  # the harmless https links did render, so the check saw links


def test_feeds_and_sitemap_are_well_formed_and_inert(hostile: Site) -> None:
    """T23: hostile titles, names and tags leave every XML file well formed (a
    broken feed is a denial of service for its readers), with no DTD, no script
    element, and the text round-tripping exactly."""
    titles = set()
    for path in _files(hostile, ".xml"):
        data = path.read_bytes()
        assert b"<!DOCTYPE" not in data and b"<!ENTITY" not in data, path
        root = ET.fromstring(data)
        for element in root.iter():
            assert element.tag.rsplit("}", 1)[-1].lower() not in ("script", "iframe"), path
            if element.tag.endswith("}title") and element.text:
                titles.add(element.text)
    assert any(a in t for t in titles for a in AUTHORS[:3])


def test_json_outputs_parse_and_round_trip(hostile: Site) -> None:
    """T23: the API and the search index are data: they parse, and hostile text
    comes back exactly as signed (the browser's search builds with textContent)."""
    blobs = []
    for path in _files(hostile, ".json"):
        blobs.append(json.dumps(json.loads(path.read_bytes())))
    joined = "\n".join(blobs)
    for payload in (*AUTHORS[:3], *TAGS[:3]):
        assert json.dumps(payload)[1:-1] in joined, payload


def test_patterns_svg_is_inert(hostile: Site) -> None:
    """T20: hostile tags used by k members become pattern terms; the inline SVG
    chart and tables hold them as escaped text only."""
    html = (hostile.root / "patterns" / "index.html").read_text(encoding="utf-8")
    page = Page(html)
    assert any("<script>alert(1)</script>" in t for t in page.text)  # the term, as text
    svg_tags = [t for t, _ in page.tags if t in ("svg", "rect", "text", "g", "title", "desc")]
    assert svg_tags
    assert "<script>alert" not in html and "<svg onload" not in html


def test_stylesheet_and_scripts_are_not_made_from_data(hostile: Site) -> None:
    """T22: no submitted text reaches a stylesheet or a script: the static files
    of the site are byte for byte the shipped ones."""
    static = resources.files("builder.templates") / "static"
    for path in sorted((hostile.root / "static").iterdir()):
        assert path.read_bytes() == (static / path.name).read_bytes(), path.name
