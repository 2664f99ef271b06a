"""The offline light client (docs/protocol.md §5) against synthetic logs built with the
real modules.

:class:`LogBuilder` lays a log out as a pool publishes it (records, proofs,
checkpoints, tiles with their partial tiles, entry bundles, consistency files), so
these tests and ``test_monitor`` need no build pipeline. The mangling tests change
every byte of each input in turn and check that verification fails *at the step
that reads that byte*.
"""

from __future__ import annotations

import functools
import hashlib
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from builder.errors import DreampoolError, VerificationError
from builder.formats import dream, ed25519, strictjson, tiles
from builder.formats.b64 import b64_encode, b64url_decode, b64url_encode
from builder.formats.checkpoint import Checkpoint, Cosigner, cosign, sign_checkpoint
from builder.formats.merkle import MerkleTree, leaf_hash
from builder.formats.note import Signer
from builder.formats.policy import Policy, PolicyLog, PolicyWitness, format_policy
from builder.formats.tlogproof import TlogProof, format_tlog_proof
from builder.readers import lightclient
from tests.conftest import REPO

ORIGIN = "example.org/dreams"
LOG_SEED = hashlib.sha256(b"dreampool test log key").digest()


def author_seed(author: str) -> bytes:
    return hashlib.sha256(f"dreampool test author {author}".encode()).digest()


def signed_dream(author: str, title: str) -> dict[str, Any]:
    draft = {
        "author": author,
        "title": title,
        "summary": "",
        "entries": [{"text": "x", "type": "fact", "confidence": "confirmed"}],
        "tags": [],
        "consent": {"share": True, "derivatives": False, "anonymize": False},
    }
    return dream.sign(draft, author_seed(author))


def record_bytes(record: dict[str, Any]) -> bytes:
    """As the pool writes record.json: indented UTF-8 JSON and a newline."""
    return (json.dumps(record, ensure_ascii=False, indent=2) + "\n").encode("utf-8")


