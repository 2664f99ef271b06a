"""The site's one Markdown renderer, and the plain text of what it renders.

Summaries are Markdown (docs/protocol.md §1: "rendered without raw HTML").
:mod:`builder.site.render` shows them with :func:`render_markdown`, and cards and
search show :func:`plain_text`; :mod:`builder.text.readerview` derives from the
same two what a reader sees, so redaction judges exactly what is shown.

One markdown-it-py parser, CommonMark, raw HTML off, links limited to http,
https and mailto, ``rel="nofollow ugc noopener"`` on every link and images
turned off: ``![a](b)`` reads as ``!`` and a link, so a page never loads a
remote image. Headings move down two levels (a summary sits under the page's
h1 and a section's h2).
"""

from __future__ import annotations

import functools
import html
import re
import unicodedata
from collections.abc import Sequence

from markdown_it import MarkdownIt
from markdown_it.renderer import RendererHTML
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict

LINK_SCHEMES = ("http:", "https:", "mailto:")
LINK_REL = "nofollow ugc noopener"

EXCERPT_LIMIT = 180
"""Characters of a summary's plain text a card shows (with the closing "…")."""
FEED_SUMMARY_LIMIT = 300
"""Characters of a summary (or first entry) an Atom <summary> shows (with "…")."""

# A fenced code block's info string becomes class="language-<first word>",
# entity-decoded and unescaped by markdown-it: only a plain language name is kept.
_LANGUAGE = re.compile(r"[A-Za-z0-9_+\-]{1,32}")


def _validate_link(url: str) -> bool:
    # markdown-it hands over the normalized URL; a scheme is matched without
    # case and leading blanks, as a browser would. Anything else (javascript:,
    # data:, relative paths that would point into the site) stays text.
    return url.strip().lower().startswith(LINK_SCHEMES)


def _link_open(
    self: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    tokens[idx].attrSet("rel", LINK_REL)
    return self.renderToken(tokens, idx, options, env)


def _heading(
    self: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    # A summary sits under the page's h1 and a section's h2: its "# x" is an h3.
    token = tokens[idx]
    token.tag = f"h{min(6, int(token.tag[1]) + 2)}"
    return self.renderToken(tokens, idx, options, env)


def _fence(
    self: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    # The info string is source text: "```ada&#64;example.com" would put the decoded
    # address into the page's bytes (class="language-ada@example.com"), where no
    # reader view looks. A plain language name is kept; anything else is dropped.
    token = tokens[idx]
    words = token.info.split(maxsplit=1)
    token.info = words[0] if words and _LANGUAGE.fullmatch(words[0]) else ""
    return RendererHTML.fence(self, tokens, idx, options, env)


def _make_markdown() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.disable("image")  # no remote loads: ![a](b) becomes "!" and a plain link
    md.validateLink = _validate_link  # type: ignore[method-assign]
    md.add_render_rule("link_open", _link_open)
    md.add_render_rule("heading_open", _heading)
    md.add_render_rule("heading_close", _heading)
    md.add_render_rule("fence", _fence)
    return md


_MD = _make_markdown()


@functools.lru_cache(maxsize=64)  # a dream page and its card render one summary
def render_markdown(text: str) -> str:
    """HTML for a dream summary: CommonMark without raw HTML or images, safe links only."""
    rendered: str = _MD.render(text)
    return rendered


# A tag of what render_markdown makes. Its text is escaped (markdown-it's
# escapeHtml: & < > " in text and attribute values alike), so every "<" of its
# output opens a tag and the first ">" after it closes that tag; raw HTML is
# off, so there is no comment, script, style or CDATA section to read apart.
_TAG = re.compile(r"<[^>]*>")


@functools.lru_cache(maxsize=64)  # a dream's card excerpt and its search entry both take it
def plain_text(markdown: str) -> str:
    """A summary's whole text, Markdown syntax removed, runs of white space as one:
    the text between the tags of :func:`render_markdown`'s HTML, its character
    references decoded (what :class:`html.parser.HTMLParser` hands over as data,
    which this did before; tests/test_mdrender.py holds the two equal), without
    an HTML parser's per-tag calls: they were a quarter of the cost of a card."""
    return " ".join(html.unescape(_TAG.sub("", render_markdown(markdown))).split())


def cuttable(text: str, at: int) -> bool:
    """Whether ``text`` may be cut before ``at`` without cutting a token: at white
    space, or beside a character of a script written without spaces."""
    return any(c.isspace() or _unspaced(c) for c in (text[at - 1], text[at]))


def _unspaced(char: str) -> bool:
    code = ord(char)
    return (
        0x2E80 <= code <= 0x9FFF  # CJK radicals, punctuation, kana, ideographs
        or 0xAC00 <= code <= 0xD7AF  # Hangul syllables
        or 0xF900 <= code <= 0xFAFF
        or 0xFE30 <= code <= 0xFE4F
        or 0x20000 <= code <= 0x3FFFF
        or (not char.isascii() and unicodedata.category(char)[0] == "P")
    )


def clip(text: str, limit: int) -> str:
    """``text`` stripped, at most ``limit`` characters including a closing "…".

    A cut falls only between tokens (as :mod:`builder.agents.memos` splits a memo): a
    cut inside one would show what the whole text does not hold ("138123456789"
    cut to the phone "13812345678…", "ada@example.com1" to "ada@example.com…").
    A text with no such place within the limit shows as "…" alone.
    """
    text = text.strip()
    if len(text) <= limit:
        return text
    for at in range(limit - 1, 0, -1):
        if cuttable(text, at):
            return text[:at].rstrip() + "…"
    return "…"
