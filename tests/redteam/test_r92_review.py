"""Review r92: cc2e0dd4, the fixes of review r91's findings in the gate
(``check --base``, THREATS.md T49).

Each defect test fails on the reviewed HEAD and passes once the defect is
fixed; tests marked "(guard)" are attacks that held.

What was tried: getting a pull request's own key-file problem classified as
"on the base branch already" (a warning) through the realpath comparison
(``--content`` relative or absolute, the current folder reached through a
symlink, the pool reached through a symlinked folder, the current folder
being the pool); flipping the other way (a base problem blamed on an honest
pull request); the pending-dream test of a rotation (``_retires_pending``)
under the same path spellings; the porcelain parsing of ``uncommitted``
(ignored folders, the whole content folder ignored, nested repositories,
names with newlines and '::'); a symlink loop beside a rotation, now that
realpath no longer raises; and honest checkouts that hold files git ignores
where a build reads (which ``--ignored=matching`` now names).

What was done: both suggested fixes. An ignored dotfile (a killed write's
.tmp-*, .DS_Store, an editor's swap file) is never named as not committed,
as no build reads it, and an ignored path counts as one a build reads only
when it is inside such a folder or is a folder holding one; the
pending-dream pass of a rotation skips what read_regular refuses (a link),
which judge() names.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from builder.content import gitrepo, init
from builder.formats import dream as dreamfmt
from builder.formats import ed25519
from tests.gitrun import git
from tests.pools import PoolFixture, make_pool
from tests.redteam import seed_of, signed, submit
from tests.redteam.test_gate import _check, _commit, _git
from tests.redteam.test_r91_review import _drop_drafts, _key_file
from tests.redteam.test_rotation import NEW, OLD, kid, rotation, submit_files

Run = Callable[..., Any]

_BASE_NOTE = "on the base branch already"


def _errors(text: str) -> list[str]:
    return [x for x in text.splitlines() if x.startswith("dreampool: error:")]


def _warnings(text: str) -> list[str]:
    return [x for x in text.splitlines() if _BASE_NOTE in x]


def _broken_new_key(tp: PoolFixture, author: str = "carol") -> Path:
    """A new author's dream and key file, as `dreampool submit` writes them,
    with the key file then broken (a tier that does not exist)."""
    submit(tp, signed(author, title="A new voice"))
    _drop_drafts(tp.content.parent)
    key = _key_file(tp, author)
    key.write_text(key.read_text().replace("tier: guest", "tier: memeber"))
    return key


def _where(repo_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str) -> str:
    """Go where ``how`` says and return the --content to give there."""
    if how == "relative":
        return "content"
    if how == "absolute":
        return str(repo_root / "content")
    if how == "cwd is a symlink":
        link = tmp_path.parent / f"{tmp_path.name}-link"
        os.symlink(repo_root, link)
        monkeypatch.chdir(link)
        return "content"
    if how == "content through a symlinked folder":
        link = tmp_path.parent / f"{tmp_path.name}-pool"
        os.symlink(repo_root / "content", link)
        monkeypatch.chdir(tmp_path.parent)
        return str(link)
    if how == "cwd is the pool":
        monkeypatch.chdir(repo_root / "content")
        return "."
    if how == "dotted relative":
        monkeypatch.chdir(repo_root / "content" / "dreams")
        return "../../content/./keys/.."
    raise AssertionError(how)


_HOWS = [
    "relative",
    "absolute",
    "cwd is a symlink",
    "content through a symlinked folder",
    "cwd is the pool",
    "dotted relative",
]


# --- defects ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "ignored_by"),
    [
        ("dreams/.tmp-k3j9x_2a", "the pool's own .gitignore (init)"),
        ("log/leaves/.tmp-0qz81mfe", "the pool's own .gitignore (init)"),
        ("dreams/.DS_Store", "a global excludes file"),
        ("dreams/.0123456789abcdef.json.swp", "a global excludes file"),
    ],
)
def test_check_base_does_not_refuse_ignored_dotfiles_the_build_skips(
    repo: PoolFixture, run: Run, name: str, ignored_by: str
) -> None:
    """T49: cc2e0dd4 lists ignored files too (``git status
    --ignored=matching``) and names each one under dreams/, keys/,
    rotations/, erasures/, log/ as "is not committed", an error. But the
    build never reads a name starting with '.' there (``pool._scan`` and
    ``logstate._load_leaves`` skip them), and such files are exactly what an
    honest checkout ignores: the ``.tmp-*`` temporaries ``atomic_write``
    leaves when a build is killed mid-write (the pool's own .gitignore,
    written by `dreampool init`, ignores them for that reason), a Finder
    ``.DS_Store``, an editor's swap file of the dream being written (a
    global excludes file). ``check`` without --base and the build pass;
    ``check --base`` now fails (it passed before cc2e0dd4, which used
    ``--ignored=no``), telling the user to commit a temporary or a swap
    file. Suggested fix: in ``uncommitted``, drop an ignored ('!!') entry
    whose last component starts with '.' (what the build's scans skip), or
    keep only ignored names the build would read (``<16 hex>.json|salt``,
    ``<16 hex>.yaml``, shard and checkpoint names, pool.yaml) and ignored
    folders."""
    root = repo.content.parent
    (root / ".gitignore").write_text("\n".join(init.gitignore_lines()) + "\n")
    _commit(root, "base with the pool's .gitignore")
    _commit(root, "pull request")
    if ignored_by == "a global excludes file":
        excludes = root.parent / f"{root.name}-global-excludes"
        excludes.write_text(".DS_Store\n.*.swp\n")
        _git(root, "config", "core.excludesFile", str(excludes))
    file = repo.content / name
    file.write_bytes(b"partial")
    assert git(root, "status", "--porcelain", "--untracked-files=all") == ""  # clean to git
    whole = run("check", "--content", "content")
    assert whole.code == 0, whole.err  # the build skips it
    result = _check(run)
    assert f"{name}: is not committed" not in result.err, result.err
    assert result.code == 0, result.err


@pytest.mark.parametrize("target", ["itself (a loop)", "a dream on the base"])
def test_a_symlink_named_as_a_dream_beside_a_rotation_does_not_end_the_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run: Run, target: str
) -> None:
    """T49: r91 found that a symlink loop a pull request adds ended `check
    --base` in a traceback, "with no annotation and no summary"; cc2e0dd4
    compares by realpath, which never raises, so ``_retires_pending`` now
    goes on to ``pool.read_regular`` the link, which raises ``InputError``
    ("is a symlink"): its ``except (OSError, ValueError, TypeError,
    KeyError)`` ("`check` names it; not this pull request's") does not catch
    it. A pull request that adds a rotation and any symlink named like a
    dream (a loop, or a link to a dream on the base) still ends the check at
    that line: nothing else is reported (not judge()'s rows, not the pending
    dream its rotation retires), and with ``--format github`` nothing is
    written to stdout: no annotation and no summary table. (It fails closed,
    exit 1, but the report is the one r91 asked back.) Suggested fix: skip
    what is not a plain file in ``_retires_pending`` (``os.lstat`` +
    ``S_ISREG`` first, or catch ``DreampoolError`` with the others): judge()
    names the link already."""
    root = tmp_path / "repo"
    tp = make_pool(root)
    (root / ".gitignore").write_text("/site\n/.site.builds/\n")
    (pending,) = submit(tp, signed("ada", title="Merged, not logged"))
    _drop_drafts(root)
    _git(root, "init", "-q", "-b", "main")
    _commit(root, "base")
    submit_files(tp, rotation(OLD, NEW), signed("ada", seed=NEW, title="With my new key"))
    _drop_drafts(root)
    name = "0000000000000000.json"  # sorts first: read before the pending dream
    os.symlink(name if target.startswith("itself") else f"{pending}.json",
               tp.content / "dreams" / name)  # fmt: skip
    _commit(root, "pull request")
    monkeypatch.chdir(root)
    result = run("check", "--content", "content", "--base", "HEAD^1", "--format", "github")
    assert result.code == 1
    out = result.out.splitlines()
    assert any(
        x.startswith(f"::error file=content/dreams/{name}") and "is a symlink" in x for x in out
    ), (result.out, result.err)
    assert any("merged but not logged yet" in x and f"{pending}.json" in x for x in out), out


# --- guards ----------------------------------------------------------------


@pytest.mark.parametrize("how", _HOWS)
def test_guard_a_pull_requests_own_broken_key_file_stays_an_error(
    repo: PoolFixture, run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """T49 (guard): a key file the pull request adds, broken, is an error
    (never "on the base branch already") however the pool is reached: by a
    relative or absolute --content, through a symlinked current folder or
    pool folder, from inside the pool, by a path with '.' and '..'. Both
    sides of the realpath comparison name the same file; the dream signed by
    it is refused with "fix that file", not "a maintainer must fix it"."""
    root = repo.content.parent
    key = _broken_new_key(repo)
    _commit(root, "pull request")
    content = _where(root, tmp_path, monkeypatch, how)
    result = run("check", "--content", content, "--base", "HEAD^1")
    assert result.code == 1, result.err
    assert not _warnings(result.err), result.err
    assert any(key.name in x and "/tier" in x for x in _errors(result.err)), result.err
    dream_line = next(x for x in _errors(result.err) if "/sig/keyId" in x)
    assert "fix that file" in dream_line and "a maintainer must" not in dream_line


@pytest.mark.parametrize("how", _HOWS)
def test_guard_a_key_file_broken_on_the_base_stays_a_warning(
    repo: PoolFixture, run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """T49 (guard): the other way round: a key file broken on the base branch
    is a warning for an honest pull request (a new author's dream), and a
    dream the pull request signs with that key is refused with "a maintainer
    must fix it there", whatever the path spelling."""
    root = repo.content.parent
    (carol,) = submit(repo, signed("carol", title="A new voice"))  # before ada breaks
    _drop_drafts(root)
    carols = [repo.content / "dreams" / f"{carol}.json", _key_file(repo, "carol")]
    held = [(path, path.read_bytes()) for path in carols]
    for path in carols:
        path.unlink()
    ada = _key_file(repo, "ada")
    ada.write_text(ada.read_text().replace("tier: guest", "tier: memeber"))
    _commit(root, "base with a broken key file")
    for path, data in held:
        path.write_bytes(data)
    _commit(root, "honest pull request")
    content = _where(root, tmp_path, monkeypatch, how)
    honest = run("check", "--content", content, "--base", "HEAD^1")
    assert honest.code == 0, honest.err
    assert any(ada.name in x for x in _warnings(honest.err)), honest.err
    obj = signed("ada", title="A second dream by ada")
    d = dreamfmt.parse(json.dumps(obj).encode(), "x")
    (root / "content" / "dreams" / f"{d.id}.json").write_text(json.dumps(obj))
    _commit(root, "pull request by ada")
    result = run("check", "--content", content, "--base", "HEAD^1")
    assert result.code == 1, result.err
    line = next(x for x in _errors(result.err) if f"{d.id}.json" in x)
    assert "a maintainer must fix it there" in line, line


@pytest.mark.parametrize("how", ["relative", "absolute", "content through a symlinked folder"])
def test_guard_a_rotation_still_finds_the_pending_dream_of_its_old_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run: Run, how: str
) -> None:
    """T49 (guard): ``_retires_pending`` now compares by realpath: a dream of
    the old key merged but not logged (no salt) still fails a pull request
    that rotates from that key, whatever the path spelling, and the dream the
    pull request adds with the new key is not taken for a pending one."""
    root = tmp_path / "repo"
    tp = make_pool(root)
    (root / ".gitignore").write_text("/site\n/.site.builds/\n")
    (pending,) = submit(tp, signed("ada", title="Merged, not logged"))
    _drop_drafts(root)
    _git(root, "init", "-q", "-b", "main")
    _commit(root, "base")
    submit_files(tp, rotation(OLD, NEW), signed("ada", seed=NEW, title="With my new key"))
    _drop_drafts(root)
    _commit(root, "pull request")
    monkeypatch.chdir(root)
    content = _where(root, tmp_path, monkeypatch, how)
    result = run("check", "--content", content, "--base", "HEAD^1")
    assert result.code == 1, result.err
    lines = [x for x in _errors(result.err) if "merged but not logged yet" in x]
    assert len(lines) == 1 and f"{pending}.json" in lines[0], result.err
    assert kid(OLD) in lines[0] and f"{kid(NEW)[7:]}.yaml" in lines[0]


def test_guard_ignored_folders_and_repositories_where_a_build_reads_are_named(
    repo: PoolFixture, run: Run
) -> None:
    """T49 (guard): what ``--ignored=matching`` lists as a folder ('!!' and a
    trailing '/': a folder an ignore pattern matches, a nested repository)
    under dreams/ or keys/ is named "is not committed" and fails the check;
    the content folder ignored as a whole (its files tracked) still lists
    each ignored file; ignored files beside the pool's folders (a notes
    folder in content/, the build's site) are not named."""
    root = repo.content.parent
    _commit(root, "pull request")
    (root / ".git" / "info" / "exclude").write_text("content/\nnotes/\n")
    (repo.content / "dreams" / "drafts").mkdir()
    (repo.content / "dreams" / "drafts" / "0123456789abcdef.json").write_text("{}")
    nested = repo.content / "keys" / "nested"
    nested.mkdir()
    git(nested, "init", "-q")
    (repo.content / "notes").mkdir()
    (repo.content / "notes" / "todo.txt").write_text("x")
    loose = gitrepo.uncommitted(root, "content", ("dreams", "keys", "log", "pool.yaml"))
    assert sorted(loose) == ["content/dreams/drafts/", "content/keys/nested/"], loose
    result = _check(run)
    assert result.code == 1
    named = [x for x in _errors(result.err) if "is not committed" in x]
    assert len(named) == 2, result.err
    assert not any("notes" in x for x in named)


def test_guard_hostile_ignored_names_are_one_escaped_annotation_each(
    repo: PoolFixture, run: Run
) -> None:
    """T49 (guard): an ignored file under dreams/ (the new '!!' entries) whose
    name holds a newline and '::error::' is named once, escaped, in one
    annotation line; -z keeps the name whole."""
    root = repo.content.parent
    _commit(root, "pull request")
    (root / ".git" / "info" / "exclude").write_text("*.bad\n")
    folder = os.fsencode(repo.content / "dreams")
    with open(os.path.join(folder, b"x\n::error file=README.md::y.bad"), "wb") as f:
        f.write(b"{}")
    result = _check(run, "--format", "github")
    assert result.code == 1
    out = result.out.splitlines()
    assert all(x.startswith("::error file=") for x in out), result.out
    (line,) = [x for x in out if "is not committed" in x]
    assert "x\\n%3A%3Aerror file=README.md%3A%3Ay.bad" in line, line


def test_guard_a_symlinked_key_file_added_by_a_pull_request_is_an_error(
    repo: PoolFixture, run: Run
) -> None:
    """T49 (guard): a key file the pull request adds as a symlink to a key
    file broken on the base (so realpath would name the base's file, whose
    problem is a warning) is refused by judge() as a symlink: the check
    fails whatever ``_blame`` makes of it."""
    root = repo.content.parent
    ada = _key_file(repo, "ada")
    ada.write_text(ada.read_text().replace("tier: guest", "tier: memeber"))
    _commit(root, "base with a broken key file")
    carol = dreamfmt.key_id(ed25519.public_key_of(seed_of("carol")))[7:]
    os.symlink(ada.name, repo.content / "keys" / f"{carol}.yaml")
    _commit(root, "pull request")
    result = _check(run)
    assert result.code == 1
    assert any(f"{carol}.yaml: is a symlink" in x for x in _errors(result.err)), result.err
