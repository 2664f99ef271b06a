"""The log as `dreampool build` keeps it: admission, append-only, erasure."""

from __future__ import annotations

import base64
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from builder import build as buildmod
from builder import buildcache
from builder.buildcache import BuildCache
from builder.content import pool
from builder.errors import DreampoolError, LogError
from builder.formats import dream as dreamfmt
from builder.formats import leaf as leaffmt
from builder.formats import note
from builder.formats.dream import Dream
from builder.formats.note import parse_private_key
from builder.log import logbuild, logstate
from tests import flushes, redteam
from tests.conftest import draft
from tests.pools import ORIGIN, SEEDS, PoolFixture, cosign_stored, key_id_of, make_pool


@pytest.fixture
def tp(tmp_path: Path) -> PoolFixture:
    return make_pool(tmp_path)


def do_build(tp: PoolFixture, out: Path, *, key: bool = True) -> buildmod.BuildReport:
    signer = parse_private_key(tp.log_key) if key else None
    return buildmod.build(tp.content, out, signer=signer)


def _own_store(tp: PoolFixture, folder: Path) -> BuildCache:
    """The store as the build that holds the log key reads and writes it (its
    rows tagged with the key's row key): a wrong row written through this is
    one no tag catches, as a bug in the build itself would write."""
    return BuildCache(folder, key=buildcache.row_key(parse_private_key(tp.log_key).seed))


def tree_files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def leaves(tp: PoolFixture) -> list[dict[str, Any]]:
    return [json.loads(x) for x in logstate.load(tp.content).leaves]


def test_first_build_logs_key_leaves_before_dreams(tp: PoolFixture, tmp_path: Path) -> None:
    tp.add("ada", 2)
    tp.add("bob", 1)
    report = do_build(tp, tmp_path / "site")
    assert report.signed and len(report.admitted) == 3
    kinds = [(x["kind"], x.get("keyId") or x.get("id")) for x in leaves(tp)]
    seen_keys: set[str] = set()
    for kind, _ in kinds:
        assert kind in ("key", "dream")
    for x in leaves(tp):
        if x["kind"] == "key":
            seen_keys.add(x["keyId"])
        else:
            record = json.loads(
                (tmp_path / "site" / "dreams" / x["id"] / "record.json").read_text()
            )
            assert record["dream"]["sig"]["keyId"] in seen_keys
    assert {key_id_of("ada"), key_id_of("bob")} == seen_keys
    dream_ids = [x["id"] for x in leaves(tp) if x["kind"] == "dream"]
    assert dream_ids == sorted(dream_ids)  # deterministic order: by id within a build


def test_rebuild_after_growth_is_consistent_and_old_proofs_unchanged(
    tp: PoolFixture, tmp_path: Path
) -> None:
    tp.add("ada", 3)
    site = tmp_path / "site"
    do_build(tp, site)
    first = tree_files(site)
    first_cp = (site / "log" / "checkpoint").read_bytes()
    tp.add("bob", 2)
    tp.add("ada", 1)
    report = do_build(tp, site)
    assert report.signed and len(report.admitted) == 3
    second = tree_files(site)
    for path, data in first.items():
        if path.endswith("proof.tlog-proof") or path.startswith("log/checkpoints/"):
            assert second[path] == data, path
        if "/tile/" in path:  # tiles (incl. partial ones) stay published, unchanged
            assert second[path] == data, path
    size1 = int(first_cp.split(b"\n")[1])
    assert f"log/consistency/{size1}" in second
    from builder.formats import checkpoint, merkle
    from builder.formats.b64 import b64_decode

    cp1 = checkpoint.parse_checkpoint(first_cp.split(b"\n\n")[0].decode() + "\n")
    cp2 = checkpoint.parse_checkpoint(second["log/checkpoint"].split(b"\n\n")[0].decode() + "\n")
    proof = [b64_decode(x) for x in second[f"log/consistency/{size1}"].decode().split()]
    merkle.verify_consistency(cp1.size, cp2.size, cp1.root, cp2.root, proof)


def test_nothing_new_needs_no_key_and_is_not_resigned(tp: PoolFixture, tmp_path: Path) -> None:
    tp.add("ada", 1)
    do_build(tp, tmp_path / "a")
    before = tree_files(tp.content)
    report = do_build(tp, tmp_path / "b", key=False)
    assert not report.signed and report.admitted == []
    assert tree_files(tp.content) == before
    assert tree_files(tmp_path / "a") == tree_files(tmp_path / "b")


