"""The text a reader sees of a dream: what redaction judges (docs/protocol.md §1).

A page does not show a summary's source. It shows its Markdown rendered:
character references decoded (``ada&#64;example.com``), backslash escapes,
emphasis and code spans removed from inside a token (``138**1234**5678`` reads
13812345678), link targets and titles that show on hover and open a mail
client (percent-decoded, white space collapsed), and runs of white space and
line breaks as one space. Only the summary is rendered as Markdown by a page;
the agent exports escape every other field's Markdown, but whoever reads a
field may still render it, so the other fields are judged as a renderer
without links shows them. A reader reads ``¹³⁸``, ``⑬`` and ``𝟏`` as digits
(NFKC) and a digit under a keycap, circle or underline (``1⃣``, ``1⃝``,
``1̲``) as the digit: each view is judged again without its combining marks.
An entry's source shows as a link: it is judged percent-decoded too. And what
a page shows cut (the card's excerpt, the feed's summary) is judged as cut.

:func:`reader_texts` gives each text a reader may see of one field: the text
with white space collapsed, and, where Markdown can change it, the plain text
of the site's own renderer (:mod:`builder.text.mdrender`: the same parser and the
same HTML the pages show, read as a browser reads it) with every link target
(percent-decoded, without ``mailto:``) and title; each NFKC-normalized. The
redaction rules (:mod:`builder.text.redact`, which also folds look-alike letters)
then run on each (:func:`findings`).

The rules run on the source too, and ``sign`` replaces what they find there.
What only the rendering shows cannot be replaced in the source without
rewriting the author's Markdown, and the pool never rewrites signed text: so
the pool refuses such a dream, and ``sign`` refuses to sign it
(:func:`problems`). Never return the text of a match: only field and kind.
"""

from __future__ import annotations

import functools
import html
import re
import unicodedata
from collections.abc import Iterator, Mapping
from html.parser import HTMLParser
from typing import Any
from urllib.parse import unquote

from builder.errors import Problem
from builder.formats import unicodepolicy
from builder.text import mdrender, redact
from builder.text.redact import Redaction

__all__ = ["HINT_POOL", "HINT_SIGN", "RESIGN", "findings", "problems", "reader_texts"]

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
                # A mail client shows the decoded target; a tooltip its title.
                # Either is judged as text is: white space runs as one space.
                target = unquote(value)
                self.attributes.append(_collapse(target.removeprefix("mailto:")))
            elif name == "title":
                self.attributes.append(_collapse(value))


def _collapse(text: str) -> str:
    return " ".join(text.split())


def _without_marks(text: str) -> str:
    """``text`` less every combining mark (Mn, Me) after canonical decomposition:
    a keycap (1️⃣), an enclosing circle (1⃝) or an underline (1̲) over a digit
    reads as the digit, and an accent as its base letter (for detection only).

    Exactly the characters whose ``unicodedata.category`` is Mn or Me are
    dropped (tests/test_fastpaths.py compares this with that definition), but
    without a Python call per character: each distinct character's category
    is looked up once per process (:func:`_learn`), and a text holding no
    known mark (most Chinese, Japanese and Korean text) is its decomposition
    as it is."""
    decomposed = unicodedata.normalize("NFD", text)
    chars = set(decomposed)
    if not chars <= _KNOWN:
        _learn(chars - _KNOWN)
    if _MARK_CHARS.isdisjoint(chars):
        return decomposed
    return decomposed.translate(_MARK_TABLE)


_MARKS = frozenset({"Mn", "Me"})
# Every character whose category this process has looked up, the marks among
# them, and a str.translate table deleting those marks. Bounded by the
# characters Unicode assigns (a few hundred thousand, ≈20 MB at worst; a pool
# of ordinary text sees a few thousand). Only this module fills them.
_KNOWN: set[str] = set()
_MARK_CHARS: set[str] = set()
_MARK_TABLE: dict[int, None] = {}


def _learn(new: set[str]) -> None:
    """Look up the category of each of ``new``, characters not seen before.

    A character joins ``_KNOWN`` only after its mark, if it is one, joined the
    mark set and table: a thread that finds it known also finds it dropped."""
    for char in new:
        if unicodedata.category(char) in _MARKS:
            _MARK_CHARS.add(char)
            _MARK_TABLE[ord(char)] = None
    _KNOWN.update(new)


def reader_texts(text: str, *, markdown: bool = True) -> tuple[str, ...]:
    """Every text a reader may see of a field holding ``text``, NFKC-normalized,
    without repeats: first the text with white space collapsed, then, where
    Markdown can change it, its rendering's text, link targets and titles, the
    text percent-decoded where it holds a "%" (a link target shows decoded), and
    each view again less its combining marks where it holds any.

    ``markdown`` is whether a page renders the field as Markdown (the summary).
    No page renders any other field so, and the agent exports escape their
    Markdown, but whoever reads one may render it: it is judged as any renderer
    could show it without links (:func:`_decoded`), in linear time, where
    markdown-it scans brackets and delimiters of hostile text slowly."""
    views = [_collapse(text)]
    if markdown and not _MARKDOWN_CHANGES.isdisjoint(text):
        plain, attributes = _rendering(text)
        views.append(plain)
        views += attributes
    elif not markdown and not _MARKDOWN_CHANGES.isdisjoint(text):
        decoded = _decoded(text)
        views.append(_collapse(decoded))
        views.append(_collapse(_DELIMITERS.sub("", decoded)))
    if "%" in text:
        views.append(_collapse(unquote(text)))
    return _folded(views)