class LogBuilder:
    """A dreampool log (docs/protocol.md §2–§5) built leaf by leaf in memory.

    ``sign()`` publishes a checkpoint at the current size; ``site_files(size)`` is
    the site's ``log/`` and ``dreams/`` as published by the build that signed
    ``size``: every checkpoint so far, the consistency proofs to ``size``, every
    tile and entry bundle of every published size (partial ones kept), the records
    and proofs of the dreams the checkpoint holds.
    """

    def __init__(
        self,
        origin: str = ORIGIN,
        log_seed: bytes = LOG_SEED,
        witnesses: tuple[PolicyWitness, ...] = (),
        quorum: str = "none",
    ) -> None:
        self.origin = origin
        self.signer = Signer.from_seed(origin, log_seed)
        self.tree = MerkleTree()
        self.leaves: list[bytes] = []
        self.records: dict[str, tuple[int, bytes]] = {}
        self.ids: dict[str, str] = {}  # title -> id
        self.checkpoints: dict[int, bytes] = {}
        log = PolicyLog(self.signer.verifier, f"https://{origin}/log/")
        self.policy = format_policy(Policy((log,), witnesses, (), quorum)).encode()

    def add_leaf(self, obj: dict[str, Any]) -> int:
        data = strictjson.canonical(obj)
        self.leaves.append(data)
        return self.tree.append(leaf_hash(data))

    def add_key(self, author: str) -> int:
        public_key = ed25519.public_key_of(author_seed(author))
        return self.add_leaf(
            {
                "v": 1,
                "kind": "key",
                "keyId": dream.key_id(public_key),
                "publicKey": b64url_encode(public_key),
                "author": author,
            }
        )

    def add_dream(
        self,
        signed: dict[str, Any],
        *,
        record_id: str | None = None,
        salt: bytes | None = None,
    ) -> str:
        """Log a dream as the pool would, or, given ``record_id``, as a lying pool might."""
        if record_id is None:
            record_id = dream.dream_id(b64url_decode(signed["sig"]["value"]))
        salt_text = b64url_encode(salt or hashlib.sha256(record_id.encode()).digest())
        commitment = hashlib.sha256(strictjson.canonical({"dream": signed, "salt": salt_text}))
        index = self.add_leaf(
            {"v": 1, "kind": "dream", "id": record_id, "commitment": commitment.hexdigest()}
        )
        record = {
            "format": "dreampool-record/v1",
            "id": record_id,
            "index": index,
            "salt": salt_text,
            "dream": signed,
        }
        self.records[record_id] = (index, record_bytes(record))
        self.ids[str(signed.get("title"))] = record_id
        return record_id

    def add_fillers(self, count: int) -> None:
        """Erasure leaves: cheap, and light clients skip them."""
        for i in range(count):
            self.add_leaf(
                {"v": 1, "kind": "erasure", "id": f"{len(self.leaves) + i:016x}", "reason": "legal"}
            )

    def sign(self) -> int:
        size = self.tree.size
        checkpoint = Checkpoint(self.origin, size, self.tree.root(size))
        self.checkpoints[size] = sign_checkpoint(checkpoint, self.signer)
        return size

    def index_of(self, title: str) -> int:
        return self.records[self.ids[title]][0]

    def record(self, title: str) -> bytes:
        return self.records[self.ids[title]][1]

    def proof(self, title: str, size: int | None = None) -> bytes:
        """The proof against ``size``, by default the first checkpoint holding the leaf."""
        index = self.index_of(title)
        if size is None:
            size = min(s for s in self.checkpoints if s > index)
        proof = TlogProof(
            index=index,
            extra=self.leaves[index],
            proof=tuple(self.tree.inclusion_proof(index, size)),
            checkpoint=self.checkpoints[size],
        )
        return format_tlog_proof(proof)

    def consistency(self, size1: int, size2: int) -> bytes:
        return "".join(
            b64_encode(h) + "\n" for h in self.tree.consistency_proof(size1, size2)
        ).encode()

    def site_files(self, size: int | None = None) -> dict[str, bytes]:
        if size is None:
            size = max(self.checkpoints)
        sizes = sorted(s for s in self.checkpoints if s <= size)
        files = {"log/checkpoint": self.checkpoints[size], "log/policy": self.policy}
        refs: set[tiles.TileRef] = set()
        for s in sizes:
            files[f"log/checkpoints/{s}"] = self.checkpoints[s]
            if s < size:
                files[f"log/consistency/{s}"] = self.consistency(s, size)
            refs.update(tiles.tiles_for_size(s))
        for ref in refs:
            if ref.is_entry_bundle:
                span = ref.hash_indices
                data = tiles.encode_entry_bundle(self.leaves[span.start : span.stop])
            else:
                data = tiles.tile_data(self.tree, ref)
            files[f"log/{ref.path}"] = data
        for record_id, (index, record) in self.records.items():
            if index < size:
                files[f"dreams/{record_id}/record.json"] = record
                first = min(s for s in sizes if s > index)
                files[f"dreams/{record_id}/proof.tlog-proof"] = format_tlog_proof(
                    TlogProof(
                        index,
                        self.leaves[index],
                        tuple(self.tree.inclusion_proof(index, first)),
                        self.checkpoints[first],
                    )
                )
        return files

    def write_site(self, root: Path, size: int | None = None) -> Path:
        for path, data in self.site_files(size).items():
            target = root / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        return root


SMALL = 5  # the first checkpoint: partial tile/0/000.p/5 only
LARGE = 268  # the second: tile/0/000, tile/0/001.p/12, tile/1/000.p/1


def build_standard_log(*, forked: bool = False) -> LogBuilder:
    """Two checkpoints, SMALL and LARGE; ``forked`` changes one early dream."""
    log = LogBuilder()
    log.add_key("ada")
    log.add_dream(signed_dream("ada", "first" if not forked else "forked"))
    log.add_dream(signed_dream("ada", "second"))
    log.add_key("bob")
    log.add_dream(signed_dream("bob", "third"))
    assert log.sign() == SMALL
    log.add_dream(signed_dream("bob", "fourth"))
    log.add_key("cy")
    log.add_fillers(LARGE - 8)
    log.add_dream(signed_dream("cy", "late"))
    assert log.sign() == LARGE
    return log


@functools.cache
def standard_log() -> LogBuilder:
    """The shared standard log; tests must not change it."""
    return build_standard_log()


def step_of(
    proof: bytes,
    record: bytes,
    policy: bytes,
    newer: bytes | None = None,
    consistency: bytes | None = None,
) -> int | None:
    """The step at which verification fails (None: it passes); any other error fails the test."""
    try:
        lightclient.verify_proof(proof, record, policy, newer=newer, consistency=consistency)
    except VerificationError as exc:
        assert exc.step in (1, 2, 3, 4, 5), exc
        assert exc.message and exc.hint, exc
        return exc.step
    return None