def test_new_dreams_without_key_stop_with_hint(tp: PoolFixture, tmp_path: Path) -> None:
    tp.add("ada", 1)
    do_build(tp, tmp_path / "site")
    tp.add("bob", 1)
    before = tree_files(tp.content)
    with pytest.raises(LogError) as info:
        do_build(tp, tmp_path / "site", key=False)
    assert "no log key" in info.value.message and "DREAMPOOL_LOG_KEY" in (info.value.hint or "")
    after = tree_files(tp.content)
    # Only the new dream's salt may have been drawn; no leaf, no checkpoint.
    assert {k for k in after if k not in before} <= {k for k in after if k.endswith(".salt")}


def _flip_commitment(line: bytes) -> bytes:
    obj = json.loads(line)
    c = obj["commitment"]
    obj["commitment"] = ("1" if c[0] == "0" else "0") + c[1:]
    import rfc8785

    return rfc8785.dumps(obj)


def _rewrite_leaves(tp: PoolFixture, change: Any) -> None:
    path = tp.content / "log" / "leaves" / "000000.jsonl"
    lines = path.read_bytes().split(b"\n")[:-1]
    lines = change(lines)
    path.write_bytes(b"".join(line + b"\n" for line in lines))


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda ls: [ls[1], ls[0], *ls[2:]], id="reorder"),
        pytest.param(lambda ls: ls[:-1], id="truncate"),
        pytest.param(lambda ls: [*ls[:2], ls[1], *ls[2:]], id="duplicate"),
        pytest.param(lambda ls: [*ls[:-1], _flip_commitment(ls[-1])], id="edit"),
        pytest.param(lambda ls: [*ls[:-1], b"{}"], id="edit-not-a-leaf"),
    ],
)
def test_tampered_state_fails_with_evidence_and_signs_nothing(
    tp: PoolFixture, tmp_path: Path, change: Any
) -> None:
    tp.add("ada", 3)
    do_build(tp, tmp_path / "site")
    tp.add("bob", 1)
    checkpoints_before = tree_files(tp.content / "log" / "checkpoints")
    site_before = tree_files(tmp_path / "site")
    _rewrite_leaves(tp, change)
    with pytest.raises(LogError) as info:
        do_build(tp, tmp_path / "site")
    message = info.value.message
    assert any(
        words in message
        for words in ("the leaves give", "lost", "changed after it was logged", "edited by hand")
    ), message
    assert tree_files(tp.content / "log" / "checkpoints") == checkpoints_before
    assert tree_files(tmp_path / "site") == site_before


