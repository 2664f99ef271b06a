"""A strict, bounded reader for the pool's own YAML: key files and ``pool.yaml``.

Both are written by pull requests, so both are hostile input, read by the build
that holds the log key. Full YAML is far more than a flat list of settings needs,
and most of it is attack surface: anchors and aliases (a 505-byte "billion
laughs" expands into gigabytes), tags (constructors), implicit typing
(``added: 2024-13-45`` is a timestamp that does not exist, and PyYAML's date
constructor ends in a ``ValueError``; ``k: 0o17`` is octal, ``no`` a boolean),
complex keys (``? [a, b]`` is an unhashable list as a key), merge keys, several
documents, and a pure-Python scanner whose time grows with the square of the
nesting of flow collections.

:func:`load_mapping` reads a subset: one document, a block mapping of ``key:
value`` lines whose keys and values are scalars (plain, quoted or block), and
nothing else. Everything else is refused before any value is used:

* at most ``max_bytes`` bytes, counted before decoding; UTF-8 only, no BOM;
* no control, bidi or invisible character anywhere in the file, comments
  included (what a reviewer sees is what is read); tab, LF and CR LF only.
  A character a double-quoted escape makes (``"\\e"``, ``"\\u202e"``) is the
  schema's to refuse, field by field (:mod:`builder.content.pool`);
* no directive (``%YAML``, ``%TAG``), tag (``!x``, ``!!x``), anchor or alias
  (``&x``, ``*x``) and no flow collection (``{…}``, ``[…]``): the scanner
  refuses each as it meets it, before the parser builds anything, so no
  nesting ever costs time;
* depth 1: a value is a scalar, never a list or a mapping; a key is a scalar;
  no merge key (``<<``), no second document, no key given twice;
* every scalar is text: no resolver runs, so nothing is typed implicitly (the
  schema converts the fields that are not text, and refuses what does not fit);
* no lone surrogate in a key or value (a double-quoted ``"\\ud800"``), and no
  escape beyond Unicode (``"\\UFFFFFFFF"`` ended PyYAML's scanner in an
  ``OverflowError``).

The parser is PyYAML's pure-Python one (the same bytes read the same with or
without libyaml), driven event by event; no composer, resolver or constructor
runs. Pure: no I/O. Errors are :class:`YAMLError`, with the line and the JSON
pointer of the key where known, and never contain a value.
"""

from __future__ import annotations

import re
from typing import Any, NoReturn, cast

import yaml
from yaml.events import (
    AliasEvent,
    DocumentEndEvent,
    DocumentStartEvent,
    Event,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    StreamEndEvent,
    StreamStartEvent,
)

from builder.formats import unicodepolicy

# Tab and LF are YAML's own; CR only before LF (a lone CR, like U+0085, U+2028
# and U+2029, is a line break to YAML 1.1 and none to most editors: two readers,
# two files). Everything else follows docs/protocol.md §1.1 (builder.formats.unicodepolicy),
# which also refuses the noncharacters U+FFFE and U+FFFF, YAML's own refusals.
_LONE_CR_RE = re.compile("\r(?!\n)")
_SURROGATE_RE = re.compile("[\ud800-\udfff]")
_MAX_SHOWN_KEY = 64


