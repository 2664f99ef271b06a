"""The Unicode policy (docs/protocol.md §1.1): its tables, its exceptions, its copies.

The tables (builder/formats/unicodetables.py, Unicode 15.0.0) are checked against what
does not come from them: the running Python's ``unicodedata`` general
categories (whatever its Unicode version), and the derivation of
Default_Ignorable_Code_Point that UAX #44 and DerivedCoreProperties.txt state.
The browser's copy (templates/static/unicodepolicy.js) must be what the script
writes from them, and the independent verifier must agree code point by code
point.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import unicodedata
from pathlib import Path
from typing import Any

import pytest

from builder.formats import dream as dreamfmt
from builder.formats import unicodepolicy as up
from builder.formats import unicodetables as t
from tests import independent_verifier as iv

REPO = Path(__file__).resolve().parent.parent
REFUSED_CATEGORIES = ("Cc", "Cf", "Co", "Cs", "Cn", "Zl", "Zp")


def _in(ranges: t.Ranges, cp: int) -> bool:
    return any(lo <= cp <= hi for lo, hi in ranges)


def _categories() -> list[str | None]:
    """The table's refused category of every code point (None: another one)."""
    out: list[str | None] = [None] * 0x110000
    for cat in REFUSED_CATEGORIES:
        for lo, hi in getattr(t, f"CATEGORY_{cat.upper()}"):
            out[lo : hi + 1] = [cat] * (hi + 1 - lo)
    return out


_TABLE = _categories()


def _table_category(cp: int) -> str | None:
    return _TABLE[cp]


def _python_categories() -> list[str]:
    return [unicodedata.category(chr(cp)) for cp in range(0x110000)]


_PYTHON = _python_categories()


def _version(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in v.split("."))


def test_the_general_categories_agree_with_pythons_unicodedata() -> None:
    """Where Python's Unicode version and 15.0.0 both assign a code point, they give
    it the same refused category or none; unassigned code points differ only in
    the direction the versions allow (3.11: 14.0.0 assigns fewer, 3.13: 15.1.0 more)."""
    ours, theirs = _version(t.UNICODE_VERSION), _version(unicodedata.unidata_version)
    for cp in range(0x110000):
        py, tab = _PYTHON[cp], _TABLE[cp]
        if py != "Cn" and tab != "Cn":
            assert (py if py in REFUSED_CATEGORIES else None) == tab, hex(cp)
        elif py == "Cn" and tab != "Cn":
            assert theirs < ours, hex(cp)  # assigned since Python's version
        elif py != "Cn" and tab == "Cn":
            assert theirs > ours, hex(cp)  # assigned after 15.0.0


def test_default_ignorable_is_derived_as_uax44_says() -> None:
    """DerivedCoreProperties.txt: Default_Ignorable_Code_Point = Other_DI + Cf +
    Variation_Selector − White_Space − U+FFF9..FFFB − U+13430..1343F −
    Prepended_Concatenation_Mark. So every Cf but those is in the table, and the
    ranges UAX #44 §5.7.2 names are in it whole."""
    excluded = [
        (0xFFF9, 0xFFFB),
        (0x13430, 0x1343F),
        (0x0600, 0x0605),  # Prepended_Concatenation_Mark (PropList.txt 15.0.0)
        (0x06DD, 0x06DD),
        (0x070F, 0x070F),
        (0x0890, 0x0891),
        (0x08E2, 0x08E2),
        (0x110BD, 0x110BD),
        (0x110CD, 0x110CD),
    ]
    for lo, hi in t.CATEGORY_CF:
        for cp in range(lo, hi + 1):
            assert _in(t.DEFAULT_IGNORABLE, cp) != _in(excluded, cp), hex(cp)
    for cp in range(0x110000):  # the Cf of Python's own version too, where assigned
        if _PYTHON[cp] == "Cf" and _TABLE[cp] == "Cf":
            assert _in(t.DEFAULT_IGNORABLE, cp) != _in(excluded, cp), hex(cp)
    for lo, hi in [
        (0xE0000, 0xE0FFF),  # tags and the reserved default-ignorables after them
        (0x2060, 0x206F),
        (0xFFF0, 0xFFF8),
        (0xFE00, 0xFE0F),  # Variation_Selector
        (0xE0100, 0xE01EF),
        (0x180B, 0x180D),
        (0x180F, 0x180F),
        (0x1BCA0, 0x1BCA3),
        (0x115F, 0x1160),  # Other_Default_Ignorable_Code_Point
        (0x3164, 0x3164),
        (0xFFA0, 0xFFA0),
        (0x17B4, 0x17B5),
        (0x034F, 0x034F),
    ]:
        assert all(_in(t.DEFAULT_IGNORABLE, cp) for cp in range(lo, hi + 1)), hex(lo)
    for cp in (0x0020, 0x00A0, 0x3000, 0x1680):  # White_Space, never ignorable
        assert not _in(t.DEFAULT_IGNORABLE, cp)


