"""What the CLI, annotations and the job summary print: builder.errors.printable."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from builder.errors import Problem, printable
from builder.formats import unicodepolicy


def _forbidden_characters() -> list[str]:
    """Every code point docs/protocol.md §1.1 refuses out of context (the Cn part is
    sampled: every 97th of the 800,000-odd unassigned ones, and all others)."""
    out = []
    for lo, hi in unicodepolicy.REFUSED:
        step = 97 if hi - lo > 4096 else 1
        out += [chr(c) for c in range(lo, hi + 1, step)]
        out.append(chr(hi))
    return out


def test_every_character_a_dream_may_not_hold_is_escaped() -> None:
    """Controls, bidi, zero-width, tag, filler, separator, variation-selector,
    private-use and unassigned code points: each comes out as an ASCII escape,
    never as itself."""
    for ch in _forbidden_characters():
        shown = printable(ch)
        assert shown != ch and shown.isascii() and shown.startswith("\\"), (hex(ord(ch)), shown)
    assert printable("\x1b[2J\t\n\r\u202e\ud800\U000e0041") == (
        "\\x1b[2J\\t\\n\\r\\u202e\\ud800\\U000e0041"
    )


def test_visible_text_is_kept_as_it_is() -> None:
    for text in ("ada", "墨子", "José", "ｆｕｌｌ", "a\\x1b is a backslash", "emoji ☕"):
        assert printable(text) == text


@given(st.text())
def test_printable_text_is_visible_and_escaping_twice_changes_nothing(text: str) -> None:
    shown = printable(text)
    assert shown.isprintable() and not any(unicodepolicy.is_hidden(c) for c in shown)
    assert printable(shown) == shown


def test_a_problem_prints_escaped() -> None:
    p = Problem("keys/\x1b]0;x\x07.yaml", "/\u202eeman", "bad\nok: fine", 3)
    assert str(p) == "keys/\\x1b]0;x\\x07.yaml:3: /\\u202eeman: bad\\nok: fine"
