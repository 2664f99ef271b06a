"""Hypothesis strategies for text written to slip past a fast path.

The admission checks (builder/text/redact.py, builder/text/readerview.py) take short
cuts: a pre-check that proves a text holds nothing to find, a view judged
once where it repeats, a table of marks learned as characters arrive. Each
is compared with its straightforward definition on text from :func:`texts`,
which mixes what the rules look for with every way a reader may see it
written otherwise: digits of other scripts, full-width, superscript and
circled forms, look-alike letters, zero-width and combining characters,
Markdown escapes, character references, emphasis inside a number, links and
percent-encoding. A fast path must agree with the slow one on all of it: it
may never accept what the slow one refuses.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

# Pieces of what the rules catch, so that generated text often holds a match
# or a near miss (the fast path must then find exactly what the slow one does).
SEEDS = (
    "ada@example.com",
    "王伟@例子.广告",
    "138 1234 5678",
    "13812345678",
    "+44 20 7946 0958",
    "0044 20 7946 0958",
    "415-555-0199",
    "(415) 555-0199",
    "020-12345678",
    "tel: 4155550199",
    "电话：4155550199",
    "11010519491231002X",
    "192.168.1.20",
    "10.0.0.1",
    "d" * 8 + "0123456789abcdef" * 2,
    "sk-" + "a1" * 12,
    "ghp_" + "A1" * 12,
    "AKIA" + "ABCDEFGHIJ123456",
    "AIza" + "x" * 35,
    "xoxb-1234567890",
    "eyJhbGciOi.eyJzdWIiOi.sig",
    "Authorization: Bearer abc123def456ghi789",
    "Basic dXNlcjpwYXNzd29yZA==",
    "aws_secret_access_key=" + "A/b1" * 10,
    "?token=abc&page=2",
    "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEF\n-----END PRIVATE KEY-----",
    "git@github.com:o/r",
    "icon@2x.png",
    "react@19.0.0-rc.canary",
    "2026-11-16",
    "v1.2.3",
)
# What a rule catches with no digit, "@", "=", "+", "/" or "_" in it: only
# the rules' words and letter runs can flag these (redact._may_match).
NEAR_MISSES = (
    "deadbeef" * 4,
    "DEADBEEFcafe" * 3,
    "sk-abcdefghijklmnopqrstuv",
    "Bearer abcdefghijklmnopqrstuv",
    "bearer",
    "BASIC",
    "authorization",
    "Authorization: abcdefghijklmnopq",
    "AKIAABCDEFGHIJKLMNOP",
    "AIza" + "xY" * 17 + "z",
    "xoxb-abcdefghijk",
    "glpat-abcdefghijklmnopqrstu",
    "eyJhbGciOi.eyJzdWIiOi",
    "secret access key ABCDEFGHIJABCDEFGHIJABCDEFGHIJABCDEFGHIJ",
    "-----BEGIN PRIVATE KEY-----",
    "PRIVATE KEY",
    "ｓｋ－",
    "ＡＫＩＡ",
)
# Characters that read as others: digits of other scripts (Arabic-Indic,
# Devanagari, Thai, full-width, mathematical), superscripts and circled
# digits, full-width and small @+-., Cyrillic and Greek look-alikes, Unicode
# spaces and dashes.
LOOK_ALIKES = (
    *"١٣٨٠٩",
    *"१३८०",
    *"๑๓๘",
    *"０１３８９＠＋－．﹫",
    *"𝟏𝟑𝟖𝟎",
    *"¹³⁸⁰₁₃",
    *"①⑬➀⓪",
    *"аеорсхуАВЕКМОРТΑΒΕΟΡαο",
    *"ıɑɡ",
    *"\u3000\u00a0\u202f\u2002\u2009\u205f",
    *"\u2010\u2011\u2013\u2014\u2212\ufe63",
    "K",  # Kelvin sign, "k" to a case-insensitive pattern
    "ſ",  # long s
    "İ",
)
# Invisible and combining characters: zero-width space, joiners, word joiner,
# BOM; acute accent, keycap, enclosing circle, underline, variation selector.
INVISIBLE = (*"\u200b\u200c\u200d\u2060\ufeff", *"\u0301\u20e3\u20dd\u0332\ufe0f\u0308")
# Markdown a page renders: escapes, character references, emphasis and code
# inside a token, links, autolinks, line breaks, block markers, percent-encoding.
MARKDOWN = (
    *("\\", "\\.", "\\-", "\\@", "\\*", "&#64;", "&#x40;", "&commat;", "&amp;", "&#49;"),
    *("*", "**", "_", "`", "~~", "[", "]", "(", ")", "](mailto:", "](https://x.org/?t=1 "),
    *("<", ">", "<https://", "\n", "\n\n", "# ", "- ", "> ", "1. ", "%40", "%20", '"'),
)
PLAIN = (*"abcdefxyz ABCXYZ0123456789@.+-_=/:;,?&#%", "的", "是", "。", "：", "，", "日本")


def texts(max_size: int = 24) -> st.SearchStrategy[str]:
    """Text made of pieces from every group above, the groups mixed freely."""
    piece = st.one_of(
        st.sampled_from(SEEDS),
        st.sampled_from(NEAR_MISSES),
        st.sampled_from(LOOK_ALIKES),
        st.sampled_from(INVISIBLE),
        st.sampled_from(MARKDOWN),
        st.sampled_from(PLAIN),
        st.text(max_size=3),  # anything at all, now and then
    )
    return st.lists(piece, max_size=max_size).map("".join)


def guardless_texts(max_size: int = 24) -> st.SearchStrategy[str]:
    """Text that often holds no ASCII digit, "@", "=", "+", "/" or "_" (so a
    pre-check on those says little) yet holds near misses and characters that
    fold into what the rules look for."""
    piece = st.one_of(
        st.sampled_from(NEAR_MISSES),
        st.sampled_from(LOOK_ALIKES),
        st.sampled_from(INVISIBLE),
        st.sampled_from((*"abcdefABCDEF xyzkKsS-.:*`[]()\n", "的", "。", "日本")),
    )
    return st.lists(piece, max_size=max_size).map("".join)


def dreams() -> st.SearchStrategy[dict[str, Any]]:
    """Dream bodies with adversarial text in every redactable field."""
    entry = st.fixed_dictionaries(
        {"text": texts(), "type": st.just("fact")}, optional={"source": texts(8)}
    )
    return st.fixed_dictionaries(
        {
            "author": st.sampled_from(["agent-one", "аda", "ada@example.com"]),
            "title": texts(8),
            "summary": texts(),
            "entries": st.lists(entry, min_size=1, max_size=3),
            "tags": st.lists(texts(4), max_size=2),
        },
        optional={"lineage": st.fixed_dictionaries({"parent": texts(4)})},
    )
