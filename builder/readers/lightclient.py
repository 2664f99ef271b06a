"""The offline light client: docs/protocol.md §5, from a proof, a record and a pinned policy.

A reader who downloaded ``dreams/<id>/proof.tlog-proof`` and ``dreams/<id>/record.json``
and pinned the pool's ``log/policy`` checks, with no network and no trust in the site
that served the files, that the dream they hold is the one the log committed to:

1. **Checkpoint.** The proof file is a c2sp.org/tlog-proof@v1 whose embedded checkpoint
   is signed by a log key of the policy, that key's name is the checkpoint's origin,
   and the policy's witness quorum is met (:func:`builder.formats.policy.verify_checkpoint`).
2. **Leaf data.** From record.json, ``commitment = hex(H(JCS({"dream", "salt"})))`` and
   ``leaf = JCS({"v":1,"kind":"dream","id","commitment"})``; the proof's ``extra`` must
   be JCS-canonical and equal ``leaf`` byte for byte, and its ``index`` must be the
   record's.
3. **Inclusion.** H(0x00 ‖ leaf) is included at ``index`` under the checkpoint root,
   ``index < size`` (RFC 9162 §2.1.3.2, :func:`builder.formats.merkle.verify_inclusion`).
4. **Dream.** The dream meets the docs/protocol.md §1 schema, its Ed25519 signature verifies
   under its ``publicKey``, ``keyId`` names that key, and the record's ``id`` is the
   dream id, the first 16 hex of H(signature).
5. **Consistency** (only given a newer checkpoint and ``log/consistency/<m>``). The newer
   checkpoint verifies as in step 1, is of the same log, and the RFC 6962 consistency
   proof links the proof's checkpoint to it (RFC 9162 §2.1.4.2).

:func:`verify_proof` runs the steps in this order and reports each as a :class:`Step`.
It raises :class:`~builder.errors.VerificationError` with ``step`` set at the first one
that fails, and returns a :class:`Result` only when every step held: there is no bool
to forget to check. Every malformed input, whichever file it is in, ends in that same
error labelled with the step that reads it. The proof file is read by three steps:
its header line and checkpoint by step 1, its ``extra`` and ``index`` lines by step 2,
its hash lines by step 3. A byte changed anywhere in it therefore fails the step that
part belongs to; an inserted or removed newline moves the empty line that ends the
header (tlog-proof §Format), so it can fail an earlier step.

``dreampool verify-proof`` (:func:`builder.cli.main.cmd_verify_proof`) prints, for example::

    step 1 ok: checkpoint example.org/dreams size 5 signed by its log key, quorum none
    step 2 ok: leaf data of dream 3f1c0d2a9b8e7f60 equals the proof's extra
    step 3 ok: leaf 1 included in the tree of size 5 (3 proof hashes)
    step 4 ok: dream 3f1c0d2a9b8e7f60 by ada verifies under key sha256:8a4f2e1b0c9d7e6f
    step 5 skipped: no newer checkpoint given (--newer CHECKPOINT --consistency FILE)
    verified: dream 3f1c0d2a9b8e7f60 is entry 1 of example.org/dreams

This module stands alone: it imports the format modules (canonical JSON, signatures,
Merkle proofs, notes, checkpoints, policies) and nothing of the build pipeline, so a
reader can audit exactly what a verification trusts.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from builder import files
from builder.errors import DreampoolError, InputError, Problem, VerificationError
from builder.formats import dream as dreams
from builder.formats import leaf as leaffmt
from builder.formats import strictjson
from builder.formats.b64 import b64_decode, b64url_decode
from builder.formats.checkpoint import Checkpoint
from builder.formats.merkle import HASH_SIZE, leaf_hash, verify_consistency, verify_inclusion
from builder.formats.note import MAX_NOTE_SIZE
from builder.formats.policy import MAX_POLICY_SIZE, NONE, Policy, parse_policy, verify_checkpoint
from builder.formats.tlogproof import HEADER, MAX_TLOG_PROOF_SIZE, parse_tlog_proof

__all__ = [
    "MAX_CONSISTENCY_SIZE",
    "MAX_RECORD_SIZE",
    "RECORD_FORMAT",
    "STEP_TITLES",
    "Result",
    "Step",
    "check_record",
    "parse_consistency_proof",
    "read_proof_files",
    "verify_logged_record",
    "verify_proof",
]

RECORD_FORMAT = "dreampool-record/v1"
"""The ``format`` field of a published record (docs/protocol.md §2)."""

RECORD_FIELDS = ("format", "id", "index", "salt", "dream")

MAX_RECORD_SIZE = 256 * 1024
"""A record holds one dream (at most 64 KiB as JCS) and may be pretty-printed."""

SALT_SIZE = 32

MAX_CONSISTENCY_HASHES = 128
"""More than any RFC 6962 consistency proof in a tree of fewer than 2^64 leaves needs."""

MAX_CONSISTENCY_SIZE = MAX_CONSISTENCY_HASHES * 45  # 44 base64 characters and a newline

STEP_TITLES: Mapping[int, str] = {
    1: "checkpoint signed by the policy's log, witness quorum met",
    2: "leaf data recomputed from the record equals the proof's extra",
    3: "leaf included at its index under the checkpoint root",
    4: "dream schema, signature, keyId and id",
    5: "checkpoint consistent with the newer checkpoint",
}
"""The docs/protocol.md §5 steps, by number."""

_STEP_HINTS: Mapping[int, str] = {
    1: "check that POLICY is the pool's pinned log/policy and that the proof comes from that "
    "pool; download dreams/<id>/proof.tlog-proof again",
    2: "the record or the proof was changed, or they belong to different dreams; "
    "download both from the same dreams/<id>/ directory again",
    3: "the proof's hashes do not lead to the signed root: the proof file was changed; "
    "download it again",
    4: "the log holds a dream that does not verify; report it to the pool's operators",
    5: "give the log's current checkpoint (log/checkpoint) with --newer and "
    "log/consistency/<size of the proof's checkpoint> with --consistency",
}

_INDEX_LINE = re.compile(rb"index (0|[1-9][0-9]{0,18})")

_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class Step:
    """One docs/protocol.md §5 step as it ran: its number, title, outcome and what it found."""

    number: int
    title: str
    ok: bool
    detail: str


@dataclass(frozen=True, slots=True)
class Result:
    """What a verification established; only :func:`verify_proof` makes one."""

    dream: dreams.Dream
    index: int
    leaf_data: bytes
    checkpoint: Checkpoint
    witnesses: tuple[str, ...]
    newer: Checkpoint | None
    steps: tuple[Step, ...]

    @property
    def id(self) -> str:
        """The verified dream id."""
        return self.dream.id


@dataclass(frozen=True, slots=True)
class _Record:
    """A record.json whose fields are well typed, with its recomputed leaf data."""

    id: str
    index: int
    dream: dict[str, Any]
    leaf_data: bytes


def verify_proof(
    proof: bytes,
    record: bytes,
    policy: bytes,
    *,
    newer: bytes | None = None,
    consistency: bytes | None = None,
    on_step: Callable[[Step], None] | None = None,
) -> Result:
    """Run docs/protocol.md §5 on a tlog-proof file, its record.json and a pinned policy.

    ``newer`` (a signed checkpoint, e.g. the site's ``log/checkpoint``) and
    ``consistency`` (``log/consistency/<m>``, m the size of the proof's checkpoint)
    run step 5; give both or neither. Each step is passed to ``on_step`` as it ends,
    the failed one too. Raises VerificationError with ``step`` set at the first
    failure, and returns the :class:`Result` only if every step held.
    """
    steps: list[Step] = []

    def report(step: Step) -> None:
        steps.append(step)
        if on_step is not None:
            on_step(step)

    # Step 1: the checkpoint the proof carries, against the pinned policy.
    _, checkpoint, witnesses = _run(1, report, lambda: _check_checkpoint(policy, proof))
    # Step 2: the leaf data, recomputed from the record, is the proof's extra.
    rec = _run(2, report, lambda: _check_leaf_data(record, proof))
    # Step 3: that leaf is in the tree the checkpoint signs.
    _run(3, report, lambda: _check_inclusion(proof, rec, checkpoint))
    # Step 4: the dream itself.
    verified = _run(4, report, lambda: _check_dream(rec))
    # Step 5 (optional): the proof's checkpoint is a prefix of a newer one.
    newer_checkpoint: Checkpoint | None = None
    if newer is not None or consistency is not None:
        newer_checkpoint = _run(
            5, report, lambda: _check_consistency(policy, checkpoint, newer, consistency)
        )
    return Result(
        dream=verified,
        index=rec.index,
        leaf_data=rec.leaf_data,
        checkpoint=checkpoint,
        witnesses=witnesses,
        newer=newer_checkpoint,
        steps=tuple(steps),
    )


def _run(number: int, report: Callable[[Step], None], check: Callable[[], tuple[_T, str]]) -> _T:
    """Run one step's check; report it, and label any failure with the step's number."""
    title = STEP_TITLES[number]
    try:
        value, detail = check()
    except DreampoolError as exc:
        if isinstance(exc, VerificationError) and exc.step == number and exc.hint:
            error = exc
        else:
            error = VerificationError(
                exc.message, step=number, hint=exc.hint or _STEP_HINTS[number]
            )
        report(Step(number, title, False, error.message))
        if error is exc:
            raise
        raise error from exc
    report(Step(number, title, True, detail))
    return value


# --- step 1 -------------------------------------------------------------------------


def _check_checkpoint(
    policy_bytes: bytes, proof: bytes
) -> tuple[tuple[Policy, Checkpoint, tuple[str, ...]], str]:
    policy = _parsed_policy(policy_bytes)
    note = _checkpoint_note(proof)
    try:
        checkpoint, witnesses = _verified_note(policy_bytes, note)
    except DreampoolError as exc:
        raise VerificationError(f"proof: {exc.message}", hint=exc.hint) from exc
    if policy.quorum == NONE:
        quorum = "quorum none"
    else:
        quorum = f"quorum {policy.quorum} met (cosigned by {', '.join(witnesses)})"
    detail = (
        f"checkpoint {checkpoint.origin} size {checkpoint.size} signed by its log key, {quorum}"
    )
    return (policy, checkpoint, witnesses), detail


# A reader that checks many proofs of one log (``dreampool mcp``'s dream_stats runs
# the light client on every dream) meets the same policy and checkpoints again and
# again: each is parsed and verified once, kept by its exact bytes. The answer is a
# function of those bytes alone (the values are frozen), and a failure raises, so
# it is never kept.
@functools.lru_cache(maxsize=16)
def _parsed_policy(policy_bytes: bytes) -> Policy:
    return parse_policy(policy_bytes)


@functools.lru_cache(maxsize=256)
def _verified_note(policy_bytes: bytes, note: bytes) -> tuple[Checkpoint, tuple[str, ...]]:
    """:func:`builder.formats.policy.verify_checkpoint` of ``note`` under the policy
    ``policy_bytes``, kept (above)."""
    return verify_checkpoint(_parsed_policy(policy_bytes), note)


def _checkpoint_note(proof: bytes) -> bytes:
    """The checkpoint note a tlog-proof file ends with, found as tlog-proof §Format says.

    The header, extra, index and hash lines are all non-empty, so the first empty line
    ends them and the checkpoint follows it verbatim. Steps 2 and 3 read the lines
    before it.
    """
    if len(proof) > MAX_TLOG_PROOF_SIZE:
        raise VerificationError(
            f"proof is {len(proof)} bytes, want at most {MAX_TLOG_PROOF_SIZE}",
            hint="this is not a dream's proof.tlog-proof",
        )
    if not proof.startswith(HEADER + b"\n"):
        raise VerificationError(
            "proof: line 1 is not the header c2sp.org/tlog-proof@v1",
            hint="give the dream's proof.tlog-proof file (c2sp.org/tlog-proof@v1)",
        )
    cut = proof.find(b"\n\n")
    if cut < 0:
        raise VerificationError(
            "proof: no empty line before the checkpoint (tlog-proof §Format)",
            hint="the proof file is truncated; download it again",
        )
    return proof[cut + 2 :]


# --- step 2 -------------------------------------------------------------------------


def _check_leaf_data(record: bytes, proof: bytes) -> tuple[_Record, str]:
    rec = _parse_record(record)
    # Step 1 found the empty line and checked line 1; lines 2 and 3 are extra and index.
    lines = proof[: proof.find(b"\n\n")].split(b"\n")
    extra = _extra_of(lines[1] if len(lines) > 1 else b"")
    # docs/protocol.md §5: extra is a leaf (§3, JCS-canonical) and equals the
    # recomputed leaf data.
    _leaf_of(extra, "proof: extra")
    if extra != rec.leaf_data:
        raise VerificationError(_leaf_mismatch(extra, rec))
    index_line = lines[2] if len(lines) > 2 else b""
    match = _INDEX_LINE.fullmatch(index_line)
    if match is None:
        raise VerificationError("proof: line 3 is not index <decimal> (tlog-proof §Format)")
    if int(match[1]) != rec.index:
        raise VerificationError(
            f"proof is for leaf index {int(match[1])}, the record says index {rec.index}"
        )
    return rec, f"leaf data of dream {rec.id} equals the proof's extra"


def _parse_record(data: bytes) -> _Record:
    """record.json (docs/protocol.md §2): strict JSON with exactly the five fields, well typed."""
    try:
        obj = strictjson.loads(data, max_bytes=MAX_RECORD_SIZE)
    except strictjson.JSONError as exc:
        where = "record" if exc.line is None else f"record line {exc.line}"
        raise VerificationError(
            f"{where}: {exc.message}",
            hint="give the dream's record.json, unchanged, as the site serves it",
        ) from None
    if not isinstance(obj, dict):
        raise VerificationError("record: must be a JSON object")
    unknown = sorted(set(obj) - set(RECORD_FIELDS))
    if unknown:
        raise VerificationError(
            f"record: {len(unknown)} unknown field(s); want exactly {', '.join(RECORD_FIELDS)}"
        )
    missing = [name for name in RECORD_FIELDS if name not in obj]
    if missing:
        raise VerificationError(f"record: missing field(s) {', '.join(missing)}")
    if obj["format"] != RECORD_FORMAT:
        raise VerificationError(
            f"record: /format is not {RECORD_FORMAT}",
            hint="this is not a dreampool record, or one of a version this client cannot read",
        )
    record_id, index, salt, dream = obj["id"], obj["index"], obj["salt"], obj["dream"]
    if not isinstance(record_id, str) or not dreams.is_dream_id(record_id):
        raise VerificationError("record: /id must be 16 lowercase hex characters")
    if type(index) is not int or index < 0:
        raise VerificationError("record: /index must be an integer >= 0")
    if not isinstance(salt, str):
        raise VerificationError(f"record: /salt must be a b64url string of {SALT_SIZE} bytes")
    try:
        salt_size = len(b64url_decode(salt))
    except ValueError as exc:
        raise VerificationError(f"record: /salt: {exc}") from None
    if salt_size != SALT_SIZE:
        raise VerificationError(f"record: /salt decodes to {salt_size} bytes, want {SALT_SIZE}")
    if not isinstance(dream, dict):
        raise VerificationError("record: /dream must be an object")
    try:
        # docs/protocol.md §2: commitment = hex(H(JCS({"dream", "salt"}))), the salt as written.
        commitment = hashlib.sha256(strictjson.canonical({"dream": dream, "salt": salt}))
        # docs/protocol.md §3: the dream leaf.
        leaf_data = leaffmt.encode(leaffmt.DreamLeaf(record_id, commitment.hexdigest()))
    except ValueError as exc:  # rfc8785.CanonicalizationError
        raise VerificationError(f"record: /dream has no JCS form: {exc}") from None
    return _Record(record_id, index, dream, leaf_data)


def _extra_of(line: bytes) -> bytes:
    # docs/protocol.md §5 requires the optional tlog-proof extra line: it is the leaf data.
    if not line.startswith(b"extra "):
        raise VerificationError("proof: line 2 is not extra <base64 of the leaf data>")
    try:
        return b64_decode(line[len(b"extra ") :].decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        raise VerificationError("proof: extra is not canonical base64 (RFC 4648 §4)") from None


def check_record(record: bytes, index: int, leaf: bytes) -> None:
    """Check that ``record`` (a record.json) is the dream logged as ``leaf`` at ``index``.

    Step 2 of docs/protocol.md §5 without a proof: the record parses strictly, and its
    leaf data recomputed (the commitment over its dream and salt) is ``leaf``, byte for
    byte. ``leaf`` must already be authenticated (proved under a signed root). Raises
    :class:`VerificationError` saying what differs, echoing only ids.
    """
    _logged_record(record, index, leaf)


def _logged_record(record: bytes, index: int, leaf: bytes) -> _Record:
    rec = _parse_record(record)
    if rec.leaf_data != leaf:
        raise VerificationError(_leaf_mismatch(leaf, rec, f"leaf {index}"))
    if rec.index != index:
        raise VerificationError(f"record says index {rec.index}, the dream is leaf {index}")
    return rec


def verify_logged_record(record: bytes, index: int, leaf: bytes) -> dreams.Dream:
    """The dream of ``record``, checked as the dream logged as ``leaf`` at ``index``.

    Steps 2 and 4 of docs/protocol.md §5 for a reader that holds the whole tree:
    :func:`check_record` (the record's recomputed leaf data is ``leaf``), then the
    dream's schema, size, signature, keyId and id. Step 3 is the caller's: ``leaf``
    must be leaf ``index`` of entries already shown to hash to a checkpoint's root
    that step 1 verified (RFC 6962 §2.1: one root over all leaves proves every
    leaf's inclusion at once). Raises :class:`VerificationError` (or
    :class:`InputError` for a dream that breaks the schema) at the first failure.
    """
    verified, _ = _check_dream(_logged_record(record, index, leaf))
    return verified


def _leaf_of(data: bytes, label: str) -> leaffmt.Leaf:
    """``data`` read as a leaf (docs/protocol.md §3, :func:`builder.formats.leaf.parse`), or a
    :class:`VerificationError` saying, after ``label``, which rule it breaks."""
    try:
        return leaffmt.parse(data)
    except leaffmt.LeafError as exc:
        raise VerificationError(
            f"{label} is no leaf of this log (docs/protocol.md §3): {exc.message}"
        ) from None


def _leaf_mismatch(extra: bytes, rec: _Record, label: str = "proof") -> str:
    """Say how the logged leaf ``extra`` differs from the recomputed one, echoing
    only ids. ``extra`` must be a leaf (:func:`_leaf_of`)."""
    logged = _leaf_of(extra, label)
    if not isinstance(logged, leaffmt.DreamLeaf):
        return f"{label}: the leaf is not a dream leaf, so the proof is not about a dream"
    if logged.id != rec.id:
        return f"{label} is for dream {logged.id}, the record is dream {rec.id}"
    return (
        f"record of dream {rec.id} does not hash to the logged commitment: "
        "its dream or salt differs from what was logged"
    )


# --- step 3 -------------------------------------------------------------------------


def _check_inclusion(proof: bytes, rec: _Record, checkpoint: Checkpoint) -> tuple[None, str]:
    # Steps 1 and 2 read the checkpoint, extra and index lines; what remains are the hashes.
    parsed = parse_tlog_proof(proof)
    if (parsed.index, parsed.extra) != (rec.index, rec.leaf_data):
        raise VerificationError("proof: parses to another index or extra than steps 2 read")
    # RFC 9162 §2.1.3.2: the proof is only about leaves inside the tree.
    if not rec.index < checkpoint.size:
        raise VerificationError(
            f"leaf index {rec.index} is not inside the checkpoint's tree of size "
            f"{checkpoint.size} (want index < size)",
            hint="the proof's checkpoint does not hold this leaf; download the proof again",
        )
    # docs/protocol.md §3: leaf hash = H(0x00 || leaf data) (RFC 6962 §2.1).
    verify_inclusion(
        leaf_hash(rec.leaf_data), rec.index, checkpoint.size, parsed.proof, checkpoint.root
    )
    detail = (
        f"leaf {rec.index} included in the tree of size {checkpoint.size} "
        f"({len(parsed.proof)} proof hashes)"
    )
    return None, detail


# --- step 4 -------------------------------------------------------------------------


def _check_dream(rec: _Record) -> tuple[dreams.Dream, str]:
    where = "record /dream"
    problems = dreams.validate(rec.dream, where)
    if problems:
        raise InputError(problems, hint=_STEP_HINTS[4])
    size = len(strictjson.canonical(rec.dream))
    if size > dreams.MAX_BYTES:
        raise VerificationError(
            f"{where}: is {size} bytes as JCS, "
            f"want at most {dreams.MAX_BYTES} (docs/protocol.md §1)"
        )
    verified = dreams.verify(rec.dream, where)  # signature, then keyId
    # docs/protocol.md §1: id = first 16 hex of H(raw signature).
    if verified.id != rec.id:
        raise VerificationError(
            f"record /id {rec.id} is not the dream's id {verified.id} "
            "(the first 16 hex of SHA-256 of its signature)"
        )
    detail = f"dream {verified.id} by {verified.author} verifies under key {verified.key_id}"
    return verified, detail


# --- step 5 -------------------------------------------------------------------------


def _check_consistency(
    policy_bytes: bytes, checkpoint: Checkpoint, newer: bytes | None, consistency: bytes | None
) -> tuple[Checkpoint, str]:
    if newer is None or consistency is None:
        raise VerificationError(
            "step 5 needs both a newer checkpoint and the consistency proof to it"
        )
    try:
        newer_checkpoint, _ = _verified_note(policy_bytes, newer)
    except DreampoolError as exc:
        raise VerificationError(f"newer checkpoint: {exc.message}", hint=exc.hint) from exc
    if newer_checkpoint.origin != checkpoint.origin:
        raise VerificationError(
            f"newer checkpoint is of log {newer_checkpoint.origin}, the proof's of "
            f"{checkpoint.origin}",
            hint="give a checkpoint of the log the proof is from",
        )
    if newer_checkpoint.size < checkpoint.size:
        raise VerificationError(
            f"newer checkpoint has size {newer_checkpoint.size}, smaller than the proof's "
            f"{checkpoint.size}",
            hint="give the log's current checkpoint; a log never shrinks",
        )
    hashes = parse_consistency_proof(consistency)
    # RFC 9162 §2.1.4.2; equal sizes need an empty proof and equal roots.
    verify_consistency(
        checkpoint.size, newer_checkpoint.size, checkpoint.root, newer_checkpoint.root, hashes
    )
    detail = (
        f"checkpoint of size {checkpoint.size} is a prefix of the newer one of size "
        f"{newer_checkpoint.size} ({len(hashes)} proof hashes)"
    )
    return newer_checkpoint, detail


def parse_consistency_proof(data: bytes) -> tuple[bytes, ...]:
    """Parse ``log/consistency/<m>`` (docs/protocol.md §4): one b64 hash per line.

    Every line ends in a newline; an empty file is the empty proof (equal sizes).
    Strict: canonical padded base64 (RFC 4648 §4) of exactly 32 bytes per line, at
    most :data:`MAX_CONSISTENCY_HASHES` lines. Raises VerificationError otherwise.
    """
    if len(data) > MAX_CONSISTENCY_SIZE:
        raise VerificationError(
            f"consistency proof is {len(data)} bytes, want at most {MAX_CONSISTENCY_SIZE}"
        )
    if not data:
        return ()
    if not data.endswith(b"\n"):
        raise VerificationError("consistency proof: the last line has no newline")
    hashes: list[bytes] = []
    for number, line in enumerate(data[:-1].split(b"\n"), 1):
        try:
            h = b64_decode(line.decode("ascii"))
        except (UnicodeDecodeError, ValueError):
            raise VerificationError(
                f"consistency proof line {number}: not canonical base64 (RFC 4648 §4)"
            ) from None
        if len(h) != HASH_SIZE:
            raise VerificationError(
                f"consistency proof line {number}: hash is {len(h)} bytes, want {HASH_SIZE}"
            )
        hashes.append(h)
    return tuple(hashes)


# --- the command ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ProofFiles:
    """The files ``dreampool verify-proof`` checks, read within their size limits."""

    proof: bytes
    record: bytes
    policy: bytes
    newer: bytes | None
    consistency: bytes | None


def read_proof_files(
    proof_path: str | os.PathLike[str],
    record_path: str | os.PathLike[str],
    policy_path: str | os.PathLike[str],
    newer_path: str | os.PathLike[str] | None = None,
    consistency_path: str | os.PathLike[str] | None = None,
) -> ProofFiles:
    """Read the files for :func:`verify_proof`; a file that cannot be read raises
    :class:`~builder.errors.InputError` naming it."""
    return ProofFiles(
        _read(proof_path, MAX_TLOG_PROOF_SIZE),
        _read(record_path, MAX_RECORD_SIZE),
        _read(policy_path, MAX_POLICY_SIZE),
        None if newer_path is None else _read(newer_path, MAX_NOTE_SIZE),
        None if consistency_path is None else _read(consistency_path, MAX_CONSISTENCY_SIZE),
    )


def _read(path: str | os.PathLike[str], limit: int) -> bytes:
    """Read at most ``limit`` bytes (the verifier refuses more, with its step's label)."""
    name = os.fspath(path)
    try:
        # One byte past the limit, so the step that reads the file sees it is too
        # big; only a regular file, opened without blocking (a FIFO would hang).
        return files.read_head(path, limit)[0]
    except OSError as exc:
        raise InputError(
            [Problem(name, "", f"cannot read: {exc.strerror or exc}")],
            hint="check the path; verify-proof reads local files only",
        ) from None
