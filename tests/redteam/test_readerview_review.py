"""Review of "redaction judges what a reader sees" (53c3989..52ea428): inputs
whose personal data, of a kind and form redact.CAUGHT/FORMS claim, reaches
what a reader of the built site sees while the dream passes `check`; false
positives on ordinary text; and the cost of a pathological dream.

Every test here fails on the reviewed code: each is a finding, not a fix.
"""

from __future__ import annotations

import gc
import html
import json
import re
import time
import unicodedata
import uuid
from pathlib import Path
from typing import Any

import pytest

from builder.content import pool
from builder.errors import InputError
from builder.text import mdrender, readerview, redact
from tests.pools import make_pool
from tests.redteam import build, dump, signed, submit, tree

CAUGHT_IN = "a reader of the built site sees personal data the rules claim to catch"


def _passes_check(obj: dict[str, Any]) -> bool:
    try:
        pool.check_dream(dump(obj), "f")
    except InputError:
        return False
    return True


def _entry(text: str, **more: str) -> dict[str, str]:
    return {"text": text, "type": "lesson", "confidence": "confirmed", **more}


def _site(tmp_path: Path, *dreams: dict[str, Any]) -> dict[str, bytes]:
    """Submit ``dreams`` (each must pass check: that is half the finding) and build."""
    for obj in dreams:
        assert _passes_check(obj), "precondition: the pool admits the dream"
    tp = make_pool(tmp_path / f"pool-{uuid.uuid4().hex}")
    submit(tp, *dreams)
    site = tmp_path / "site"
    build(tp, site)
    return tree(site)


def _kinds(text: str) -> tuple[str, ...]:
    """What the rules find in ``text`` as a reader sees it (white space as one, NFKC)."""
    return redact.redact_text(unicodedata.normalize("NFKC", " ".join(text.split())))[1]


def _filler(n: int) -> str:
    """``n`` characters of plain prose ending in a space."""
    words = ("the parser changed its output after a minor upgrade " * 20)[: n - 1].rstrip()
    return words + "s" * (n - 1 - len(words)) + " "


# --- truncation: a cut makes a match the whole text does not hold -------------------


def test_home_card_excerpt_cuts_a_long_number_into_a_phone(tmp_path: Path) -> None:
    """T56 (bypass): the home card shows ``excerpt`` (summary cut at 179
    characters + "…"). "138123456789" (12 digits) is no phone, and passes;
    cut after its 11th digit it reads "13812345678…", a China mobile, on the
    home page, tag and author pages. readerview never judges the cut text."""
    summary = _filler(168) + "138123456789 and more words follow here."
    obj = signed(summary=summary)
    files = _site(tmp_path, obj)
    cards = re.findall(r'<p class="excerpt" dir="auto">(.*?)</p>', files["index.html"].decode())
    shown = [html.unescape(c) for c in cards]
    # Fixed at the source: the cut falls between tokens (mdrender.clip), so the
    # card shows the prose before the number, never a part of it.
    assert shown and shown[0].endswith("…") and "1381234" not in shown[0]
    assert not any("phone" in _kinds(c) for c in shown), CAUGHT_IN


def test_feed_summary_cut_makes_a_prc_id(tmp_path: Path) -> None:
    """T56 (bypass): the Atom <summary> is the source summary cut at 299
    characters + "…" (feeds._clip). A 19-digit number whose first 18 are a
    valid PRC id (check character and birth date right) passes; the feed
    shows the 18-digit id."""
    first17 = "11010519491231000"
    valid = first17 + redact._id_check_char(first17)
    assert valid[-1].isdigit() and redact.redact_text(valid)[1] == ("id",)
    summary = _filler(281) + valid + "7 closes the ticket, nothing else to add."
    assert redact.redact_text(summary)[1] == ()
    files = _site(tmp_path, signed(summary=summary))
    feed = files["feed.xml"].decode()
    summaries = [html.unescape(s) for s in re.findall(r"<summary[^>]*>(.*?)</summary>", feed, re.S)]
    # Fixed at the source: the cut falls between tokens, before the number.
    assert any(s.endswith("…") for s in summaries) and not any(first17 in s for s in summaries)
    assert not any("id" in _kinds(s) for s in summaries), CAUGHT_IN


