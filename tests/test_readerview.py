"""What a reader sees of a dream (builder/text/readerview.py), which redaction judges."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from builder.text import mdrender, readerview

ORDINARY = [
    "Pin `parser==3.11.7` and run **pytest -q**; see [the docs](https://docs.example.org/a?page=2).",
    "# Heading\n\n- item one\n- item 2026-11-16\n\n> quoted `code_with_underscores`",
    "Use `icon@2x.png`, `git@github.com:owner/repo.git` and `lodash@4.17.21`.",
    "版本 3.11.7 于 2026-11-16 发布，耗时 256 512 1024 毫秒。",
    "Escapes: \\*not emphasis\\*, a &amp; b, 5 &lt; 6, 1\\. not a list",
    "Dream id 2e6633c05ac064cb and log index 12345 at size 67890.",
    "[secret] and [email] markers stay; so does &copy; 2026",
]


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_markdown_shows_nothing_to_refuse(text: str) -> None:
    assert readerview.findings({"summary": text, "entries": [{"text": text}]}) == ()


def test_the_text_is_the_sites_own_plain_text() -> None:
    """The reader's text of a summary is what cards and search show
    (mdrender.plain_text), plus link targets and titles."""
    text = 'Mail [me](mailto:ada%40example.org "call me") or **bold**&#33;'
    views = readerview.reader_texts(text)
    assert mdrender.plain_text(text) in views
    assert "ada@example.org" in views and "call me" in views


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from("ab 1&#;*_`[]()<>\\\n.@:"), max_size=40))
def test_the_plain_text_view_is_always_the_sites(text: str) -> None:
    views = readerview.reader_texts(text)
    if set(text) & set("&\\*_`<[\n"):
        assert unicodedata.normalize("NFKC", mdrender.plain_text(text)) in views
    else:
        assert views == (unicodedata.normalize("NFKC", " ".join(text.split())),)


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet=st.sampled_from("ab1 #>-+.)=~|:!(]"), max_size=40))
def test_where_markdown_changes_nothing_the_rendering_joins_nothing(text: str) -> None:
    """The fast path: without & \\ * _ ` < [ or a second line, the rendering is
    the text less a block marker at its start, so it can join no tokens."""
    assert mdrender.plain_text(text) in " ".join(text.split())


ORDINARY_MORE = [
    "Accented: crème brûlée, naïve café, Ångström, 日本語のテキスト、한국어 문장.",
    "```python\nprint('hi')\n```",
    "Upgrade with `npm i react@19.0.0-rc.canary`; released 2023 2024 on mobile.",
    "Emoji keycaps in prose: press 1️⃣ then 2️⃣ to choose.",
]


@pytest.mark.parametrize("text", ORDINARY_MORE)
def test_more_ordinary_text_shows_nothing_to_refuse(text: str) -> None:
    assert readerview.findings({"summary": text, "entries": [{"text": text}]}) == ()


def test_a_fence_keeps_a_plain_language_name_only() -> None:
    assert 'class="language-python"' in mdrender.render_markdown("```python\nx\n```")
    html = mdrender.render_markdown("```ada&#64;example.com\nx\n```")
    assert "language" not in html and "@" not in html


@pytest.mark.parametrize(
    ("text", "limit", "shown"),
    [
        ("short", 10, "short"),
        ("one two three four", 10, "one two…"),
        ("138123456789 x", 12, "…"),  # no place to cut within the limit
        ("数据库索引的列顺序很重要", 6, "数据库索引…"),
    ],
)
def test_a_clip_falls_between_tokens(text: str, limit: int, shown: str) -> None:
    assert mdrender.clip(text, limit) == shown
    assert len(mdrender.clip(text, limit)) <= limit
