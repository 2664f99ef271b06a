"""Hostile key files and pool.yaml (THREATS.md T51, T52, T53; also T01, T02, T13, T41).

A pull request can write ``content/keys/<16 hex>.yaml`` and ``content/pool.yaml``,
and the build that holds the log key reads them. Both go through one strict
reader (:mod:`builder.formats.safeyaml`), then a schema that converts every typed field
explicitly. Each attack here is offered the way it arrives: as a file in a pool
that ``dreampool check`` (the pull request's gate) and ``dreampool build`` read,
through :func:`builder.cli.main`.
"""

from __future__ import annotations

import re
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from builder.content import pool
from builder.errors import InputError, printable
from tests.pools import PoolFixture, make_pool
from tests.redteam import signed, submit

KEY_FIELDS = """\
author: "ada"
publicKey: XTaI-B5bQRidM9arUS1OubEfn2-l3bygJwyxK0eOWQk
tier: member
added: '2026-11-16'
"""
HEX = "2f3a41e169a0c09e"  # the keyId of that publicKey: the file is named for it

# Nine aliases of nine aliases …, every key one the schema knows: PyYAML shares
# the nodes, but the old code's b64url_decode(str(publicKey)) spelled out 9^9
# "lol"s (11 s and gigabytes, for a file of a few hundred bytes).
BILLION_LAUGHS = (
    "author: \"ada\"\ntier: guest\nadded: '2026-01-01'\nrotatedFrom:\n"
    '- &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    + "".join(
        f"- &{n} [{','.join(['*' + p] * 9)}]\n" for p, n in zip("abcdefgh", "bcdefghi", strict=True)
    )
    + "publicKey: *i\n"
)


@pytest.fixture
def tp(tmp_path: Path) -> PoolFixture:
    return make_pool(tmp_path)


def key_file(tp: PoolFixture, text: str | bytes) -> Path:
    path = tp.content / "keys" / f"{HEX}.yaml"
    path.write_bytes(text.encode("utf-8") if isinstance(text, str) else text)
    return path


# (id, the key file, words one problem on that file must hold)
KEY_FILE_ATTACKS: list[tuple[str, str, tuple[str, ...]]] = [
    ("complex-key", "? [a, b]\n: 1\n", ("flow collections",)),
    ("block-complex-key", "? - a\n  - b\n: 1\n", ("a key must be plain text",)),
    (
        "timestamp-that-is-no-date",
        KEY_FIELDS.replace("'2026-11-16'", "2024-13-45"),
        ("/added", "YYYY-MM-DD"),
    ),
    ("free-text-date", KEY_FIELDS.replace("'2026-11-16'", "yesterday"), ("/added",)),
    ("short-date", KEY_FIELDS.replace("'2026-11-16'", "2026-1-5"), ("/added",)),
    ("compact-date", KEY_FIELDS.replace("'2026-11-16'", "'20261116'"), ("/added",)),
    ("integer-5000-digits", KEY_FIELDS + "rotatedFrom: " + "9" * 5000 + "\n", ("limit is 4096",)),
    ("integer-4000-digits", KEY_FIELDS + "rotatedFrom: " + "9" * 3900 + "\n", ("/rotatedFrom",)),
    (
        "integer-4000-digits-as-author",
        KEY_FIELDS.replace('"ada"', "9" * 3900),
        ("/author", "1–64"),
    ),
    ("oversize", KEY_FIELDS + "# " + "x" * 5000 + "\n", ("limit is 4096",)),
    ("anchor-and-alias", "author: &a ada\ntier: *a\n", ("anchors and aliases",)),
    ("python-tag", "author: !!python/object/apply:os.system ['id']\n", ("tags",)),
    ("local-tag", "author: !x ada\n", ("tags",)),
    ("merge-key", "<<: {tier: maintainer}\n" + KEY_FIELDS, ("merge keys",)),
    ("bare-merge-key", "<<: x\n" + KEY_FIELDS, ("merge keys",)),
    ("two-documents", KEY_FIELDS + "---\ntier: maintainer\n", ("second document",)),
    ("directive", "%YAML 1.1\n---\n" + KEY_FIELDS, ("directives",)),
    ("nested-value", "author:\n  name: ada\n", ("/author", "not a list or a mapping")),
    ("list-root", "- ada\n", ("must be a mapping",)),
    ("duplicate-tier", KEY_FIELDS + "tier: maintainer\n", ("/tier", "given twice")),
    ("escape-beyond-unicode", 'author: "\\UFFFFFFFF"\n', ("beyond U+10FFFF",)),
    ("lone-surrogate", KEY_FIELDS.replace('"ada"', '"\\ud800"'), ("lone surrogate",)),
    ("bidi-in-a-comment", KEY_FIELDS + "# \u202e gnp.exe\n", ("U+202E",)),
    ("lone-carriage-return", KEY_FIELDS.replace("\n", "\r", 1), ("carriage return",)),
    ("bom", "\ufeff" + KEY_FIELDS, ("byte order mark",)),
    ("bidi-in-author", KEY_FIELDS.replace('"ada"', '"ada\\u202e"'), ("/author", "U+202E")),
    ("author-too-long", KEY_FIELDS.replace('"ada"', '"' + "a" * 65 + '"'), ("/author",)),
    ("tier-unknown", KEY_FIELDS.replace("member", "root"), ("/tier", "maintainer")),
    ("tier-null", KEY_FIELDS.replace("member", "~"), ("/tier",)),
    ("short-key", KEY_FIELDS.replace("XTaI-", ""), ("/publicKey", "32 bytes")),
    ("bad-keyid", KEY_FIELDS + "rotatedFrom: sha256:XYZ\n", ("/rotatedFrom", "16")),
    ("unknown-key", KEY_FIELDS + "trust: maintainer\n", ("/trust", "unknown key")),
]


