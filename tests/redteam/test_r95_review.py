"""Review r95: `check --base`'s scan of the folders a build reads (c54bf3e),
the hints of a refused signature (cf67dec), and the Go verifier's rule on R
(487bc70).

Each test failed on the reviewed tree (cf67dec) and names the defect it
showed. What was done: `check --base` lists only the folders a build lists
entry by entry (dreams, keys and the log's leaf shards, not rotations or
erasures, which it reads by name), names a folder only when it holds no file
or link (what git carries is git's to report, and a base branch's problem
stays a warning), skips a folder that is a link or cannot be listed (a
symlink loop is named by judge and the layout check, not an abort), and
never recurses; a logged dream (a salt beside it) gets no "sign it again"
hint, the log's problem says recheck and erase; a key that is no point of
the curve is refused as such (builder.formats.ed25519, rule 3), not told it
was edited; tests/interop/verify.go refuses a vkey whose key fails §1's key
rules, as §4.1 requires.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from builder import build as buildmod
from builder.errors import SignatureError
from builder.formats import dream as dreamfmt
from builder.formats import note as notemod
from builder.formats.b64 import b64url_encode
from builder.formats.note import parse_private_key
from tests.conftest import draft
from tests.pools import SEEDS, PoolFixture, make_pool
from tests.redteam.test_gate import _check, _commit
from tests.redteam.test_r94_review import pool_logging_an_identity_r_dream
from tests.test_interop import run_go

Run = Callable[..., Any]


def _make(path: Path, kind: str) -> None:
    if kind == "folder":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(path))
        sock.close()


# --------------------------------------------------------------------------
# 1. c54bf3e: _unseen_by_git


@pytest.mark.parametrize("folder", ["erasures", "rotations"])
def test_check_base_does_not_refuse_a_folder_the_build_accepts(
    repo: PoolFixture, run: Run, monkeypatch: pytest.MonkeyPatch, folder: str
) -> None:
    """T49: _SCANNED holds rotations and erasures, but the build never scans
    them (pool._scan reads dreams and keys only; rotations and erasures are
    read by path), and `check` without --base finds nothing wrong with a
    folder there. A maintainer's committed content/erasures/archive/note.txt
    (git carries it: a folder holding a file) is on the base branch; every
    honest pull request then fails `check --base` with "is a folder, which
    git does not carry and a build refuses (unexpected entry)", none of which
    is true: `check` says ok and `build` builds."""
    monkeypatch.setenv("DREAMPOOL_LOG_KEY", repo.log_key)
    root = repo.content.parent
    held = repo.content / folder / "archive"
    held.mkdir(parents=True)
    (held / "note.txt").write_text("kept by the maintainers\n", encoding="utf-8")
    _commit(root, "base: a folder in content/" + folder)
    _commit(root, "pull request")
    whole = run("check", "--content", "content")
    built = run("build", "--content", "content", "--out", str(root / "out"))
    assert whole.code == 0 and built.code == 0, whole.err + built.err
    based = _check(run)
    assert based.code == 0, based.err


def test_check_base_does_not_fail_a_pull_request_for_what_it_calls_the_bases(
    repo: PoolFixture, run: Run
) -> None:
    """T49: a folder (holding a file, so git carries it) in content/keys on the
    base branch: before c54bf3e `check --base` said it as a warning "on the
    base branch already, not caused by this pull request: a maintainer fixes
    it there" (gate._blame) and passed the pull request. Now the same entry
    is also an error of the pull request ("which git does not carry", false:
    it is committed), so every pull request fails for the base's problem,
    with two contradictory lines for one path."""
    root = repo.content.parent
    held = repo.content / "keys" / "archive"
    held.mkdir()
    (held / "old.yaml").write_text("author: x\n", encoding="utf-8")
    _commit(root, "base: a folder in content/keys")
    _commit(root, "pull request")
    based = _check(run)
    assert "not caused by this pull request" in based.err
    assert based.code == 0, based.err


def test_a_symlink_loop_in_place_of_a_scanned_folder_is_named_not_an_abort(
    repo: PoolFixture, run: Run
) -> None:
    """T49: a pull request that adds content/erasures as a symlink to itself.
    Before c54bf3e, `check --base` named it twice (judge: "is a symlink";
    load_config's layout check). Now _unseen_by_git's os.scandir raises
    ELOOP (it catches FileNotFoundError and NotADirectoryError only), and
    the run ends with "error: content/erasures: Too many levels of symbolic
    links": no problem list, no annotation, no summary (review r91 fixed the
    same abort for realpath). `check` and `build` name the symlink."""
    root = repo.content.parent
    os.symlink("erasures", repo.content / "erasures")
    _commit(root, "pull request")
    based = _check(run)
    assert based.code == 1
    assert "content/erasures: is a symlink" in based.err, based.err


@pytest.mark.parametrize("kind", ["folder", "fifo", "socket"])
def test_check_base_names_an_entry_in_log_leaves_the_build_refuses(
    repo: PoolFixture, run: Run, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    """T49: the r91 gap c54bf3e closed for dreams and keys is still open for
    content/log/leaves, which the build also reads entry by entry
    (logstate._load_leaves: every name not starting with "." must be a
    shard): an empty folder, a FIFO or a socket there makes `build` and
    `check` refuse the pool, while `check --base` says ok."""
    monkeypatch.setenv("DREAMPOOL_LOG_KEY", repo.log_key)
    root = repo.content.parent
    _commit(root, "pull request")
    _make(repo.content / "log" / "leaves" / "zzz", kind)
    built = run("build", "--content", "content", "--out", str(root / "out"))
    whole = run("check", "--content", "content")
    assert built.code == 1 and whole.code == 1
    based = _check(run)
    assert based.code == 1, based.out


# --------------------------------------------------------------------------
# 2. cf67dec: a logged dream a rule added since refuses


def test_check_of_a_logged_dream_a_new_rule_refuses_does_not_say_sign_again(
    tmp_path: Path, run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    """T05: review r94 found that `check` told a logged dream rule 4 now
    refuses to "sign the draft again with `dreampool sign`" and said
    neither restoring nor re-signing helps. cf67dec changed the first half
    of that hint only: the file's row now says "no Ed25519 signer makes such
    a signature (docs/protocol.md §1); sign the draft again with `dreampool
    sign`", while the log's row, just below, says to erase it. Signing
    again makes another dream (another id); the logged one still fails
    `check` until erased. pool.check adds a new file's hint to every dream
    it reads, logged or not (recheck rightly adds none)."""
    tp = pool_logging_an_identity_r_dream(tmp_path, monkeypatch)
    checked = run("check", "--content", tp.content)
    said = checked.out + checked.err
    assert checked.code == 1 and "dreampool erase" in said
    assert "sign the draft again" not in said, said


# --------------------------------------------------------------------------
# 3. 487bc70: the Go verifier


B = bytes.fromhex("5866666666666666666666666666666666666666666666666666666666666666")


@pytest.mark.parametrize(
    "key_hex",
    [
        "0100000000000000000000000000000000000000000000000000000000000000",  # identity
        "eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",  # y = p + 1
    ],
)
def test_go_verifier_refuses_a_log_key_section_1_refuses(tmp_path: Path, key_hex: str) -> None:
    """T05, T32: docs/protocol.md §4.1 says a verifier MUST refuse a vkey
    whose public key fails §1's key-validity rules, and docs/verifiers.md
    (487bc70) now tells a Go verifier which rules its library lacks, naming
    only the rule on R. Go's note.NewVerifier takes any 32-byte key: with a
    log key of small order (the identity, or y = p + 1 which Go's decoder
    reduces to it), the universal signature R = B, S = 1 verifies every
    checkpoint, so anyone forges one; tests/interop/verify.go (strict)
    accepts it, where dreampool refuses the key itself."""
    tp = make_pool(tmp_path)
    tp.add("ada", 3)
    site = tmp_path / "site"
    buildmod.build(tp.content, site, signer=parse_private_key(tp.log_key))
    name = parse_private_key(tp.log_key).name
    key = bytes.fromhex(key_hex)
    vkey = notemod.encode_verifier_key(name, notemod.SIG_ED25519, key)
    with pytest.raises(Exception, match=r"small order|canonical"):
        notemod.parse_verifier_key(vkey)
    policy = site / "log" / "policy"
    policy.write_text(
        "".join(
            f"log {vkey}\n" if line.startswith("log ") else line + "\n"
            for line in policy.read_text(encoding="utf-8").splitlines()
        ),
        encoding="utf-8",
    )
    kid = notemod.key_id(name, notemod.SIG_ED25519, key)
    forged = B + (1).to_bytes(32, "little")

    def forge(note: bytes) -> bytes:
        text = note.decode("utf-8").split("\n\n")[0] + "\n"
        return notemod.format_note(text, [notemod.Signature(name, kid, forged)])

    # Every note the site holds, as anyone could sign it: the checkpoints,
    # and the one in each dream's proof.
    for path in [site / "log" / "checkpoint", *(site / "log" / "checkpoints").iterdir()]:
        path.write_bytes(forge(path.read_bytes()))
    for path in site.glob("dreams/*/proof.tlog-proof"):
        head, note = path.read_bytes().split(b"\n\n", 1)
        path.write_bytes(head + b"\n\n" + forge(note))
    result = run_go(site, tmp_path)
    assert result.returncode != 0, result.stdout


def test_a_dream_under_a_key_that_does_not_decode_is_not_told_it_was_edited() -> None:
    """T05: cf67dec keeps the edit hint ("the dream was changed after
    signing, or signed with another key") for the message "signature does
    not verify" alone. A public key off the curve (rule 3: y = 2, x² has no
    square root mod p) passes check_public_key, which checks rules 1 and 2
    only, and reaches OpenSSL, which fails the equation: the error is
    "signature does not verify" with the edit hint, though no edit and no
    honest signer made that key (the keyId matches it). Checking rule 3
    explicitly in check_public_key would name it and give the §1 hint."""
    body = dreamfmt.sign(draft(title="Under a key off the curve"), SEEDS["ada"])
    key = (2).to_bytes(32, "little")
    body["sig"]["publicKey"] = b64url_encode(key)
    body["sig"]["keyId"] = dreamfmt.key_id(key)
    with pytest.raises(SignatureError) as caught:
        dreamfmt.parse(json.dumps(body).encode("utf-8"), "f.json")
    assert "changed after signing" not in (caught.value.hint or ""), caught.value