@functools.lru_cache(maxsize=64)
def _rendering(text: str) -> tuple[str, tuple[str, ...]]:
    """The plain text of ``text`` rendered as Markdown (equal to
    :func:`builder.text.mdrender.plain_text`: the text nodes joined, white space as
    one space), and its link targets and titles, from one pass over the HTML.
    Kept for a few texts: a summary's reader views and its card excerpt
    (:func:`_shown_cut`) both need its plain text, and parsing the HTML twice
    was a tenth of a dream's check."""
    reader = _Reader()
    reader.feed(mdrender.render_markdown(text))
    reader.close()
    return _collapse("".join(reader.parts)), tuple(reader.attributes)


# A backslash escape or a character reference, in one left-to-right pass (an
# escaped "\\&" starts no reference), as CommonMark reads them outside code.
_DECODABLE = re.compile(
    r"\\([!-/:-@\[-`{-~])|&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});"
)
# What emphasis, strikethrough and code spans may remove: every such character.
_DELIMITERS = re.compile(r"[*_`~]")


def _decoded(text: str) -> str:
    """``text`` with escapes and character references decoded everywhere. A
    renderer shows that less some of its delimiters (emphasis, code spans), and
    keeps a reference inside a code span as written: the views are the source,
    this, and this with every delimiter removed."""
    return _DECODABLE.sub(lambda m: m[1] or html.unescape(m[0]), text)


def _folded(views: list[str]) -> tuple[str, ...]:
    """``views`` NFKC-normalized, then again less what shows as nothing
    (:data:`builder.formats.unicodepolicy.INVISIBLE`: a rendering may hold
    one the source only references, ``138&#x200b;1234``), then again less
    their combining marks, without repeats."""
    folded = [unicodedata.normalize("NFKC", v) for v in views]
    folded += [
        unicodedata.normalize("NFKC", unicodepolicy.INVISIBLE.sub("", v))
        for v in folded
        if not v.isascii() and unicodepolicy.INVISIBLE.search(v)
    ]
    folded += [unicodedata.normalize("NFKC", _without_marks(v)) for v in folded if not v.isascii()]
    return tuple(dict.fromkeys(folded))


def _shown_cut(dream: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """(pointer, text) of what a page shows cut: the home card's excerpt of the
    summary and the feed's <summary> (the summary, or else the first entry)."""
    summary = dream.get("summary")
    entries = dream.get("entries")
    if isinstance(summary, str) and summary:
        yield "/summary", mdrender.clip(_rendering(summary)[0], mdrender.EXCERPT_LIMIT)
        yield "/summary", mdrender.clip(summary, mdrender.FEED_SUMMARY_LIMIT)
    elif isinstance(entries, list) and entries and isinstance(entries[0], dict):
        first = entries[0].get("text")
        if isinstance(first, str):
            yield "/entries/0/text", mdrender.clip(first, mdrender.FEED_SUMMARY_LIMIT)


def findings(dream: Mapping[str, Any]) -> tuple[Redaction, ...]:
    """Field and kind of what the policy catches in what a reader sees of each
    redactable field, each kind once per field. Meant for a dream the rules
    leave unchanged (signed, or just redacted): all it finds then shows only
    once rendered.

    Each distinct view is judged once: the rules are a pure function of the
    text, so a view equal to one already judged (a summary's excerpt is often
    its whole rendered text, its feed summary its source with white space
    collapsed) has the kinds found the first time, and adds them to its own
    field as judging it again would."""
    seen: dict[str, dict[str, None]] = {}  # pointer → kinds, in order of appearance
    judged: dict[str, tuple[str, ...]] = {}  # view → the kinds the rules find in it

    def kinds_in(view: str) -> tuple[str, ...]:
        kinds = judged.get(view)
        if kinds is None:
            kinds = judged[view] = redact.redact_text(view)[1]
        return kinds

    for pointer, text in redact.text_fields(dream):
        kinds = seen.setdefault(pointer, {})
        for view in reader_texts(text, markdown=pointer == "/summary"):
            if view != text:  # the source is the rules' own business (redact_dream)
                kinds |= dict.fromkeys(kinds_in(view))
    for pointer, shown in _shown_cut(dream):
        kinds = seen.setdefault(pointer, {})
        for view in _folded([_collapse(shown)]):  # plain text, shown as it is
            kinds |= dict.fromkeys(kinds_in(view))
    return tuple(Redaction(pointer, kind) for pointer, kinds in seen.items() for kind in kinds)


# A new dream's fix, at the end of each row problems() makes; a logged
# dream's rows go without it (builder.content.pool._problems_of, review r99).
RESIGN = (
    ": remove it from the draft, or write it plainly for `dreampool sign` to replace, "
    "and sign again"
)


def problems(dream: Mapping[str, Any], file: str) -> list[Problem]:
    """A problem for each field whose rendering shows what the policy catches."""
    return [
        Problem(
            file,
            f.pointer,
            f"shows personal data ({f.kind}) once rendered (Markdown, character "
            f"references, Unicode forms){RESIGN}",
        )
        for f in findings(dream)
    ]