def replaced(data: bytes, pos: int, value: int) -> bytes:
    return data[:pos] + bytes([value]) + data[pos + 1 :]


def replacements(byte: int) -> tuple[int, ...]:
    """Two different bytes for one position: a low bit flip and a high bit flip."""
    return (byte ^ 0x01, byte ^ 0x80)


def flip(pos: int, byte: int) -> int:
    """One different byte for a position: low and high bit flips in turn."""
    return byte ^ (0x01 if pos % 2 else 0x80)


# --- passing --------------------------------------------------------------------------


def test_valid_proof_passes_all_five_steps() -> None:
    log = standard_log()
    seen: list[lightclient.Step] = []
    result = lightclient.verify_proof(
        log.proof("first"),
        log.record("first"),
        log.policy,
        newer=log.checkpoints[LARGE],
        consistency=log.consistency(SMALL, LARGE),
        on_step=seen.append,
    )
    assert [(s.number, s.ok) for s in seen] == [(n, True) for n in range(1, 6)]
    assert result.steps == tuple(seen)
    assert [s.title for s in seen] == [lightclient.STEP_TITLES[n] for n in range(1, 6)]
    assert result.id == log.ids["first"] == result.dream.id
    assert result.index == 1
    assert (result.checkpoint.size, result.newer and result.newer.size) == (SMALL, LARGE)
    assert result.leaf_data == log.leaves[1]
    assert "size 5" in seen[0].detail and "quorum none" in seen[0].detail
    assert "3 proof hashes" in seen[2].detail
    assert "by ada" in seen[3].detail


def test_step_5_is_optional() -> None:
    log = standard_log()
    result = lightclient.verify_proof(log.proof("third"), log.record("third"), log.policy)
    assert [s.number for s in result.steps] == [1, 2, 3, 4]
    assert result.newer is None


@pytest.mark.parametrize("title", ["first", "second", "third", "fourth", "late"])
def test_every_published_proof_verifies(title: str) -> None:
    log = standard_log()
    files = log.site_files()
    dream_id = log.ids[title]
    result = lightclient.verify_proof(
        files[f"dreams/{dream_id}/proof.tlog-proof"],
        files[f"dreams/{dream_id}/record.json"],
        files["log/policy"],
        newer=files["log/checkpoint"],
        consistency=files.get(
            f"log/consistency/{min(s for s in log.checkpoints if s > log.index_of(title))}", b""
        ),
    )
    assert result.id == dream_id
    assert result.newer is not None and result.newer.size == LARGE


def test_proof_against_a_later_checkpoint_verifies() -> None:
    log = standard_log()
    result = lightclient.verify_proof(log.proof("first", LARGE), log.record("first"), log.policy)
    assert result.checkpoint.size == LARGE


def test_witness_quorum_met() -> None:
    cosigner = Cosigner.from_seed("witness.example/w1", hashlib.sha256(b"w1").digest())
    log = LogBuilder(witnesses=(PolicyWitness("w1", cosigner.verifier),), quorum="w1")
    log.add_key("ada")
    log.add_dream(signed_dream("ada", "first"))
    size = log.sign()
    bare = log.proof("first")
    with pytest.raises(VerificationError, match="quorum w1 is not met") as info:
        lightclient.verify_proof(bare, log.record("first"), log.policy)
    assert info.value.step == 1
    text = log.checkpoints[size][: log.checkpoints[size].index(b"\n\n") + 1].decode()
    log.checkpoints[size] += cosign(text, cosigner, 1_700_000_000).encode()
    result = lightclient.verify_proof(log.proof("first"), log.record("first"), log.policy)
    assert result.witnesses == ("witness.example/w1",)
    assert "cosigned by witness.example/w1" in result.steps[0].detail


# --- mangling: every byte of every input fails at the step that reads it ---------------


def proof_part_steps(proof: bytes) -> list[int]:
    """The step that reads each byte of a tlog-proof file (see lightclient's docstring)."""
    lines_end = proof.index(b"\n\n") + 1  # just past the last hash line's newline
    header_end = proof.index(b"\n") + 1
    extra_end = proof.index(b"\n", header_end) + 1
    index_end = proof.index(b"\n", extra_end) + 1
    steps = []
    for pos in range(len(proof)):
        if pos < header_end:
            steps.append(1)
        elif pos < index_end:
            steps.append(2)
        elif pos < lines_end:
            steps.append(3)
        else:  # the empty line, then the checkpoint
            steps.append(1)
    return steps


