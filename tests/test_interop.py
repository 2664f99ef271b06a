"""Interop: Go's golang.org/x/mod/sumdb (note, tlog) checks the published log.

A second, independent implementation of signed notes and RFC 6962 hashing,
proofs and tiles, from Debian's golang-golang-x-mod-dev (`.ci/run` installs
it). Locally the test skips when Go is absent; in CI (CI=true) that is a
failure, so the check never silently stops running.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from builder import build as buildmod
from builder.formats.note import parse_private_key
from tests.conftest import REPO
from tests.pools import make_pool

GOPATH = "/usr/share/gocode"


def go_available() -> bool:
    return bool(shutil.which("go")) and Path(GOPATH, "src/golang.org/x/mod/sumdb").is_dir()


def run_go(site: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    if not go_available():
        if os.environ.get("CI"):
            pytest.fail("Go and golang-golang-x-mod-dev must be installed in CI (.ci/run)")
        pytest.skip(
            "Go with golang.org/x/mod not installed (apt-get install golang-go "
            "golang-golang-x-mod-dev)"
        )
    env = {
        **os.environ,
        "GO111MODULE": "off",
        "GOPATH": GOPATH,
        "GOFLAGS": "",
        "GOCACHE": str(tmp_path / "gocache"),
    }
    return subprocess.run(
        ["go", "run", str(REPO / "tests" / "interop" / "verify.go"), str(site)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


def test_go_sumdb_verifies_the_log(tmp_path: Path, run: object) -> None:
    tp = make_pool(tmp_path)
    signer = parse_private_key(tp.log_key)
    site = tmp_path / "site"
    tp.add("ada", 300)  # more than one full tile, so full and partial tiles both exist
    buildmod.build(tp.content, site, signer=signer)
    tp.add("bob", 5)
    buildmod.build(tp.content, site, signer=signer)
    result = run_go(site, tmp_path)
    assert result.returncode == 0, result.stderr
    assert "interop ok: size 307, 307 leaves, 2 checkpoints, 305 proofs" in result.stdout


def test_go_sumdb_rejects_a_tampered_tile(tmp_path: Path) -> None:
    tp = make_pool(tmp_path)
    tp.add("ada", 3)
    site = tmp_path / "site"
    buildmod.build(tp.content, site, signer=parse_private_key(tp.log_key))
    tile = next(p for p in (site / "log" / "tile" / "0").rglob("*") if p.is_file())
    data = bytearray(tile.read_bytes())
    data[5] ^= 1
    tile.write_bytes(bytes(data))
    result = run_go(site, tmp_path)
    assert result.returncode != 0 and "FAIL" in result.stderr


def test_go_sumdb_with_the_rule_on_r_refuses_a_checkpoint_signed_with_r_the_identity(
    tmp_path: Path,
) -> None:
    """T05, T32 (review r94): Go's Ed25519 takes R = the identity with S = k·s,
    which docs/protocol.md §1 rule 4 refuses for every signature, notes
    included: a log key could sign a checkpoint that Go's note.Open accepts
    and every dreampool verifier refuses, and readers would see different
    logs. verify.go adds the rule (docs/verifiers.md says a Go verifier must):
    the log's own checkpoint, signed again that way, is refused there, as
    by dreampool's own note reader."""
    import hashlib

    from builder.formats import ed25519
    from builder.formats import note as notemod

    tp = make_pool(tmp_path)
    tp.add("ada", 3)
    site = tmp_path / "site"
    signer = parse_private_key(tp.log_key)
    buildmod.build(tp.content, site, signer=signer)
    assert run_go(site, tmp_path).returncode == 0
    text = (site / "log" / "checkpoint").read_text(encoding="utf-8").split("\n\n")[0] + "\n"
    h = hashlib.sha512(signer.seed).digest()
    s = (int.from_bytes(h[:32], "little") & ~7 & ((1 << 254) - 1)) | (1 << 254)
    r = (1).to_bytes(32, "little")
    public = ed25519.public_key_of(signer.seed)
    k = int.from_bytes(hashlib.sha512(r + public + text.encode()).digest(), "little")
    sig = r + (k % ed25519.L * s % ed25519.L).to_bytes(32, "little")
    data = notemod.format_note(text, [notemod.Signature(signer.name, signer.key_id, sig)])
    with pytest.raises(Exception, match="R is a point of small order"):
        notemod.open_note(data, [signer.verifier])
    (site / "log" / "checkpoint").write_bytes(data)
    result = run_go(site, tmp_path)
    assert result.returncode != 0 and "note.Open" in result.stderr, result.stderr
