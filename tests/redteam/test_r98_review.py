"""Review r98 of 80f09b2 (a logged dream's fix for every rule; git asked once
a listed folder; vkeys off the curve refused).

Each test failed on the reviewed tree and names the defect it showed. What
was done: gitrepo.tracked_folders counts a bare name too (git lists a
submodule so), so a base branch's submodule in a listed folder is git's to
report again, not a failure of every pull request; a logged dream's rows
lose the new dream's fix their text carried ("redact and sign the draft
again", pool._RESIGN) before the logged dream's fix is added.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from builder import build as buildmod
from builder.formats.note import parse_private_key
from builder.text import redact
from tests.pools import PoolFixture, make_pool
from tests.redteam import signed, submit
from tests.redteam.test_gate import _check, _commit


def _git(root: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True)
    return done.stdout


def test_check_base_passes_an_honest_pull_request_over_a_base_holding_a_submodule(
    repo: PoolFixture, run: Any
) -> None:
    """T49: a base branch's problem stays a warning (review r95): a folder in
    a listed folder that git names is git's to report, not the pull
    request's. 80f09b2's gitrepo.tracked_folders keeps only the first names
    of paths ``name/…`` (``if slash``), so a submodule (gitlink, mode 160000,
    listed by `git ls-files` as ``sub`` with no slash) that the base holds in
    content/dreams (an empty folder in a checkout without
    --recurse-submodules) is now "a folder git holds nothing of" and fails
    every honest pull request; d5ace72's gitrepo.tracked(content/dreams,
    ["sub"]) named it, and the pull request passed. Count a path equal to
    the name (no slash) as named too."""
    root = repo.content.parent
    head = _git(root, "rev-parse", "HEAD").strip()
    _git(root, "update-index", "--add", "--cacheinfo", f"160000,{head},content/dreams/sub")
    (repo.content / "dreams" / "sub").mkdir()  # as a clone leaves a submodule
    _git(root, "commit", "-qm", "base with a submodule in content/dreams")
    submit(repo, signed("carol", title="A new voice"))
    for path in root.glob("in-*.json"):
        path.unlink()
    _commit(root, "an honest pull request")
    based = _check(run)
    assert based.code == 0, based.out + based.err


def test_check_of_a_logged_dream_a_new_redaction_kind_refuses_does_not_say_sign_again(
    tmp_path: Path, run: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """T05: review r95 (test_r95_review: "sign the draft again" not in said)
    holds that a logged dream never gets a new dream's fix: signing again
    makes another dream (another id), and the logged one still fails until
    erased. 80f09b2 appends the logged dream's hint to the last row of an
    InputError, but the rows' own text is left as it is: a redaction kind
    added since gives each row "still holds personal data (new-kind); redact
    and sign the draft again with `dreampool sign`", followed on the last
    row by "(hint: this dream is logged: ... `dreampool erase` removes one)"
    -- two contradictory fixes. The r97 test only asserts that recheck and
    erase are named, not that the new dream's fix is gone."""
    tp = make_pool(tmp_path)
    tp.add("ada", 1)
    buildmod.build(tp.content, tmp_path / "site", signer=parse_private_key(tp.log_key))
    real = redact.changes

    def new_kind(dream: Any) -> tuple[redact.Redaction, ...]:  # a redaction kind added since
        return (*real(dream), redact.Redaction("/title", "new-kind"))

    monkeypatch.setattr(redact, "changes", new_kind)
    checked = run("check", "--content", tp.content)
    said = checked.out + checked.err
    assert checked.code == 1 and "dreampool erase" in said, said
    assert "sign the draft again" not in said, said