@pytest.mark.parametrize(
    ("text", "words"),
    [pytest.param(text, words, id=name) for name, text, words in KEY_FILE_ATTACKS],
)
def test_hostile_key_files_are_problems_not_tracebacks(
    tp: PoolFixture, run: Callable[..., Any], text: str, words: tuple[str, ...]
) -> None:
    """T51, T41, T02: `dreampool check` on each key file ends in a problem naming the
    file, the field and what is wanted, within a second. Before, `? [a, b]` (a
    list as a dict key), `added: 2024-13-45` (a timestamp that does not exist)
    and a 5,000-digit integer each ended `check` in a traceback."""
    path = key_file(tp, text)
    started = time.monotonic()
    result = run("check", "--content", tp.content)
    assert time.monotonic() - started < 1
    assert result.code == 1, result
    mine = [line for line in result.err.splitlines() if str(path) in line]
    assert mine, result.err
    assert any(all(w in line for w in words) for line in mine), (words, mine)
    assert "Traceback" not in result.err


def test_a_key_file_alias_bomb_is_refused_at_once(tp: PoolFixture) -> None:
    """T51, T01, T41: the 505-byte "billion laughs" key file took `dreampool check` 11 s
    and gigabytes. It is refused at its first list, before any anchor is read
    (run under a 1.5 GB address space limit), in well under a second."""
    assert len(BILLION_LAUGHS.encode()) < 512
    path = key_file(tp, BILLION_LAUGHS)

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (3 << 29, 3 << 29))

    proc = subprocess.run(
        [sys.executable, "-m", "builder", "check", "--content", str(tp.content)],
        capture_output=True,
        text=True,
        timeout=30,
        preexec_fn=cap,
    )
    assert proc.returncode == 1, proc.stderr
    assert f"{path}:5: /rotatedFrom: must be plain text" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    started = time.monotonic()
    with pytest.raises(InputError, match="must be plain text"):
        pool.read_yaml(BILLION_LAUGHS.encode(), "x", max_bytes=pool.KEY_FILE_MAX_BYTES)
    assert time.monotonic() - started < 0.1


# (id, pool.yaml, words its problem must hold)
CONFIG_ATTACKS: list[tuple[str, str, tuple[str, ...]]] = [
    ("k-5000-digits", "k: " + "9" * 5000 + "\n", ("/k", "between 1 and 1000")),
    ("k-octal", "k: 0o17\n", ("/k", "between 1 and 1000")),
    ("k-zero", "k: 0\n", ("/k",)),
    ("k-float", "k: 3.0\n", ("/k",)),
    ("title-escape", 'title: "\\e[2Jpwned"\n', ("/title", "U+001B")),
    ("title-bidi", 'title: "a\\u202eb"\n', ("/title", "U+202E")),
    ("title-newline", "title: |\n  two\n  lines\n", ("/title", "newline")),
    ("title-too-long", "title: " + "t" * 121 + "\n", ("/title", "1–120")),
    ("title-tag-smuggling", 'title: "a\\U000E0041"\n', ("/title", "U+E0041")),
    ("origin-space", "origin: a b\n", ("/origin", "scheme-less")),
    ("origin-surrogate", 'origin: "x\\udc00"\n', ("/origin", "lone surrogate")),
    ("base-url-javascript", "base_url: javascript:alert(1)\n", ("/base_url", "http(s)")),
    ("base-url-space", "base_url: '/a b'\n", ("/base_url",)),
    ("anchor", "title: &t x\n", ("anchors and aliases",)),
    ("unknown", "colour: blue\n", ("/colour", "unknown key")),
]


