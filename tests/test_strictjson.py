"""Strict JSON reading and RFC 8785 canonical bytes."""

from __future__ import annotations

import json

import pytest
import rfc8785
from hypothesis import given
from hypothesis import strategies as st

from builder.formats import strictjson
from tests.conftest import VECTORS, vector_files

JCS_CASES = [p.name for p in vector_files("jcs/input")]


def test_all_jcs_vectors_present() -> None:
    assert len(JCS_CASES) == 6
    assert [p.name for p in vector_files("jcs/output")] == JCS_CASES


@pytest.mark.parametrize("name", JCS_CASES)
def test_rfc8785_vectors(name: str) -> None:
    raw = (VECTORS / "jcs" / "input" / name).read_bytes()
    want = (VECTORS / "jcs" / "output" / name).read_bytes()
    value = json.loads(raw)  # the vectors hold floats and controls strictjson needn't forbid
    assert strictjson.canonical(value) == want


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (b'{"a": 1, "a": 2}', "duplicate member name"),
        (b'{"a": {"b": 1, "b": 1}}', "duplicate member name"),
        (b"[NaN]", "NaN"),
        (b"[Infinity]", "Infinity"),
        (b"[-Infinity]", "Infinity"),
        (b"[1e999]", "infinity"),
        (b'["\\ud800"]', "lone surrogate"),
        (b'{"\\udfff": 1}', "lone surrogate"),
        (b"[9007199254740992]", "2^53"),
        (b"[-9007199254740992]", "2^53"),
        (b"\xef\xbb\xbf{}", "byte order mark"),
        (b'{"a": "\xff"}', "UTF-8"),
        (b"[" * 33 + b"]" * 33, "nested deeper than 32"),
        (b'{"a": [1, 2,]}', "not valid JSON"),
        (b"", "not valid JSON"),
    ],
)
def test_refuses_loose_json(data: bytes, words: str) -> None:
    with pytest.raises(strictjson.JSONError) as info:
        strictjson.loads(data)
    assert words in info.value.message


def test_size_limit_is_checked_before_parsing() -> None:
    data = b'"' + b"a" * (64 * 1024) + b'"'
    with pytest.raises(strictjson.JSONError, match="limit is 65536"):
        strictjson.loads(data)


def test_depth_limit_ignores_brackets_inside_strings() -> None:
    text = json.dumps({"a": "[" * 100 + "{" * 100})
    assert strictjson.loads(text.encode())["a"].startswith("[[")


def test_accepts_limits_exactly() -> None:
    assert strictjson.loads(b"[" * 32 + b"]" * 32) is not None
    assert strictjson.loads(b"[9007199254740991, -9007199254740991]")[0] == 2**53 - 1


def test_error_names_the_line() -> None:
    with pytest.raises(strictjson.JSONError) as info:
        strictjson.loads(b'{\n"a": 1,\n"b": }')
    assert info.value.line == 3


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53) + 1, 2**53 - 1) | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4)
    ),
    max_leaves=20,
)


@given(json_values)
def test_canonicalize_twice_is_once(value: object) -> None:
    once = strictjson.canonical(value)
    assert strictjson.canonical(strictjson.loads(once, max_bytes=len(once) + 1)) == once
    assert strictjson.is_canonical(once)


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53) + 1, 2**53 - 1)
    | st.text(st.characters(exclude_categories=("Cs",)), max_size=12),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.text(st.characters(exclude_categories=("Cs",)), max_size=6), inner, max_size=4
        )
    ),
    max_leaves=20,
)


@given(JSON_VALUES)
def test_the_c_encoder_path_is_jcs(value: object) -> None:
    """strictjson.canonical takes the C encoder for float-free values: it must
    give rfc8785's bytes for every one (keys outside the BMP, where the two
    sort orders differ, included: those fall back)."""
    assert strictjson.canonical(value) == rfc8785.dumps(value)


def test_keys_outside_the_bmp_sort_by_utf16() -> None:
    # U+FF61 sorts after U+1F600 in UTF-16 (0xFF61 > 0xD83D), before it by code point.
    value = {"\uff61": 1, "\U0001f600": 2}
    assert strictjson.canonical(value) == '{"\U0001f600":2,"\uff61":1}'.encode()
    assert strictjson.canonical({"a": 1.5}) == b'{"a":1.5}'


@pytest.mark.parametrize(
    ("data", "line"),
    [
        (b'{\n"a": "NaN in a string",\n"b": NaN}', 3),
        (b'{"x":\n\n1e999}', 3),
        (b'{"t": "12345678901234567890",\n"n":\n12345678901234567890}', 3),
        (b"[\n-Infinity]", 2),
        (b'{"s": "a \\" NaN \\\\", "ok": 1,\n"bad": 9007199254740992}', 2),
    ],
)
def test_a_refused_number_or_constant_is_named_by_its_line(data: bytes, line: int) -> None:
    """A new user's audit (23rd session): "NaN is not JSON" and "number
    overflows to infinity" named no line (the parser's hooks see the token,
    not where it is), where a syntax error names one. Tokens inside strings,
    escapes included, are not taken for it."""
    with pytest.raises(strictjson.JSONError) as info:
        strictjson.loads(data)
    assert info.value.line == line, info.value.message