def test_feed_summary_cut_drops_the_digit_that_hid_an_address(tmp_path: Path) -> None:
    """T56 (bypass): "ada@example.com1" was no address to the rules (a TLD
    must not run into a digit), though a reader sees one; cut at the 299th
    character the feed showed "ada@example.com…".

    Fixed twice: a top-level label now ends where its letters end, so the rules
    see the address a reader sees (and `sign` replaces it); and a cut falls
    between tokens. The site cannot be built from a dream the pool refuses, so
    the test checks the rules and the pool, and the cut on a token the rules
    leave alone."""
    summary = _filler(284) + "ada@example.com1 is the desk to write to about it."
    assert redact.redact_text(summary)[1] == ("email",)
    assert not _passes_check(signed(summary=summary)), CAUGHT_IN
    summary = _filler(284) + "adaexample.com12 is the desk to write to about it."
    files = _site(tmp_path, signed(summary=summary))
    feed = html.unescape(files["feed.xml"].decode())
    assert not re.search(r"adaexample\.com1?…", feed)  # no cut inside the token


# --- joins: texts judged apart, shown together ----------------------------------------


def test_search_shard_joins_summary_and_entry_into_a_phone(tmp_path: Path) -> None:
    """T56 (bypass): a search shard's ``text`` is the summary's plain text and
    each entry joined by "\\n", which search.js shows in a white-space:normal
    <p> as one space. "+44 20" ends the summary, "7946 0958" starts an entry:
    each alone is no number (4 digits), the search result shows
    "+44 20 7946 0958"."""
    obj = signed(
        summary="Reach the on-call desk at +44 20",
        entries=[_entry("7946 0958 any time, day or night.")],
    )
    files = _site(tmp_path, obj)
    shards = [json.loads(b) for p, b in files.items() if p.startswith("search/shard-")]
    texts = [d["text"] for s in shards for d in s["dreams"]]
    # Fixed at the source: the texts are joined by a visible " · " (render.SEARCH_JOIN),
    # which no rule reads as part of a number, not by a line break shown as a space.
    assert any("+44 20 · 7946 0958" in t for t in texts)
    assert not any("phone" in _kinds(t) for t in texts), CAUGHT_IN


def _agent_views(files: dict[str, bytes]) -> list[str]:
    """What a reader of each agents/*.md file sees: its source, and its
    rendering by the site's own Markdown renderer (text, link targets, titles)."""
    views: list[str] = []
    for path, data in files.items():
        if path.startswith("agents/") and path.endswith(".md"):
            views += readerview.reader_texts(data.decode())
    return views


def test_agent_file_resolves_a_reference_defined_in_another_field(tmp_path: Path) -> None:
    """T56 (bypass): readerview renders each field alone. An unused link
    reference definition renders to nothing, so the summary
    "[x]: mailto:ada&#64;example.com" shows nothing; the entry
    "write [to me][x]" is literal text. The agent export puts the whole dream
    in one Markdown document (one block quote), where the entry's reference
    resolves: a link to mailto:ada@example.com."""
    obj = signed(
        summary="Notes on contact.\n\n[x]: mailto:ada&#64;example.com",
        entries=[_entry("write [to me][x]")],
    )
    views = _agent_views(_site(tmp_path, obj))
    assert not any("ada@example.com" in v for v in views), CAUGHT_IN


def test_agent_file_resolves_a_reference_across_two_dreams(tmp_path: Path) -> None:
    """T56 (bypass): the same across two dreams by two authors: the
    definition in one, the reference in the other, both in agents/digest.md.
    No per-dream check can see it."""
    defines = signed(
        "ada", title="Contact notes", summary="Hi.\n\n[desk]: mailto:ada&#64;example.com"
    )
    uses = signed("bob", title="Who to ask", entries=[_entry("ask [the desk][desk]")])
    views = _agent_views(_site(tmp_path, defines, uses))
    assert not any("ada@example.com" in v for v in views), CAUGHT_IN


