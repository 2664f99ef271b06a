"""``dreampool check --base``: the gate a maintainer relies on (THREATS.md T49).

Each test makes a pool in a real git repository, commits it as the target
branch, commits a pull request on top, and runs ``check --base HEAD^1`` as
the scaffold's check workflow does (from the repository's root).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from builder import build as buildmod
from builder.content import gate, pool
from builder.formats import dream as dreamfmt
from builder.formats.note import parse_private_key
from builder.log import erase
from tests.pools import PoolFixture, make_pool
from tests.redteam import dump, signed, submit

_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@t",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t",
}


def _git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, env={**os.environ, **_ENV}
    )


def _commit(root: Path, message: str, *force: str) -> None:
    _git(root, "add", "-A")
    if force:
        _git(root, "add", "-f", "--", *force)
    _git(root, "commit", "-q", "--allow-empty", "-m", message)


def published_repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> PoolFixture:
    """A published pool (two logged dreams) committed as the target branch; the
    current folder is the repository's root, as in the check workflow (the
    ``repo`` fixture of tests/redteam/conftest.py)."""
    tp = make_pool(tmp_path)
    (tmp_path / ".gitignore").write_text("/site\n/.site.builds/\n")
    submit(tp, signed("ada", title="Logged one"), signed("bob", title="Logged two"))
    buildmod.build(tp.content, tmp_path / "site", signer=parse_private_key(tp.log_key))
    for path in tmp_path.glob("in-*.json"):
        path.unlink()
    _git(tmp_path, "init", "-q", "-b", "main")
    _commit(tmp_path, "base")
    monkeypatch.chdir(tmp_path)
    return tp


Run = Callable[..., Any]


def _check(run: Run, *extra: str) -> Any:
    return run("check", "--content", "content", "--base", "HEAD^1", *extra)


def test_an_honest_pull_request_passes_and_only_it_is_checked(
    repo: PoolFixture, run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    """T49: a new author's dream with its key file (what `dreampool submit`
    writes): ok, and only that one dream is verified, however large the pool."""
    submit(repo, signed("carol", title="A new voice"))
    for path in repo.content.parent.glob("in-*.json"):
        path.unlink()
    _commit(repo.content.parent, "pull request")
    checked = []
    real = pool.check_file
    monkeypatch.setattr(pool, "check_file", lambda p: checked.append(p) or real(p))
    result = _check(run)
    assert result.code == 0, result
    assert len(checked) == 1


def test_every_change_outside_the_contributor_paths_is_named(repo: PoolFixture, run: Run) -> None:
    """T49 (regression for issue 17's reproductions 1–4 and 8): `check` passed
    each of these. Now every offending path is named, in plain output and as
    a GitHub annotation on that file."""
    root = repo.content.parent
    (dream_id,) = submit(repo, signed("carol", title="Brings company"))
    for path in root.glob("in-*.json"):
        path.unlink()
    (root / "pip.py").write_text("import os\n")
    (root / "sitecustomize.py").write_text("import os\n")
    (root / ".github" / "workflows").mkdir(parents=True)
    (root / ".github" / "workflows" / "evil.yml").write_text("on: push\n")
    (repo.content / "dreams" / f"{dream_id}.salt").write_text("not-a-salt\n")
    leaves = sorted((repo.content / "log").rglob("*"))
    leaf = next(p for p in leaves if p.is_file() and "leaves" in p.parts)
    leaf.write_bytes(leaf.read_bytes() + b"\n")
    (repo.content / "pool.yaml").write_text(
        (repo.content / "pool.yaml").read_text().replace("k: 2", "k: 1")
    )
    ada_key = next((repo.content / "keys").glob("*.yaml"))
    ada_key.write_text(ada_key.read_text().replace("tier: guest", "tier: maintainer"))
    cache = root / ".site.builds" / "cache"
    (cache / "scan").write_bytes(b"dreampool-cache/3\n")
    (cache / "jinja").symlink_to("../../content")
    (root / "site").unlink()
    (root / "site").symlink_to(".site.builds/a")
    (repo.content / "dreams" / "0123456789abcdef.json").symlink_to("/etc/passwd")
    _commit(root, "pull request", ".site.builds/cache", "site")
    offending = [
        "pip.py",
        "sitecustomize.py",
        ".github/workflows/evil.yml",
        f"content/dreams/{dream_id}.salt",
        str(leaf.relative_to(root)),
        "content/pool.yaml",
        str(ada_key.relative_to(root)),
        ".site.builds/cache/scan",
        ".site.builds/cache/jinja",
        "site",
        "content/dreams/0123456789abcdef.json",
    ]
    plain = _check(run)
    assert plain.code == 1
    for path in offending:
        assert f"dreampool: error: {path}: " in plain.err, (path, plain.err)
    github = _check(run, "--format", "github")
    assert github.code == 1
    for path in offending:
        assert f"::error file={path.replace(':', '%3A').replace(',', '%2C')}::" in github.out, (
            path,
            github.out,
        )
    assert f"content/dreams/{dream_id}.json" not in plain.err + github.out  # the dream is fine


def test_what_a_pull_request_breaks_in_a_key_file_or_salt_is_its_own(
    repo: PoolFixture, run: Run
) -> None:
    """T49 (a new user's audit, 23rd session): a key file the pull request
    changed into an invalid one was named, besides the change itself, as a
    problem "on the base branch already" for a maintainer to fix there; and
    a logged dream's salt it deleted or changed was to be "removed". Both are
    the pull request's own, with the fix: restore them."""
    root = repo.content.parent
    key_file = next((repo.content / "keys").glob("*.yaml"))
    key_file.write_text(key_file.read_text().replace("tier: guest", "tier: memeber"))
    deleted, changed = sorted((repo.content / "dreams").glob("*.salt"))
    deleted.unlink()
    changed.write_text(changed.read_text() + "x")
    _commit(root, "pull request")
    result = _check(run)
    assert result.code == 1
    assert "on the base branch already" not in result.err, result.err
    assert f"error: {key_file.relative_to(root)}: /tier: must be one of" in result.err
    for salt, verb in ((deleted, "deletes"), (changed, "changes")):
        rel = salt.relative_to(root)
        assert (
            f"error: {rel}: the pull request {verb} the salt of a logged dream, which its "
            f"record needs; restore it from the base branch (git checkout <base> -- {rel})"
        ) in result.err, result.err
    assert "remove this file" not in result.err


def test_what_the_commits_do_not_hold_is_named_not_passed(repo: PoolFixture, run: Run) -> None:
    """T49 (a new user's audit, 23rd session): `check --base` judges the
    commits, and said "ok" with a broken dream file beside them, untracked or
    staged but not committed, which a build would read."""
    root = repo.content.parent
    _commit(root, "pull request")
    untracked = repo.content / "dreams" / "1111111111111111.json"
    untracked.write_text("{bad")
    staged = repo.content / "dreams" / "2222222222222222.json"
    staged.write_text("{bad")
    _git(root, "add", str(staged))
    result = _check(run)
    assert result.code == 1, result.err
    for path in (untracked, staged):
        rel = path.relative_to(root)
        assert (
            f"error: {rel}: is not committed: `check --base` checks the commits HEAD^1..HEAD"
            in (result.err)
        ), result.err
    untracked.unlink()
    _git(root, "rm", "-q", "--cached", str(staged.relative_to(root)))
    staged.unlink()
    assert _check(run).code == 0


def test_a_new_key_file_comes_in_as_a_guest(repo: PoolFixture, run: Run) -> None:
    """T37, T49: a key file written by hand with `tier: member` in a pull request."""
    submit(repo, signed("carol", title="Wants a tier"))
    key = next(p for p in (repo.content / "keys").glob("*.yaml") if "carol" in p.read_text())
    key.write_text(key.read_text().replace("tier: guest", "tier: member"))
    _commit(repo.content.parent, "pull request")
    result = _check(run)
    assert result.code == 1
    assert (
        f"{key.relative_to(repo.content.parent)}: /tier: a new key comes in as guest" in result.err
    )


def test_an_erased_dream_cannot_come_back(repo: PoolFixture, run: Run) -> None:
    """T07, T49: a dream a maintainer erased, added again by a pull request."""
    (dream_id,) = submit(repo, signed("ada", title="Will be erased"))
    data = (repo.content / "dreams" / f"{dream_id}.json").read_bytes()
    for path in repo.content.parent.glob("in-*.json"):
        path.unlink()
    buildmod.build(
        repo.content, repo.content.parent / "site", signer=parse_private_key(repo.log_key)
    )
    erase.erase(repo.content, dream_id, "author-request")
    _commit(repo.content.parent, "erased")
    (repo.content / "dreams" / f"{dream_id}.json").write_bytes(data)
    _commit(repo.content.parent, "pull request")
    result = _check(run)
    assert result.code == 1
    assert "was erased from this pool and cannot return" in result.err


def test_a_bad_dream_beside_good_ones_is_named_alone(repo: PoolFixture, run: Run) -> None:
    """T49: a bad contribution never wedges honest ones: `check` names the bad
    file and only it."""
    good, bad = submit(repo, signed("carol", title="Good"), signed("carol", title="Bad"))
    path = repo.content / "dreams" / f"{bad}.json"
    obj = dreamfmt.load_json(path.read_bytes(), "x")
    obj["title"] = "Edited after signing"
    path.write_bytes(dump(obj))
    _commit(repo.content.parent, "pull request")
    result = _check(run)
    assert result.code == 1
    assert f"content/dreams/{bad}.json" in result.err
    assert f"content/dreams/{good}.json" not in result.err


def test_a_base_that_is_not_there_is_a_clear_error(repo: PoolFixture, run: Run) -> None:
    """T49, T41: a base the checkout lacks (fetch-depth 1) is an error that says
    what to do, never a traceback or a pass."""
    result = run("check", "--content", "content", "--base", "no-such-ref")
    assert result.code == 1
    assert "no-such-ref is not a commit" in result.err and "fetch-depth" in result.err
    assert "Traceback" not in result.err


def test_check_of_the_whole_pool_names_tracked_build_state_and_special_files(
    repo: PoolFixture, run: Run
) -> None:
    """T49: without --base (a maintainer's local check): tracked build state,
    symlinks and submodules git tracks, and FIFOs or hard links in content/."""
    root = repo.content.parent
    (root / ".site.builds" / "cache" / "planted").write_bytes(b"x")
    (root / "docs").mkdir()
    (root / "docs" / "link").symlink_to("/etc/passwd")
    _commit(root, "planted", ".site.builds/cache/planted")
    os.mkfifo(repo.content / "log" / "fifo")
    key = next((repo.content / "keys").glob("*.yaml"))
    os.link(key, root / "outside-copy.yaml")
    result = run("check", "--content", "content")
    assert result.code == 1
    assert ".site.builds/cache/planted: is the build's own state" in result.err
    assert "docs/link: is a symlink git tracks" in result.err
    assert "content/log/fifo: is a special file" in result.err
    assert f"{key.relative_to(root)}: is a hard link" in result.err


@pytest.mark.parametrize("given", ["content", "absolute"])
def test_a_tracked_symlinked_dream_is_one_problem_with_its_fix(
    repo: PoolFixture, run: Run, given: str
) -> None:
    """T49 (a new user's audit, 23rd session): without --base, a dream file
    that is a symlink git tracks was named twice, by the scan and as a
    tracked symlink, and neither line said what to do."""
    root = repo.content.parent
    link = repo.content / "dreams" / "b296e901a488ede7.json"
    link.symlink_to("/tmp/elsewhere.json")
    _commit(root, "a symlinked dream")
    content = "content" if given == "content" else str(repo.content)
    result = run("check", "--content", content)
    assert result.code == 1
    lines = [ln for ln in result.err.splitlines() if "b296e901a488ede7.json" in ln]
    assert len(lines) == 1, result.err
    assert "replace it by the file itself" in lines[0]
    assert "1 problem(s)" in result.err


@pytest.mark.parametrize(
    "path", ["Site/index.html", "SITE/x", "\u017fite/x", ".Site.BUILDS/cache/store.sqlite"]
)
def test_build_state_under_another_letter_case_is_named_too(
    repo: PoolFixture, run: Run, path: str
) -> None:
    """T110 at the gate: a file system that folds letter case (macOS, Windows; APFS
    also folds U+017F, long s, to s) checks ``Site/`` out as the build's own
    ``site`` and ``.Site.BUILDS/`` as its ``.site.builds``: ``check`` names them as
    it names the lower-case ones, where a case-sensitive comparison let them by."""
    root = repo.content.parent
    (root / path).parent.mkdir(parents=True, exist_ok=True)
    (root / path).write_bytes(b"planted")
    _commit(root, "planted", path)
    result = run("check", "--content", "content")
    assert result.code == 1
    assert f"{path}: is the build's own state" in result.err


def test_judge_refuses_what_no_contributor_writes() -> None:
    """T49: the pure rule, path by path (a naive reading of the table in
    builder.content.gate)."""
    from builder.content.gitrepo import Change

    def one(status: str, path: str, mode: str = "100644") -> list[str]:
        old = "000000" if status == "A" else "100644"
        new = "000000" if status == "D" else mode
        problems, _ = gate.judge([Change(status, path, old, new)], "content")
        return [p.rule for p in problems]

    ok = [
        ("A", "content/dreams/0123456789abcdef.json"),
        ("A", "content/keys/0123456789abcdef.yaml"),
        ("A", "content/rotations/0123456789abcdef.json"),
    ]
    for status, path in ok:
        assert one(status, path) == [], path
    refused = [
        ("M", "content/dreams/0123456789abcdef.json"),
        ("D", "content/dreams/0123456789abcdef.json"),
        ("M", "content/keys/0123456789abcdef.yaml"),
        ("A", "content/dreams/0123456789abcdef.salt"),
        ("A", "content/dreams/0123456789ABCDEF.json"),
        ("A", "content/dreams/sub/0123456789abcdef.json"),
        ("A", "content/dreams/.gitkeep2"),
        ("A", "content/erasures/0123456789abcdef.json"),
        ("A", "content/log/leaves/x"),
        ("A", "content/pool.yaml"),
        ("A", "pip.py"),
        ("A", "pip/__init__.py"),
        ("A", "requirements.txt"),
        ("A", ".site.builds/cache/store.sqlite"),
        ("A", "site"),
        ("A", "contentx/dreams/0123456789abcdef.json"),
    ]
    for status, path in refused:
        assert one(status, path) != [], path
    assert one("A", "content/dreams/0123456789abcdef.json", "120000") != []
    assert one("A", "content/dreams/0123456789abcdef.json", "160000") != []


def test_a_pull_request_may_add_an_anonymous_dream_but_not_a_named_anonymized_one(
    repo: PoolFixture, run: Run
) -> None:
    """T68, T70: the gate applies the anonymity rules to what a pull
    request adds. A dream with consent.anonymize under its author's own name
    is refused, telling the author to sign it again with `dreampool sign`; one
    signed with a one-time key under ``anonymous`` (its key file a guest's)
    passes; a second dream by a one-time key already in the pool is refused."""
    root = repo.content.parent
    anon = {"share": True, "derivatives": False, "anonymize": True}
    d = dreamfmt.parse(dump(signed("carol", consent=anon)), "x")
    path = repo.content / "dreams" / f"{d.id}.json"
    path.write_bytes(dump(d.body))
    pool.atomic_write(
        repo.content / "keys" / f"{d.key_id[7:]}.yaml",
        pool.format_key_entry(
            pool.KeyEntry(d.key_id, "carol", d.public_key, "guest", "2026-01-01")
        ),
    )
    _commit(root, "pull request")
    named = _check(run)
    assert named.code == 1
    assert "/consent/anonymize" in named.err and "dreampool sign" in named.err, named.err
    _git(root, "reset", "-q", "--hard", "HEAD^1")
    one_time = signed("anonymous", seed=b"\x07" * 32, consent=anon)
    submit(repo, one_time)
    for stale in root.glob("in-*.json"):
        stale.unlink()
    _commit(root, "pull request")
    assert _check(run).code == 0
    _git(root, "reset", "-q", "--hard", "HEAD^1")
    # Merged and built: the same one-time key signs nothing more.
    submit(repo, one_time)
    for stale in root.glob("in-*.json"):
        stale.unlink()
    _commit(root, "merged")
    again = signed("anonymous", seed=b"\x07" * 32, consent=anon, title="Again")
    d2 = dreamfmt.parse(dump(again), "x")
    (repo.content / "dreams" / f"{d2.id}.json").write_bytes(dump(again))
    _commit(root, "pull request")
    result = _check(run)
    assert result.code == 1 and "one dream" in result.err, result
