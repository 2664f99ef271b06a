"""Review of ``gate.is_build_state`` (THREATS.md T110): build state committed
under a name a file system that folds names checks out as the build's own.

The file systems meant, and what each folds (only what a real one does):

* APFS, case-insensitive (macOS's default): Unicode case folding (``ſ`` is
  ``s``) and canonical normalization (``é`` composed or decomposed is one name).
* HFS+ (Mac OS Extended): its own case folding, decomposition, and it ignores
  the code points U+200C–U+200F, U+202A–U+202E, U+206A–U+206F and U+FEFF in a
  name (Apple TN1150, "FastUnicodeCompare"; git's ``is_hfs_dotgit`` skips the
  same ones for ``.git``, CVE-2014-9390), so ``s\\u200cite`` is ``site``.

The tests run on a case-sensitive file system: they show what git tracks and
what ``check`` and the build say about it, not the aliasing itself.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from builder.content import gate, gitrepo
from builder.site import derived
from tests.pools import PoolFixture
from tests.redteam.test_gate import Run, _check, _commit

_ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@t",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t",
}


@pytest.mark.parametrize("path", ["Site/x", "\u017fite/x", ".SITE.builds/cache/store.sqlite"])
def test_a_pull_request_adding_build_state_under_another_case_fails_check(
    repo: PoolFixture,
    run: Run,
    path: str,
) -> None:
    """T110 at the pull-request gate (``check --base``, what the check workflow
    runs): a pull request adding build state under another letter case fails,
    and the problem names the path and says what it is."""
    root = repo.content.parent
    (root / path).parent.mkdir(parents=True, exist_ok=True)
    (root / path).write_bytes(b"planted")
    _commit(root, "pull request", path)
    result = _check(run)
    assert result.code == 1
    assert f"{path}: the build's own state is never committed" in result.err


@pytest.mark.parametrize(
    "path",
    [
        "s\u200cite/index.html",  # HFS+: ZERO WIDTH NON-JOINER ignored
        "\ufeffsite/x",  # HFS+: ZERO WIDTH NO-BREAK SPACE ignored
        ".site.builds\u200d/cache/store.sqlite",  # HFS+: ZERO WIDTH JOINER ignored
        ".\u017fite.B\u200cUILDS/cache/store.sqlite",
    ],
)
def test_build_state_behind_an_ignorable_code_point_is_named(
    repo: PoolFixture,
    run: Run,
    path: str,
) -> None:
    """T110: HFS+ ignores U+200C–U+200F, U+202A–U+202E, U+206A–U+206F and U+FEFF
    when it compares names, so a tracked ``s<U+200C>ite/`` is checked out there
    into the build's own ``site``, and ``.site.builds<U+200D>/`` into its builds
    folder. NFKC and case folding keep these code points, so the whole-pool
    ``check`` (a maintainer's) passed such a path while it names ``Site/``."""
    root = repo.content.parent
    (root / path).parent.mkdir(parents=True, exist_ok=True)
    (root / path).write_bytes(b"planted")
    _commit(root, "planted", path)
    assert gate.is_build_state(path.split("/")[0])
    result = run("check", "--content", "content")
    assert result.code == 1
    shown = path.encode("unicode_escape").decode("ascii")
    assert f"{shown}: is the build's own state" in result.err


def _track(root: Path, *paths: str) -> None:
    for path in paths:
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes(b"planted")
    git = ["git", "-C", str(root)]
    subprocess.run([*git, "init", "-q"], check=True, env=_ENV)
    subprocess.run([*git, "config", "core.ignorecase", "true"], check=True, env=_ENV)
    subprocess.run([*git, "add", "-f", "--", *paths], check=True, env=_ENV)


@pytest.mark.parametrize(
    ("out_name", "planted"),
    [
        ("site", ".\u017fite.builds/cache/store.sqlite"),  # APFS: U+017F folds to s
        ("site", "\u017fite/index.html"),
        ("site", ".site.builds\u200c/cache/store.sqlite"),  # HFS+: U+200C ignored
        ("caf\u00e9", ".cafe\u0301.builds/cache/store.sqlite"),  # APFS, HFS+: NFD is NFC
    ],
)
def test_the_build_trusts_no_state_git_tracks_under_a_folded_name(
    tmp_path: Path, out_name: str, planted: str
) -> None:
    """T110 in the build (T45) and the agents' server (T108): ``gitrepo.tracked``
    asks git with ``:(literal,icase)``, and git's icase folds ASCII letters only.
    On APFS a tracked ``.ſite.builds/cache/store.sqlite`` is the builds folder's
    own store, and on APFS and HFS+ a tracked decomposed ``.café.builds`` is the
    composed one of ``--out café``; the build and the agents' server read such a
    store as their own (rows with keyless digests). The gate stops a pull request
    that adds it, but the build's defence is meant to hold without the gate (a
    maintainer's push, a merge past a red check), as it does for ``Site/``."""
    out = tmp_path / out_name
    builds = tmp_path / f".{out_name}.builds"
    (builds / "cache").mkdir(parents=True)
    (builds / "cache" / "store.sqlite").write_bytes(b"the build's own")
    _track(tmp_path, planted)
    assert gitrepo.tracked(tmp_path, [out_name, builds.name]) == [planted]
    assert derived.store_to_read(out) is None
    notes = derived.secure(out)
    assert notes and "git tracks 1 path(s) of the build's own state" in notes[0]
    assert not builds.exists()


def test_a_pull_request_adding_a_name_that_is_not_utf8_fails_check_without_a_traceback(
    repo: PoolFixture,
    run: Run,
) -> None:
    """T110/T49: git holds names as bytes; a top-level name that is not UTF-8
    (``\\xffsite``, which no folding file system takes for ``site``: APFS refuses
    such a name) goes through the fold without an error and is refused as outside
    the contributor paths, shown escaped, in plain output and as an annotation."""
    root = repo.content.parent
    name = os.fsdecode(b"\xffsite")
    (root / name).mkdir()
    (root / name / "x").write_bytes(b"planted")
    _commit(root, "pull request")
    result = _check(run)
    assert result.code == 1
    assert "\\udcffsite/x: is outside the contributor paths" in result.err
    result = _check(run, "--format", "github")
    assert result.code == 1
    assert "udcffsite" in result.out
