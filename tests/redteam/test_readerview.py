"""Redaction judges what a reader will see (issue 19, items 1, 2, 14): personal
data that only appears once Markdown is rendered, character references decoded
and the text folded (NFKC, look-alike letters); kinds the rules missed; and a
MemOS import that cut a number in two.
"""

from __future__ import annotations

import contextlib
import html
import json
import re
import unicodedata
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from builder.agents import memos
from builder.content import pool
from builder.errors import InputError
from builder.formats import dream as dreamfmt
from builder.text import readerview, redact
from tests.conftest import draft, write_json
from tests.pools import PoolFixture, make_pool
from tests.redteam import build, dump, seed_of, signed, submit, tree

# Issue 19, item 1, as the attacker wrote it: every piece passes the source rules.
RENDERED_ONLY = (
    "Mail ada&#64;example.com or bob\\@example.org, call 138&#49;2345678 or "
    "138**1234**5678; key sk&#45;ant-api03-abcdEFGH1234ijklMNOP5678; "
    "IP 192&#46;168&#46;1&#46;20"
)
# (id, summary, the kind the reader would see): each shows only once rendered.
RENDERINGS = [
    ("char-ref-email", "Mail ada&#64;example.com today", "email"),
    ("hex-char-ref-email", "Mail ada&#x40;example.com today", "email"),
    ("named-char-ref-email", "Mail ada&commat;example&period;com today", "email"),
    ("escaped-at", "Mail bob\\@example.org today", "email"),
    ("char-ref-phone", "call 138&#49;2345678 now", "phone"),
    ("emphasis-in-phone", "call 138**1234**5678 now", "phone"),
    ("star-emphasis-in-phone", "call *138*12345678 now", "phone"),
    ("code-span-in-phone", "call `138`12345678 now", "phone"),
    ("char-ref-key", "key sk&#45;ant-api03-abcdEFGH1234ijklMNOP5678 here", "secret"),
    ("char-ref-ip", "IP 192&#46;168&#46;1&#46;20 here", "ip"),
    ("link-target-email", "[write to me](mailto:ada&#64;example.com)", "email"),
    ("percent-encoded-link", "[write](mailto:ada%40example.com)", "email"),
    ("link-title-phone", '[home](https://x.org "call 138&#49;2345678")', "phone"),
    ("soft-break-in-phone", "call 138\n1234\n5678 now", "phone"),
    ("spaces-in-phone", "call 138   1234   5678 now", "phone"),
    ("two-digit-circled", "call ⑬⑧ 1234 5678 now", "phone"),
]


@pytest.fixture
def tp(tmp_path: Path) -> PoolFixture:
    return make_pool(tmp_path)


def _signed_as_is(**fields: Any) -> dict[str, Any]:
    """A dream signed without `sign`'s redaction: what an attacker submits."""
    return signed(**fields)


def test_the_attackers_summary_is_refused_by_the_pool(tp: PoolFixture) -> None:
    """T56: the summary of issue 19 passed `check` and `build`, and its page
    showed the decoded e-mail, phone, key and IP. The pool now judges the
    rendering: refused, naming the file, the field, each kind and what to do;
    nothing is added."""
    obj = _signed_as_is(summary=RENDERED_ONLY)
    assert redact.redact_dream(obj)[1] == ()  # the source rules see nothing
    src = tp.content.parent / "in.json"
    src.write_bytes(dump(obj))
    before = tree(tp.content)
    with pytest.raises(InputError) as info:
        pool.submit(tp.content, [src])
    problems = info.value.problems
    assert {p.pointer for p in problems} == {"/summary"}
    kinds = {k for p in problems for k in ("email", "phone", "secret", "ip") if f"({k})" in p.rule}
    assert kinds == {"email", "phone", "secret", "ip"}, problems
    assert all(p.file == str(src) for p in problems)
    assert all("rendered" in p.rule and "sign again" in p.rule for p in problems)
    shown = str(problems) + (info.value.hint or "")
    assert "example" not in shown and "2345678" not in shown and "192" not in shown
    assert tree(tp.content) == before


@pytest.mark.parametrize(
    ("summary", "kind"), [(s, k) for _, s, k in RENDERINGS], ids=[i for i, _, _ in RENDERINGS]
)
def test_what_only_the_rendering_shows_is_refused(summary: str, kind: str) -> None:
    """T56: character references, backslash escapes, emphasis and code spans
    inside a token, link targets and titles, line breaks and runs of spaces the
    page collapses, and NFKC forms of two digits: each passed as clean text."""
    with pytest.raises(InputError) as info:
        pool.check_dream(dump(_signed_as_is(summary=summary)), "f")
    assert any(p.pointer == "/summary" and f"({kind})" in p.rule for p in info.value.problems)


