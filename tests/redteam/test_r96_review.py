"""Review r96 of bb33268 (review r95's fixes): `check --base`'s _holds_a_file,
and rule 3 in builder.formats.ed25519.

Each test failed on the reviewed tree (bb33268) and names the defect it
showed. What was done: `check --base` asks git whether it names anything
under a folder it finds there (tracked, or among what `uncommitted` lists)
instead of walking the folder for any file, so a folder holding only an
ignored dotfile, or nested past the path limit, is named as the build
refuses it; rule 3 is asked only once OpenSSL has refused a signature, to
name the cause, never for an honest key (the review's timing test is now a
count of the calls: speed is measured in benchmarks/, not asserted here).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from builder.formats import ed25519
from tests.pools import PoolFixture
from tests.redteam.test_gate import _check, _commit

Run = Callable[..., Any]


def _three(repo: PoolFixture, run: Run, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any, Any]:
    monkeypatch.setenv("DREAMPOOL_LOG_KEY", repo.log_key)
    root = repo.content.parent
    built = run("build", "--content", "content", "--out", str(root / "out"))
    whole = run("check", "--content", "content")
    return built, whole, _check(run)


@pytest.mark.parametrize("folder", ["dreams", "keys", "log/leaves"])
def test_check_base_names_a_folder_holding_only_a_file_git_ignores(
    repo: PoolFixture, run: Run, monkeypatch: pytest.MonkeyPatch, folder: str
) -> None:
    """T49: _holds_a_file counts any file at any depth as "git's to report",
    but gitrepo.uncommitted drops an ignored dotfile (review r92), and the
    .gitignore `dreampool init` writes ignores `.tmp-*` (a macOS user's
    global ignore, `.DS_Store`). A folder content/dreams/drafts holding only
    .tmp-abc is then reported by neither: `build` and `check` refuse the
    pool ("content/dreams/drafts: unexpected entry"), `check --base` says
    "ok: content has no problems". Before bb33268 it named the folder (for
    dreams and keys): a regression. A file counts only if git would name it
    (tracked, or reported by gitrepo.uncommitted)."""
    root = repo.content.parent
    with open(root / ".gitignore", "a", encoding="utf-8") as f:
        f.write(".tmp-*\n")  # as builder/content/init.py's template
    _commit(root, "base: the scaffold's .gitignore")
    _commit(root, "pull request")
    drafts = repo.content / folder / "drafts"
    drafts.mkdir()
    (drafts / ".tmp-abc").write_text("a killed write's temporary\n", encoding="utf-8")
    built, whole, based = _three(repo, run, monkeypatch)
    assert built.code == 1 and whole.code == 1, built.err + whole.err
    assert based.code == 1, based.out + based.err


def test_check_base_names_an_empty_folder_nested_past_path_max(
    repo: PoolFixture, run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    """T49: _holds_a_file takes a folder it cannot list as holding a file
    ("git's to report, never a false alarm"). A folder in content/dreams
    holding only empty folders nested 2,500 deep (its paths pass PATH_MAX, so
    os.scandir raises ENAMETOOLONG) is carried by no git and refused by the
    build, whatever it holds ("content/dreams/deep: unexpected entry"); but
    `check --base` says ok (before bb33268 it named it). Any entry of a
    listed folder that is a folder is refused by the build, so naming one
    git cannot list is never a false alarm; listing by folder descriptor
    (os.fwalk / scandir(fd)) would not hit PATH_MAX at all. (`check`
    without --base stops on the same tree with "…/d: File name too long",
    gate.special_files, no problem list: older, not bb33268's.)"""
    root = repo.content.parent
    _commit(root, "pull request")
    deep = repo.content / "dreams" / "deep"
    deep.mkdir()
    here = os.getcwd()
    os.chdir(deep)
    try:
        for _ in range(2500):
            os.mkdir("d")
            os.chdir("d")
    finally:
        os.chdir(here)
    monkeypatch.setenv("DREAMPOOL_LOG_KEY", repo.log_key)
    try:
        built = run("build", "--content", "content", "--out", str(root / "out"))
        based = _check(run)
    finally:
        _remove_nest(deep)
    assert built.code == 1 and "content/dreams/deep" in built.err, built.err
    assert based.code == 1, based.out + based.err


def _remove_nest(deep: Path) -> None:
    """Remove the nest bottom up (pytest's rmtree recurses past Python's limit)."""
    here = os.getcwd()
    os.chdir(deep)
    depth = 0
    try:
        while os.path.isdir("d"):
            os.chdir("d")
            depth += 1
        for _ in range(depth):
            os.chdir("..")
            os.rmdir("d")
    finally:
        os.chdir(here)


def test_rule_3_is_asked_only_of_a_key_whose_signature_failed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """T05: _decodes (rule 3) runs two 255-bit modular exponentiations in
    Python: about 290–340 µs a key here, 2.5× an OpenSSL verification
    (120–140 µs), and it ran on every check of a public key, kept for 1,024
    keys only. benchmarks/genpool.py makes n/20 authors, interleaved, so
    nearly every dream's key missed the cache: measured 186 → 643 µs a
    verify over 10,000 dreams by 5,000 authors. Every key leaf the log reads
    paid it as well. Now rule 3 is asked only once OpenSSL has refused, to
    name the cause (speed is measured in benchmarks/, never asserted here:
    this counts the calls instead of timing them)."""
    asked: list[bytes] = []
    real = ed25519._decodes

    def counting(key: bytes) -> bool:
        asked.append(key)
        return real(key)

    monkeypatch.setattr(ed25519, "_decodes", counting)
    message = b"m" * 500
    for _ in range(20):
        seed = os.urandom(32)
        key = ed25519.public_key_of(seed)
        ed25519.check_public_key(key)
        ed25519.verify(key, message, ed25519.sign(seed, message))
    assert asked == []
    seed = os.urandom(32)
    key = ed25519.public_key_of(seed)
    with pytest.raises(ed25519.SignatureError, match="does not verify"):
        ed25519.verify(key, message + b"!", ed25519.sign(seed, message))
    assert asked == [key]
    off_curve = (2).to_bytes(32, "little")  # y = 2: x² has no root mod p
    with pytest.raises(ed25519.SignatureError, match="not a point of the curve"):
        ed25519.verify(off_curve, message, ed25519.sign(seed, message))
