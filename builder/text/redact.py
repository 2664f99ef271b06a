"""The redaction policy: personal data and secrets a dream must not carry.

docs/protocol.md §1: a dream must already be redacted, so the policy applied to it
changes nothing. The signer redacts before signing; the pool runs the same
policy and refuses a dream it would still change (it never alters signed
text). The policy is therefore a pure function of the text, and idempotent:
``redact_text(redact_text(x)[0])[0] == redact_text(x)[0]``, or an author could
never produce a dream the pool accepts.

Each rule replaces what it matches by a marker naming the kind:

* ``[secret]`` — credentials, whose leak is irreversible and not the author's
  alone: PEM private key blocks (``-----BEGIN … PRIVATE KEY-----`` to the
  matching ``-----END …-----``, the whole block; a block cut off before its
  footer up to the end of its base64 body); ``sk-…`` API keys (OpenAI,
  Anthropic: ``sk-proj-…``, ``sk-ant-…``; 20+ characters of key material);
  GitHub tokens ``ghp_/gho_/ghu_/ghs_/ghr_…`` and ``github_pat_…``; AWS access
  key ids (``AKIA`` + 16 upper-case letters or digits); Slack tokens
  (``xoxb-``, ``xoxp-``, …); JWTs (b64url segments joined by dots, the first
  starting ``eyJ``, which is ``{"`` in base64); Stripe secret and restricted
  keys (``sk_live_…``, ``rk_test_…``); Google API keys (``AIza`` + 35);
  GitLab tokens (``glpat-…``, ``gldt-…``, …); AWS secret access keys (40
  base64 characters, after a label such as ``aws_secret_access_key``, or bare
  with a ``/`` or ``+`` and mixed case and digits); HTTP credentials: the value
  after ``Authorization:``, a ``Bearer`` token, a ``Basic`` base64 of
  ``user:password``. Also the *value* of a URL query
  or fragment parameter named token, key, sig, signature, secret, password,
  access_token (and a few synonyms, case-insensitive): the rest of the URL
  stays (``https://x.org/a?token=[secret]&page=2``), so a link keeps its use.
* ``[email]`` — e-mail addresses (a local part in any script, ``josé@``,
  ``王伟@``; an alphabetic top-level label). ``git@host`` (an SSH remote, not
  a person) and names like ``icon@2x.png`` (a file) are not addresses.
* ``[id]`` — PRC resident identity numbers (GB 11643-1999): 17 digits and a
  check character, optionally grouped 6-8-4. Only a number whose check
  character is right (ISO 7064 MOD 11-2, weights 7 9 10 5 8 4 2 1 6 3 7 9 10
  5 8 4 2, remainder 0…10 → ``10X98765432``) and whose digits 7–14 are a real
  date of birth is an id; any other 18-digit number is left alone.
* ``[phone]`` — mainland China mobile numbers (``1[3-9]`` + 9 digits, grouped
  3-4-4 or not, with or without ``+86``/``0086``/``(+86)``); E.164
  international numbers (``+``, then 8–15 digits in groups separated by one
  space, dot or dash, ``(0)``-style trunk groups allowed; or ``00`` in place
  of the ``+``, groups separated by a space or a dash); North American
  numbers without ``+`` (``415-555-0199``, ``415.555.0199``, ``(415) 555-0199``,
  optionally after ``1``); trunk-prefix national numbers (``020-12345678``,
  ``(020) 1234 5678``: 0, an area code, 7–8 digits); and 7–15 digits after a
  phone label (``tel: 4155550199``, ``phone``, ``mobile``, ``cell``, ``fax``,
  ``电话``, ``手机``, ``座机``, ``传真``; the label stays). Any other bare number
  stays: years, counts (``256 512 1024``), dates (``2026-11-16``), versions,
  times, ids and amounts. :data:`CAUGHT` says the same in the words the docs
  and ``sign`` use.
* ``[ip]`` — private and loopback IPv4 addresses (10/8, 172.16/12,
  192.168/16, 127/8), which map a person's machine or network. Public
  addresses are published facts and stay; every octet is ≤ 255 and an address
  inside a longer dotted number (a version string) is not one.
* ``[hex]`` — runs of 32 or more hex digits standing alone: key material,
  session ids, digests. A 16-hex dream id stays.

Rules match at token boundaries written as explicit ASCII look-arounds, never
``\\b``: Python counts CJK characters as word characters, and ``联系我13812345678``
must be redacted. Matching runs on a folded copy of the text in which
full-width digits, letters and ``＠＋－．``, the small ``﹫``, the ideographic
space and no-break spaces, the decimal digits of every other script
(``١٣٨…``, ``𝟏𝟑𝟖…``), the Unicode spaces U+2000–U+200A and U+205F and the
Unicode hyphens and dashes U+2010–U+2015, U+2212 and U+FE63, every
character NFKC or its digit value maps onto one ASCII letter, digit or
``@+-.`` (superscripts ``¹³⁸``, circled ``①`` and dingbat ``➀`` digits,
mathematical ``𝐚``), and Cyrillic, Greek and other letters drawn like ASCII
ones (``а``, ``Α``) are mapped one code point to one code point onto ASCII,
so indexes stay aligned and the replacement is made on the original text:
nothing outside a match is ever altered. An e-mail domain may be
internationalized (``bücher.de``, ``例子.广告``), and so may the local part.

This module judges the text as written. What a reader sees of it (Markdown
rendered, character references decoded, NFKC forms that are not one code
point, such as ``⑬``) is judged by :mod:`builder.text.readerview` with these same
rules; what shows only there is refused, since it cannot be replaced here.

Idempotence by construction: rules run in order on the folded text with the
markers written in; a match never spans a marker's brackets, so markers are
never re-matched. A marker can make a neighbour match that the original
characters did not (``]`` is a boundary where a letter was not), so the
rules run again until a pass finds nothing. The last pass saw exactly the
folded output, which is what a second call would see.

Never log or return the text of a match: it can be a secret. Only the kinds
are reported.
"""