def test_entries_and_titles_are_judged_as_agents_read_them() -> None:
    """T56: agent exports are Markdown documents, so a character reference
    in an entry or a title is decoded by whoever renders them."""
    entries = [{"text": "ask ada&#64;example.com", "type": "fact", "confidence": "confirmed"}]
    for fields, pointer in (
        ({"entries": entries}, "/entries/0/text"),
        ({"title": "call 138&#49;2345678"}, "/title"),
    ):
        with pytest.raises(InputError) as info:
            pool.check_dream(dump(_signed_as_is(**fields)), "f")
        assert [p.pointer for p in info.value.problems] == [pointer]


def test_sign_refuses_what_only_the_rendering_shows(run: Any, home: Path, tmp_path: Path) -> None:
    """T56: `sign` redacts what it can in the source; what only the
    rendering shows it cannot replace, so it refuses: exit 1, a message naming
    the file, the field and the kind, and nothing written."""
    key_id = run("keygen", "--author", "ada").out.split("keyId")[1].split()[0]
    src = write_json(tmp_path / "draft.json", draft(summary=RENDERED_ONLY))
    out = tmp_path / "signed.json"
    result = run("sign", src, "--key", key_id, "-o", out)
    assert result.code == 1, result
    assert f"{src}: /summary:" in result.err
    assert "(email)" in result.err and "(phone)" in result.err and "rendered" in result.err
    assert "Traceback" not in result.err and "&#" not in result.err
    assert "example.org" not in result.err
    assert not out.exists() and result.out == ""


def test_the_mcp_draft_refuses_what_only_the_rendering_shows(tmp_path: Path, home: Path) -> None:
    """T56: `dream_draft` redacts and signs like `sign`, so it refuses like
    `sign` too: nothing is signed or written to the pool."""
    from builder.agents import mcp_server
    from builder.content import keystore

    tp = make_pool(tmp_path)
    key = keystore.create_author_key("drafty")
    before = tree(tp.content)
    body = {k: v for k, v in draft(summary="mail ada&#64;example.com").items() if k != "author"}
    with pytest.raises(InputError) as info:
        mcp_server.draft_dream(body, key.key_id, tp.content)
    assert [(p.pointer, "(email)" in p.rule) for p in info.value.problems] == [("/summary", True)]
    assert info.value.hint == readerview.HINT_SIGN  # refused before signing, not by the pool
    assert tree(tp.content) == before


# (id, text, kind): issue 19, item 2, kinds the rules missed.
MISSED = [
    ("superscript-digits", "call ¹³⁸ ¹²³⁴ ⁵⁶⁷⁸ now", "phone"),
    ("circled-digits", "call ①③⑧①②③④⑤⑥⑦⑧ now", "phone"),
    ("accented-local-part", "mail josé@gmail.com now", "email"),
    ("cyrillic-local-part", "mail ad\u0430@example.com now", "email"),
    ("cjk-local-part", "mail 王伟@example.cn now", "email"),
    ("stripe", "key sk_live_4eC39HqLyjWDarjtT1zdp7dc here", "secret"),
    ("google-api-key", "key AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY here", "secret"),
    ("aws-secret", "secret wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY here", "secret"),
    (
        "aws-secret-labelled",
        "aws_secret_access_key = wJalrXUtnFEMIxK7MDENGxbPxRfiCYEXAMPLEKEY",
        "secret",
    ),
    ("gitlab", "token glpat-xDk3Z9vBq2LmN8pR4tYw here", "secret"),
    ("basic-auth", "Authorization: Basic dXNlcjpodW50ZXIy", "secret"),
    ("bearer", "Authorization: Bearer 9f8e7d6c5b4a39281706f5e4d3c2b1a0", "secret"),
    ("bare-bearer", "send Bearer 0a1b2c3d4e5f6g7h8i9j0k1l", "secret"),
    ("double-zero-prefix", "call 0044 20 7946 0958 now", "phone"),
]