def check_proof_mutation(proof: bytes, pos: int, value: int) -> None:
    log = standard_log()
    want = proof_part_steps(proof)[pos]
    got = step_of(replaced(proof, pos, value), log.record("first"), log.policy)
    assert got is not None, f"byte {pos} -> {value:#04x} still verifies"
    if b"\n"[0] in (proof[pos], value):
        # A newline added or removed moves the empty line that ends the proof's
        # header, so the first step to notice may be an earlier one.
        assert got <= want, (pos, value, got, want)
    else:
        assert got == want, (pos, value, got, want)


def test_mangled_proof_fails_at_the_step_of_each_part() -> None:
    log = standard_log()
    proof = log.proof("first")
    parts = proof_part_steps(proof)
    assert sorted(set(parts)) == [1, 2, 3] and parts.count(3) == 3 * 45  # three hash lines
    for pos, byte in enumerate(proof):
        for value in replacements(byte):
            check_proof_mutation(proof, pos, value)


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_mangled_proof_with_any_byte(data: st.DataObject) -> None:
    proof = standard_log().proof("first")
    pos = data.draw(st.integers(0, len(proof) - 1), label="pos")
    value = data.draw(st.integers(0, 255).filter(lambda v: v != proof[pos]), label="value")
    check_proof_mutation(proof, pos, value)


def test_mangled_record_fails_at_step_2() -> None:
    log = standard_log()
    proof, record = log.proof("first"), log.record("first")
    canonical = strictjson.canonical(strictjson.loads(record, max_bytes=1 << 20))
    same = 0
    for pos, byte in enumerate(record):
        mangled = replaced(record, pos, flip(pos, byte))
        got = step_of(proof, mangled, log.policy)
        try:
            unchanged = strictjson.canonical(strictjson.loads(mangled)) == canonical
        except (strictjson.JSONError, ValueError):
            unchanged = False
        if unchanged:  # whitespace for whitespace: the same JSON, so the same record
            assert got is None, pos
            same += 1
        else:
            # The commitment binds every field: step 2 catches any change, before step 4.
            assert got == 2, (pos, got)
    assert same < len(record) // 4


def test_mangled_policy_key_fails_at_step_1() -> None:
    log = standard_log()
    proof, record = log.proof("first"), log.record("first")
    vkey = log.signer.verifier.vkey.encode()
    start = log.policy.index(vkey)
    for pos in range(start, start + len(vkey)):
        for value in replacements(log.policy[pos]):
            assert step_of(proof, record, replaced(log.policy, pos, value)) == 1, (pos, value)


def test_mangled_newer_checkpoint_or_consistency_fails_at_step_5() -> None:
    log = standard_log()
    proof, record = log.proof("first"), log.record("first")
    newer, consistency = log.checkpoints[LARGE], log.consistency(SMALL, LARGE)
    for pos, byte in enumerate(newer):
        got = step_of(proof, record, log.policy, replaced(newer, pos, flip(pos, byte)), consistency)
        assert got == 5, pos
    for pos, byte in enumerate(consistency):
        got = step_of(proof, record, log.policy, newer, replaced(consistency, pos, flip(pos, byte)))
        assert got == 5, pos


# --- step 1 -------------------------------------------------------------------------


def test_policy_of_another_log_fails_step_1() -> None:
    log = standard_log()
    other = LogBuilder(log_seed=hashlib.sha256(b"another key").digest())
    with pytest.raises(VerificationError, match="no signature by a log of the policy") as info:
        lightclient.verify_proof(log.proof("first"), log.record("first"), other.policy)
    assert info.value.step == 1


def test_log_of_another_origin_fails_step_1() -> None:
    log = standard_log()
    other = LogBuilder(origin="example.net/dreams", log_seed=LOG_SEED)
    assert step_of(log.proof("first"), log.record("first"), other.policy) == 1