@pytest.mark.parametrize(
    ("extra", "words"),
    [pytest.param(text, words, id=name) for name, text, words in CONFIG_ATTACKS],
)
def test_hostile_pool_settings_are_problems_not_tracebacks(
    tp: PoolFixture, run: Callable[..., Any], extra: str, words: tuple[str, ...]
) -> None:
    """T52, T02, T10, T41: each setting is read as text and converted explicitly;
    `k` of 5,000 digits was a traceback (int() past CPython's digit limit).
    Text settings follow a dream's text rules."""
    config = tp.content / "pool.yaml"
    lines = config.read_text().splitlines(keepends=True)
    name = extra.split(":")[0]
    kept = [line for line in lines if not line.startswith(f"{name}:")]
    config.write_text("".join(kept) + extra, encoding="utf-8")
    result = run("check", "--content", tp.content)
    assert result.code == 1, result
    mine = [line for line in result.err.splitlines() if str(config) in line]
    assert any(all(w in line for w in words) for line in mine), (words, result.err)
    assert "Traceback" not in result.err


def test_a_title_that_is_no_unicode_text_stops_the_build_before_it_signs(
    tp: PoolFixture, run: Callable[..., Any], tmp_path: Path
) -> None:
    """T52, T02, T41: pool.yaml's `title: "\\ud800"` (a lone surrogate, by YAML's escape)
    passed `check`; `build` signed a new checkpoint and then died on a
    UnicodeEncodeError, and so did every later build. pool.yaml is now read as
    strictly as a dream's text, by `check` and by `build` before anything is
    appended or signed."""
    submit(tp, signed("ada"))
    config = tp.content / "pool.yaml"
    config.write_text(config.read_text().replace("Test pool", '"\\ud800"'), encoding="utf-8")
    key = tmp_path / "log.key"
    key.write_text(tp.log_key + "\n", encoding="utf-8")
    refusal = f"{config}:1: /title: holds a lone surrogate"
    checked = run("check", "--content", tp.content)
    assert checked.code == 1 and refusal in checked.err, checked
    for _ in range(2):
        built = run("build", "--content", tp.content, "--out", tmp_path / "site", "--log-key", key)
        assert built.code == 1, built
        assert refusal in built.err
        assert "Traceback" not in built.err
        assert not (tp.content / "log" / "checkpoints").exists() or not list(
            (tp.content / "log" / "checkpoints").iterdir()
        )
        assert not (tmp_path / "site").exists()


# The payload of a key name: set the terminal's title, clear the screen, then
# start a line that passes for check's own verdict, and turn the text green.
ESCAPES = "\\e]0;pwned\\a\\e[2J\\nok: content has no problems\\e[32m"
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u200b-\u200f]")


def test_escape_sequences_in_a_key_name_never_reach_the_terminal_log_or_summary(
    tp: PoolFixture, run: Callable[..., Any], tmp_path: Path
) -> None:
    """T53, T13: a key name made of terminal escapes (a YAML double-quoted key can
    hold any character) was echoed raw by `check` to stderr, into its
    `::error` annotations and into the job summary. It now reads as
    `\\x1b]0;pwned\\x07…` everywhere, and no line of output is the fake verdict."""
    key_file(tp, f'"{ESCAPES}\\u202e": x\n' + KEY_FIELDS)
    summary = tmp_path / "summary.md"
    text = run("check", "--content", tp.content)
    github = run("check", "--content", tp.content, "--format", "github", "--summary", summary)
    assert text.code == github.code == 1
    written = summary.read_text(encoding="utf-8")
    for output in (text.err, text.out, github.out, github.err, written):
        assert not RAW.search(output), repr(output)
        for line in output.splitlines():
            assert not line.startswith("ok"), line
    assert "\\x1b]0;pwned\\x07\\x1b[2J" in text.err
    assert "\\x1b[2J\\nok: content has no problems\\x1b[32m\\u202e" in github.out
    assert "\\x1b]0;pwned" in written