def test_the_verdict_does_not_ask_pythons_unicodedata(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same verdict on 3.11, 3.12 and 3.13: refusals come from the shipped tables."""

    def refuse(*_: Any) -> Any:
        raise AssertionError("unicodedata asked")

    for name in ("category", "combining", "bidirectional", "name", "east_asian_width"):
        monkeypatch.setattr(unicodedata, name, refuse)
    for text, _ in ACCEPTED + REFUSED_TEXT:
        up.first_refused(text)


ACCEPTED = [
    ("plain ASCII", "ada"),
    ("heart with emoji selector", "\u2764\ufe0f"),
    ("keycap", "#\ufe0f\u20e3"),
    ("text-style selector", "\u2764\ufe0e"),
    ("ZWJ sequence", "\U0001f469\u200d\U0001f4bb"),
    ("ZWJ after modifier", "\U0001f469\U0001f3fd\u200d\U0001f4bb"),
    ("ZWJ after selector", "\U0001f3f3\ufe0f\u200d\U0001f308"),
    ("flag of regional indicators", "\U0001f1ec\U0001f1e7"),
    ("Persian ZWNJ", "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645"),
    ("Devanagari ZWJ after virama", "\u0915\u094d\u200d\u0937"),
    ("Devanagari ZWNJ after virama", "\u0915\u094d\u200c\u0937"),
    ("CJK, accents, no-break space", "梦 José\u00a0ok"),
]
ACCEPTED = [(b, a) for a, b in ACCEPTED]
REFUSED_TEXT = [
    ("a\U000e0100", 1),
    ("a\u180b", 1),
    ("a\u180f", 1),
    ("a\U0001bca0", 1),
    ("a\U000e0200", 1),
    ("a\U000e0fff", 1),
    ("\u845b\U000e0100", 1),  # an ideographic variation sequence: refused too
    ("a\ufe0f", 1),
    ("\u2764\ufe0f\ufe0f", 2),
    ("a\u200db", 1),
    ("\U0001f469\u200d", 1),
    ("a\u200cb", 1),
    ("\u200c\u0645", 0),
    ("\U0001f3f4\U000e0067\U000e0062\U000e007f", 1),
    ("x\ue000", 1),
    ("x\U000f0000", 1),
    ("x\u0378", 1),
    ("x\ufdd0", 1),
    ("x\uffff", 1),
    ("x\U0010fffe", 1),
    ("x\u2028", 1),
    ("x\t", 1),
    ("x\x85", 1),
    ("x\ud800", 1),
    ("x\u3164", 1),
    ("x\u00ad", 1),
    ("x\u202e", 1),
]


@pytest.mark.parametrize(("text", "what"), ACCEPTED, ids=[w for _, w in ACCEPTED])
def test_the_stated_exceptions_are_accepted(text: str, what: str) -> None:
    assert up.first_refused(text) is None, what
    iv._text(text, 0, 100, what)


@pytest.mark.parametrize(("text", "index"), REFUSED_TEXT, ids=[ascii(t) for t, _ in REFUSED_TEXT])
def test_everything_else_is_refused_where_it_stands(text: str, index: int) -> None:
    found = up.first_refused(text)
    assert found is not None and found.index == index, found
    assert found.describe().startswith(f"U+{found.code_point:04X} (")
    with pytest.raises(iv.VerificationError):
        iv._text(text, 0, 100, "t")


def test_newline_only_where_a_field_takes_lines() -> None:
    assert up.first_refused("a\nb", newline=True) is None
    found = up.first_refused("a\nb")
    assert found is not None and found.describe() == "a newline at character 1"


def test_the_independent_verifier_refuses_the_same_code_points() -> None:
    """Out of context, code point by code point, where Python's Unicode version and
    15.0.0 agree that it is assigned."""
    for cp in range(0x110000):
        if (_PYTHON[cp] == "Cn") != (_TABLE[cp] == "Cn"):
            continue
        assert iv._refused(cp) == up.is_refused(cp), hex(cp)


def test_the_browser_copy_is_generated_from_the_tables() -> None:
    module = _load_tables_script()
    js = (REPO / "templates" / "static" / "unicodepolicy.js").read_text(encoding="utf-8")
    assert js == module.render_js(), "run python scripts/make_unicode_tables.py --js"


def test_the_table_names_its_sources() -> None:
    assert t.UNICODE_VERSION == up.UNICODE_VERSION == "15.0.0"
    assert t.CONFUSABLES_VERSION == "13.0.0"
    assert all(len(sha) == 64 for _, sha in t.SOURCES)
    assert len(t.CONFUSABLES.splitlines()) > 6000  # every single-code-point mapping


def test_every_unicode_negative_vector_is_refused_by_both_verifiers() -> None:
    """docs/vectors/negative/unicode.json: signatures verify, the policy refuses."""
    cases = json.loads(
        (REPO / "docs" / "vectors" / "negative" / "unicode.json").read_text(encoding="utf-8")
    )
    assert len(cases) >= 8
    for case in cases:
        problems = dreamfmt.validate(case["dream"], "v.json")
        assert [p.pointer for p in problems] == [case["pointer"]], (case["name"], problems)
        dreamfmt.verify(case["dream"], "v.json")  # the signature itself holds
        with pytest.raises(iv.VerificationError, match=r"§1\.1"):
            iv.check_dream(case["dream"], case["name"])


def _load_tables_script() -> Any:
    spec = importlib.util.spec_from_file_location(
        "make_unicode_tables", REPO / "scripts" / "make_unicode_tables.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["make_unicode_tables"] = module
    spec.loader.exec_module(module)
    return module


TABLES_JSON = REPO / "docs" / "vectors" / "unicode-tables.json"


def test_the_vectors_tables_are_generated_from_the_tables() -> None:
    """A stranger's audit (23rd session): §1.1's tables lived only in the
    project's code; docs/vectors/unicode-tables.json carries them."""
    module = _load_tables_script()
    assert TABLES_JSON.read_text(encoding="utf-8") == module.render_json(), (
        "run python scripts/make_unicode_tables.py --json"
    )


def _first_refused_from_json(text: str, newline: bool, tables: dict[str, Any]) -> int | None:
    """§1.1 written from docs/protocol.md and the JSON tables alone (no
    builder module): the index of the first refused code point, or None."""
    import bisect

    starts = {name: [lo for lo, _ in r] for name, r in tables.items()}

    def inside(name: str, cp: int) -> bool:
        i = bisect.bisect_right(starts[name], cp) - 1
        return i >= 0 and tables[name][i][1] >= cp

    cps = [ord(c) for c in text]

    def allowed(i: int) -> bool:
        cp = cps[i]
        before = cps[i - 1] if i else -1
        after = cps[i + 1] if i + 1 < len(cps) else -1
        if cp == 0x0A:
            return newline
        if cp in (0xFE0E, 0xFE0F):
            bases = "text_style_bases" if cp == 0xFE0E else "emoji_style_bases"
            return inside(bases, before)
        if cp == 0x200D:
            if inside("virama", before):
                return True
            emoji = (
                inside("extended_pictographic", before)
                or inside("emoji_modifier", before)
                or (before == 0xFE0F and allowed(i - 1))
            )
            return emoji and inside("extended_pictographic", after)
        if cp == 0x200C:
            if inside("virama", before):
                return True
            j = i - 1
            while j >= 0 and inside("joining_transparent", cps[j]):
                j -= 1
            k = i + 1
            while k < len(cps) and inside("joining_transparent", cps[k]):
                k += 1
            return (
                j >= 0
                and inside("joining_left", cps[j])
                and k < len(cps)
                and (inside("joining_right", cps[k]))
            )
        return False

    for i, cp in enumerate(cps):
        if inside("refused", cp) and not allowed(i):
            return i
    return None


def test_a_verifier_from_the_vectors_tables_alone_agrees_with_the_pool() -> None:
    """The JSON tables suffice: a checker built from them and §1.1 refuses
    every negative vector's field and gives the pool's verdict on a spread of
    sequences §1.1 allows or refuses (emoji, ZWJ, ZWNJ, selectors, new in 15.0)."""
    tables = json.loads(TABLES_JSON.read_text(encoding="utf-8"))["tables"]
    for case in json.loads((REPO / "docs" / "vectors" / "negative" / "unicode.json").read_text()):
        obj: Any = case["dream"]
        for part in case["pointer"].strip("/").split("/"):
            obj = obj[int(part)] if isinstance(obj, list) else obj[part]
        assert _first_refused_from_json(obj, False, tables) is not None, case["name"]
    samples = [
        "👩‍💻", "👩🏽‍💻", "🏳️‍🌈", "❤️", "#️⃣", "می‌خواهم", "क्‍ष", "\U0001fae8",
        "a\u200db", "x\ufe0f", "Deploy\U000e0100", "\ue000", "\u0378", "line\nbreak",
    ]  # fmt: skip
    for text in samples:
        want = up.first_refused(text, newline=False)
        got = _first_refused_from_json(text, False, tables)
        assert (got is None) == (want is None), (text, got, want)
