"""Strict JSON reading and RFC 8785 canonical bytes."""

from __future__ import annotations

import json

import pytest
import rfc8785
from hypothesis import given
from hypothesis import strategies as st

from builder import strictjson
from tests.conftest import VECTORS

JCS_CASES = sorted(p.name for p in (VECTORS / "jcs" / "input").glob("*.json"))


def test_all_jcs_vectors_present() -> None:
    assert len(JCS_CASES) == 6


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


@given(
    st.dictionaries(
        st.text(st.characters(max_codepoint=127), max_size=8),
        st.one_of(
            st.text(st.characters(exclude_categories=("Cs",)), max_size=20),
            st.integers(-(2**53) + 1, 2**53 - 1),
        ),
        max_size=6,
    )
)
def test_the_fast_leaf_encoder_is_jcs(value: dict[str, object]) -> None:
    """strictjson.is_canonical checks log leaves with the C encoder: for flat
    objects of ASCII keys and strings or safe integers it must equal rfc8785."""
    fast = strictjson._flat_canonical(value)
    assert fast == rfc8785.dumps(value)
    assert strictjson.is_canonical(fast)
    assert not strictjson.is_canonical(json.dumps(value).encode() + b" ")