from __future__ import annotations

import base64
import copy
import itertools
import re
import unicodedata
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

# The kinds a Redaction names; the rules apply in the order of _RULES below.
KINDS: tuple[str, ...] = ("email", "phone", "id", "secret", "ip", "hex")


# What the policy catches, kind by kind, in the words README.md,
# docs/contributors.md and `dreampool sign` use (tests hold them to it, and
# check every example here is redacted).
CAUGHT: dict[str, str] = {
    "email": "e-mail addresses (a local part in any script)",
    "phone": (
        "phone numbers: international with + or 00 (+44 20 7946 0958, 0044 20 7946 0958), "
        "China mobile "
        "(138 1234 5678), North American (415-555-0199, 415.555.0199, (415) 555-0199), "
        "with a trunk 0 and area code (020-12345678, (020) 1234 5678), and 7–15 digits "
        "after tel, telephone, phone, mobile, cell, fax, 电话, 手机, 座机 or 传真 "
        "(tel: 4155550199)"
    ),
    "id": "PRC ID numbers (check character and birth date verified)",
    "secret": (
        "private keys, API keys and tokens (OpenAI, Anthropic, GitHub, GitLab, Stripe, "
        "Google, Slack, AWS key ids and secret keys, JWTs), HTTP Authorization credentials "
        "and secret URL parameters (token=, key=, …)"
    ),
    "ip": "private and loopback IPv4 addresses",
    "hex": "hex runs of 32 or more digits",
}
# The forms each is caught in: what a reader sees (builder.text.readerview).
FORMS = (
    "each in any form a reader sees: digits of any script, full-width, superscript or "
    "circled, look-alike letters of other scripts, and the text as its Markdown renders "
    "(character references, backslash escapes, emphasis or code inside a number, link "
    "targets); what shows only once rendered is refused, not replaced"
)
NOT_CAUGHT = (
    "names, street addresses, phone numbers in other layouts (415 555 0199, a bare "
    "4155550199), an AWS secret key with neither / nor + and no label, and text spelled "
    "out to dodge a pattern (ada [at] example [dot] com)"
)


@dataclass(frozen=True, slots=True)
class Redaction:
    """One replaced span: the JSON pointer of its field and its kind (one of KINDS)."""

    pointer: str
    kind: str


# A span of the original text: [start, end) and the kind that replaces it.
_Span = tuple[int, int, str]

# -- folding -----------------------------------------------------------------

# Only the full-width forms that can be part of a match are folded: full-width
# punctuation common in Chinese prose (，：（）…) is a boundary either way, and
# leaving it out keeps clean Chinese text on the fast path. The parentheses a
# phone number may carry are matched in both widths by the phone rules.
# Spaces and dashes a number's groups may be separated by, and digits of any
# script (``[^\D0-9]``: a decimal digit that is not ASCII), are folded too, or
# "١٣٨١٢٣٤٥٦٧٨" and "138\u20131234\u20135678" would pass as clean text.
# The whole full-width ASCII block (U+FF01–FF5E sits 0xFEE0 above ASCII); only
# characters _FOLDABLE finds (the full-width ones in _BASE_FOLDABLE) are ever
# translated.
_FOLD = (
    {c: c - 0xFEE0 for c in range(ord("！"), ord("～") + 1)}
    | {ord("﹫"): ord("@"), 0x3000: ord(" "), 0x00A0: ord(" "), 0x202F: ord(" ")}
    | {c: ord(" ") for c in (*range(0x2000, 0x200B), 0x205F)}
    | {c: ord("-") for c in (*range(0x2010, 0x2016), 0x2212, 0xFE63)}
)
_BASE_FOLDABLE = (
    "０-９Ａ-Ｚａ-ｚ＠＋－．﹫\u3000\u00a0\u202f\u2000-\u200a\u205f\u2010-\u2015\u2212\ufe63"
)
# Letters of other scripts drawn like ASCII ones (Unicode confusables, UTS #39),
# one code point each: "аdа@example.com" and "АKIA…" with Cyrillic letters read
# as the ASCII ones on a page.
_LOOK_ALIKES = {
    **dict(zip("асеһіјӏорԛѕԝхуԁ", "acehijlopqswxyd", strict=True)),  # Cyrillic
    **dict(zip("АВСЕНІЈКМОРЅТХҮԜ", "ABCEHIJKMOPSTXYW", strict=True)),
    **dict(zip("ΑΒΕΖΗΙΚΜΝΟΡΤΥΧαιονρυχ", "ABEZHIKMNOPTYXaiovpux", strict=True)),  # Greek
    **dict(zip("ıɑɡօսհ", "iaganh", strict=True)),  # dotless i, Latin alpha and script g, Armenian
}
# Where NFKC or a digit value (superscripts, circled and dingbat digits,
# mathematical letters, subscripts) maps a character onto one ASCII letter,
# digit or one of @+-. (docs/protocol.md §1: redaction judges what a reader sees).
_NFKC_RANGES: tuple[tuple[int, int], ...] = (
    *((0x80, 0x3400), (0xA640, 0xA6A0), (0xFB00, 0x10000)),
    *((0x1D400, 0x1D800), (0x1F100, 0x1F200)),
)


def _reads_as() -> dict[int, int]:
    out = {ord(k): ord(v) for k, v in _LOOK_ALIKES.items()}
    for lo, hi in _NFKC_RANGES:
        for code in range(lo, hi):
            char = chr(code)
            folded = unicodedata.normalize("NFKC", char)
            if len(folded) == 1 and ord(folded) in _FOLD and _FOLDABLE_BASE.match(folded):
                out.setdefault(code, _FOLD[ord(folded)])
            elif len(folded) == 1 and folded.isascii() and (folded.isalnum() or folded in "@+-."):
                out.setdefault(code, ord(folded))
            elif (
                unicodedata.digit(char, None) is not None
                and unicodedata.decimal(char, None) is None
            ):
                out.setdefault(code, ord("0") + unicodedata.digit(char))
    return {c: v for c, v in out.items() if c != v and c >= 0x80}