@pytest.mark.parametrize(
    ("text", "kind"), [(t, k) for _, t, k in MISSED], ids=[i for i, _, _ in MISSED]
)
def test_missed_kinds_are_redacted_by_sign_and_refused_by_the_pool(text: str, kind: str) -> None:
    """T57: superscript and circled digits, e-mail local parts of any script
    (accented, Cyrillic look-alike, Chinese), Stripe, Google, AWS secret and
    GitLab keys, HTTP Authorization credentials and 00-prefixed international
    numbers passed `sign` and the pool. `sign` now replaces them in the source;
    the pool refuses a dream signed without."""
    with pytest.raises(InputError) as info:
        pool.check_dream(dump(_signed_as_is(summary=text)), "f")
    assert any(f"({kind})" in p.rule for p in info.value.problems)
    redacted, kinds = redact.redact_text(text)
    assert kind in kinds and f"[{kind}]" in redacted
    clean = dreamfmt.sign(redact.redact_dream(_signed_as_is(summary=text))[0], seed_of("ada"))
    pool.check_dream(dump(clean), "f")  # the signer's output is admitted


# -- the MemOS importer (item 14) ----------------------------------------------


def _import(**fields: Any) -> dict[str, Any]:
    obj = {"title": "t", "summary": "s", "status": "completed", **fields}
    data = json.dumps(obj, ensure_ascii=False).encode("utf-8")
    return memos.import_memos(data, "diary.json")


def _signed_texts(draft_: dict[str, Any]) -> list[str]:
    body = redact.redact_dream(draft_)[0]
    return [body["title"]] + [e["text"] for e in body["entries"]]


@pytest.mark.parametrize(
    "number", ["138 1234 5678", "+44 20 7946 0958", "13812345678", "AKIAIOSFODNN7EXAMPLE"]
)
def test_the_importer_never_splits_personal_data_past_redaction(number: str) -> None:
    """T58: a phone number, a mobile number or an AWS key straddling the
    300-character entry split or the 120-character title cut was signed in two
    halves that each passed. The importer now cuts only where no token and no
    match of the rules (run on the whole field) is cut."""
    digits = re.sub(r"[^0-9A-Z]", "", number)
    for at in range(-len(number) + 1, 1):
        filler = "word " * 70
        paragraph = filler[: 300 + at - 1] + " " + number + " and more words after it"
        title = filler[: 120 + at - 2] + " " + number + " tail"
        got = _import(title=title, dream_entry=paragraph)
        for text in _signed_texts(got):
            squeezed = re.sub(r"[^0-9A-Z]", "", text)
            assert not any(digits[i : i + 4] in squeezed for i in range(len(digits) - 3)), (
                at,
                text,
            )


# -- acceptance: random Markdown around planted personal data -------------------

_DOTS = "．"  # a full-width full stop, folded by the rules and NFKC alike
_SUPER = dict(zip("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹", strict=True))
_CIRCLED = dict(zip("0123456789", "⓪①②③④⑤⑥⑦⑧⑨", strict=True))


def _ref(char: str) -> str:
    return f"&#{ord(char)};"


def _hexref(char: str) -> str:
    return f"&#x{ord(char):x};"


# Each planted value: (what must never be readable, the forms it is written in).
# A form is a function of a draw (0-99) to the Markdown that shows the value.
_PLANTS: dict[str, tuple[str, list[Any]]] = {
    "email": (
        "ada@example.com",
        [
            lambda n: "ada@example.com",
            lambda n: "ada&#64;example.com",
            lambda n: "ada&#x40;example&#46;com",
            lambda n: "ada&commat;example.com",
            lambda n: "ada\\@example\\.com",
            lambda n: "**ada**@example.com",
            lambda n: "ad\u0430@ex\u0430mple.com",  # Cyrillic а
            lambda n: "ａｄａ＠example.com",
            lambda n: "[mail](mailto:ada&#64;example.com)",
            lambda n: "[mail](mailto:ada%40example.com)",
        ],
    ),
    "email-accented": (
        "josé@example.com",
        [lambda n: "josé@example.com", lambda n: "jos&eacute;&#64;example.com"],
    ),
    "phone": (
        "13812345678",
        [
            lambda n: "13812345678",
            lambda n: "138 1234 5678",
            lambda n: "138&#49;2345678",
            lambda n: f"138{_hexref('1')}234{_ref('5')}678",
            lambda n: "138**1234**5678",
            lambda n: "138*1234*5678",
            lambda n: "`138`12345678",
            lambda n: "138\n1234\n5678",
            lambda n: " ".join("".join(_SUPER[c] for c in g) for g in ("138", "1234", "5678")),
            lambda n: "".join(_CIRCLED[c] for c in "13812345678"),
            lambda n: "⑬⑧ 1234 5678",
            lambda n: "１３８１２３４５６７８",
        ],
    ),
    "key": (
        "sk-ant-api03-abcdEFGH1234ijklMNOP5678",
        [
            lambda n: "sk-ant-api03-abcdEFGH1234ijklMNOP5678",
            lambda n: "sk&#45;ant-api03-abcdEFGH1234ijklMNOP5678",
            lambda n: "sk\\-ant-api03-abcdEFGH1234ijklMNOP5678",
            lambda n: "sk-ant-api03-abcd**EFGH1234**ijklMNOP5678",
        ],
    ),
    "ip": (
        "192.168.1.20",
        [
            lambda n: "192.168.1.20",
            lambda n: "192&#46;168&#46;1&#46;20",
            lambda n: "192\\.168\\.1\\.20",
            lambda n: "192.**168**.1.20",
            lambda n: _DOTS.join(("192", "168", "1", "20")),
        ],
    ),
}
_PROSE = st.sampled_from(
    ["notes on the parser", "我们发现", "see", "*quiet*", "**loud**", "`code`", "a\\*b", "x"]
)
_WRAPS = [
    "{}",
    "- {}",
    "# {}",
    "> {}",
    "*{}*",
    "**{}**",
    "[{}](https://example.org/)",
    "1. {}",
    "{}\n\n",
    "call: {}",
]


