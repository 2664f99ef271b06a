"""Review r99 of 5d8e439 (a submodule is a name git holds; a logged dream's
rows lose the new dream's fix).

Each defect test failed on the reviewed tree and names the defect it showed;
the test of a tracked dream deleted and replaced by a folder is a guard
that held. What was done: a bare name counts as git's only for a submodule
(mode 160000 in ``git ls-files -s``), not for a file git no longer checks
(skip-worktree) with a folder in its place; a logged dream's rows about
what a page shows lose their new dream's fix too (readerview.RESIGN).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from builder import build as buildmod
from builder.formats.note import parse_private_key
from builder.text import readerview, redact
from tests.pools import PoolFixture, make_pool
from tests.redteam import signed, submit
from tests.redteam.test_gate import _check, _commit
from tests.redteam.test_r98_review import _git


def test_check_of_a_logged_dream_a_new_rendered_finding_refuses_does_not_say_sign_again(
    tmp_path: Path, run: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """T05: 5d8e439 strips only pool._RESIGN (the redaction row's suffix) from
    a logged dream's rows, but check_dream's other InputError,
    readerview.problems, carries its own new dream's fix in the rule text:
    "shows personal data (...) once rendered ...: remove it from the draft,
    or write it plainly for `dreampool sign` to replace, and sign again".
    A logged dream a rendering rule added since refuses (recheck's "a new
    redaction kind", seen once rendered) still gets "sign again" beside
    the logged dream's hint: two contradictory fixes, as r98 found for
    the redaction rows."""
    tp = make_pool(tmp_path)
    tp.add("ada", 1)
    buildmod.build(tp.content, tmp_path / "site", signer=parse_private_key(tp.log_key))

    def new_view(dream: Any) -> tuple[redact.Redaction, ...]:  # a rendered finding added since
        return (redact.Redaction("/title", "new-kind"),)

    monkeypatch.setattr(readerview, "findings", new_view)
    checked = run("check", "--content", tp.content)
    said = checked.out + checked.err
    assert checked.code == 1 and "new-kind" in said and "dreampool erase" in said, said
    assert "sign again" not in said, said


def _a_dream_after_an_honest_pull_request(repo: PoolFixture) -> Path:
    """The first tracked dream file, once an honest pull request is committed."""
    root = repo.content.parent
    submit(repo, signed("carol", title="A new voice"))
    for path in root.glob("in-*.json"):
        path.unlink()
    _commit(root, "an honest pull request")
    return sorted((repo.content / "dreams").glob("*.json"))[0]


def test_check_base_names_a_tracked_dream_replaced_by_an_empty_folder(
    repo: PoolFixture, run: Any
) -> None:
    """T49: tracked_folders now counts a tracked file's bare name, so an empty
    folder standing where a tracked dream file was (deleted in the work
    tree) is not named by _unseen_by_git; git status names the deletion
    (loose), so check --base still fails, naming the path, as build does."""
    dream = _a_dream_after_an_honest_pull_request(repo)
    dream.unlink()
    dream.mkdir()
    based = _check(run)
    said = based.out + based.err
    assert based.code == 1, said
    assert dream.name in said, said


def test_check_base_names_a_folder_over_a_skip_worktree_dream(repo: PoolFixture, run: Any) -> None:
    """T49: 5d8e439's tracked_folders counts every bare name git's index
    lists, a plain file's too, not only a submodule's (mode 160000). Where
    git does not stat the entry (skip-worktree: a sparse checkout, or
    `git update-index --skip-worktree`), a tracked dream file replaced by an
    empty folder is in neither `git status` (loose) nor any problem: check
    --base says "ok" while `dreampool build` refuses the tree. On
    5d8e439^ (names of paths ``name/...`` only) it was "a folder git holds
    nothing of". Count a bare name only where its index entry is a gitlink."""
    root = repo.content.parent
    dream = _a_dream_after_an_honest_pull_request(repo)
    _git(root, "update-index", "--skip-worktree", str(dream.relative_to(root)))
    dream.unlink()
    dream.mkdir()
    built = run("build", "--content", repo.content, "--out", root / "o")
    assert built.code == 1, built.out + built.err
    based = _check(run)
    said = based.out + based.err
    assert based.code == 1 and dream.name in said, said