def _char_class(codes: list[int]) -> str:
    """A regex character class body of ``codes`` as ranges."""
    parts, start, prev = [], codes[0], codes[0]
    for code in [*codes[1:], -2]:
        if code != prev + 1:
            parts.append(
                re.escape(chr(start)) + ("-" + re.escape(chr(prev)) if prev > start else "")
            )
            start = code
        prev = code
    return "".join(parts)


_FOLDABLE_BASE = re.compile(f"[{_BASE_FOLDABLE}]")
_FOLD |= _reads_as()
_READS_AS = _char_class(sorted(c for c in _FOLD if c >= 0x80 and not 0xFF01 <= c <= 0xFF5E))
_FOLDABLE = re.compile(f"[{_BASE_FOLDABLE}{_READS_AS}]|[^\\D0-9]")


def _fold_char(match: re.Match[str]) -> str:
    char = match.group()
    folded = _FOLD.get(ord(char))
    if folded is not None:
        return chr(folded)
    return str(unicodedata.decimal(char))  # a decimal digit of another script


def _fold(text: str) -> str:
    """``text`` with foldable characters mapped to ASCII; same length, same indexes."""
    if text.isascii() or not _FOLDABLE.search(text):  # a search is 3x cheaper than a sub
        return text
    return _FOLDABLE.sub(_fold_char, text)


# -- rules -------------------------------------------------------------------
#
# Each rule is a function from the (folded, partly redacted) text to the spans
# it would replace. Speed matters (every dream, every build) and most text is
# clean, so each rule first asks a cheap question its matches imply (a
# character, a literal prefix, a "shape"). Patterns start with a literal or a
# character class and check the character before the match with a
# look-behind placed after the first character: a pattern that begins with a
# look-behind loses re's fast scan for its first character and costs ~20x
# more.

_Rule = Callable[[str], Iterator[tuple[int, int]]]

_PEM_BEGIN = re.compile(r"-----BEGIN [A-Z0-9 ]{0,32}PRIVATE KEY(?: BLOCK)?-----")
_PEM_END = re.compile(r"-----END [A-Z0-9 ]{0,32}PRIVATE KEY(?: BLOCK)?-----")
# A block cut off before its footer: the base64 body, lines of 16+ characters
# separated by whitespace or a literal "\n".
_PEM_BODY = re.compile(r"(?:\s|\\n)*+[A-Za-z0-9+/=]{16,}+(?:(?:\s|\\n)++[A-Za-z0-9+/=]{16,}+)*+")


def _pem_blocks(text: str) -> Iterator[tuple[int, int]]:
    if "PRIVATE KEY" not in text:
        return
    at, footers = 0, True
    while begin := _PEM_BEGIN.search(text, at):
        # Once a footer search fails no later one can succeed: stop searching,
        # or many headers without footers would cost quadratic time.
        end = _PEM_END.search(text, begin.end()) if footers else None
        if end is None:
            footers = False
            end = _PEM_BODY.match(text, begin.end())
        if end is None:
            at = begin.end()
        else:
            yield begin.start(), end.end()
            at = end.end()


# (guard, pattern): a substring every match holds, so that clean text costs a
# substring search instead of a regex call.
_TOKENS = (
    ("sk-", re.compile(r"sk-(?<![0-9A-Za-z_\-]sk-)[A-Za-z0-9_\-]{20,}+")),
    ("_", re.compile(r"gh[pousr]_(?<![0-9A-Za-z_]gh[pousr]_)[A-Za-z0-9]{20,}+")),
    ("_", re.compile(r"github_pat_(?<![0-9A-Za-z_]github_pat_)[A-Za-z0-9_]{20,}+")),
    ("AKIA", re.compile(r"AKIA(?<![0-9A-Za-z]AKIA)[0-9A-Z]{16}(?![0-9A-Za-z])")),
    # Stripe secret and restricted keys: sk_live_…, rk_test_…
    ("k_", re.compile(r"(?<![0-9A-Za-z_])[sr]k_(?:live|test)_[0-9A-Za-z]{16,}+")),
    # Google API keys: AIza and 35 characters.
    ("AIza", re.compile(r"AIza(?<![0-9A-Za-z_\-]AIza)[0-9A-Za-z_\-]{35}(?![0-9A-Za-z_\-])")),
    # GitLab tokens: personal, deploy, runner, trigger, … (glpat-…)
    (
        "gl",
        re.compile(
            r"(?<![0-9A-Za-z_\-])gl(?:pat|dt|rt|ptt|cbt|soat|ft|imt|oas)-[0-9A-Za-z_\-]{20,}+"
        ),
    ),
    ("xox", re.compile(r"xox[abeprs]-(?<![0-9A-Za-z]xox[abeprs]-)[A-Za-z0-9\-]{10,}+")),
    (
        "eyJ",
        re.compile(
            r"eyJ(?<![0-9A-Za-z_\-]eyJ)[A-Za-z0-9_\-]{5,}+\.[A-Za-z0-9_\-]{2,}+"
            r"(?:\.[A-Za-z0-9_\-]*+)?"  # an unsigned or cut-off token still leaks its claims
        ),
    ),
)


def _tokens(text: str) -> Iterator[tuple[int, int]]:
    for guard, pattern in _TOKENS:
        if guard in text:
            yield from (m.span() for m in pattern.finditer(text))