def test_urls_and_mentions_in_summary_cells_stay_inert(
    tp: PoolFixture, run: Callable[..., Any], tmp_path: Path
) -> None:
    """T53, T13: GitHub turns a bare URL in a job summary into a link and an `@name`
    into a mention that notifies that user. A key name carrying both reached
    the table as live text; every cell is now one code span, where GitHub does
    neither (checked here by rendering the table as GFM)."""
    from markdown_it import MarkdownIt

    key_file(tp, '"see www.evil.example and @octocat, `x` | y": 1\n' + KEY_FIELDS)
    summary = tmp_path / "summary.md"
    assert run("check", "--content", tp.content, "--summary", summary).code == 1
    html = MarkdownIt("commonmark", {"html": False}).enable("table").render(summary.read_text())
    cells = re.findall(r"<td>(.*?)</td>", html)
    assert cells and any("www.evil.example" in c and "@octocat" in c for c in cells)
    for cell in cells:
        assert cell == "" or cell.isdigit() or re.fullmatch(r"<code>[^<]*</code>", cell), cell
    assert "/see www.evil.example and @octocat, `x` | y: unknown key" in html


# --- any input at all ---------------------------------------------------------------

_KEYS = [
    "author",
    "publicKey",
    "tier",
    "added",
    "rotatedFrom",
    "title",
    "origin",
    "base_url",
    "k",
    "<<",
    '"\\e[2J"',
    "? x",
    "? [a, b]",
    "- x",
    "",
]
_VALUES = [
    '"ada"',
    "XTaI-B5bQRidM9arUS1OubEfn2-l3bygJwyxK0eOWQk",
    "member",
    "'2026-11-16'",
    "2024-13-45",
    "sha256:2f3a41e169a0c09e",
    "3",
    "9" * 5000,
    "&a x",
    "*a",
    "!!str x",
    "!!python/object/apply:os.system ['id']",
    "!x y",
    "[a, [b, [c]]]",
    "{a: 1}",
    '"\\ud800"',
    '"\\UFFFFFFFF"',
    '"\\x1b]0;t\\a"',
    "|\n  x\n  y",
    ">-\n  x",
    "~",
    "",
    "'it''s'",
    "'unterminated",
    "---",
    "...",
    "%YAML 1.1",
    "\t",
    "\u202e",
]
_PREFIXES = ["", " ", "  ", "- ", "? "]
_SEPARATORS = [": ", ":", " : ", "\n  ", ": &x ", ": *x "]


def _yamlish(choices: bytes, text: str) -> bytes:
    """YAML-ish lines, four choice bytes a line (indent or indicator, key,
    separator, value); a choice byte of 240 or more puts ``text`` in instead.
    One draw of bytes, not a list of draws: ten times cheaper to generate, and
    Hypothesis still shrinks it line by line."""
    lines = []
    for i in range(0, len(choices) - 3, 4):
        p, k, sep, v = choices[i : i + 4]
        key = _KEYS[k % len(_KEYS)] if k < 240 else text
        value = _VALUES[v % len(_VALUES)] if v < 240 else text
        lines.append(_PREFIXES[p % len(_PREFIXES)] + key + _SEPARATORS[sep % 6] + value)
    return "\n".join(lines).encode("utf-8", "surrogatepass")


_YAMLISH = st.builds(_yamlish, st.binary(max_size=48), st.text(max_size=16))
KEY_FILE_INPUTS = st.one_of(
    st.binary(max_size=600),
    st.text(max_size=300).map(lambda t: t.encode("utf-8", "surrogatepass")),
    _YAMLISH,
    _YAMLISH,
)
EXAMPLES = 10_000
LIMIT = 1.0  # seconds an example may take
CONFIG = "content/pool.yaml"
KEYS = f"content/keys/{HEX}.yaml"


def read_both(data: bytes) -> list[str]:
    """``data`` read as a key file and as pool.yaml, as `check` and `build` read
    them once the bytes are in (pool.load_keys, pool.load_config): the problems
    as printed. What is accepted as a key entry writes back to the same entry."""
    entry, problems = pool.read_key_file(data, KEYS, HEX)
    if entry is not None:
        again, found = pool.read_key_file(pool.format_key_entry(entry), KEYS, HEX)
        assert again == entry and not found
    try:
        _, found = pool.check_config(pool.read_yaml(data, CONFIG, max_bytes=8192), CONFIG)
    except InputError as exc:
        found = exc.problems
    return [str(p) for p in [*problems, *found]]


