"""Red-team review of the admission fast paths (THREATS T83).

The redaction review was made faster (commits 8a88e89..a64ff34): a pre-check
that skips every rule (``redact._may_match``), each reader view judged once,
the summary's rendering kept (``readerview._rendering``), combining marks
dropped through a learned table (``readerview._learn``), ``redact.changes``
instead of ``redact_dream`` in ``check_dream``, the lone-surrogate walk
skipped without a surrogate escape (``strictjson``), Ed25519 key objects kept
(``ed25519._public``) and ``mdrender.plain_text`` kept.

The reference is the code before them: commit 3c5ed77's ``redact``,
``readerview``, ``mdrender``, ``strictjson`` and ``ed25519``, loaded here
from git as they were. Each test below offers the new code the strongest
inputs this review found and requires the verdict the old code gives (the
new must refuse all the old refused). None of them found a difference: these
tests pin the attacks that held.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import threading
import types
import unicodedata
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from builder import errors
from builder.content import pool
from builder.errors import InputError, SignatureError
from builder.formats import dream as dreamfmt
from builder.formats import ed25519, strictjson
from builder.text import mdrender, readerview, redact
from tests import adversarial
from tests.conftest import draft

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = "3c5ed77"  # the commit before the fast paths


# -- the reference: the modules as they were before the fast paths -------------


def _source(name: str) -> str:
    try:
        return subprocess.run(
            ["git", "-C", str(ROOT), "show", f"{REFERENCE}:builder/{name}.py"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError) as exc:  # pragma: no cover
        pytest.fail(f"T83 reference {REFERENCE}:builder/{name}.py unavailable: {exc}")


def _load(name: str, replace: dict[str, str], inject: dict[str, Any]) -> types.ModuleType:
    text = _source(name)
    for old, new in replace.items():
        assert old in text, old
        text = text.replace(old, new)
    module = types.ModuleType(f"_t83_old_{name}")
    module.__dict__.update(inject)
    sys.modules[module.__name__] = module  # dataclasses look their module up
    exec(compile(text, f"{REFERENCE}:builder/{name}.py", "exec"), module.__dict__)
    return module


OLD_REDACT = _load("redact", {}, {})
OLD_MDRENDER = _load("mdrender", {}, {})
OLD_READERVIEW = _load(
    "readerview",
    {
        "from builder import mdrender, redact\n": "",
        "from builder.errors import Problem\n": "",
        "from builder.redact import Redaction\n": "",
    },
    {
        "mdrender": OLD_MDRENDER,
        "redact": OLD_REDACT,
        "Problem": errors.Problem,
        "Redaction": OLD_REDACT.Redaction,
    },
)
OLD_STRICTJSON = _load("strictjson", {}, {})
OLD_ED25519 = _load(
    "ed25519",
    {"from builder.errors import SignatureError\n": ""},
    {"SignatureError": SignatureError},
)


def old_verdict(body: dict[str, Any]) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """What check_dream refused at 3c5ed77: the source review, then the reader view."""
    source = [(c.pointer, c.kind) for c in OLD_REDACT.redact_dream(body)[1]]
    shown = [(f.pointer, f.kind) for f in OLD_READERVIEW.findings(body)]
    return source, shown


def new_verdict(body: dict[str, Any]) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """What check_dream refuses now (builder.content.pool.check_dream)."""
    source = [(c.pointer, c.kind) for c in redact.changes(body)]
    shown = [(f.pointer, f.kind) for f in readerview.findings(body)]
    return source, shown


def refuses_at_least(
    new: tuple[list[tuple[str, str]], list[tuple[str, str]]],
    old: tuple[list[tuple[str, str]], list[tuple[str, str]]],
) -> bool:
    """Every (field, kind) the old code refused, in the source or once
    rendered, is refused now in one or the other (the review's fixes catch
    some in the source that the old code caught only rendered)."""
    return set(old[0]) | set(old[1]) <= set(new[0]) | set(new[1])


def _in(field: str, text: str) -> dict[str, Any]:
    body: dict[str, Any] = {
        "author": "agent",
        "title": "t",
        "summary": "s",
        "entries": [{"text": "e", "type": "fact"}],
        "tags": ["x"],
    }
    if field == "entry":
        body["entries"][0]["text"] = text
    elif field == "source":
        body["entries"][0]["source"] = text
    elif field == "tag":
        body["tags"] = [text]
    else:
        body[field] = text
    return body


FIELDS = ("summary", "title", "entry", "source", "tag")

# The strongest inputs tried, each refused by the old code in every field:
# case folds the rules' guards and IGNORECASE see differently, look-alikes,
# references, escapes, emphasis and code inside a token, link targets and
# titles, percent-encoding, marks, and forms of the pre-check's words.
ATTACKS = {
    "dotted capital I in Authorization": "Authorİzation: Bearer abcdefghij0123456789",
    "dotted capital I in BASIC": "BASİC dXNlcjpwYXNzd29yZA==",
    "long s in sk-ant": "ſk-ant-api03-" + "a1" * 12,
    "Kelvin sign in AKIA": "A\u212aIAABCDEFGHIJ123456",
    "full-width BEARER": "ＢＥＡＲＥＲ abcdefghij0123456789",
    "full-width AUTHORIZATION": "ＡＵＴＨＯＲＩＺＡＴＩＯＮ: abcdefghij0123456789",
    "full-width PRIVATE KEY": "-----BEGIN ＰＲＩＶＡＴＥ ＫＥＹ-----\nMIIEvQIBADANBgkqhkiG9w0BAQEF",
    "sk with a minus sign": "sk\u2212" + "a1" * 12,
    "sk with a referenced dash": "sk&#45;" + "a1" * 12,
    "referenced digits": "&#x31;38&#x31;2345678",
    "referenced full-width digits": "&#xff11;&#xff13;&#xff18;12345678",
    "referenced no-break spaces": "138&nbsp;1234&nbsp;5678",
    "reference after CJK": "联系我&#49;3812345678",
    "emphasis inside a number": "138**1234**5678",
    "keycaps": "1&#x20e3;3&#x20e3;812345678",
    "circled digits": "①③812345678",
    "parenthesized digits": "⑴⑶⑻12345678",
    "escaped at sign": "ada\\@example.com",
    "code spans around an address": "`ada`@`example.com`",
    "percent-encoded mailto": "[x](mailto:ada%40example.com)",
    "percent-encoded autolink": "<mailto:ada%40example.com>",
    "referenced at sign in a link title": '[a](https://x.org "ada&#64;example.com")',
    "referenced at sign in an HTML block": "<div>\nada&#64;example.com\n</div>",
    "private address in a link target": "[home](http://192.168.1.20/)",
    "percent-encoded address in a link": "[home](http://%31%39%32.168.1.20/)",
    "percent-encoded secret parameter": "[x](https://x.org/?to%6Ben=abcdef)",
    "accents inside a hex run": "dead\u0301beef" * 4,
    # No digit, "@", "=", "+", "/" or "_": only the pre-check's words let these
    # reach the rules.
    "bare Basic credential": "Basic dXNlcjpwYXNz",
    "bare Basic, dotted capital I": "BASİC dXNlcjpwYXNz",
    "bare Basic, full-width": "ＢＡＳＩＣ dXNlcjpwYXNz",
    "bare Basic, long s": "baſic dXNlcjpwYXNz",
    "Authorization with a scheme": "Authorization: Token abcdefghijkl",
    "Authorization, dotted capital I": "AUTHORİZATION: Token abcdefghijkl",
    "AKIA of letters": "AKIAABCDEFGHIJKLMNOP",
    "AKIA of letters, Kelvin sign": "A\u212aIAABCDEFGHIJKLMNOP",
    "AKIA of letters, Cyrillic A": "АKIAABCDEFGHIJKLMNOP",
    "sk- of letters": "sk-abcdefghijklmnopqrstuv",
    "sk- of letters, long s": "ſk-abcdefghijklmnopqrstuv",
    "xoxb of letters": "xoxb-abcdefghijk",
    "glpat of letters": "glpat-abcdefghijklmnopqrstu",
    "JWT of letters": "eyJhbGciOi.eyJzdWIiOi",
    "AIza of letters": "AIza" + "xY" * 17 + "z",
    "labelled AWS key of letters": "secret access key " + "ABCDEFGHIJ" * 4,
    "labelled AWS key, upper case": "SECRET ACCESS KEY " + "ABCDEFGHIJ" * 4,
    "PEM of letters": "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiGwAAAAAAA",
    "hex run of letters": "deadbeef" * 4,
    "hex run of letters, full-width": "ｄｅａｄｂｅｅｆ" * 4,
    "ghp_ of letters": "ghp_" + "AbCdEfGhIjKlMnOpQrSt",
    "github_pat_ of letters": "github_pat_" + "AbCdEfGhIjKlMnOpQrSt",
    "sk_live_ of letters": "sk_live_" + "AbCdEfGhIjKlMnOp",
    "token parameter of letters": "see ?token=abcdef",
    "token parameter, full-width": "see ？ｔｏｋｅｎ＝ａｂｃｄｅｆ",
    "address of letters": "ada@example.com",
    "address, full-width at sign": "ada＠example.com",
}


@pytest.mark.parametrize("field", FIELDS)
@pytest.mark.parametrize("text", ATTACKS.values(), ids=list(ATTACKS))
def test_pinned_attacks_are_refused_as_before(text: str, field: str) -> None:
    """T83: each attack on the pre-check, the judged-once views and the kept
    rendering is refused now as at 3c5ed77 (every field and kind it refused)."""
    body = _in(field, text)
    old = old_verdict(body)
    assert old[0] or old[1], "the reference refuses it"
    assert refuses_at_least(new_verdict(body), old)


def _signed(**fields: Any) -> bytes:
    return json.dumps(dreamfmt.sign(draft(**fields), bytes(range(32)))).encode()


@pytest.mark.parametrize("text", ATTACKS.values(), ids=list(ATTACKS))
def test_pinned_attacks_are_refused_by_check_dream(text: str) -> None:
    """T83: signed, in the summary and in an entry, check_dream (strict JSON,
    the kept Ed25519 key, redact.changes, the reader view) refuses each."""
    for fields in (
        {"summary": text},
        {"entries": [{"text": text, "type": "lesson", "confidence": "confirmed"}]},
    ):
        with pytest.raises(InputError) as refused:
            pool.check_dream(_signed(**fields), "x.json")
        assert all("personal data" in p.rule for p in refused.value.problems)


# Inputs 3c5ed77 let through, found by this review: a reference to an
# invisible format character inside a number (the source policy refuses the
# character written out, not referenced), and a label in mixed case the
# labelled AWS rule's guard ("ecret"/"ECRET") did not see. Not made by the
# fast paths; fixed with them (readerview judges each view less what shows as
# nothing; the case-blind rules have case-blind guards).
GAPS_FOUND = {
    "referenced zero-width space": "138&#x200b;1234&#x200b;5678",
    "referenced zero-width joiner": "138&#x200d;1234&#x200d;5678",
    "referenced word joiner": "ada&#x2060;@example.com",
    "referenced soft hyphen": "138&shy;1234&shy;5678",
    "mixed-case AWS label": "SeCrEt AcCeSs KeY=" + "A/b1" * 10,
}


@pytest.mark.parametrize("field", FIELDS)
@pytest.mark.parametrize("text", GAPS_FOUND.values(), ids=list(GAPS_FOUND))
def test_gaps_the_review_found_are_refused_now(text: str, field: str) -> None:
    """T83: what 3c5ed77 let through (a reader sees a number or address once
    an invisible referenced character shows as nothing; a label in mixed
    case) is refused now."""
    body = _in(field, text)
    assert old_verdict(body) == ([], [])
    source, shown = new_verdict(body)
    assert source or shown


# -- generated: secrets written so only a reader sees them ---------------------

_SEEDS = (
    *adversarial.SEEDS,
    "Authorization: Bearer abcdefghij0123456789",
    "sk-ant-api03-abcdefghijklmnopqrstuvwxyz",
    "ghp_" + "A1" * 12,
    "deadbeef" * 5,
)
_LOOKS = {"a": "а", "e": "е", "o": "о", "c": "с", "p": "р", "x": "х", "A": "Α", "B": "Β"}
_LOOKS |= {"E": "Ε", "K": "\u212a", "s": "ſ", "i": "ı"}


def _obfuscated(rnd: random.Random) -> str:
    def char(c: str) -> str:
        r = rnd.random()
        if r < 0.25:
            return f"&#{ord(c)};"
        if r < 0.4:
            return f"&#x{ord(c):X};"
        if r < 0.5 and c.isdigit():
            d = int(c)
            return rnd.choice(
                [
                    f"&#x{0xFF10 + d:X};",
                    chr(0x1D7CE + d),
                    chr(0x0660 + d),
                    c + "\u0332",
                    c + "\u20e3",
                ]
            )
        if r < 0.6 and not c.isalnum():
            return "\\" + c
        if r < 0.65:
            return c + rnd.choice(["**", "*", "`", "_", "\u0301"])
        if r < 0.75 and c in _LOOKS:
            return _LOOKS[c]
        return c

    parts = []
    for _ in range(rnd.randint(1, 3)):
        shown = "".join(char(c) for c in rnd.choice(_SEEDS))
        if rnd.random() < 0.2:
            shown = f'[l](https://x.org/{shown.replace(" ", "%20")} "{shown}")'
        if rnd.random() < 0.25:  # near or across the card's cut (180) and the feed's (300)
            shown = "word " * rnd.randint(25, 62) + shown
        parts.append(shown)
    return rnd.choice([" ", "\n", "\n\n"]).join(parts)


@settings(max_examples=60, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(st.randoms(use_true_random=False), st.sampled_from(FIELDS))
def test_generated_reader_only_secrets_as_before(rnd: random.Random, field: str) -> None:
    """T83: text whose secret shows only once rendered (references, escapes,
    emphasis, look-alikes, marks, links, cuts) gets the old verdict."""
    body = _in(field, _obfuscated(rnd))
    assert new_verdict(body) == old_verdict(body)


@settings(max_examples=80, deadline=None, database=None)
@given(adversarial.dreams())
def test_adversarial_dreams_as_before(dream: dict[str, Any]) -> None:
    """T83: the author's adversarial dreams, against the old code rather than
    against definitions that call the new one."""
    assert refuses_at_least(new_verdict(dream), old_verdict(dream))


# -- the pre-check, character by character ---------------------------------------


def _related_to_ascii() -> list[str]:
    """Characters whose NFKC, case mappings or digit value touch what a rule reads."""
    out = []
    for code in range(0x80, 0x20000, 1):
        if 0xD800 <= code < 0xE000:
            continue
        c = chr(code)
        forms = (unicodedata.normalize("NFKC", c), c.lower(), c.upper(), c.casefold())
        if any(x.isascii() and (x.isalnum() or x in "@=+/_-") for f in forms for x in f) or (
            unicodedata.digit(c, None) is not None
        ):
            out.append(c)
    return out


def test_pre_check_by_substitution() -> None:
    """T83: one character of a caught or nearly caught text replaced by any
    character that reads or case-folds as ASCII: _find_spans finds at least
    what it found at 3c5ed77 (more where a case-blind guard was not: "sⒺcret")."""
    chars = _related_to_ascii()
    rnd = random.Random(83)
    seeds = [
        *adversarial.NEAR_MISSES,
        "Authorization: Bearer abcdefghij0123456789",
        "Basic dXNlcjpwYXNzd29yZA==",
        "secret key ABCDEFGHIJABCDEFGHIJABCDEFGHIJABCDEFGHIJ",
        "glpat-abcdefghijklmnopqrstu",
    ]
    for seed in seeds:
        for i in range(len(seed)):
            for c in rnd.sample(chars, 60):
                text = seed[:i] + c + seed[i + 1 :]
                new, old = redact._find_spans(text), OLD_REDACT._find_spans(text)
                assert all(any(s <= os and oe <= e for s, e, _ in new) for os, oe, _ in old), ascii(
                    text
                )


def test_long_text_reaches_the_rules() -> None:
    """T83: a secret after 60,000 characters of clean text (no early bail-out)."""
    filler = "quiet words of no consequence " * 2000
    for tail in (
        "deadbeef" * 5,
        "bearer abcdefghij0123456789",
        "AKIAABCDEFGHIJKLMNOP",
        "ada&#64;example.com",
    ):
        body = _in("summary", filler + tail)
        old = old_verdict(body)
        assert old[0] or old[1]
        assert new_verdict(body) == old


# -- the kept renderings and the judged-once views ---------------------------------


def test_kept_rendering_is_not_stale_after_eviction() -> None:
    """T83: a summary judged, pushed out of _rendering's and plain_text's 64
    entries by other summaries, then judged again, in another field too."""
    secret = "word " * 34 + "ada&#64;example.com and more"  # straddles the card's cut
    bodies = [_in("summary", secret), _in("entry", secret)]
    bodies += [_in("summary", f"note {i} *x* &amp; y") for i in range(70)]
    bodies += [_in("summary", secret), _in("title", secret), _in("summary", secret + " ")]
    for body in bodies:
        assert new_verdict(body) == old_verdict(body)
    assert readerview._rendering(secret)[0] == OLD_MDRENDER.plain_text(secret)
    assert mdrender.plain_text(secret) == OLD_MDRENDER.plain_text(secret)


@pytest.mark.parametrize("cut", [175, 178, 179, 180, 181, 185, 296, 299, 300, 301])
def test_secret_across_the_cuts(cut: int) -> None:
    """T83: an address whose start sits at each side of the card (180) and
    feed (300) cuts, its view judged once for several fields."""
    lead = "x" * (cut - 10) + " "
    text = lead + "ada&#64;example.com 13812345678"
    body = _in("summary", text)
    body["entries"][0]["text"] = text
    body["title"] = "ada&#64;example.com"
    assert new_verdict(body) == old_verdict(body)


def test_marks_learned_by_racing_threads() -> None:
    """T83: threads meeting marks no thread has seen drop them all
    (readerview._learn's order), as the per-character definition does."""
    sys_interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    marks = [
        chr(c)
        for lo, hi in ((0x1AB0, 0x1AC0), (0x1DC0, 0x1E00), (0xFE20, 0xFE30), (0x302A, 0x3030))
        for c in range(lo, hi)
        if unicodedata.category(chr(c)) in ("Mn", "Me")
    ]
    texts = [f"1{m}3{marks[(i * 7) % len(marks)]}8{'x' * (i % 5)}" for i, m in enumerate(marks)]
    wrong: list[str] = []

    def work(k: int) -> None:
        for text in texts if k % 2 else reversed(texts):
            if readerview._without_marks(text) != OLD_READERVIEW._without_marks(text):
                wrong.append(text)

    try:
        threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(sys_interval)
    assert wrong == []


# -- strict JSON: the surrogate walk -----------------------------------------------

_SURROGATE_SPELLINGS = (
    r"\ud800", r"\uD800", r"\uDbFf", r"\udC00", r"\uDFFF", r"\ud83d", r"\ude00",
    r"\\\ud800", r"\\\\\udfff", r"x\uD83D\uDE00\ud800", r"\uD83D\uDE00\uDE00",
)  # fmt: skip


@pytest.mark.parametrize("spelling", _SURROGATE_SPELLINGS)
def test_lone_surrogates_refused_as_before(spelling: str) -> None:
    """T83: a lone surrogate escape, in a value, a member name, deep inside,
    after escaped backslashes: refused whenever 3c5ed77 refused it."""
    docs = (
        f'["{spelling}"]',
        f'{{"{spelling}": 1}}',
        f'{{"a": [[{{"b": ["{spelling}"]}}]]}}',
        f'{{"summary": "ok", "x": {{"{spelling}k": "v"}}}}',
    )
    for doc in docs:
        data = doc.encode()
        outcomes = []
        for loads in (strictjson.loads, OLD_STRICTJSON.loads):
            try:
                outcomes.append(("value", repr(loads(data))))
            except (strictjson.JSONError, OLD_STRICTJSON.JSONError) as exc:
                outcomes.append(("refused", exc.message))
        assert outcomes[0] == outcomes[1], doc


def test_encoded_surrogates_never_reach_a_string() -> None:
    """T83: surrogates written as UTF-8 (or CESU-8) bytes are refused by the
    decoder, which the skipped walk relies on."""
    for raw in (b'["\xed\xa0\x80"]', b'["\xed\xbf\xbf"]', b'["\xed\xa0\xbd\xed\xb8\x80"]'):
        with pytest.raises(strictjson.JSONError):
            strictjson.loads(raw)
        with pytest.raises(OLD_STRICTJSON.JSONError):
            OLD_STRICTJSON.loads(raw)


# -- Ed25519: the kept key objects ------------------------------------------------


def test_kept_keys_bind_their_bytes() -> None:
    """T83: a key object kept for one public key never verifies for another:
    the same key with its sign bit flipped, another author's key, or the
    same bytes in a new object."""
    seed = bytes(range(1, 33))
    public = ed25519.public_key_of(seed)
    message = b"dream"
    signature = ed25519.sign(seed, message)
    ed25519.verify(public, message, signature)  # now kept
    flipped = public[:31] + bytes([public[31] ^ 0x80])
    other = ed25519.public_key_of(bytes(32))
    for key in (flipped, other):
        with pytest.raises(SignatureError):
            ed25519.verify(key, message, signature)
        with pytest.raises(SignatureError):
            OLD_ED25519.verify(key, message, signature)
    ed25519.verify(bytes(bytearray(public)), message, signature)
    with pytest.raises(SignatureError):
        ed25519.verify(public, message + b"!", signature)