# HTTP credentials (RFC 9110 §11.6.2): the value after "Authorization:", with
# or without its scheme; a bare "Bearer <token>"; a bare "Basic <base64>" whose
# base64 holds "user:password" (RFC 7617 §2). Only the value is replaced: the
# header name and the scheme stay.
_AUTH_HEADER = re.compile(
    r"(?i:authorization)[\"']?\s*[:=]\s*[\"']?(?:(?P<scheme>(?i:basic|bearer|token))\s+)?"
    r"(?P<value>[A-Za-z0-9\-_~+/]++(?:\.[A-Za-z0-9\-_~+/]++)*+=*+)"
)
_BEARER = re.compile(
    r"(?<![0-9A-Za-z])(?i:bearer)\s+(?P<value>[A-Za-z0-9\-_~+/]++(?:\.[A-Za-z0-9\-_~+/]++)*+=*+)"
)
_BASIC = re.compile(r"(?<![0-9A-Za-z])(?i:basic)\s+(?P<value>[A-Za-z0-9+/]{8,}+={0,2}+)(?![=])")


def _token_like(value: str) -> bool:
    """Long enough, with a letter and a digit: not a word ("Bearer tokens …")."""
    return len(value) >= 16 and any(c.isdigit() for c in value) and any(c.isalpha() for c in value)


def _is_basic_credential(value: str) -> bool:
    try:
        decoded = base64.b64decode(value + "=" * (-len(value) % 4), validate=True).decode()
    except (ValueError, UnicodeDecodeError):
        return False
    return ":" in decoded and decoded.isprintable()


# The guards of the case-blind rules, as case-blind as the rules' own (?i)
# (Python's simple case folding: "Authorİzation", "BASİC", "SeCrEt" and a
# long s match; str.lower() does not fold İ to i, so a guard on it skipped them).
_AUTHORIZATION = re.compile("authorization", re.IGNORECASE)
_BEARER_WORD = re.compile("bearer", re.IGNORECASE)
_BASIC_WORD = re.compile("basic", re.IGNORECASE)
_SECRET_WORD = re.compile("ecret", re.IGNORECASE)


def _auth_credentials(text: str) -> Iterator[tuple[int, int]]:
    if _AUTHORIZATION.search(text):
        for m in _AUTH_HEADER.finditer(text):
            value = m.group("value")
            if (len(value) >= 8 and m.group("scheme")) or _token_like(value):
                yield m.span("value")
    if _BEARER_WORD.search(text):
        yield from (m.span("value") for m in _BEARER.finditer(text) if _token_like(m["value"]))
    if _BASIC_WORD.search(text):
        for m in _BASIC.finditer(text):
            if _is_basic_credential(m.group("value")):
                yield m.span("value")


# AWS secret access keys: 40 characters of base64. After a label
# (aws_secret_access_key, SecretAccessKey, "secret access key") any 40; bare,
# only with a / or + and upper case, lower case and a digit, and not inside a
# path or a longer word: a 40-character identifier or a path is not a key.
_AWS_LABELLED = re.compile(
    r"(?i:(?:aws[ _\-]?)?secret[ _\-]?(?:access[ _\-]?)?key)[\"']?\s*[:=]?\s*[\"']?"
    r"(?P<value>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])"
)
_AWS_BARE = re.compile(r"(?<![A-Za-z0-9/+=.\-_\\])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])")


def _aws_secrets(text: str) -> Iterator[tuple[int, int]]:
    if len(text) < 40:
        return
    if _SECRET_WORD.search(text):
        yield from (m.span("value") for m in _AWS_LABELLED.finditer(text))
    if "/" in text or "+" in text:
        for m in _AWS_BARE.finditer(text):
            key = m.group()
            if (
                key.count("/") <= 2
                and any(c.isupper() for c in key)
                and any(c.islower() for c in key)
                and any(c.isdigit() for c in key)
            ):
                yield m.span()


_SECRET_PARAMS = (
    *("token", "key", "sig", "signature", "secret", "password", "access_token"),
    *("api_key", "apikey", "client_secret", "id_token", "passwd", "refresh_token"),
    *("x-amz-security-token", "x-amz-signature"),  # AWS pre-signed URLs
)
# A parameter starts a query (?), follows another (& or ;, also as in &amp;) or
# starts a fragment (#access_token=… in OAuth redirects).
_PARAM_ENDINGS = tuple(sep + name for sep in "?&;#" for name in _SECRET_PARAMS)
_PARAM_LOOKBACK = max(map(len, _PARAM_ENDINGS))
# The value, without a trailing full stop: "see ?token=abc." ends a sentence.
_PARAM_VALUE = re.compile(r"[A-Za-z0-9\-_~%+/=@.]*[A-Za-z0-9\-_~%+/=@]")


def _url_secrets(text: str) -> Iterator[tuple[int, int]]:
    # From each "=": a regex for [?&;#]name= would test every character.
    eq = text.find("=")
    while eq != -1:
        if text[max(0, eq - _PARAM_LOOKBACK) : eq].lower().endswith(_PARAM_ENDINGS) and (
            value := _PARAM_VALUE.match(text, eq + 1)
        ):
            yield value.span()
            eq = value.end() - 1
        eq = text.find("=", eq + 1)


# Found from each "@": the local part is the run of local-part characters
# before it (a regex would try every word start), the domain is matched after.
# A local part may be written in any script (RFC 6531 §3.3: josé@, 王伟@); where
# text in a script written without spaces (Chinese, Japanese, Korean) runs
# straight into an ASCII local part ("联系邮箱bob@…"), the address starts at
# the ASCII.
_LOCAL_PART = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._%+-")


def _is_local(char: str) -> bool:
    if char in _LOCAL_PART:
        return True
    return not char.isascii() and (char.isalnum() or unicodedata.category(char)[0] == "M")