def test_a_stored_checkpoint_is_verified_once_and_a_changed_one_again(
    tp: PoolFixture, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Builds keep the checkpoints they verified (build cache, "notes"): a
    checkpoint file is opened once, and one whose bytes changed is opened
    again and refused."""
    opened: list[int] = []
    open_checkpoint = logbuild.open_checkpoint

    def counted(note: bytes, *args: Any) -> Any:
        opened.append(int(note.split(b"\n")[1]))  # the checkpoint's size line
        return open_checkpoint(note, *args)

    monkeypatch.setattr(logbuild, "open_checkpoint", counted)
    for n in (2, 1, 1):
        tp.add("ada", n)
        do_build(tp, tmp_path / "site")
    # Each build opens only the checkpoint it has not seen: the last build's.
    assert opened == [3, 4]
    do_build(tp, tmp_path / "site", key=False)
    do_build(tp, tmp_path / "site", key=False)
    assert opened == [3, 4, 5]
    stored = tp.content / "log" / "checkpoints" / "3"
    signature = stored.read_bytes().rsplit(b" ", 1)
    sig = bytearray(base64.b64decode(signature[1]))
    sig[-1] ^= 1
    stored.write_bytes(signature[0] + b" " + base64.b64encode(bytes(sig)) + b"\n")
    with pytest.raises(DreampoolError):
        do_build(tp, tmp_path / "site", key=False)
    assert opened == [3, 4, 5, 3]  # the changed note is opened again, and refused


def test_a_build_while_another_holds_the_pool_changes_nothing(
    tp: PoolFixture, tmp_path: Path
) -> None:
    """Builds of one pool run one at a time from their first read: two at
    once each salted the new dreams and signed a checkpoint of the same size
    with its own root (a fork). The lock is flock(2) on content/ (taken here
    with fcntl directly, as another build holds it)."""
    import fcntl

    from builder.log import erase

    tp.add("ada", 2)
    do_build(tp, tmp_path / "site")
    new = tp.add("ada", 1)
    log_before = tree_files(tp.content / "log")
    dreams_before = tree_files(tp.content / "dreams")
    fd = os.open(tp.content, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(DreampoolError, match="another build or erase is writing the pool"):
            do_build(tp, tmp_path / "other")
        with pytest.raises(DreampoolError, match="another build or erase"):
            erase.erase(tp.content, new[0], "legal", None)
        assert tree_files(tp.content / "log") == log_before
        assert tree_files(tp.content / "dreams") == dreams_before  # no salt was written
        assert not (tmp_path / "other").exists()
    finally:
        os.close(fd)
    assert do_build(tp, tmp_path / "other").admitted == new  # the lock went with its holder


def test_the_checkpoint_cache_does_not_take_a_witness_key_for_a_line_of_the_note(
    tp: PoolFixture, tmp_path: Path
) -> None:
    """A note opened with witness W is cached; W is then dropped from the
    policy and the stored note gets W's key as a first line. That note does
    not verify, and the build must say so, as one without a cache does."""
    from builder.formats.checkpoint import generate_cosigner_key

    tp.add("ada", 2)
    do_build(tp, tmp_path / "site")
    policy = tp.content / "log" / "policy"
    plain = policy.read_text()
    _, witness = generate_cosigner_key("witness.example/w1")
    policy.write_text(plain.replace("quorum none", f"witness w1 {witness}\nquorum none"))
    do_build(tp, tmp_path / "site", key=False)  # caches the note, opened with W
    policy.write_text(plain)
    stored = tp.content / "log" / "checkpoints" / "3"
    stored.write_bytes(witness.encode() + b"\n" + stored.read_bytes())
    with pytest.raises(DreampoolError, match="does not verify"):
        do_build(tp, tmp_path / "site", key=False)


def test_the_checkpoint_cache_key_tells_every_input_apart() -> None:
    """opened_key is injective over (log key, witness keys, note): the parts
    are length-prefixed, so moving bytes between them changes the key."""
    log, w1, w2 = "log+01+AA", "w1+02+BB", "w2+03+CC"
    note = "origin\n3\nroot\n\n\u2014 log sig\n".encode()
    keys = {
        logbuild.opened_key(log, [], note),
        logbuild.opened_key(log, [w1], note),
        logbuild.opened_key(log, [], w1.encode() + b"\n" + note),
        logbuild.opened_key(log, [w1, w2], note),
        logbuild.opened_key(log, [w1], w2.encode() + b"\n" + note),
        logbuild.opened_key(log + "\n" + w1, [], note),
        logbuild.opened_key(log, [w1 + w2], note),
    }
    assert len(keys) == 7
    # The witnesses are a set: their order in the policy does not matter.
    assert logbuild.opened_key(log, [w2, w1], note) == logbuild.opened_key(log, [w1, w2], note)


def test_root_mismatch_evidence_names_both_roots_and_the_range(
    tp: PoolFixture, tmp_path: Path
) -> None:
    tp.add("ada", 3)
    do_build(tp, tmp_path / "site")
    _rewrite_leaves(tp, lambda ls: [ls[0], ls[2], ls[1], *ls[3:]])
    with pytest.raises(LogError) as info:
        do_build(tp, tmp_path / "site")
    m = info.value.message
    assert "checkpoint 4 has root" in m and "the leaves give" in m and "[0, 4)" in m
    assert "Nothing was signed" in (info.value.hint or "")


def test_edited_dream_after_logging_is_caught(tp: PoolFixture, tmp_path: Path) -> None:
    (dream_id,) = tp.add("ada", 1)
    do_build(tp, tmp_path / "site")
    (tp.content / "dreams" / f"{dream_id}.salt").write_text("A" * 43 + "\n")
    with pytest.raises(LogError, match="changed after it was logged"):
        do_build(tp, tmp_path / "site")


def test_a_salt_that_is_not_ascii_is_named_not_a_traceback(tp: PoolFixture, tmp_path: Path) -> None:
    (dream_id,) = tp.add("ada", 1)
    do_build(tp, tmp_path / "site")
    (tp.content / "dreams" / f"{dream_id}.salt").write_bytes("é".encode() * 20)
    with pytest.raises(LogError, match=f"{dream_id}.salt: want the b64url") as info:
        do_build(tp, tmp_path / "site")
    assert "restore it from git history" in (info.value.hint or "")


def test_lost_dream_file_is_caught(tp: PoolFixture, tmp_path: Path) -> None:
    (dream_id,) = tp.add("ada", 1)
    do_build(tp, tmp_path / "site")
    (tp.content / "dreams" / f"{dream_id}.json").unlink()
    with pytest.raises(LogError, match="is missing and no erasure is recorded") as info:
        do_build(tp, tmp_path / "site")
    assert "dreampool erase" in (info.value.hint or "")


def test_a_logged_dream_refused_for_its_key_file_is_not_called_missing(
    tp: PoolFixture, tmp_path: Path, run: Any
) -> None:
    """`dreampool check` names every problem: a logged dream whose key file a
    change broke is there, refused with it, and was said to be missing, with
    a hint to erase it; its own line did not say the key file was there."""
    (dream_id,) = tp.add("ada", 1)
    do_build(tp, tmp_path / "site")
    (key_file,) = (tp.content / "keys").glob("*.yaml")
    key_file.write_text(key_file.read_text().replace("tier: ", "tier: x"))
    result = run("check", "--content", tp.content)
    assert result.code == 1
    assert f"{dream_id}.json was refused" in result.err
    assert f"its file {key_file} was refused" in result.err
    assert "missing" not in result.err and "erase" not in result.err


def test_a_changed_origin_is_named_by_check_with_the_way_back(
    tp: PoolFixture, tmp_path: Path, run: Any
) -> None:
    """A new user's audit (23rd session): an origin changed in pool.yaml after
    the log began passed `check`; every build then stopped on "content/log/
    policy: no log key named …", with no hint."""
    tp.add("ada", 1)
    do_build(tp, tmp_path / "site")
    config = tp.content / "pool.yaml"
    before = config.read_text()
    origin = next(
        ln.split(":", 1)[1].strip() for ln in before.splitlines() if ln.startswith("origin:")
    )
    config.write_text(before.replace(f"origin: {origin}", "origin: elsewhere.example/pool"))
    result = run("check", "--content", tp.content)
    assert result.code == 1
    assert "pool.yaml: /origin: is 'elsewhere.example/pool', but the log's policy" in result.err
    assert f"set origin back to {origin!r}" in result.err
    with pytest.raises(LogError, match=r"/origin: is") as info:
        do_build(tp, tmp_path / "site")
    assert f"set origin back to {origin!r}" in (info.value.hint or "")


def test_wrong_log_key_refused(tp: PoolFixture, tmp_path: Path) -> None:
    from builder.formats.note import generate_key

    tp.add("ada", 1)
    do_build(tp, tmp_path / "site")
    tp.add("bob", 1)
    other, _ = generate_key("test.example/pool")
    with pytest.raises(LogError, match="is not the one in"):
        buildmod.build(tp.content, tmp_path / "site", signer=parse_private_key(other))


def all_text(root: Path) -> bytes:
    return b"\n".join(p.read_bytes() for p in root.rglob("*") if p.is_file())


def test_erasure_leaves_zero_residue_and_proof_still_verifies(
    tp: PoolFixture, tmp_path: Path, run: Any
) -> None:
    secret_title = "A dream about the lighthouse keeper's ledger"
    (gone,) = tp.add(
        "ada", 1, title=secret_title, summary="The ledger summary that must vanish entirely."
    )
    kept = tp.add("bob", 1)
    site = tmp_path / "site"
    do_build(tp, site)
    old_proof = (site / "dreams" / gone / "proof.tlog-proof").read_bytes()
    signature = json.loads((site / "dreams" / gone / "record.json").read_text())["dream"]["sig"][
        "value"
    ]
    for p in tp.content.parent.glob("in-*.json"):
        p.unlink()  # the submitted copies outside content/
    result = run("erase", gone, "--reason", "author-request", "--content", tp.content)
    assert result.code == 0, result
    report = do_build(tp, site)
    assert report.erased == [gone]
    assert leaves(tp)[-1] == {"v": 1, "kind": "erasure", "id": gone, "reason": "author-request"}
    for root in (tp.content, site):
        blob = all_text(root)
        for needle in (secret_title, "lighthouse", "must vanish", signature):
            assert needle.encode() not in blob, (root, needle)
    assert not (site / "dreams" / gone / "record.json").exists()
    assert (site / "dreams" / gone / "proof.tlog-proof").read_bytes() == old_proof
    assert (site / "dreams" / kept[0] / "record.json").exists()


def test_erased_dream_cannot_return(tp: PoolFixture, tmp_path: Path, run: Any) -> None:
    (gone,) = tp.add("ada", 1, title="Returning dream")
    src = next(tp.content.parent.glob("in-Returning*.json"))
    do_build(tp, tmp_path / "site")
    src_bytes = src.read_bytes()
    src.unlink()
    assert run("erase", gone, "--reason", "legal", "--content", tp.content).code == 0
    do_build(tp, tmp_path / "site")
    (tp.content / "dreams" / f"{gone}.json").write_bytes(src_bytes)
    report = do_build(tp, tmp_path / "site")
    assert any("was erased" in p.rule for p in report.refused)
    assert not (tmp_path / "site" / "dreams" / gone / "record.json").exists()


def test_erase_refuses_while_text_remains_elsewhere(
    tp: PoolFixture, tmp_path: Path, run: Any
) -> None:
    (gone,) = tp.add("ada", 1, title="Quoted somewhere else entirely")
    do_build(tp, tmp_path / "site")
    (tp.content / "notes.md").write_text("see: Quoted somewhere else entirely\n")
    result = run("erase", gone, "--reason", "abuse", "--content", tp.content)
    assert result.code == 1 and "notes.md" in result.err
    assert (tp.content / "dreams" / f"{gone}.json").exists()


def test_erase_request_must_be_signed_by_the_dreams_key(
    tp: PoolFixture, tmp_path: Path, run: Any
) -> None:
    from builder.formats import statement
    from tests.pools import SEEDS

    (gone,) = tp.add("ada", 1)
    req = {"type": statement.ERASE, "id": gone, "reason": "author-request"}
    forged = tmp_path / "forged.json"
    forged.write_text(json.dumps(statement.sign(req, SEEDS["bob"])))
    result = run(
        "erase", gone, "--reason", "author-request", "--request", forged, "--content", tp.content
    )
    assert result.code == 1 and "is not signed by the dream's key" in result.err
    good = tmp_path / "good.json"
    good.write_text(json.dumps(statement.sign(req, SEEDS["ada"])))
    result = run(
        "erase", gone, "--reason", "author-request", "--request", good, "--content", tp.content
    )
    assert result.code == 0, result


def test_dates_come_from_source_date_epoch(
    tp: PoolFixture, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    tp.add("ada", 1)
    do_build(tp, tmp_path / "site")
    assert logstate.load(tp.content).history[0].time == "2023-11-14T22:13:20Z"


def test_commitment_matches_protocol() -> None:
    import hashlib

    import rfc8785

    dream = {"author": "a"}
    salt = "s" * 43
    want = hashlib.sha256(rfc8785.dumps({"dream": dream, "salt": salt})).hexdigest()
    assert logbuild.commitment(dream, salt) == want


def test_build_cli_summary(tp: PoolFixture, tmp_path: Path, run: Any, monkeypatch: Any) -> None:
    tp.add("ada", 2)
    monkeypatch.setenv("DREAMPOOL_LOG_KEY", tp.log_key)
    result = run("build", "--content", tp.content, "--out", tmp_path / "site")
    assert result.code == 0, result
    assert "2 admitted, 0 refused, 0 erased; log size 3 (signed a new checkpoint)" in result.out
    monkeypatch.delenv("DREAMPOOL_LOG_KEY")
    again = run("build", "--content", tp.content, "--out", tmp_path / "site")
    assert again.code == 0 and "checkpoint unchanged" in again.out
    assert os.path.exists(tmp_path / "site" / "log" / "checkpoints" / "3")


def test_verify_proof_cli_on_a_built_pool(tp: PoolFixture, tmp_path: Path, run: Any) -> None:
    (first,) = tp.add("ada", 1)
    site = tmp_path / "site"
    do_build(tp, site)
    old_checkpoint = (site / "log" / "checkpoint").read_bytes()
    tp.add("bob", 2)
    do_build(tp, site)
    d = site / "dreams" / first
    result = run(
        "verify-proof",
        d / "proof.tlog-proof",
        "--record",
        d / "record.json",
        "--policy",
        site / "log" / "policy",
        "--newer",
        site / "log" / "checkpoint",
        "--consistency",
        site / "log" / "consistency" / "2",
    )
    assert result.code == 0, result
    for step in range(1, 6):
        assert f"step {step} ok" in result.out
    assert old_checkpoint != (site / "log" / "checkpoint").read_bytes()
    other = tmp_path / "other-record.json"
    other.write_text((d / "record.json").read_text().replace('"index": 1', '"index": 2'))
    bad = run(
        "verify-proof",
        d / "proof.tlog-proof",
        "--record",
        other,
        "--policy",
        site / "log" / "policy",
    )
    assert bad.code == 1 and "step 2 FAILED" in bad.out


def test_check_reports_a_damaged_log(tp: PoolFixture, tmp_path: Path, run: Any) -> None:
    tp.add("ada", 3)
    do_build(tp, tmp_path / "site")
    assert run("check", "--content", tp.content).code == 0
    _rewrite_leaves(tp, lambda ls: [ls[0], ls[2], ls[1], *ls[3:]])
    result = run("check", "--content", tp.content)
    assert result.code == 1 and "/log: the stored leaves are not the tree the pool signed" in (
        result.err
    )


def test_witness_cosignatures_are_kept_and_verified(tp: PoolFixture, tmp_path: Path) -> None:
    from builder.formats import policy as policymod

    tp.add("ada", 2)
    site = tmp_path / "site"
    do_build(tp, site)
    cosigned = cosign_stored(tp.content, 3)
    stored, note_bytes, line = cosigned.checkpoint, cosigned.before, cosigned.line
    do_build(tp, site, key=False)
    published = (site / "log" / "checkpoint").read_bytes()
    assert published == stored.read_bytes()
    cp, names = policymod.verify_checkpoint(cosigned.policy, published)
    assert cp.size == 3 and names == ("witness.example/w1",)
    # A forged cosignature line fails the build, and nothing is signed.
    forged = line[:-6] + ("AAAA" if not line.endswith("AAAA=\n") else "BBBB") + "=\n"
    stored.write_bytes(note_bytes + forged.encode())
    with pytest.raises(DreampoolError):
        do_build(tp, site, key=False)


def test_only_dreams_the_scan_took_from_the_cache_are_checked_again(
    tp: PoolFixture, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A dream the scan read and verified this build is logged as it was read;
    one it took from the build cache is read and checked again first. (All of
    them once: a pool's first build verified every dream twice.)"""
    again: list[str] = []
    check_file = logbuild.check_file

    def counted(path: Path) -> Any:
        again.append(path.name)
        return check_file(path)

    monkeypatch.setattr(logbuild, "check_file", counted)
    tp.add("ada", 3)
    do_build(tp, tmp_path / "site")
    assert again == []
    # Bob's dream is scanned (and cached) before his key is known, so refused;
    # once his key is registered, the next build logs it from the cache.
    body = dreamfmt.sign(draft(author="bob", title="Bob waits for his key"), SEEDS["bob"])
    raw = json.dumps(body).encode()
    dream_id = dreamfmt.parse(raw, "x").id
    (tp.content / "dreams" / f"{dream_id}.json").write_bytes(raw)
    assert do_build(tp, tmp_path / "site").refused
    (tmp_path / "bob.json").write_bytes(raw)
    pool.submit(tp.content, [tmp_path / "bob.json"])
    assert do_build(tp, tmp_path / "site").admitted == [dream_id]
    assert again == [f"{dream_id}.json"]


@pytest.mark.parametrize("damage", ["garbled bytes", "wrong entry"])
def test_a_dream_the_build_cache_garbled_is_never_logged(
    tp: PoolFixture, tmp_path: Path, damage: str
) -> None:
    # The scan takes an unchanged file's dream from the build cache. Bob's
    # dream lands before his key is registered: verified, cached, refused.
    tp.add("ada", 1)
    body = dreamfmt.sign(draft(author="bob", title="Bob says hello there"), SEEDS["bob"])
    raw = json.dumps(body).encode()
    dream_id = dreamfmt.parse(raw, "x").id
    file = tp.content / "dreams" / f"{dream_id}.json"
    file.write_bytes(raw)
    site = tmp_path / "site"
    assert do_build(tp, site).refused
    cache = tmp_path / ".site.builds" / "cache"
    if damage == "garbled bytes":  # a same-length change: the JSON still reads
        store = cache / buildcache.STORE
        data = store.read_bytes()
        # one row: the dream's head and its body (buildcache._scan_out)
        assert data.count(b"Bob says hello there") == 2
        store.write_bytes(data.replace(b"Bob says hello", b"Bob says PWNED"))
    else:  # an entry no digest or tag can catch (a bug, say): the log must not take it
        c = _own_store(tp, cache)
        [blob] = [k for k, (_, v) in c["scan"].items() if v.id == dream_id]
        digest, d = c["scan"][blob]
        c["scan"][blob] = (
            digest,
            Dream(d.id, d.key_id, d.public_key, {**d.body, "title": "PWNED"}),
        )
        c.save()
    (tmp_path / "bob.json").write_bytes(raw)
    pool.submit(tp.content, [tmp_path / "bob.json"])  # registers bob's key
    size = len(leaves(tp))
    refused = False
    try:
        do_build(tp, site)
    except LogError as exc:  # the build cache's word against the file's
        refused = True
        assert str(file) in exc.message and "build cache" in exc.message
        assert "delete the build cache folder" in (exc.hint or "")
        assert len(leaves(tp)) == size  # nothing appended, nothing signed
        shutil.rmtree(cache)
        do_build(tp, site)
    assert refused or damage == "garbled bytes"  # (there, the row's digest is enough)
    salt = (tp.content / "dreams" / f"{dream_id}.salt").read_text().strip()
    assert leaves(tp)[-1] == {
        "v": 1,
        "kind": "dream",
        "id": dream_id,
        "commitment": logbuild.commitment(body, salt),
    }
    record = json.loads((site / "dreams" / dream_id / "record.json").read_text())
    assert record["dream"] == body


def test_a_logged_dream_the_build_cache_garbled_is_called_cache_damage(
    tp: PoolFixture, tmp_path: Path
) -> None:
    [dream_id] = tp.add("ada", 1)
    site = tmp_path / "site"
    do_build(tp, site)
    cache = tmp_path / ".site.builds" / "cache"
    c = _own_store(tp, cache)
    [blob] = c["scan"]
    digest, d = c["scan"][blob]
    c["scan"][blob] = (digest, Dream(d.id, d.key_id, d.public_key, {**d.body, "title": "PWNED"}))
    c["commit"].clear()
    c.save()
    with pytest.raises(LogError) as caught:
        do_build(tp, site)
    assert f"{dream_id}.json" in caught.value.message and "build cache" in caught.value.message
    assert "changed after it was logged" not in caught.value.message
    shutil.rmtree(cache)
    do_build(tp, site)


@pytest.mark.parametrize(
    "leaf",
    [
        b'{"kind":"dream","v":1}',  # members missing
        b"[1]",  # not an object
        b'{"commitment":"' + b"0" * 64 + b'","id":"' + b"f" * 16 + b'","kind":"dream","v":2}',
    ],
    ids=["missing-members", "not-an-object", "v-2"],
)
def test_a_malformed_leaf_in_the_log_is_named_never_a_traceback(
    tp: PoolFixture, tmp_path: Path, leaf: bytes
) -> None:
    """docs/protocol.md §3, read back strictly (builder.formats.leaf): a pull request can append
    a line to content/log/leaves. The readers that take what the log holds before
    the build checks its unsigned tail (the logged keys, the salts ``check``
    reviews) used to index such a leaf as a dict (a traceback) or count a leaf of
    another version as a logged dream; now each names the file, the line and the
    rule broken."""
    tp.add("ada", 1)
    do_build(tp, tmp_path / "site")
    shard = tp.content / "log" / "leaves" / "000000.jsonl"
    shard.write_bytes(shard.read_bytes() + leaf + b"\n")
    for read in (
        lambda: logbuild.logged_keys(tp.content),
        lambda: logbuild.unlogged_problems(tp.content, []),
        lambda: logbuild.anonymity_review(tp.content, []),
    ):
        with pytest.raises(LogError) as info:
            read()
        assert "content/log/leaves/000000.jsonl:3: leaf 2: " in info.value.message
        assert "docs/protocol.md §3" in (info.value.message + (info.value.hint or ""))


def test_plan_writes_nothing_and_apply_writes_what_it_planned(
    tp: PoolFixture, tmp_path: Path
) -> None:
    """The log stage in two: plan reads the checkout and decides the leaves (a key
    leaf before its dreams, docs/protocol.md §3); apply writes salts, leaves and
    the policy and signs. A build killed between the two leaves no trace."""
    tp.add("ada", 1)
    do_build(tp, tmp_path / "site")
    new = tp.add("ada", 1) + tp.add("bob", 2)
    signer = parse_private_key(tp.log_key)
    origin = pool.load_config(tp.content).origin
    scanned = pool.scan_dreams(tp.content, pool.load_keys(tp.content)[0])[0]
    before = tree_files(tp.content)
    planned = logbuild.plan(
        tp.content, scanned, origin=origin, signer=signer, log_url="https://pool.example/log/"
    )
    assert tree_files(tp.content) == before  # not even the policy's new URL
    kinds = [json.loads(leaf)["kind"] for leaf in planned.new_leaves]
    assert kinds == ["key", "dream", "dream", "dream"]  # bob's key is new; ada's is logged
    assert set(new) <= set(planned.new_salts) and planned.policy_text is not None
    size = planned.log.tree.size
    log = logbuild.apply(tp.content, planned, signer=signer)
    assert log.signed_now and log.tree.size == size + 4
    assert "https://pool.example/log/" in (tp.content / "log" / "policy").read_text()
    for dream_id in planned.new_salts:
        salt = (tp.content / "dreams" / f"{dream_id}.salt").read_text(encoding="utf-8")
        assert salt == planned.new_salts[dream_id] + "\n"
    assert sorted(log.admitted_now) == sorted(planned.new_salts)


def test_apply_refuses_a_key_the_plan_was_not_checked_with(tp: PoolFixture, tmp_path: Path) -> None:
    do_build(tp, tmp_path / "site")
    tp.add("ada", 1)
    origin = pool.load_config(tp.content).origin
    scanned = pool.scan_dreams(tp.content, pool.load_keys(tp.content)[0])[0]
    planned = logbuild.plan(tp.content, scanned, origin=origin, signer=None)
    before = tree_files(tp.content)
    other, _ = note.generate_key(origin)
    with pytest.raises(LogError, match="is not the one in"):
        logbuild.apply(tp.content, planned, signer=parse_private_key(other))
    assert tree_files(tp.content) == before


def test_a_few_new_salts_are_flushed_one_by_one_before_any_leaf(
    tp: PoolFixture, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each new dream's salt is durable before a leaf commits to it. A few are
    flushed file by file, then their folder (the renames), never with a
    syncfs of the whole file system: that also waits for every other write
    pending there, such as a build store just restored (0.55 s of a +1 at 10k)."""
    do_build(tp, tmp_path / "site")
    ids = tp.add("ada", 2)
    events = flushes.record(monkeypatch)
    do_build(tp, tmp_path / "site")
    dreams = str((tp.content / "dreams").resolve())
    leaves = events.index(("leaves", ""))
    flushed = {path for kind, path in events[:leaves] if kind == "fsync"}
    assert {f"{dreams}/{i}.salt" for i in ids} | {dreams} <= flushed
    assert ("syncfs", "") not in events


def test_many_new_salts_are_flushed_with_one_syncfs_before_any_leaf(
    tp: PoolFixture, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """More than ``DURABLE_ONE_BY_ONE`` salts (a first build of a large pool):
    one syncfs, before the leaves, and no fsync of each."""
    tp.add("ada", 3)
    monkeypatch.setattr(pool, "DURABLE_ONE_BY_ONE", 2)
    events = flushes.record(monkeypatch)
    do_build(tp, tmp_path / "site")
    leaves = events.index(("leaves", ""))
    assert ("syncfs", "") in events[:leaves]
    assert not [p for kind, p in events if kind == "fsync" and p.endswith(".salt")]


def test_a_proven_log_names_its_dreams_without_reading_the_leaves_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ProvenLog.logged_ids (the agents' server's read of a checkout) is
    logged_dreams of every stored leaf, from the leaves the proof already read;
    with an unsigned tail (a build killed after appending), the tail's too."""
    tp = make_pool(tmp_path / "pool")
    ids = redteam.submit(tp, redteam.signed("ada", title="One"), redteam.signed("ada", title="Two"))
    redteam.build(tp, tmp_path / "pool" / "site")
    proven = logbuild.prove(tp.content, origin=ORIGIN)
    parsed: list[bytes] = []
    parse = leaffmt.parse
    monkeypatch.setattr(leaffmt, "parse", lambda data: parsed.append(data) or parse(data))
    assert proven.logged_ids() == set(ids) and parsed == []
    assert set(logbuild.logged_dreams(proven.state.leaves)) == set(ids)
    shard = tp.content / "log" / "leaves" / "000000.jsonl"
    tail = leaffmt.encode(leaffmt.DreamLeaf("f" * 16, "0" * 64))
    shard.write_bytes(shard.read_bytes() + tail + b"\n")
    assert logbuild.prove(tp.content, origin=ORIGIN).logged_ids() == {*ids, "f" * 16}
