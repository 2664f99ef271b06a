"""builder.text.mdrender.plain_text against an HTML parser (the way it was made
before): the text nodes of render_markdown's HTML, references decoded, white
space collapsed. plain_text strips tags with a pattern instead, which holds only
because render_markdown's output escapes every "<" of text and attribute alike;
these tests are the witness that it does, on hostile and random Markdown."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from builder.text import mdrender
from tests import adversarial


class _TextNodes(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []

    def handle_data(self, data: str) -> None:
        self.parts.append(data)


def parsed_text(markdown: str) -> str:
    """The reference: an HTML parser's data, as plain_text was made until 2026-12-03."""
    parser = _TextNodes()
    parser.feed(mdrender.render_markdown(markdown))
    parser.close()
    return " ".join("".join(parser.parts).split())


HOSTILE = [
    "plain words",
    "a <b>bold</b> claim <script>alert(1)</script> and <!-- a comment --> end",
    "<style>p{}</style> <![CDATA[x]]> <?pi x?> <!DOCTYPE html> &",
    "1 < 2 > 0 & 3 <= 4, \"quoted\" and 'single'",
    "&amp; &lt; &gt; &quot; &#60; &#x3C; &#0; &#xD800; &copy; &notanentity; &amp",
    "&**lt;** and &amp;**lt;** and `&lt;` and `<b>` in code",
    '[a link](http://example.com/?a=1&b=<2> "a title with > and <tag> and \\"")',
    "[x](<http://example.com/a b> 't>') and <http://example.com/<>> and <mailto:a@b.c>",
    '[javascript](javascript:alert(1)) ![image](http://example.com/i.png "t>")',
    "```html&#64;example.com\n<div>code</div> &amp;\n```\n\n    indented <code> & block",
    "# Heading <h1>\n\n> quote > more\n\n- item <li>\n- *em* _em_ **strong**\n\n1. one\n2. two",
    "line one  \nline two\\\nline three\n\n---\n\ntext after a rule",
    "中文摘要 <标签> 和 &amp; 符号，还有 `代码` 与 **强调**。",
    "a\u00a0b\u2028c\u200bd e\tf\r\ng",
    "\\<not a tag\\> \\& \\* escaped",
    '<a href="x">raw link</a> <img src=x onerror=alert(1)>',
    "",
    "   ",
]


@pytest.mark.parametrize("markdown", HOSTILE)
def test_plain_text_is_what_an_html_parser_reads(markdown: str) -> None:
    assert mdrender.plain_text(markdown) == parsed_text(markdown)


# Markdown's own punctuation, HTML's, references' and a few letters and scripts.
_PIECES = st.sampled_from(
    [
        *"<>&;#\"'`*_[]()!\\/:=-\n \t.x1",
        "&amp;",
        "&lt;",
        "&#60;",
        "&#x3C;",
        "&copy;",
        "http://",
        "mailto:",
        "<b>",
        "</b>",
        "<!--",
        "-->",
        "<![CDATA[",
        "<script>",
        "```",
        "    ",
        "# ",
        "> ",
        "- ",
        "1. ",
        "中文",
        "é",
        "\u00a0",
    ]
)


@settings(max_examples=400, deadline=None)
@given(st.lists(_PIECES, max_size=40).map("".join))
def test_plain_text_is_what_an_html_parser_reads_for_any_markdown(markdown: str) -> None:
    assert mdrender.plain_text(markdown) == parsed_text(markdown)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_plain_text_is_what_an_html_parser_reads_for_any_text(markdown: str) -> None:
    assert mdrender.plain_text(markdown) == parsed_text(markdown)


@settings(max_examples=200, deadline=None)
@given(adversarial.texts(60))
def test_plain_text_is_what_an_html_parser_reads_for_the_adversarial_texts(markdown: str) -> None:
    """The project's hostile text (tests/adversarial.py: near misses, look-alikes,
    invisible characters, Markdown), as redaction's own tests use it."""
    assert mdrender.plain_text(markdown) == parsed_text(markdown)


_REFERENCE = re.compile(r"&(?:amp|lt|gt|quot);")


@pytest.mark.parametrize("markdown", HOSTILE)
def test_the_html_plain_text_strips_is_escaped_throughout(markdown: str) -> None:
    """What the pattern relies on, checked on the HTML itself (review r42): raw
    HTML, the typographer and linkify off; every < opens a tag the pattern
    takes whole; every & between tags begins &amp; &lt; &gt; or &quot;. Turning
    on an option or adding a render rule that writes raw text fails here."""
    options = mdrender._MD.options
    assert (options["html"], options["typographer"], options["linkify"]) == (False, False, False)
    text = mdrender._TAG.sub("", mdrender.render_markdown(markdown))
    assert "<" not in text and ">" not in text
    assert "&" not in _REFERENCE.sub("", text)