def _is_unspaced_script(char: str) -> bool:
    code = ord(char)
    return (
        0x3040 <= code <= 0x30FF  # kana
        or 0x3400 <= code <= 0x9FFF  # CJK ideographs
        or 0xAC00 <= code <= 0xD7AF  # Hangul syllables
        or 0xF900 <= code <= 0xFAFF
        or 0x20000 <= code <= 0x3FFFF
    )


def _local_start(text: str, at: int, done: int) -> int | None:
    """Where the local part before the "@" at ``at`` starts, or None if it would
    reach back into the address that ended at ``done``."""
    start = at
    while start > done and _is_local(text[start - 1]):
        # "联系邮箱bob@": the ASCII local part ends where the unspaced script starts.
        if start < at and _is_unspaced_script(text[start - 1]) != _is_unspaced_script(text[start]):
            return start
        start -= 1
    if start == done and start > 0 and _is_local(text[start - 1]):
        return None
    return start


# Labels are letters and digits of any script ([^\W_]) and hyphens, so an
# internationalized or look-alike domain is an address too. An ASCII top-level
# label ends where ASCII letters end ("ada@example.com联系我" stops at "com").
_DOMAIN = re.compile(
    r"(?:[^\W_](?:(?:[^\W_]|-){0,61}[^\W_])?\.)+"
    r"(?P<tld>(?:[A-Za-z]{2,63}|xn--[A-Za-z0-9]{1,59})(?![A-Za-z])"
    r"|[^\W\d_A-Za-z]{2,63})"
)
# A package at a version (react@19.0.0-rc.canary, tools@v0.1.0-beta.rc): a
# semver pre-release's last identifier reads as a top-level domain, but no
# domain starts with three numeric labels.
_VERSION = re.compile(r"[vV]?[0-9]+\.[0-9]+\.[0-9]+(?![0-9])")
# Image scale suffixes (icon@2x.png) look like addresses; none is a top-level domain.
_FILE_TLDS = frozenset({"png", "jpg", "jpeg", "gif", "svg", "webp", "ico", "bmp", "tif", "tiff"})


def _emails(text: str) -> Iterator[tuple[int, int]]:
    done = 0  # end of the last address: a local part never reaches back into it
    at = text.find("@")
    while at != -1:
        start = _local_start(text, at, done)
        if (
            start is not None
            and start < at
            and text[start:at] != "git"  # git@host:owner/repo is an SSH remote
            and (domain := _DOMAIN.match(text, at + 1)) is not None
            and domain["tld"].lower() not in _FILE_TLDS
            and not _VERSION.match(text, at + 1)
        ):
            yield start, domain.end()
            done = domain.end()
        at = text.find("@", max(at + 1, done))


# Shapes: the UTF-8 bytes of the text with each byte mapped to its class, so
# that "is there a run of N digits / hex digits" is a bytes search (memmem)
# instead of a regex attempt at every digit or letter a-f.
_DIGIT_SHAPE = bytes(0x64 if chr(b) in "0123456789Xx" else 0x20 for b in range(256))
_HEX_SHAPE = bytes(0x68 if chr(b) in "0123456789abcdefABCDEF" else 0x20 for b in range(256))


def _has_run(text: str, shape: bytes, run: bytes, skip: bytes = b"") -> bool:
    """Whether ``text``, its bytes mapped by ``shape`` and ``skip`` bytes deleted, holds ``run``."""
    # Folded text is ASCII where it matters: other bytes map to a space.
    return run in text.encode("utf-8", "surrogatepass").translate(shape, skip)


_PRC_ID = re.compile(
    r"[1-9](?<![0-9A-Za-z][1-9])[0-9]{5}([ \-]?)[0-9]{8}\1[0-9]{3}[0-9Xx](?![0-9A-Za-z])"
)
_ID_WEIGHTS = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
_ID_CHECK = "10X98765432"


def _id_check_char(first17: str) -> str:
    """The GB 11643-1999 check character of 17 ASCII digits (ISO 7064 MOD 11-2)."""
    total = sum(int(d) * w for d, w in zip(first17, _ID_WEIGHTS, strict=True))
    return _ID_CHECK[total % 11]


def _is_birth_date(yyyymmdd: str) -> bool:
    year, month, day = int(yyyymmdd[:4]), int(yyyymmdd[4:6]), int(yyyymmdd[6:])
    if not (1800 <= year <= 2099 and 1 <= month <= 12 and day >= 1):
        return False
    if month == 2:
        leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
        return day <= (29 if leap else 28)
    return day <= (30 if month in (4, 6, 9, 11) else 31)


def _prc_ids(text: str) -> Iterator[tuple[int, int]]:
    # 17 digits and a check character, separators aside: a date or a dream id
    # never has that many.
    if not _has_run(text, _DIGIT_SHAPE, b"d" * 18, skip=b" -"):
        return
    for m in _PRC_ID.finditer(text):
        digits = m.group().replace(" ", "").replace("-", "")
        if digits[17].upper() == _id_check_char(digits[:17]) and _is_birth_date(digits[6:14]):
            yield m.span()


# After the leading 1, which each pattern matches itself.
_MOBILE_REST = r"[3-9][0-9][ .\-]?[0-9]{4}[ .\-]?[0-9]{4}(?![0-9A-Za-z]|[.\-][0-9])"
# A "+" may follow a letter ("Tel+86…"), not a digit ("1.0.0+2013…" is semver).
_CN_MOBILE_PREFIXED = re.compile(
    r"(?:(?<![0-9+])\+86[ .\-]?|(?<![0-9A-Za-z])0086[ .\-]?|[(（] ?(?:\+|00)86 ?[)）] ?)1"
    + _MOBILE_REST
)
# Not after a digit and a dot or dash: 1.138.1234.5678 is no phone number.
_CN_MOBILE = re.compile(r"1(?<![0-9A-Za-z+]1)(?<![0-9][.\-]1)" + _MOBILE_REST)