class YAMLError(ValueError):
    """Input is not the strict subset; ``line`` is 1-based where known, ``pointer``
    the JSON pointer of the key concerned (or "")."""

    def __init__(self, message: str, line: int | None = None, pointer: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.line = line
        self.pointer = pointer


def pointer_to(key: str) -> str:
    """The JSON pointer (RFC 6901) of a top-level key, cut short if the key is long."""
    shown = key if len(key) <= _MAX_SHOWN_KEY else key[:_MAX_SHOWN_KEY] + "…"
    return "/" + shown.replace("~", "~0").replace("/", "~1")


def load_mapping(data: bytes, *, max_bytes: int) -> dict[str, str]:
    """Read a flat ``key: value`` mapping of text (see the module doc); raise
    :class:`YAMLError` on anything else. An empty file (or only comments) is
    an empty mapping."""
    if len(data) > max_bytes:
        raise YAMLError(
            f"file is {len(data)} bytes, the limit is {max_bytes}; this file holds a few "
            "short `key: value` lines"
        )
    if data.startswith(b"\xef\xbb\xbf"):
        raise YAMLError("starts with a UTF-8 byte order mark (BOM); save the file without it", 1)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise YAMLError(f"not valid UTF-8 at byte {exc.start}; save it as UTF-8", line) from None
    cr = _LONE_CR_RE.search(text)
    if cr:
        line = text.count("\n", 0, cr.start()) + 1
        raise YAMLError("holds a carriage return without a line feed; end lines with LF", line)
    # Tab and CR before LF allowed: each replaced by a space, so indices stay.
    bad = unicodepolicy.first_refused(text.replace("\t", " ").replace("\r", " "), newline=True)
    if bad:
        line = text.count("\n", 0, bad.index) + 1
        raise YAMLError(
            f"holds {bad.describe()}, which docs/protocol.md §1.1 refuses; remove it "
            "(comments included: what a reviewer sees must be what is read)",
            line,
        )
    events = _Events(text)
    try:
        return _walk(events)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        raise YAMLError(
            f"not valid YAML: {exc.problem or exc.context}",
            mark.line + 1 if mark is not None else None,
        ) from None
    except yaml.YAMLError:  # the reader's refusals, all caught above on the raw text
        raise YAMLError("not valid YAML") from None
    finally:
        events.dispose()


class _Events(yaml.reader.Reader, yaml.scanner.Scanner, yaml.parser.Parser):
    """PyYAML's reader, scanner and parser; the scanner refuses, as it meets
    them, the tokens of everything outside the subset."""

    def __init__(self, text: str) -> None:
        yaml.reader.Reader.__init__(self, text)
        yaml.scanner.Scanner.__init__(self)
        yaml.parser.Parser.__init__(self)

    def next_event(self) -> Event:
        return cast(Event, self.get_event())  # type: ignore[no-untyped-call]

    def _refuse(self, what: str) -> NoReturn:
        raise YAMLError(what, self.get_mark().line + 1)

    def fetch_directive(self) -> None:
        self._refuse("directives (%YAML, %TAG) are not allowed; delete the line")

    def fetch_flow_sequence_start(self) -> None:
        self._flow()

    def fetch_flow_mapping_start(self) -> None:
        self._flow()

    def _flow(self) -> NoReturn:
        self._refuse(
            "flow collections ([…], {…}) are not allowed: write one `key: value` per line, "
            "and quote a value that starts with [ or {"
        )

    def fetch_alias(self) -> None:
        self._anchor()

    def fetch_anchor(self) -> None:
        self._anchor()

    def _anchor(self) -> NoReturn:
        self._refuse(
            "anchors and aliases (&name, *name) are not allowed: write each value out, "
            "and quote a value that starts with & or *"
        )

    def fetch_tag(self) -> None:
        self._refuse(
            "tags (!name, !!type) are not allowed: every value is read as text; "
            "quote a value that starts with !"
        )

    def scan_flow_scalar_non_spaces(self, double: bool, start_mark: Any) -> list[Any]:
        try:
            return super().scan_flow_scalar_non_spaces(double, start_mark)
        except (ValueError, OverflowError):  # chr() of an escape beyond U+10FFFF
            self._refuse("holds an escape (\\U…) beyond U+10FFFF, which is no character")


def _walk(events: _Events) -> dict[str, str]:
    get = events.next_event
    _expect(get(), StreamStartEvent)
    first = get()
    if isinstance(first, StreamEndEvent):
        return {}
    _expect(first, DocumentStartEvent)
    root = get()
    result: dict[str, str] = {}
    if isinstance(root, ScalarEvent) and _plain_empty(root):
        pass  # "---" and nothing else: an empty document
    elif isinstance(root, MappingStartEvent) and not root.flow_style:
        _bare(root)
        while not isinstance(event := get(), MappingEndEvent):
            key = _scalar(event, "a key must be plain text")
            line = _line(event)
            where = pointer_to(key)
            if key == "<<":
                raise YAMLError("merge keys (<<) are not allowed; write each key out", line)
            if _SURROGATE_RE.search(key):
                raise YAMLError(_LONE_SURROGATE, line)
            if key in result:
                raise YAMLError("is given twice; keep one", line, where)
            value = get()
            text = _scalar(
                value,
                "must be plain text, not a list or a mapping: write one `key: value` per line",
                where,
            )
            if _SURROGATE_RE.search(text):
                raise YAMLError(_LONE_SURROGATE, _line(value), where)
            result[key] = text
    else:
        raise YAMLError("must be a mapping of `key: value` lines", _line(root))
    _expect(get(), DocumentEndEvent)
    end = get()
    if not isinstance(end, StreamEndEvent):
        raise YAMLError("holds a second document (after ---); keep one", _line(end))
    return result


_LONE_SURROGATE = (
    "holds a lone surrogate (a \\ud800–\\udfff escape), which is not Unicode text; remove it"
)


def _plain_empty(event: ScalarEvent) -> bool:
    return event.value == "" and event.style is None and event.anchor is None and not event.tag


def _bare(event: Event) -> None:
    """Anchors, aliases and tags never get this far (the scanner refuses their
    tokens); checked again here so that no change there can let one through."""
    if isinstance(event, AliasEvent) or getattr(event, "anchor", None) is not None:
        raise YAMLError("anchors and aliases (&name, *name) are not allowed", _line(event))
    if getattr(event, "tag", None) is not None:
        raise YAMLError("tags (!name, !!type) are not allowed", _line(event))


def _scalar(event: Event, refusal: str, pointer: str = "") -> str:
    _bare(event)
    if not isinstance(event, ScalarEvent):
        raise YAMLError(refusal, _line(event), pointer)
    return str(event.value)


def _expect(event: Event, kind: type[Event]) -> None:
    if not isinstance(event, kind):  # pragma: no cover - the parser's own grammar
        raise YAMLError("not valid YAML", _line(event))


def _line(event: Event) -> int | None:
    mark = event.start_mark
    return mark.line + 1 if mark is not None else None
