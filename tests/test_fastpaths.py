"""The admission checks' short cuts against their straightforward definitions.

Admitting a dream parses it strictly (builder/formats/strictjson.py), verifies its
signature (builder/formats/ed25519.py) and judges its text and every view a reader has
of it (builder/text/redact.py, builder/text/readerview.py). To cost less CPU per dream
(benchmarks/ADMISSION.md) those checks take short cuts. Each short cut is held
here to a plain definition written out in this file, on adversarial text
(tests/adversarial.py): the fast path may never accept what the slow one
refuses, nor refuse differently.
"""

from __future__ import annotations

import unicodedata
from typing import Any
from urllib.parse import unquote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from builder.errors import SignatureError
from builder.formats import ed25519, strictjson, unicodepolicy
from builder.text import mdrender, readerview, redact
from builder.text.redact import Redaction
from tests import adversarial

# -- the straightforward definitions -----------------------------------------


def _collapse(text: str) -> str:
    return " ".join(text.split())


def slow_without_marks(text: str) -> str:
    """Every combining mark (Mn, Me) of the canonical decomposition dropped."""
    return "".join(
        c for c in unicodedata.normalize("NFD", text) if unicodedata.category(c) not in ("Mn", "Me")
    )


def slow_visible(text: str) -> str:
    """``text`` less what shows as nothing: Default_Ignorable code points and
    format characters (Cf), one code point at a time."""
    return "".join(
        c
        for c in text
        if not unicodepolicy.is_default_ignorable(ord(c)) and unicodedata.category(c) != "Cf"
    )


def slow_fold(views: list[str]) -> list[str]:
    """NFKC, then each view again less what shows as nothing, then again less marks."""
    folded = [unicodedata.normalize("NFKC", v) for v in views]
    folded += [
        unicodedata.normalize("NFKC", slow_visible(v))
        for v in folded
        if not v.isascii() and slow_visible(v) != v
    ]
    folded += [
        unicodedata.normalize("NFKC", slow_without_marks(v)) for v in folded if not v.isascii()
    ]
    return folded


def slow_reader_texts(text: str, *, markdown: bool = True) -> tuple[str, ...]:
    """readerview.reader_texts as its docstring defines it, with no short cut
    but the documented one (text holding no Markdown syntax renders as itself)."""
    views = [_collapse(text)]
    changes = any(c in text for c in "&\\*_`<[\n")
    if markdown and changes:
        reader = readerview._Reader()
        reader.feed(mdrender.render_markdown(text))
        reader.close()
        views.append(mdrender.plain_text(text))
        views += reader.attributes
    elif not markdown and changes:
        decoded = readerview._decoded(text)
        views.append(_collapse(decoded))
        views.append(_collapse(readerview._DELIMITERS.sub("", decoded)))
    if "%" in text:
        views.append(_collapse(unquote(text)))
    return tuple(dict.fromkeys(slow_fold(views)))


def slow_findings(dream: dict[str, Any]) -> tuple[Redaction, ...]:
    """Every view of every field judged, each time it occurs."""
    seen: dict[str, dict[str, None]] = {}
    for pointer, text in redact.text_fields(dream):
        kinds = seen.setdefault(pointer, {})
        for view in slow_reader_texts(text, markdown=pointer == "/summary"):
            if view != text:
                kinds |= dict.fromkeys(redact.redact_text(view)[1])
    cut: list[tuple[str, str]] = []
    summary, entries = dream.get("summary"), dream.get("entries")
    if isinstance(summary, str) and summary:
        cut.append(("/summary", mdrender.clip(mdrender.plain_text(summary), 180)))
        cut.append(("/summary", mdrender.clip(summary, 300)))
    elif (
        isinstance(entries, list)
        and entries
        and isinstance(entries[0], dict)
        and isinstance(entries[0].get("text"), str)
    ):
        cut.append(("/entries/0/text", mdrender.clip(entries[0]["text"], 300)))
    for pointer, shown in cut:
        kinds = seen.setdefault(pointer, {})
        for v in dict.fromkeys(slow_fold([_collapse(shown)])):
            kinds |= dict.fromkeys(redact.redact_text(v)[1])
    return tuple(Redaction(p, k) for p, kinds in seen.items() for k in kinds)


# -- the reader view ------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(adversarial.texts())
def test_marks_are_dropped_as_the_definition_says(text: str) -> None:
    assert readerview._without_marks(text) == slow_without_marks(text)


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=30))
def test_marks_are_dropped_from_any_text(text: str) -> None:
    assert readerview._without_marks(text) == slow_without_marks(text)


def test_a_mark_learned_late_is_still_dropped() -> None:
    """A character first seen without a mark, then a mark first seen later."""
    assert readerview._without_marks("x\u1ab0") == slow_without_marks("x\u1ab0")
    assert readerview._without_marks("1\u20e3\u1ab0") == "1"