def _cn_mobiles(text: str) -> Iterator[tuple[int, int]]:
    if "86" in text:
        yield from (m.span() for m in _CN_MOBILE_PREFIXED.finditer(text))
    yield from (m.span() for m in _CN_MOBILE.finditer(text))


_E164 = re.compile(
    r"\+(?<![0-9+]\+)[1-9][0-9]*+"
    r"(?:(?:[ .\-]|\s?[(（][0-9]{1,4}[)）]\s?)[0-9]++)*+(?![0-9A-Za-z])"
)
_DIGIT_RUN = re.compile("[0-9]+")


def _e164(text: str) -> Iterator[tuple[int, int]]:
    if "+" not in text:
        return
    for m in _E164.finditer(text):
        # E.164 §6.1: at most 15 digits. Longer runs of groups end the number at
        # the last group that fits, so "+44 20 7946 0958 2024" keeps no more
        # digits than a number can have.
        count, end = 0, 0
        for run in _DIGIT_RUN.finditer(m.group()):
            if count + len(run.group()) > 15:
                break
            count, end = count + len(run.group()), run.end()
        if count >= 8:
            yield m.start(), m.start() + end


# The international prefix 00 in place of "+" (ITU-T E.164 §2, E.123 §2.5):
# 0044 20 7946 0958, 0049-30-1234567. Groups are separated by a space or a
# dash, never a dot (00.1.2 is a version); 8-15 digits after the 00.
_INTL_00 = re.compile(
    r"00(?<![0-9A-Za-z+.\-]00)[1-9][0-9]*+(?:[ \-][0-9]++)*+(?![0-9A-Za-z]|[.\-][0-9])"
)


def _intl_00(text: str) -> Iterator[tuple[int, int]]:
    if "00" not in text:
        return
    for m in _INTL_00.finditer(text):
        count, end = 0, 0
        for run in _DIGIT_RUN.finditer(m.group(), 2):
            if count + len(run.group()) > 15:
                break
            count, end = count + len(run.group()), run.end()
        if count >= 8:
            yield m.start(), m.start() + end


# National formats, written without a country code. Only layouts a phone
# number alone takes, so dates (2026-11-16), versions (1.2.3), times, counts
# (256 512 1024) and ids stay: a bare run of digits is a phone number only
# after a phone label (below).
#
# North American (NANP): area code and exchange start 2-9; 415-555-0199 and
# 415.555.0199 (one separator, used twice), (415) 555-0199 and (415)555-0199,
# optionally after the country code 1 ("1-415-555-0199", "1 (415) 555-0199").
_NANP = re.compile(
    r"(?:1[ .\-]?)?(?:[(（][2-9][0-9]{2}[)）] ?|[2-9][0-9]{2}(?P<sep>[.\-]))"
    r"[2-9][0-9]{2}(?(sep)(?P=sep)|[ .\-]?)[0-9]{4}(?![0-9A-Za-z]|[.\-][0-9])"
)
# Trunk prefix 0 and an area code of 2-4 more digits, then a dash or in
# parentheses, then a subscriber number of 7-8 digits, whole or split once:
# 020-12345678, 0755-8888 9999, (020) 1234 5678, (0161) 496 0000.
_TRUNK = re.compile(
    r"(?:[(（]0[1-9][0-9]{1,3}[)）] ?|0[1-9][0-9]{1,3}-)"
    r"[1-9][0-9]{2,3}[ \-]?[0-9]{4}(?![0-9A-Za-z]|[.\-][0-9])"
)
# A phone label, then 7-15 digits in groups separated by a space, dot or dash:
# "tel: 4155550199", "Phone no. 555 0199 12", "电话：4155550199". Only the
# number is replaced; the label stays.
_LABELLED = re.compile(
    r"(?:(?i:tel(?:ephone)?|phone|mobile|cell|fax)(?![A-Za-z])\.?"
    r"(?: ?(?i:no\.?|number|#))?|电话|手机|座机|传真)(?:号码|号)?"
    r" *[:：]? *(?P<number>[0-9]++(?:[ .\-]?+[0-9]++)*+)(?![0-9A-Za-z])"
)


def _starts_clear(text: str, start: int) -> bool:
    """Whether a number may start at ``start``: not inside a word, a longer
    number (1.415-…, 12-415-…) or after a "+" (the E.164 rule's)."""
    if start == 0:
        return True
    before = text[start - 1]
    if before.isascii() and (before.isalnum() or before == "+"):
        return False
    return not (before in ".-" and start >= 2 and text[start - 2].isdigit())


# Every national match holds a digit, a separator and three digits ("5-555",
# "5) 555", "0-1234"): a scan that starts with a character class is fast, and
# dates (2026-11-16) and versions fail it.
_NATIONAL_SHAPE = re.compile(r"[0-9][.\-)）] ?[0-9]{3}")


def _national(text: str) -> Iterator[tuple[int, int]]:
    if not _NATIONAL_SHAPE.search(text):
        return
    for pattern in (_NANP, _TRUNK):
        at = 0
        while m := pattern.search(text, at):
            # A refused start may hide a number that starts inside it: go on
            # from the next character, not from the end of the refused match.
            if _starts_clear(text, m.start()):
                yield m.span()
                at = m.end()
            else:
                at = m.start() + 1


def _years(number: str) -> bool:
    """Whether ``number`` is a list of years ("mobile 2023 2024 releases"): two or
    more groups, each a year from 1950 to 2099, each later than the one before.
    Kept narrow: an eight-digit number split 4+4 is a phone in many places."""
    groups = number.replace(".", " ").replace("-", " ").split()
    if len(groups) < 2 or any(len(g) != 4 or not "1950" <= g <= "2099" for g in groups):
        return False
    return all(a < b for a, b in itertools.pairwise(groups))


