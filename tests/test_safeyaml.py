"""The strict YAML reader of key files and pool.yaml (builder.formats.safeyaml)."""

from __future__ import annotations

import time

import pytest

from builder.formats import safeyaml


def load(text: str | bytes, max_bytes: int = 4096) -> dict[str, str]:
    data = text.encode("utf-8") if isinstance(text, str) else text
    return safeyaml.load_mapping(data, max_bytes=max_bytes)


def test_every_scalar_is_text_as_written() -> None:
    """No resolver: what YAML 1.1 would type (octal, booleans, timestamps, null,
    floats, sexagesimal) stays the text it is; quoting and block scalars work."""
    assert load(
        "k: 0o17\nb: yes\nd: 2024-13-45\nn: ~\ne:\nf: 1e3\nt: 1:30\nq: '3'\n"
        'dq: "a\\tb"\nblock: |\n  one\n  two\nfold: >-\n  one\n  two\n'
    ) == {
        "k": "0o17",
        "b": "yes",
        "d": "2024-13-45",
        "n": "~",
        "e": "",
        "f": "1e3",
        "t": "1:30",
        "q": "3",
        "dq": "a\tb",
        "block": "one\ntwo\n",
        "fold": "one two",
    }


def test_empty_files_are_empty_mappings() -> None:
    assert load("") == load("# only a comment\n") == load("---\n") == load("---\n...\n") == {}


def test_a_duplicate_key_is_refused_with_its_line_and_pointer() -> None:
    with pytest.raises(safeyaml.YAMLError) as info:
        load("a: 1\nb: 2\n'a': 3\n")
    assert (info.value.line, info.value.pointer) == (3, "/a")
    assert "given twice" in info.value.message


def test_the_size_is_checked_before_decoding() -> None:
    with pytest.raises(safeyaml.YAMLError, match="5000 bytes, the limit is 4096"):
        load(b"\xff" * 5000)


def test_keys_in_pointers_are_escaped_and_cut_short() -> None:
    assert safeyaml.pointer_to("a/b~c") == "/a~1b~0c"
    assert safeyaml.pointer_to("x" * 100) == "/" + "x" * 64 + "…"


@pytest.mark.parametrize(
    "text",
    [
        "[" * 8000,
        "{" * 8000,
        "[" * 1023 + "]" * 1023,
        "a: " + "[a, " * 2000,
        "- " * 4000,
        "? " * 4000,
        "a:\n" + "".join(" " * i + "b:\n" for i in range(1, 120)),
        "&a " * 2600,
        '"' + "\\" * 8000,
    ],
    ids=["[", "{", "[]", "[a,", "- ", "? ", "indent", "&", "\\"],
)
def test_nesting_is_refused_before_it_costs_time(text: str) -> None:
    """PyYAML's pure-Python scanner spends time in the square of the nesting of
    flow collections (0.8 s for 1,023 `[`s); the reader's scanner refuses the
    first `[` or `{` it meets, and no block nesting gets past one level."""
    started = time.perf_counter()
    with pytest.raises(safeyaml.YAMLError):
        load(text, max_bytes=16384)
    assert time.perf_counter() - started < 0.1