def test_agent_file_joins_title_and_author_through_a_link_title(tmp_path: Path) -> None:
    """T56 (bypass): the agent export writes "title: …" and "author: …" on
    consecutive lines, one Markdown paragraph. A title ending in
    '138 [](https://x.org "' opens a link title that the author
    '") 1234 5678' closes: "author: " hides in the (empty) link's title and
    the paragraph reads "title: Call 138 1234 5678"."""
    obj = signed(author='") 1234 5678', title='Call 138 [](https://x.org "')
    views = _agent_views(_site(tmp_path, obj))
    assert not any("phone" in _kinds(v) for v in views), CAUGHT_IN


def test_agent_file_joins_entry_text_and_source(tmp_path: Path) -> None:
    """T56 (bypass): as above between an entry's text and its source line
    ("  source: …" continues the list item's paragraph)."""
    obj = signed(entries=[_entry('call me on 138 [](https://x.org "', source='") 1234 5678')])
    views = _agent_views(_site(tmp_path, obj))
    assert not any("phone" in _kinds(v) for v in views), CAUGHT_IN


# --- rendered HTML that readerview does not read ---------------------------------------


@pytest.mark.parametrize(
    ("summary", "value"),
    [
        ("```ada&#64;example.com\nprint(1)\n```", "ada@example.com"),
        ("```ada\\@example.com\nprint(1)\n```", "ada@example.com"),
        (
            "~~~sk&#45;ant-api03-abcdEFGH1234ijklMNOP5678\nx\n~~~",
            "sk-ant-api03-abcdEFGH1234ijklMNOP5678",
        ),
    ],
    ids=["char-ref", "escape", "key"],
)
def test_fence_info_string_is_decoded_into_the_page(
    tmp_path: Path, summary: str, value: str
) -> None:
    """T56 (bypass): a fenced code block's info string is entity-decoded and
    unescaped by markdown-it and written into the dream page as
    class="language-ada@example.com". readerview reads only text, href and
    title: the page bytes (read by scrapers, feeds of HTML, AI agents) hold
    the decoded value while the source only holds &#64;."""
    files = _site(tmp_path, signed(summary=summary))
    pages = [
        b.decode() for p, b in files.items() if p.startswith("dreams/") and p.endswith(".html")
    ]
    assert not any(value in page for page in pages), CAUGHT_IN


@pytest.mark.parametrize(
    "summary",
    [
        '[home](https://x.org "call 138&#32;&#32;1234 5678")',
        '[home](https://x.org "call 138&#10;1234&#10;5678")',
        "[write](mailto:desk?body=call%20138%20%201234%205678)",
    ],
    ids=["title-two-spaces", "title-newlines", "href-two-spaces"],
)
def test_link_attributes_are_judged_without_collapsing_white_space(summary: str) -> None:
    """T56 (bypass): readerview collapses white space in text ("138   1234
    5678" is refused) but not in a link's title or target: the tooltip
    "call 138  1234 5678" (two spaces, or line breaks, by character
    reference) passes check."""
    assert not _passes_check(signed(summary=summary)), CAUGHT_IN


@pytest.mark.parametrize(
    "source",
    [
        "https://example.org/contact/ada%40example.com",
        "https://example.org/?q=call%20138%201234%205678",
        "https://example.org/?tok%65n=abcdEFGH1234ijklMNOP",
    ],
    ids=["email", "phone", "secret-param"],
)
def test_entry_source_link_target_is_judged_like_a_summary_link(source: str) -> None:
    """T56 (bypass, policy gap): an entry's http(s) source is shown as a link
    (<a href=source>). The same URL as a summary link is refused (readerview
    percent-decodes link targets); as a source it passes: "%" is not among
    readerview's Markdown characters and a source is never decoded."""
    in_summary = signed(summary=f"[see]({source})")
    as_source = signed(entries=[_entry("see the source", source=source)])
    assert not _passes_check(in_summary)
    assert not _passes_check(as_source), CAUGHT_IN


# --- visible combining marks ----------------------------------------------------------


def _marked(text: str, mark: str) -> str:
    return "".join(c + mark if c.isalnum() else c for c in text)