def _labelled(text: str) -> Iterator[tuple[int, int]]:
    # Seven digits with nothing but separators between them come first.
    if not _has_run(text, _DIGIT_SHAPE, b"d" * 7, skip=b" .-"):
        return
    for m in _LABELLED.finditer(text):
        start = m.start()
        if start and text[start - 1].isascii() and text[start - 1].isalpha():
            continue  # "hotel 12345678", "Intel 80486"
        number = m.start("number")
        # At most 15 digits (E.164 §6.1), as for _e164: the number ends at the
        # last group that fits.
        count, end = 0, number
        for run in _DIGIT_RUN.finditer(m.group("number")):
            if count + len(run.group()) > 15:
                break
            count, end = count + len(run.group()), number + run.end()
        if count >= 7 and not _years(text[number:end]):
            yield number, end


# The first octet of every private or loopback block, as a literal prefix.
_IPV4 = re.compile(
    r"(?:10(?<![0-9A-Za-z.]10)|127(?<![0-9A-Za-z.]127)|172(?<![0-9A-Za-z.]172)"
    r"|192(?<![0-9A-Za-z.]192))\.[0-9]{1,3}+\.[0-9]{1,3}+\.[0-9]{1,3}+(?![0-9A-Za-z]|\.[0-9])"
)


def _is_private_ipv4(a: int, b: int) -> bool:
    # RFC 1918 §3 private blocks and RFC 1122 §3.2.1.3 loopback.
    return a in (10, 127) or (a == 172 and 16 <= b <= 31) or (a == 192 and b == 168)


def _private_ipv4s(text: str) -> Iterator[tuple[int, int]]:
    for m in _IPV4.finditer(text):
        octets = [int(o) for o in m.group().split(".")]
        if max(octets) <= 255 and _is_private_ipv4(octets[0], octets[1]):
            yield m.span()


_HEX = re.compile(r"[0-9a-fA-F](?<![0-9A-Za-z].)[0-9a-fA-F]{31,}+(?![0-9A-Za-z])")


def _hex_runs(text: str) -> Iterator[tuple[int, int]]:
    if len(text) >= 32 and _has_run(text, _HEX_SHAPE, b"h" * 32):
        yield from (m.span() for m in _HEX.finditer(text))


# Order matters only where matches would overlap: the most specific first
# (a PEM body holds hex runs, a URL value can hold an address), and a later
# rule sees the markers of earlier ones.
_RULES: tuple[tuple[str, _Rule], ...] = (
    ("secret", _pem_blocks),
    ("secret", _tokens),
    ("secret", _auth_credentials),
    ("secret", _aws_secrets),
    ("secret", _url_secrets),
    ("email", _emails),
    ("id", _prc_ids),
    ("phone", _cn_mobiles),
    ("phone", _e164),
    ("phone", _intl_00),
    ("phone", _national),
    ("phone", _labelled),
    ("ip", _private_ipv4s),
    ("hex", _hex_runs),
)

# -- spans -------------------------------------------------------------------


def _render(text: str, spans: list[_Span]) -> str:
    parts: list[str] = []
    at = 0
    for start, end, kind in spans:
        parts += (text[at:start], "[", kind, "]")
        at = end
    parts.append(text[at:])
    return "".join(parts)


class _Layout:
    """Where the markers of a rendered text sit, to map its indexes back to the original."""

    __slots__ = ("_ends", "_spans", "_starts")

    def __init__(self, spans: list[_Span]) -> None:
        self._spans = spans
        self._starts: list[int] = []
        self._ends: list[int] = []
        shift = 0  # rendered index minus original index, after the spans so far
        for start, end, kind in spans:
            self._starts.append(start + shift)
            shift += len(kind) + 2 - (end - start)
            self._ends.append(end + shift)

    def original(self, start: int, end: int) -> tuple[int, int]:
        """Original span of rendered [start, end); a marker it cuts counts whole."""
        # For start, the last marker starting at or before it; for end, before it.
        return (
            self._back(start, bisect_right(self._starts, start) - 1, is_end=False),
            self._back(end, bisect_left(self._starts, end) - 1, is_end=True),
        )

    def _back(self, at: int, i: int, *, is_end: bool) -> int:
        if i < 0:
            return at
        start, end, _ = self._spans[i]
        if at < self._ends[i]:  # inside marker i, which goes whole
            return end if is_end else start
        return at - self._ends[i] + end


def _merge(spans: list[_Span], new: list[_Span]) -> list[_Span] | None:
    """``spans`` with ``new`` added, swallowing spans they cover; None if nothing changes.

    Requires both lists disjoint within themselves, and no new span to cut an
    old one (``_Layout.original`` widens a cut marker to the whole of it).
    """
    merged: list[_Span] = []
    # By start, the longer first; sort is stable, so an old span beats an equal new one.
    for span in sorted(spans + new, key=lambda s: (s[0], -s[1])):
        if merged and span[1] <= merged[-1][1]:
            continue
        merged.append(span)
    return None if merged == spans else merged


# -- a fast path ---------------------------------------------------------------
#
# Most text holds nothing for any rule, and asking each rule (14 generators,
# three of them encoding the text for _has_run) cost ~25 µs a field. A rule
# can find something only where its own first question says yes, so where
# every one says no, nothing is found. _may_match asks those same questions,
# each the rule's own guard or a weaker one (a regex a rule needs matches
# only where its literal characters are), at once:
#
#   any ASCII digit           _prc_ids, _cn_mobiles, _intl_00, _national,
#                             _labelled, _private_ipv4s (every pattern needs one)
#   @                         _emails (from each "@")
#   =                         _url_secrets (from each "=")
#   +                         _e164; _aws_secrets' bare key ("/" or "+")
#   /                         _aws_secrets' bare key
#   _                         _tokens: gh?_, github_pat_, sk_/rk_ (guards "_", "k_")
#   PRIVATE KEY               _pem_blocks (its guard)
#   sk- AKIA AIza gl xox eyJ  _tokens (the other guards, verbatim)
#   ecret (any case)          _aws_secrets' labelled key (its guard)
#   authorization bearer basic, any case (their guards: one case-blind search)
#                             _auth_credentials (its guards, verbatim)
#   32 hex digits in a row    _hex_runs (its guard, verbatim: a run of a-f alone)
#
# tests/test_fastpaths.py holds _find_spans to _spans_of alone on adversarial
# text, and every rule to finding nothing wherever _may_match says no.

