"""Review r35 of commit 9edc52f (THREATS.md T117: the log prefix a signing build
attests, read by ``dreampool mcp --content``).

No way was found to make the bulk tools skip the signature of a dream no build
holding the log key verified (see the review's report). What follows is a defect
the review met on the way, older than 9edc52f but reached by the tools under
review: a failing test is an attack that succeeds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from builder.agents import mcp_server
from builder.errors import DreampoolError, LogError
from builder.formats import leaf as leaffmt
from tests.pools import PoolFixture
from tests.redteam import build
from tests.redteam.test_attested import published  # noqa: F401  (the fixture)
from tests.redteam.test_r36_review import _append_under_a_second_key


def test_an_erasure_leaf_of_a_dream_never_logged_is_a_named_error_not_a_key_error(
    published: tuple[PoolFixture, list[str], Path],  # noqa: F811
) -> None:
    """T118, docs/protocol.md §3: an erasure leaf names a dream leaf at a lower index. The
    pull request appends one naming an id no leaf logs, under its own log key. The
    leaf parses, every checkpoint verifies under the checkout's policy, and
    content_plan's logbuild._index_log then looks the id up in the logged dreams:
    KeyError, not a DreampoolError. Every tool call over the checkout fails with
    an exception the server does not name (the SDK tells the agent only "Error
    executing tool dream_list"; the warm-up thread prints a traceback), where
    every other broken log is a LogError that names the leaf. (Older than 9edc52f;
    a `dreampool build` over the same checkout, with or without the log key,
    stops with the same KeyError.)"""
    tp, _, out = published
    _append_under_a_second_key(
        tp, [leaffmt.encode(leaffmt.ErasureLeaf("0123456789abcdef", "legal"))]
    )
    # Read lazily, as the server reads a checkout: the first call meets the log.
    reader = mcp_server.open_reader(None, tp.content, lazy=True, out=out)
    tools = mcp_server.Tools(reader, content=tp.content)
    with pytest.raises(DreampoolError) as caught:
        tools.dream_list(limit=100)
    assert "which no earlier leaf logs (docs/protocol.md §3)" in caught.value.message


def _again(tp: PoolFixture, kind: type) -> bytes:
    """A copy of the log's first leaf of ``kind``: a second leaf of the same id."""
    leaves = (tp.content / "log" / "leaves" / "000000.jsonl").read_bytes().splitlines()
    return next(x for x in leaves if isinstance(leaffmt.parse(x), kind))


@pytest.mark.parametrize("key", [True, False], ids=["log-key", "no-key"])
@pytest.mark.parametrize(
    ("leaf", "rule"),
    [
        (lambda tp: leaffmt.encode(leaffmt.ErasureLeaf("0123456789abcdef", "legal")), "no earlier"),
        (lambda tp: _again(tp, leaffmt.DreamLeaf), "is logged again"),
        (lambda tp: _again(tp, leaffmt.KeyLeaf), "is logged again"),
    ],
    ids=["erasure-of-nothing", "dream-again", "key-again"],
)
def test_a_build_refuses_a_log_that_breaks_section_3_across_leaves_naming_the_leaf(
    published: tuple[PoolFixture, list[str], Path],  # noqa: F811
    leaf: Any,
    rule: str,
    key: bool,
) -> None:
    """T118: the same pull request before ``dreampool build``: it stopped with the KeyError
    (the erasure) or took the second leaf as the first's; it now refuses the log
    with a LogError naming the leaf's line and the rule, and writes nothing."""
    tp, _, out = published
    _append_under_a_second_key(tp, [leaf(tp)])
    before = {p: p.read_bytes() for p in (tp.content / "log").rglob("*") if p.is_file()}
    with pytest.raises(LogError) as caught:
        build(tp, out, key=key)
    assert "content/log/leaves/000000.jsonl:" in caught.value.message
    assert rule in caught.value.message and "docs/protocol.md §3" in caught.value.message
    after = {p: p.read_bytes() for p in (tp.content / "log").rglob("*") if p.is_file()}
    assert after == before