@pytest.mark.parametrize(
    "summary",
    [
        "call " + "".join(c + "\ufe0f\u20e3" for c in "13812345678"),  # keycap emoji 1️⃣3️⃣8️⃣
        "call " + _marked("138 1234 5678", "\u20dd"),  # enclosing circle: 1⃝ as ①
        "call " + _marked("13812345678", "\u0332"),  # underlined digits
        "mail ada@" + _marked("example", "\u0332") + ".com",
        "key " + _marked("sk-ant-api03-abcdEFGH1234ijklMNOP5678", "\u0332"),
    ],
    ids=["keycap", "enclosing-circle", "underline-phone", "underline-domain", "underline-key"],
)
def test_visible_combining_marks_hide_caught_values(summary: str) -> None:
    """T56 (bypass): FORMS claims digits "circled" are caught (①); a digit
    with a combining enclosing circle or keycap (1⃝, 1️⃣) or underline reads
    the same but NFKC keeps the mark, and a mark breaks every rule. These
    marks are visible, not the invisible format characters the code-point
    policy in progress may refuse."""
    assert not _passes_check(signed(summary=summary)), CAUGHT_IN


# --- false positives ------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "Upgrade with `npm i react@19.0.0-rc.canary` first.",
        "Semver: `pkg@1.0.0-alpha.beta` sorts before `pkg@1.0.0`.",
        "Pin `golang.org/x/tools@v0.1.0-beta.rc` in go.mod.",
    ],
)
def test_a_package_at_a_prerelease_version_is_no_address(text: str) -> None:
    """T56 (false positive): a package pinned at a semver pre-release whose
    last identifier is alphabetic (1.0.0-alpha.beta is the semver spec's own
    example) is an e-mail address to the rules: `sign` replaces it with
    [email] and the pool refuses it signed as is."""
    assert redact.redact_text(text)[1] == ()


def test_a_year_list_after_the_word_mobile_is_no_phone() -> None:
    """T56 (false positive): "mobile" followed by two years reads as a
    labelled phone number (7-15 digits after a label): ordinary prose."""
    assert redact.redact_text("The bug shows in mobile 2023 2024 releases.")[1] == ()


# --- cost -----------------------------------------------------------------------------


def _cpu_check(obj: dict[str, Any]) -> float:
    data = dump(obj)
    best = float("inf")
    for _ in range(3):
        mdrender.render_markdown.cache_clear()
        gc.collect()
        start = time.process_time()
        pool.check_dream(data, "f")
        best = min(best, time.process_time() - start)
    return best


def _full(unit: str, summary_unit: str | None = None) -> dict[str, Any]:
    """A dream at every text limit: summary 800, 50 entries of 300, each with a 300 source."""
    entries = [
        _entry((f"{i:02d}" + unit * 300)[:300], source=(f"{i:02d}" + unit[1:] + unit * 300)[:300])
        for i in range(50)
    ]
    return signed(summary=((summary_unit or unit) * 800)[:800], entries=entries)


def test_a_pathological_markdown_dream_costs_no_more_than_ordinary_markdown() -> None:
    """T56 (performance): readerview renders every field (summary, 50 entry
    texts, 50 sources, title, author, tags) with markdown-it, though the site
    renders only the summary. Fields of "*[_" repeated (delimiters and
    unmatched brackets) cost markdown-it ~10 ms CPU per 300 characters: a
    35 KB dream takes ~1.1 s CPU in check_dream here (0.19 s for a dream of
    the same size dense with ordinary Markdown, 0.03 s for prose), and it
    passes, so every later check and build pays it again."""
    ordinary = _full(
        "Use **bold** and _em_ with a [link](https://example.org/a) and `code`; "
        "see [docs](https://x.org). "
    )
    hostile = _full("*[_")
    base, cost = _cpu_check(ordinary), _cpu_check(hostile)
    # Relative to the baseline measured in this run (no absolute floor, which on a
    # fast machine hid a 6x regression); 20 ms keeps timer noise out.
    assert cost < 3 * max(base, 0.02), (round(cost, 3), round(base, 3))