_NEEDS_CHAR = re.compile(r"[0-9@=+/_]")
_NEEDS_WORD = ("PRIVATE KEY", "sk-", "AKIA", "AIza", "gl", "xox", "eyJ")
# The case-blind guards of _auth_credentials and _aws_secrets, in one pass.
_NEEDS_WORD_ANY_CASE = re.compile("authorization|bearer|basic|ecret", re.IGNORECASE)


def _may_match(folded: str) -> bool:
    """False only where no rule can find anything in ``folded`` (see the table above)."""
    if _NEEDS_CHAR.search(folded):
        return True
    for word in _NEEDS_WORD:  # a loop, not any(): a generator costs more than the tests
        if word in folded:
            return True
    if _NEEDS_WORD_ANY_CASE.search(folded):
        return True
    return len(folded) >= 32 and _has_run(folded, _HEX_SHAPE, b"h" * 32)


def _find_spans(text: str) -> list[_Span]:
    """The spans the policy replaces in ``text``, sorted and disjoint."""
    folded = _fold(text)
    if not _may_match(folded):
        return []
    return _spans_of(folded)


def _spans_of(folded: str) -> list[_Span]:
    """The spans the rules replace in the folded text ``folded``, every rule asked."""
    spans: list[_Span] = []
    current = folded
    # Terminates: every change covers an original character not covered
    # before or merges spans, and both are bounded by len(folded).
    changed = True
    while changed:
        changed = False
        for kind, rule in _RULES:
            found = list(rule(current))
            if not found:
                continue
            layout = _Layout(spans)
            merged = _merge(spans, [(*layout.original(s, e), kind) for s, e in found])
            if merged is not None:
                spans, changed = merged, True
                current = _render(folded, spans)
    return spans


def spans(text: str) -> list[tuple[int, int, str]]:
    """(start, end, kind) of every span the policy replaces in ``text``, sorted
    and disjoint (never their text)."""
    return _find_spans(text)


def redact_text(text: str) -> tuple[str, tuple[str, ...]]:
    """Redacted text and the kinds replaced, in order of appearance (a kind once per occurrence)."""
    spans = _find_spans(text)
    if not spans:
        return text, ()
    return _render(text, spans), tuple(kind for _, _, kind in spans)


# -- dreams ------------------------------------------------------------------


def _copy(value: Any) -> Any:
    # JSON values: containers rebuilt, immutable scalars shared.
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    if value is None or isinstance(value, str | int | float):
        return value
    return copy.deepcopy(value)


def text_fields(dream: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """(JSON pointer, text) of every redactable string field, in the order
    :func:`redact_dream` lists its redactions."""
    for key in ("author", "title", "summary"):
        if isinstance(dream.get(key), str):
            yield f"/{key}", dream[key]
    entries = dream.get("entries")
    if isinstance(entries, list):
        for i, entry in enumerate(entries):
            if isinstance(entry, dict):
                for key in ("text", "source"):
                    if isinstance(entry.get(key), str):
                        yield f"/entries/{i}/{key}", entry[key]
    tags = dream.get("tags")
    if isinstance(tags, list):
        for i, tag in enumerate(tags):
            if isinstance(tag, str):
                yield f"/tags/{i}", tag
    lineage = dream.get("lineage")
    if isinstance(lineage, dict) and isinstance(lineage.get("parent"), str):
        yield "/lineage/parent", lineage["parent"]


def changes(dream: Mapping[str, Any]) -> tuple[Redaction, ...]:
    """What :func:`redact_dream` would list for ``dream``, in the same order,
    without making the redacted copy: all the pool needs to refuse a dream
    (copying it and rendering the redacted text was a tenth of the review)."""
    return tuple(
        Redaction(pointer, kind)
        for pointer, text in text_fields(dream)
        for _, _, kind in _find_spans(text)
    )


def redact_dream(dream: Mapping[str, Any]) -> tuple[dict[str, Any], tuple[Redaction, ...]]:
    """A deep copy of the dream with every redactable field redacted, and what changed.

    Redactable fields: /author, /title, /summary, /entries/N/text,
    /entries/N/source, /tags/N, /lineage/parent. Every other field is copied
    unchanged. A field of the wrong type (title an int, entries not a list) is
    left as it is: schema validation is done elsewhere. Redactions are listed
    field by field in that order, within a field in order of appearance.
    """
    out: dict[str, Any] = {k: _copy(v) for k, v in dream.items()}
    found: list[Redaction] = []

    def field(container: dict[str, Any] | list[Any], key: Any, pointer: str) -> None:
        value = container[key]
        if isinstance(value, str):
            container[key], kinds = redact_text(value)
            found.extend(Redaction(pointer, kind) for kind in kinds)

    for key in ("author", "title", "summary"):
        if key in out:
            field(out, key, f"/{key}")
    entries = out.get("entries")
    if isinstance(entries, list):
        for i, entry in enumerate(entries):
            if isinstance(entry, dict):
                for key in ("text", "source"):
                    if key in entry:
                        field(entry, key, f"/entries/{i}/{key}")
    tags = out.get("tags")
    if isinstance(tags, list):
        for i in range(len(tags)):
            field(tags, i, f"/tags/{i}")
    lineage = out.get("lineage")
    if isinstance(lineage, dict) and "parent" in lineage:
        field(lineage, "parent", "/lineage/parent")
    return out, tuple(found)