@st.composite
def _planted(draw: st.DrawFn) -> tuple[str, str, str]:
    """(kind, the readable value, a summary showing it in a random form)."""
    kind = draw(st.sampled_from(sorted(_PLANTS)))
    value, forms = _PLANTS[kind]
    form = draw(st.sampled_from(forms))(draw(st.integers(0, 99)))
    wrap = draw(st.sampled_from(_WRAPS))
    before = " ".join(draw(st.lists(_PROSE, max_size=3)))
    after = " ".join(draw(st.lists(_PROSE, max_size=3)))
    return kind, value, f"{before} {wrap.format(form)} {after}".strip()


def _readable(data: bytes) -> str:
    """What any reader of a built file can read in it: the bytes decoded, JSON
    strings unescaped, character references decoded, tags and Markdown
    emphasis and escapes dropped, NFKC, look-alike letters folded, white space,
    dashes and dots between digits removed."""
    text = data.decode("utf-8", "replace")
    with contextlib.suppress(ValueError):
        text = json.dumps(json.loads(text), ensure_ascii=False)
    text = re.sub(r"<[^>]*>", "", html.unescape(html.unescape(text)))
    text = unquote(text).replace("\\", "").replace("*", "").replace("`", "")
    text = redact._fold(unicodedata.normalize("NFKC", text))
    return re.sub(r"(?<=[0-9])[\s\-]+(?=[0-9])", "", text).lower()


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(plants=st.lists(_planted(), min_size=1, max_size=3))
def test_no_planted_personal_data_reaches_any_file_of_a_built_site(
    tmp_path: Path, plants: list[tuple[str, str, str]]
) -> None:
    """T56, T57: random Markdown around planted personal data (e-mails,
    phones, keys, IPs; as character references, escapes, emphasis or code inside
    the token, super- and circled digits, full width, look-alike letters,
    non-ASCII local parts, link targets). Each is either refused (by `sign`, or
    by the pool when signed unredacted) or, admitted, none of it can be read in
    any page, card, feed, search shard, API or agent file of the built site."""
    root = tmp_path / f"pool-{uuid.uuid4().hex}"
    tp = make_pool(root)
    admitted = 0
    for i, (_, _, summary) in enumerate(plants):
        title = f"Planted {i}"
        # What `sign` does: redact the source, refuse what only the rendering shows.
        redacted = redact.redact_dream(draft(title=title + " signed", summary=summary))[0]
        candidates = [] if readerview.findings(redacted) else [redacted]
        candidates.append(draft(title=title + " raw", summary=summary))  # signed as is
        for body in candidates:
            obj = dreamfmt.sign(body, seed_of("ada"))
            try:
                pool.check_dream(dump(obj), "f")
            except InputError:
                assert body is not redacted, "sign's output was refused by the pool"
                continue
            submit(tp, obj)
            admitted += 1
    if not admitted:
        return
    site = root / "site"
    build(tp, site)
    files = tree(site)
    assert any(p.startswith("agents/") for p in files) and "feed.xml" in files
    readable = {path: _readable(data) for path, data in files.items()}
    for _, value, _ in plants:
        leaks = [path for path, text in readable.items() if value.lower() in text]
        assert not leaks, (value, leaks)
