"""``dreampool recheck``: today's admission rules over the dreams already logged."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from builder import build as buildmod
from builder.formats.note import parse_private_key
from builder.log import recheck
from builder.text import readerview, redact
from tests.conftest import REPO, CLIResult
from tests.pools import PoolFixture, make_pool
from tests.test_site_build import tree

SECRET = "ada.lovelace@example.org"
HIDDEN = "grace.hopper&#64;example.org"


def _logged_with_an_email(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[PoolFixture, str]:
    """A pool whose log holds a dream with an e-mail address in an entry: it
    was admitted while the redaction review let everything through (as a
    review of an older dreampool let through what today's catches)."""
    tp = make_pool(tmp_path)
    tp.add("bob", 2)
    with monkeypatch.context() as m:
        m.setattr(redact, "redact_dream", lambda body: (body, []))
        m.setattr(redact, "changes", lambda body: ())  # what check_dream asks
        m.setattr(readerview, "problems", lambda body, file: [])
        (leaky,) = tp.add(
            "ada",
            1,
            entries=[
                {
                    "text": f"Write to {SECRET} for access.",
                    "type": "fact",
                    "confidence": "confirmed",
                },
                # Only its rendering shows the address (a character reference).
                {"text": f"Or to {HIDDEN}.", "type": "fact", "confidence": "confirmed"},
            ],
        )
        buildmod.build(tp.content, tmp_path / "site", signer=parse_private_key(tp.log_key))
    return tp, leaky


def test_recheck_finds_a_logged_dream_todays_rules_refuse(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run: Callable[..., CLIResult]
) -> None:
    tp, leaky = _logged_with_an_email(tmp_path, monkeypatch)
    # The build takes it by its commitment: nothing refused, nothing re-reviewed.
    report = buildmod.build(tp.content, tmp_path / "cold", signer=None)
    assert report.refused == [] and report.committed == 3
    result = run("recheck", "--content", tp.content)
    assert result.code == 1, result
    file = str(tp.content / "dreams" / f"{leaky}.json")
    assert f"candidate {leaky} (leaf " in result.out
    assert f"{file}: /entries/0/text: holds personal data (email)" in result.out
    assert f"{file}: /entries/1/text: shows personal data (email) once rendered" in result.out
    assert result.out.count("candidate ") == 2  # one line a finding; the two other dreams pass
    assert SECRET not in result.out + result.err  # the kind, never the text
    assert "grace" not in result.out + result.err
    assert "dreampool erase ID --reason" in result.err and leaky in result.err
    assert "docs/operators.md#erase-a-dream" in result.err


def test_recheck_is_read_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tp, leaky = _logged_with_an_email(tmp_path, monkeypatch)
    before = tree(tmp_path)
    found = recheck.recheck(tp.content)
    assert [c.dream_id for c in found.candidates] == [leaky] and found.checked == 3
    assert tree(tmp_path) == before


def test_recheck_passes_the_sample_pool(run: Callable[..., CLIResult]) -> None:
    result = run("recheck", "--content", REPO / "content")
    assert result.code == 0, result
    assert result.out.startswith("ok: today's rules refuse none of the ")
    status = subprocess.run(
        ["git", "-C", str(REPO), "status", "--porcelain", "content"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert status.stdout == ""


def test_recheck_skips_a_dream_being_erased(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run: Callable[..., CLIResult]
) -> None:
    """After `dreampool erase` (before the build logs the erasure) the
    candidate is gone: the procedure recheck names is enough."""
    tp, leaky = _logged_with_an_email(tmp_path, monkeypatch)
    assert run("erase", leaky, "--reason", "legal", "--content", tp.content).code == 0
    result = run("recheck", "--content", tp.content)
    assert result.code == 0, result
    assert "none of the 2 logged dream(s)" in result.out


@pytest.mark.parametrize("damage", ["changed", "missing", "salt"])
def test_recheck_of_a_broken_pool_exits_2(
    tmp_path: Path, damage: str, run: Callable[..., CLIResult]
) -> None:
    tp = make_pool(tmp_path)
    (first, _) = tp.add("ada", 2)
    buildmod.build(tp.content, tmp_path / "site", signer=parse_private_key(tp.log_key))
    path = tp.content / "dreams" / f"{first}.json"
    if damage == "changed":
        obj = json.loads(path.read_bytes())
        obj["title"] = "Another title"
        path.write_text(json.dumps(obj), encoding="utf-8")
        want = "changed after it was logged"
    elif damage == "missing":
        path.unlink()
        want = "is logged but missing, and no erasure is recorded"
    else:
        path.with_suffix(".salt").unlink()
        want = "has lost its salt"
    result = run("recheck", "--content", tp.content)
    assert result.code == 2, result
    assert f"dreampool: error: {path}: {want}" in result.err
    assert "Traceback" not in result.err and result.out == ""


def test_recheck_needs_a_pool(tmp_path: Path, run: Callable[..., CLIResult]) -> None:
    result = run("recheck", "--content", tmp_path)
    assert result.code == 2
    assert "is not a pool" in result.err