@pytest.mark.parametrize(
    "proof",
    [
        b"",
        b"c2sp.org/tlog-proof@v2\nextra AA==\nindex 0\n\n",
        b"c2sp.org/tlog-proof@v1\nextra AA==\nindex 0\n",
        b"\xff" * 100,
        b"c2sp.org/tlog-proof@v1\n" * 80_000,
    ],
)
def test_malformed_proof_file_fails_step_1(proof: bytes) -> None:
    log = standard_log()
    assert step_of(proof, log.record("first"), log.policy) == 1


@pytest.mark.parametrize("policy", [b"", b"log\n", b"quorum none\n", b"\x00", b"log x+y+z\n"])
def test_malformed_policy_fails_step_1(policy: bytes) -> None:
    log = standard_log()
    assert step_of(log.proof("first"), log.record("first"), policy) == 1


# --- step 2 -------------------------------------------------------------------------


def edited_record(edit: Callable[[dict[str, Any]], None]) -> bytes:
    record = json.loads(standard_log().record("first"))
    edit(record)
    return record_bytes(record)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda r: r.update(format="dreampool-record/v2"), "/format"),
        (lambda r: r.update(id="3F1C0D2A9B8E7F60"), "/id must be"),
        (lambda r: r.update(id=7), "/id must be"),
        (lambda r: r.update(index="1"), "/index must be"),
        (lambda r: r.update(index=True), "/index must be"),
        (lambda r: r.update(index=-1), "/index must be"),
        (lambda r: r.update(salt=b64url_encode(b"\x00" * 31)), "31 bytes"),
        (lambda r: r.update(salt=r["salt"] + "="), "/salt"),
        (lambda r: r.update(salt=None), "/salt must be"),
        (lambda r: r.update(dream=[]), "/dream must be an object"),
        (lambda r: r.pop("salt"), "missing field"),
        (lambda r: r.update(note="hi"), "unknown field"),
        (lambda r: r["dream"].update(title="changed"), "logged commitment"),
        (lambda r: r.update(salt=b64url_encode(b"\x01" * 32)), "logged commitment"),
        (lambda r: r.update(index=2), "the record says index 2"),
    ],
)
def test_bad_record_fails_step_2(edit: Callable[[dict[str, Any]], None], message: str) -> None:
    log = standard_log()
    with pytest.raises(VerificationError, match=message) as info:
        lightclient.verify_proof(log.proof("first"), edited_record(edit), log.policy)
    assert info.value.step == 2


@pytest.mark.parametrize(
    "record",
    [b"", b"[]", b"{", b'{"id": 1, "id": 2}', b"\xef\xbb\xbf{}", b"NaN", b" " * 300_000],
)
def test_record_that_is_not_strict_json_fails_step_2(record: bytes) -> None:
    log = standard_log()
    assert step_of(log.proof("first"), record, log.policy) == 2


def test_record_of_another_dream_fails_step_2() -> None:
    log = standard_log()
    with pytest.raises(VerificationError, match="proof is for dream") as info:
        lightclient.verify_proof(log.proof("first"), log.record("second"), log.policy)
    assert info.value.step == 2


def test_proof_index_line_changed_fails_step_2() -> None:
    log = standard_log()
    proof = log.proof("first").replace(b"\nindex 1\n", b"\nindex 2\n", 1)
    with pytest.raises(VerificationError, match="proof is for leaf index 2") as info:
        lightclient.verify_proof(proof, log.record("first"), log.policy)
    assert info.value.step == 2


def test_extra_that_is_not_canonical_fails_step_2() -> None:
    log = standard_log()
    proof = log.proof("first")
    loose = json.dumps(json.loads(log.leaves[1])).encode()  # spaces after separators
    proof = proof.replace(b64_encode(log.leaves[1]).encode(), b64_encode(loose).encode())
    with pytest.raises(VerificationError, match="not JCS-canonical") as info:
        lightclient.verify_proof(proof, log.record("first"), log.policy)
    assert info.value.step == 2


def test_proof_without_extra_fails_step_2() -> None:
    log = standard_log()
    proof = log.proof("first")
    start = proof.index(b"\nextra ") + 1
    proof = proof[:start] + proof[proof.index(b"\n", start) + 1 :]
    assert step_of(proof, log.record("first"), log.policy) == 2


# --- step 3 -------------------------------------------------------------------------