@settings(max_examples=150, deadline=None)
@given(adversarial.texts())
def test_one_html_pass_gives_the_sites_plain_text(text: str) -> None:
    assert readerview._rendering(text)[0] == mdrender.plain_text(text)


@settings(max_examples=150, deadline=None)
@given(adversarial.texts(), st.booleans())
def test_reader_texts_are_the_definitions(text: str, markdown: bool) -> None:
    assert readerview.reader_texts(text, markdown=markdown) == slow_reader_texts(
        text, markdown=markdown
    )


@settings(max_examples=120, deadline=None)
@given(adversarial.dreams())
def test_findings_judge_each_view_once_and_find_the_same(dream: dict[str, Any]) -> None:
    assert readerview.findings(dream) == slow_findings(dream)


def test_a_repeated_view_still_counts_for_each_field() -> None:
    """A view judged for one field is found in another field holding it too."""
    shown = "ada&#64;example.com"
    dream = {"summary": shown, "entries": [{"text": shown}], "title": shown}
    found = readerview.findings(dream)
    assert found == slow_findings(dream)
    assert {f.pointer for f in found} == {"/title", "/summary", "/entries/0/text"}


# -- the redaction rules --------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(st.one_of(adversarial.texts(), adversarial.guardless_texts()))
def test_the_pre_check_changes_no_span(text: str) -> None:
    assert redact._find_spans(text) == redact._spans_of(redact._fold(text))


@settings(max_examples=300, deadline=None)
@given(adversarial.guardless_texts())
def test_where_the_pre_check_says_no_no_rule_finds_anything(text: str) -> None:
    folded = redact._fold(text)
    if not redact._may_match(folded):
        for _, rule in redact._RULES:
            assert list(rule(folded)) == [], rule.__name__


@pytest.mark.parametrize("text", adversarial.NEAR_MISSES + adversarial.SEEDS)
def test_every_near_miss_passes_the_pre_check(text: str) -> None:
    """Each seed a rule may catch gets past the pre-check to the rules."""
    assert redact._may_match(redact._fold(text))


# -- strict JSON ------------------------------------------------------------------

_ESCAPES = (
    *(r"\ud800", r"\uDBFF", r"\udc00", r"\uDFFF", r"\uD83D\uDE00", r"\ud7ff", r"\ue000"),
    *(r"\\ud800", r"\\\ud800", r"\u00e9", r"\u4e2d", r"\\", r"\"", "a", "中", "😀"),
)


def _slow_loads(data: bytes) -> object:
    """strictjson.loads with the surrogate walk run on every value."""
    value = strictjson.loads(data)
    strictjson._check_surrogates(value)
    return value


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(st.sampled_from(_ESCAPES), max_size=6).map("".join), max_size=4))
def test_surrogates_are_refused_with_or_without_the_walk(strings: list[str]) -> None:
    """In strings and in member names, escaped or written out."""
    as_list = "[" + ",".join(f'"{s}"' for s in strings) + "]"
    as_object = "{" + ",".join(f'"{s}{i}":{{"{s}":1}}' for i, s in enumerate(strings)) + "}"
    for data in (as_list.encode(), as_object.encode()):
        outcomes = []
        for loads in (strictjson.loads, _slow_loads):
            try:
                outcomes.append(("value", loads(data)))
            except strictjson.JSONError as exc:
                outcomes.append(("refused", exc.message))
        assert outcomes[0] == outcomes[1]


@settings(max_examples=150, deadline=None)
@given(
    st.one_of(
        adversarial.dreams(),
        st.dictionaries(
            st.sampled_from(["author", "title", "summary", "entries", "tags", "lineage"]),
            st.one_of(
                st.integers(),
                adversarial.texts(6),
                st.lists(st.one_of(st.integers(), adversarial.texts(6))),
                st.lists(
                    st.dictionaries(st.sampled_from(["text", "source"]), adversarial.texts(6))
                ),
                st.dictionaries(st.just("parent"), st.one_of(st.integers(), adversarial.texts(6))),
            ),
        ),
    )
)
def test_changes_are_what_redact_dream_lists(dream: dict[str, Any]) -> None:
    assert redact.changes(dream) == redact.redact_dream(dream)[1]


# -- Ed25519 ------------------------------------------------------------------------


def test_a_kept_key_object_still_refuses_what_does_not_verify() -> None:
    """The key object kept for an author verifies each message afresh."""
    seed = bytes(range(32))
    public = ed25519.public_key_of(seed)
    signature = ed25519.sign(seed, b"first")
    ed25519.verify(public, b"first", signature)
    with pytest.raises(SignatureError):
        ed25519.verify(public, b"second", signature)
    other = ed25519.public_key_of(bytes(32))
    with pytest.raises(SignatureError):
        ed25519.verify(other, b"first", signature)
