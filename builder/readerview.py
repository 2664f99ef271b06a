"""The text a reader sees of a dream: what redaction judges (docs/protocol.md §1).

A page does not show a summary's source. It shows its Markdown rendered:
character references decoded (``ada&#64;example.com``), backslash escapes,
emphasis and code spans removed from inside a token (``138**1234**5678`` reads
13812345678), link targets and titles that show on hover and open a mail
client, and runs of white space and line breaks as one space. The agent
exports are Markdown documents, so any field may be rendered by whoever reads
them. And a reader reads ``¹³⁸``, ``⑬`` and ``𝟏`` as digits (NFKC).

:func:`reader_texts` gives each text a reader may see of one field: the text
with white space collapsed, and, where Markdown can change it, the plain text
of the site's own renderer (:mod:`builder.mdrender`: the same parser and the
same HTML the pages show, read as a browser reads it) with every link target
(percent-decoded, without ``mailto:``) and title; each NFKC-normalized. The
redaction rules (:mod:`builder.redact`, which also folds look-alike letters)
then run on each (:func:`findings`).

The rules run on the source too, and ``sign`` replaces what they find there.
What only the rendering shows cannot be replaced in the source without
rewriting the author's Markdown, and the pool never rewrites signed text: so
the pool refuses such a dream, and ``sign`` refuses to sign it
(:func:`problems`). Never return the text of a match: only field and kind.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping
from html.parser import HTMLParser
from typing import Any
from urllib.parse import unquote

from builder import mdrender, redact
from builder.errors import Problem
from builder.redact import Redaction

__all__ = ["HINT_POOL", "HINT_SIGN", "findings", "problems", "reader_texts"]

# Where none of these is in a text, its rendering is the text itself, white
# space collapsed, less a block marker at its very start (#, >, -, 1.), which
# joins nothing: no character reference (&), backslash escape, emphasis (* _),
# code span (`), link or autolink ([ <), and no second line.
_MARKDOWN_CHANGES = frozenset("&\\*_`<[\n")

HINT_SIGN = (
    "a page shows what the Markdown renders, not its source: write the value out "
    "plainly (so `dreampool sign` can replace it) or remove it, and sign again"
)
HINT_POOL = (
    "the pool never rewrites signed text: remove the value from the draft (or write it "
    "plainly, which `dreampool sign` replaces), sign it again and submit the new file"
)


class _Reader(HTMLParser):
    """The text nodes of rendered HTML, as a browser decodes them, and the
    link targets and titles a reader can see or follow."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.attributes: list[str] = []

    def handle_data(self, data: str) -> None:
        self.parts.append(data)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if value is None:
                continue
            if name == "href":
                target = unquote(value)
                self.attributes.append(target.removeprefix("mailto:"))
            elif name == "title":
                self.attributes.append(value)


def reader_texts(text: str) -> tuple[str, ...]:
    """Every text a reader may see of a field holding ``text``, NFKC-normalized,
    without repeats: first the text with white space collapsed, then, where
    Markdown can change it, its rendering's text, link targets and titles."""
    views = [" ".join(text.split())]
    if not _MARKDOWN_CHANGES.isdisjoint(text):
        reader = _Reader()
        reader.feed(mdrender.render_markdown(text))
        reader.close()
        # As mdrender.plain_text: the text nodes joined, white space as one space.
        views.append(" ".join("".join(reader.parts).split()))
        views += reader.attributes
    return tuple(dict.fromkeys(unicodedata.normalize("NFKC", v) for v in views))


def findings(dream: Mapping[str, Any]) -> tuple[Redaction, ...]:
    """Field and kind of what the policy catches in what a reader sees of each
    redactable field, each kind once per field. Meant for a dream the rules
    leave unchanged (signed, or just redacted): all it finds then shows only
    once rendered."""
    out: list[Redaction] = []
    for pointer, text in redact.text_fields(dream):
        kinds: dict[str, None] = {}  # in order of appearance, once each
        for view in reader_texts(text):
            if view != text:  # the source is the rules' own business (redact_dream)
                kinds |= dict.fromkeys(redact.redact_text(view)[1])
        out += [Redaction(pointer, kind) for kind in kinds]
    return tuple(out)


def problems(dream: Mapping[str, Any], file: str) -> list[Problem]:
    """A problem for each field whose rendering shows what the policy catches."""
    return [
        Problem(
            file,
            f.pointer,
            f"shows personal data ({f.kind}) once rendered (Markdown, character "
            "references, Unicode forms): remove it from the draft, or write it plainly "
            "for `dreampool sign` to replace, and sign again",
        )
        for f in findings(dream)
    ]