def test_index_not_below_size_fails_step_3() -> None:
    """A proof and record that agree on an index outside the checkpoint's tree."""
    log = standard_log()
    proof = log.proof("first").replace(b"\nindex 1\n", f"\nindex {SMALL}\n".encode(), 1)
    record = edited_record(lambda r: r.update(index=SMALL))
    with pytest.raises(VerificationError, match="not inside the checkpoint's tree") as info:
        lightclient.verify_proof(proof, record, log.policy)
    assert info.value.step == 3


def test_wrong_index_with_matching_record_fails_step_3() -> None:
    log = standard_log()
    proof = log.proof("first").replace(b"\nindex 1\n", b"\nindex 0\n", 1)
    record = edited_record(lambda r: r.update(index=0))
    assert step_of(proof, record, log.policy) == 3


def test_hashes_for_another_size_fail_step_3() -> None:
    log = standard_log()
    index = log.index_of("first")
    proof = format_tlog_proof(
        TlogProof(
            index,
            log.leaves[index],
            tuple(log.tree.inclusion_proof(index, LARGE)),
            log.checkpoints[SMALL],
        )
    )
    with pytest.raises(VerificationError, match="want 3") as info:
        lightclient.verify_proof(proof, log.record("first"), log.policy)
    assert info.value.step == 3


def test_dropped_or_extra_hash_fails_step_3() -> None:
    log = standard_log()
    proof = log.proof("first")
    lines = proof.split(b"\n")
    assert step_of(b"\n".join(lines[:3] + lines[4:]), log.record("first"), log.policy) == 3
    assert step_of(b"\n".join(lines[:4] + lines[3:]), log.record("first"), log.policy) == 3


# --- step 4: a lying log that committed to a bad dream -------------------------------


def lying_log(edit: Callable[[dict[str, Any]], None], record_id: str | None = None) -> LogBuilder:
    log = LogBuilder()
    signed = signed_dream("ada", "first")
    edit(signed)
    log.add_dream(signed, record_id=record_id)
    log.sign()
    return log


@pytest.mark.parametrize(
    ("edit", "record_id", "message"),
    [
        (lambda d: d.update(title="changed after signing"), None, "does not verify"),
        (lambda d: d["sig"].update(keyId="sha256:" + "0" * 16), None, "keyId"),
        (lambda d: d.update(extra="field"), None, "unknown field"),
        (lambda d: d.update(title=""), None, "/title"),
        (lambda d: None, "0123456789abcdef", "is not the dream's id"),
    ],
)
def test_dream_that_does_not_verify_fails_step_4(
    edit: Callable[[dict[str, Any]], None], record_id: str | None, message: str
) -> None:
    log = lying_log(edit, record_id)
    (title,) = log.ids
    with pytest.raises(VerificationError, match=message) as info:
        lightclient.verify_proof(log.proof(title), log.record(title), log.policy)
    assert info.value.step == 4


def test_step_4_failure_reports_steps_1_to_3_ok() -> None:
    log = lying_log(lambda d: d.update(title="changed after signing"))
    seen: list[lightclient.Step] = []
    with pytest.raises(VerificationError):
        lightclient.verify_proof(
            log.proof("changed after signing"),
            log.record("changed after signing"),
            log.policy,
            on_step=seen.append,
        )
    assert [(s.number, s.ok) for s in seen] == [(1, True), (2, True), (3, True), (4, False)]


# --- step 5 -------------------------------------------------------------------------


def test_newer_checkpoint_of_equal_size_needs_empty_proof() -> None:
    log = standard_log()
    result = lightclient.verify_proof(
        log.proof("first"),
        log.record("first"),
        log.policy,
        newer=log.checkpoints[SMALL],
        consistency=b"",
    )
    assert result.newer == result.checkpoint
    assert (
        step_of(
            log.proof("first"),
            log.record("first"),
            log.policy,
            log.checkpoints[SMALL],
            log.consistency(SMALL, LARGE),
        )
        == 5
    )


def test_smaller_newer_checkpoint_fails_step_5() -> None:
    log = standard_log()
    with pytest.raises(VerificationError, match="smaller than the proof's") as info:
        lightclient.verify_proof(
            log.proof("first", LARGE),
            log.record("first"),
            log.policy,
            newer=log.checkpoints[SMALL],
            consistency=b"",
        )
    assert info.value.step == 5