@settings(
    max_examples=EXAMPLES,
    deadline=LIMIT * 1000,  # milliseconds
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(KEY_FILE_INPUTS)
def test_no_key_file_or_pool_yaml_ends_in_a_traceback_or_takes_a_second(data: bytes) -> None:
    """T51, T41: 10,000 key files and pool.yaml files, drawn as raw bytes, as text and
    as YAML-ish lines full of anchors, aliases, tags, odd keys and escapes: each
    ends in an entry or in problems of the project's family, each problem names
    its file and prints as visible text, and none takes a second."""
    started = time.perf_counter()
    shown = read_both(data)
    assert time.perf_counter() - started < LIMIT
    for line in shown:
        assert line.startswith((CONFIG, KEYS)), line
        assert line.isprintable() and line == printable(line), line


# `added` values a pull request might write into its own key file, as YAML text,
# and what check's refusal must name. Each is shown in the Keys table of the
# author's diary if it passes.
FREE_TEXT_ADDED = [
    pytest.param("'call +1 555 867 5309'", "/added", id="phone"),
    pytest.param("victim@example.com", "/added", id="email"),
    pytest.param("'2026-01-01 or mail victim@example.com'", "/added", id="date-and-text"),
    pytest.param("'2026-01-01 '", "/added", id="date-and-space"),
    pytest.param("2026-02-30", "/added", id="no-such-day"),
    pytest.param("'2026-01-01\u202e'", "U+202E", id="bidi-raw"),
    pytest.param('"2026-01-01\\u2067"', "/added", id="bidi-escaped"),
    pytest.param('"\\u202e10-10-6202"', "/added", id="bidi-reversed"),
    pytest.param("'2026-01-01\u200b'", "U+200B", id="zero-width"),
]


@pytest.mark.parametrize(("added", "named"), FREE_TEXT_ADDED)
def test_a_key_files_added_reaches_the_diary_only_as_a_date(
    tp: PoolFixture, run: Callable[..., Any], tmp_path: Path, added: str, named: str
) -> None:
    """T51, T15: a key file's `added` held any text (a phone number, an e-mail,
    bidi controls) and the author's diary showed it in its Keys table. End to
    end: `dreampool check` refuses it naming the file and the field, `build`
    refuses it before it signs or writes anything (the live site stays as it
    was), nothing printed holds a raw control, and the diary shows a real date."""
    submit(tp, signed("carol", title="A new voice"))
    for path in tp.content.parent.glob("in-*.json"):
        path.unlink()
    key = tmp_path / "log.key"
    key.write_text(tp.log_key + "\n", encoding="utf-8")
    site = tmp_path / "site"
    first = run("build", "--content", tp.content, "--out", site, "--log-key", key)
    assert first.code == 0, first
    (path,) = (tp.content / "keys").glob("*.yaml")
    written = re.search(r"^added: '(\d{4}-\d{2}-\d{2})'$", path.read_text(), re.M)
    assert written, path.read_text()
    diary = site / "authors" / "carol" / "index.html"
    assert f"<td>{written.group(1)}</td>" in diary.read_text(encoding="utf-8")
    before = {p: p.read_bytes() for p in sorted(site.resolve().rglob("*")) if p.is_file()}
    log_before = {p: p.read_bytes() for p in sorted((tp.content / "log").rglob("*")) if p.is_file()}

    path.write_text(
        re.sub(r"(?m)^added: .*$", lambda _: f"added: {added}", path.read_text()),
        encoding="utf-8",
    )
    checked = run("check", "--content", tp.content)
    built = run("build", "--content", tp.content, "--out", site, "--log-key", key)
    for result in (checked, built):
        assert result.code == 1, result
        mine = [line for line in result.err.splitlines() if str(path) in line and named in line]
        assert mine, result.err
        assert "Traceback" not in result.err
        assert not RAW.search(result.err + result.out), repr(result.err)
    after = {p: p.read_bytes() for p in sorted(site.resolve().rglob("*")) if p.is_file()}
    assert after == before
    assert {p: p.read_bytes() for p in sorted((tp.content / "log").rglob("*")) if p.is_file()} == (
        log_before
    )

    path.write_text(
        re.sub(r"(?m)^added: .*$", "added: '2001-02-03'", path.read_text()), encoding="utf-8"
    )
    assert run("check", "--content", tp.content).code == 0
    rebuilt = run("build", "--content", tp.content, "--out", site)
    assert rebuilt.code == 0, rebuilt
    cells = re.findall(r"<td>([^<]*)</td>", diary.read_text(encoding="utf-8"))
    assert "2001-02-03" in cells and written.group(1) not in cells, cells