def test_newer_checkpoint_of_a_fork_fails_step_5() -> None:
    log, fork = standard_log(), build_standard_log(forked=True)
    assert fork.checkpoints[LARGE] != log.checkpoints[LARGE]
    for consistency in (log.consistency(SMALL, LARGE), fork.consistency(SMALL, LARGE)):
        got = step_of(
            log.proof("first"),
            log.record("first"),
            log.policy,
            fork.checkpoints[LARGE],
            consistency,
        )
        assert got == 5


@pytest.mark.parametrize("which", ["newer", "consistency"])
def test_step_5_needs_both_files(which: str) -> None:
    log = standard_log()
    newer = log.checkpoints[LARGE] if which == "newer" else None
    consistency = log.consistency(SMALL, LARGE) if which == "consistency" else None
    with pytest.raises(VerificationError, match="needs both") as info:
        lightclient.verify_proof(
            log.proof("first"),
            log.record("first"),
            log.policy,
            newer=newer,
            consistency=consistency,
        )
    assert info.value.step == 5


@pytest.mark.parametrize(
    "consistency", [b"\n", b"AAAA\n", b"no newline", b"\xff\n", b"A" * 44 * 200 + b"\n"]
)
def test_malformed_consistency_file_fails_step_5(consistency: bytes) -> None:
    log = standard_log()
    got = step_of(
        log.proof("first"), log.record("first"), log.policy, log.checkpoints[LARGE], consistency
    )
    assert got == 5


# --- any input at all ends in a labelled VerificationError ---------------------------


@settings(max_examples=100, deadline=None)
@given(
    which=st.sampled_from(["proof", "record", "policy", "newer", "consistency"]),
    data=st.data(),
)
def test_arbitrary_edits_end_in_a_labelled_error(which: str, data: st.DataObject) -> None:
    log = standard_log()
    inputs = {
        "proof": log.proof("first"),
        "record": log.record("first"),
        "policy": log.policy,
        "newer": log.checkpoints[LARGE],
        "consistency": log.consistency(SMALL, LARGE),
    }
    original = inputs[which]
    start = data.draw(st.integers(0, len(original)), label="start")
    end = data.draw(st.integers(start, min(len(original), start + 8)), label="end")
    insert = data.draw(st.binary(max_size=8), label="insert")
    inputs[which] = original[:start] + insert + original[end:]
    got = step_of(
        inputs["proof"],
        inputs["record"],
        inputs["policy"],
        inputs["newer"],
        inputs["consistency"],
    )
    if got is None and inputs[which] != original:
        # Only what no step reads may change: whitespace between a record's tokens, or
        # in a policy anything but its log key (a URL, spacing, a comment).
        if which == "record":
            edited = strictjson.canonical(strictjson.loads(inputs[which]))
            assert edited == strictjson.canonical(strictjson.loads(original))
        else:
            assert which == "policy", inputs[which]
            assert log.signer.verifier.vkey.encode() in inputs[which]


@settings(max_examples=100, deadline=None)
@given(proof=st.binary(max_size=400), record=st.binary(max_size=200))
def test_garbage_ends_in_a_labelled_error(proof: bytes, record: bytes) -> None:
    log = standard_log()
    assert step_of(proof, record, log.policy) in (1, 2)
    assert step_of(log.proof("first"), record, log.policy) == 2


# --- the command ----------------------------------------------------------------------


def write_inputs(tmp_path: Path, log: LogBuilder, title: str) -> dict[str, Path]:
    paths = {
        "proof": tmp_path / "proof.tlog-proof",
        "record": tmp_path / "record.json",
        "policy": tmp_path / "policy",
        "newer": tmp_path / "checkpoint",
        "consistency": tmp_path / "consistency",
    }
    paths["proof"].write_bytes(log.proof(title))
    paths["record"].write_bytes(log.record(title))
    paths["policy"].write_bytes(log.policy)
    paths["newer"].write_bytes(log.checkpoints[LARGE])
    paths["consistency"].write_bytes(log.consistency(SMALL, LARGE))
    return paths


def test_cli_prints_every_step(tmp_path: Path, run: Callable[..., Any]) -> None:
    p = write_inputs(tmp_path, standard_log(), "first")
    result = run(
        "verify-proof", p["proof"], "--record", p["record"], "--policy", p["policy"],
        "--newer", p["newer"], "--consistency", p["consistency"],
    )  # fmt: skip
    assert result.code == 0, result
    lines = result.out.splitlines()
    assert [line.split(":")[0] for line in lines[:5]] == [f"step {n} ok" for n in range(1, 6)]
    assert lines[5].startswith("verified: dream ")


def test_cli_without_step_5_says_it_skipped(tmp_path: Path, run: Callable[..., Any]) -> None:
    p = write_inputs(tmp_path, standard_log(), "first")
    result = run("verify-proof", p["proof"], "--record", p["record"], "--policy", p["policy"])
    assert result.code == 0, result
    assert "step 5 skipped" in result.out


def test_cli_reports_the_failed_step(tmp_path: Path, run: Callable[..., Any]) -> None:
    p = write_inputs(tmp_path, standard_log(), "first")
    proof = p["proof"].read_bytes()
    hash_line = proof.split(b"\n")[3]
    p["proof"].write_bytes(proof.replace(hash_line, b"B" + hash_line[1:], 1))
    result = run("verify-proof", p["proof"], "--record", p["record"], "--policy", p["policy"])
    assert result.code == 1, result
    lines = result.out.splitlines()
    assert [line.split(":")[0] for line in lines[:3]] == ["step 1 ok", "step 2 ok", "step 3 FAILED"]
    assert lines[3].startswith("hint: ")
    assert "step 4" not in result.out


def test_cli_missing_file_is_an_error(tmp_path: Path, run: Callable[..., Any]) -> None:
    p = write_inputs(tmp_path, standard_log(), "first")
    result = run(
        "verify-proof", p["proof"], "--record", tmp_path / "nope.json", "--policy", p["policy"]
    )
    assert result.code == 1
    assert "nope.json" in result.err and "cannot read" in result.err


def test_cli_read_errors_are_dreampool_errors(tmp_path: Path) -> None:
    with pytest.raises(DreampoolError):
        lightclient.read_proof_files(tmp_path / "a", tmp_path / "b", tmp_path / "c")


# --- standing alone -------------------------------------------------------------------

FORMAT_MODULES = {
    "builder",
    "builder.formats.b64",
    "builder.formats.checkpoint",
    "builder.formats.dream",
    "builder.formats.ed25519",
    "builder.errors",
    "builder.files",
    "builder.formats.leaf",
    "builder.formats.merkle",
    "builder.formats.note",
    "builder.formats.policy",
    "builder.formats.strictjson",
    "builder.formats.tiles",
    "builder.formats.tlogproof",
    "builder.formats.unicodepolicy",
    "builder.formats.unicodetables",
    # the packages themselves (their __init__ is a docstring)
    "builder.formats",
    "builder.readers",
}


@pytest.mark.parametrize(
    ("module", "own"),
    [
        ("builder.readers.lightclient", {"builder.readers.lightclient"}),
        (
            "builder.readers.monitor",
            {
                "builder.readers.fetch",
                "builder.readers.lightclient",
                "builder.readers.monitor",
                "builder.readers.presence",
            },
        ),
    ],
)
def test_imports_no_pipeline_module(module: str, own: set[str]) -> None:
    code = (
        f"import {module}, sys; "
        "print(' '.join(sorted(m for m in sys.modules if m.startswith('builder'))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split()
    assert module in out
    assert set(out) <= FORMAT_MODULES | own, set(out) - FORMAT_MODULES - own


def test_each_checkpoint_is_verified_once_for_many_proofs(monkeypatch: pytest.MonkeyPatch) -> None:
    """A reader checking every dream of a log (dreampool mcp's dream_stats) opened the
    same checkpoint twice a dream; now once, kept by its bytes, and a note that fails
    is never kept: a mangled one fails every time, the good one verifies after it."""
    log = standard_log()
    opened: list[bytes] = []
    real = lightclient.verify_checkpoint

    def counted(policy: Policy, note: bytes) -> Any:
        opened.append(note)
        return real(policy, note)

    monkeypatch.setattr(lightclient, "verify_checkpoint", counted)
    lightclient._verified_note.cache_clear()
    newer, consistency = log.checkpoints[LARGE], log.consistency(SMALL, LARGE)
    for title in ("first", "second", "third"):
        assert step_of(log.proof(title), log.record(title), log.policy, newer, consistency) is None
    assert sorted(opened) == sorted([log.checkpoints[SMALL], newer])
    bad = replaced(newer, 10, flip(10, newer[10]))
    for _ in range(2):
        assert step_of(log.proof("first"), log.record("first"), log.policy, bad, consistency) == 5
    assert opened.count(bad) == 2
