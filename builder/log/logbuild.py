"""The log half of ``dreampool build``: admit, prove append-only, sign, publish.

1. Read the log state (:mod:`builder.log.logstate`) and rebuild the tree from it.
2. Prove the stored tree is the one the pool signed: every stored checkpoint
   verifies under the pool's policy and equals the rebuilt root at its size.
   Any drop, change or reorder of a leaf fails here, with the evidence, and
   nothing is signed.
3. Check every logged dream against ``content/``: its file and salt still give
   the committed value, or an erasure is recorded for it. Taken as the last
   build found it when every file and salt is the one it checked
   (:mod:`builder.log.checked`).
4. Append an erasure leaf for each newly erased dream; then a key leaf for
   each new key of the new dreams, by keyId, and then each new dream, by id
   (docs/protocol.md §3): within a build a key leaf's place says nothing of
   which dream it came with (§1.2). A new dream the anonymity rules refuse
   (:mod:`builder.content.anonymity`) is not logged. Each new dream is read from its
   file and checked again first: the scan may have taken it from the build
   cache, and the log, being append-only, takes nothing on the cache's word.
5. If the tree grew, sign a checkpoint (C2SP tlog-checkpoint) with the log
   key; a tree that did not grow is not signed again.

Steps 1–4 are :func:`plan`, which reads ``content/`` and writes nothing: a
:class:`LogPlan` (the leaves to append, the new dreams' salts, the policy text).
Step 5 is :func:`apply`, which writes that plan and signs. :func:`update` is both.

:func:`publish` then lays out ``log/`` and ``dreams/<id>/`` files
(docs/protocol.md §4–§5) as a plan ``{path: bytes}``.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
import os
import re
from collections.abc import Callable, Container, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from builder import parallel
from builder.content import anonymity, filekeys
from builder.content.pool import (
    ScannedDream,
    atomic_write,
    check_file,
    load_config,
    make_durable,
    read_regular,
)
from builder.errors import DreampoolError, InputError, LogError, Problem
from builder.formats import leaf as leaffmt
from builder.formats import merkle, strictjson, tiles
from builder.formats.b64 import b64_encode, b64url_decode, b64url_encode
from builder.formats.checkpoint import Checkpoint, open_checkpoint, sign_checkpoint
from builder.formats.dream import Dream, commitment, is_dream_id
from builder.formats.note import Signer, Verifier, split_note
from builder.formats.policy import Policy, PolicyLog, format_policy, parse_policy
from builder.formats.tlogproof import TlogProof, format_tlog_proof
from builder.log import checked, logstate, prefix

SALT_SIZE = 32


# --- the log as built -------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Admitted:
    """A dream in the log whose record is published. Its salt is the text, or
    (a dream the log check took as it stood: :mod:`builder.log.checked`) what
    reads it when a page first shows it (:func:`salt_text`)."""

    dream: Dream
    index: int
    salt_of: str | Callable[[Admitted], str]
    date: str
    # Its leaf's commitment, which a salt read later must give (salt_text).
    # Each Admitted carries its own: a page worker is sent the dreams it
    # renders, pickled, never the whole log's commitments (review r78).
    commitment: str = ""

    @property
    def salt(self) -> str:
        s = self.salt_of
        return s if isinstance(s, str) else s(self)


@dataclass(frozen=True, slots=True)
class Erased:
    id: str
    index: int
    erasure_index: int
    reason: str
    date: str


@dataclass(slots=True)
class Log:
    state: logstate.LogState
    tree: merkle.MerkleTree
    policy: Policy
    checkpoint: Checkpoint | None
    dreams: dict[str, Admitted] = field(default_factory=dict)
    erased: dict[str, Erased] = field(default_factory=dict)
    key_index: dict[str, int] = field(default_factory=dict)
    admitted_now: list[str] = field(default_factory=list)
    erased_now: list[str] = field(default_factory=list)
    refused: list[Problem] = field(default_factory=list)
    # Refused for good by the log as it stood before this build (a key the log
    # had retired): named every build, but no fault of this one's input.
    set_aside: list[Problem] = field(default_factory=list)
    signed_now: bool = False
    notes: list[str] = field(default_factory=list)  # for the build to report
    # Given the log key: how many leaves (from the first) lie inside a checkpoint
    # that key signed, so that a build holding it verified in full each dream of
    # them that they do not erase (docs/protocol.md §3.1, THREATS.md T78, T117);
    # 0 if the key signed none yet, None without the key.
    attested: int | None = None
    # The lines of builder.log.checked for every dream this log holds, for the
    # next build to take as checked once the store has saved the rows they
    # name: None if some dream's file or salt had no blob id to name.
    log_check: checked.Hashing | None = None


@dataclass(slots=True)
class LogPlan:
    """What :func:`plan` found to do and :func:`apply` does: the leaves to append
    (erasures, then new keys, then new dreams: docs/protocol.md §3), the salts of
    the new dreams, and the policy text to write (None: the stored one stands)."""

    log: Log  # as it stands before apply: refused, admitted_now, erased_now filled in
    origin: str
    new_leaves: list[bytes]
    new_salts: dict[str, str]
    policy_text: str | None
    present: dict[str, ScannedDream]
    # Each present logged dream's salt: its text, else (the log check stood)
    # what reads it when a page shows the dream (_SaltAsStood).
    salt_of: dict[str, str]
    salt_as_stood: Callable[[Admitted], str] | None
    logged: _Logged
    # The lines of builder.log.checked for every dream the log holds once the
    # plan is applied (those it checked, then those it logs); None if a file or
    # salt has no blob id to name.
    lines: checked.Hashing | None
    # The log key the plan's proof trusted leaves by (None: none given), which alone
    # may sign it (docs/protocol.md §3.1, T78); and whether apply has taken it:
    # a plan is carried out once, as a ProvenLog is planned once.
    vkey: str | None = None
    # With the log key: the size of the largest checkpoint it had signed (ProvenLog).
    key_size: int | None = None
    applied: bool = False


SET_ASIDE = "retired key; remove the file (the log retired its key, so no build will log it): "


def now_time() -> str:
    """RFC 3339 UTC seconds: SOURCE_DATE_EPOCH when set (reproducible builds), else now."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    moment = dt.datetime.fromtimestamp(int(epoch), dt.UTC) if epoch else dt.datetime.now(dt.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def new_salt(dream_id: str) -> str:
    """A fresh salt for a dream being logged: :data:`SALT_SIZE` random bytes,
    b64url (docs/protocol.md §3). The id is unused here; a test that must build the
    same state twice byte for byte (tests/redteam/test_crash.py) replaces this
    function with one that derives the salt from it."""
    del dream_id
    return b64url_encode(os.urandom(SALT_SIZE))


_PROVEN = object()  # held by prove() alone: see ProvenLog


class ProvenLog:
    """The stored log state once step 2 has proven it: every stored checkpoint
    verifies under the pool's policy and equals the root of the tree rebuilt
    from the stored leaves (:func:`_prove_append_only`).

    Only :func:`prove` makes one (the constructor refuses any caller without a
    token private to this module), so holding a ProvenLog means the proof
    ran. It is the only way the scan learns what the log commits to
    (:func:`builder.content.pool.scan_dreams`, docs/protocol.md §3.1), and
    :meth:`commitment_of` answers only for a dream leaf inside the last
    checkpoint it may trust (never a leaf of an unsigned tail, which only a
    killed build wrote and no signature covers) whose id has no erasure leaf.
    Given the log key, that is the last checkpoint *this key* signed: the
    policy is in the checkout, where a pull request can add a log key of its
    own beside the pool's and sign its own leaves with it (THREATS.md T78);
    leaves past that checkpoint are checked in full, as new dreams are.
    :func:`update` then goes on from this very state and tree, once (it
    appends to them), so nothing is read again between the proof and its use.
    """

    __slots__ = (
        "_committed",
        "_logged",
        "_spent",
        "checkpoint",
        "key_size",
        "state",
        "tree",
        "vkey",
    )

    def __init__(
        self,
        token: object,
        state: logstate.LogState,
        tree: merkle.MerkleTree,
        checkpoint: Checkpoint | None,
        logged: _Logged,
        trusted_size: int,
        vkey: str | None = None,
    ) -> None:
        if token is not _PROVEN:
            raise TypeError("a ProvenLog is made only by builder.log.logbuild.prove")
        self.vkey = vkey  # the log key the proof trusted leaves by; None: no key given
        # Given the log key: the size of the largest checkpoint it signed (0: none).
        self.key_size = None if vkey is None else trusted_size
        self.state = state
        self.tree = tree
        self.checkpoint = checkpoint
        self._logged = logged
        signed = min(state.signed_size, trusted_size)
        self._committed = {
            dream_id: logged.commitments[dream_id]
            for dream_id, index in logged.dreams.items()
            if index < signed and dream_id not in logged.erasures
        }
        self._spent = False

    def commitment_of(self, dream_id: str) -> str | None:
        """The commitment of ``dream_id``'s dream leaf, if a signed checkpoint
        holds it and the dream is not erased; else None."""
        return self._committed.get(dream_id)

    def dreams(self) -> list[tuple[str, int, str]]:
        """(id, leaf index, commitment) of each dream :meth:`commitment_of`
        answers for, in log order."""
        return sorted(
            ((i, self._logged.dreams[i], c) for i, c in self._committed.items()),
            key=lambda row: row[1],
        )

    def logged_ids(self) -> set[str]:
        """Every dream id the stored leaves log, erased ones and an unsigned tail's
        too (:func:`logged_dreams` of them all), from the leaves the proof read:
        without a tail, no leaf is read again."""
        if self.state.signed_size < len(self.state.leaves):
            return set(logged_dreams(self.state.leaves))
        return set(self._logged.dreams)

    def _take(self) -> _Logged:
        """For :func:`update`, once: it appends to the state and the tree."""
        if self._spent:
            raise RuntimeError("a ProvenLog is used by one update; prove the log again")
        self._spent = True
        return self._logged


def prove(
    content: Path,
    *,
    origin: str,
    signer: Signer | None = None,
    canonical_shards: set[bytes] | None = None,
    opened: dict[Any, Any] | None = None,
    prefixes: dict[str, bytes] | None = None,
) -> ProvenLog:
    """Steps 1–2 without writing anything: read the log state, rebuild the
    tree (unsigned tail included) and prove it against every stored
    checkpoint (:class:`LogError`, with the evidence, if any part fails). A
    pool with no log yet (no policy, no checkpoint) proves an empty log; its
    first build writes the policy (:func:`update`). ``canonical_shards`` and
    ``opened`` are :func:`update`'s.

    ``prefixes`` (the build store's ``logprefix`` section) holds what an
    earlier proof made of the leaves of the full shards
    (:mod:`builder.log.prefix`): if it holds the row of these very shards,
    only the leaves after them are parsed and hashed. It is left holding
    this proof's row alone (none while no shard is full and signed).

    ``signer``, the log key a build was given, must be a log key of the stored
    policy: otherwise the stored log (policy and checkpoints together) is not
    the one this key signed, and nothing is taken on its word."""
    state = logstate.load(content, canonical_shards=canonical_shards)
    # The full shards' leaves, as far as a checkpoint signs them: an unsigned
    # tail is judged by update() before it is read, and is never kept.
    kept = min(len(state.leaves), state.signed_size) // logstate.SHARD * logstate.SHARD
    row_key = prefix.key(state.shard_digests[: kept // logstate.SHARD])
    row = None if prefixes is None or not kept else prefixes.get(row_key)
    found = None if row is None else prefix.decode(row, kept)
    if found is None:
        tree = merkle.MerkleTree.from_leaf_hashes(merkle.leaf_hash(leaf) for leaf in state.leaves)
    else:
        tree = found.tree
        tree.extend(merkle.leaf_hash(leaf) for leaf in state.leaves[kept:])
    checkpoint = None
    trusted = state.signed_size
    if state.policy is not None:
        policy = _stored_policy(content, state.policy, origin)
        _check_signer(content, policy, signer, origin)
        checkpoint, by_key = _prove_append_only(state, tree, policy, opened)
        if signer is not None:  # docs/protocol.md §3.1: the leaves this key signed
            trusted = by_key.get(signer.verifier.vkey, 0)
    elif state.history:
        path = logstate.log_dir(content) / "policy"
        raise LogError(f"{path} is missing but checkpoints were signed; restore it from git")
    # Only the signed leaves: an unsigned tail is judged by update() before it is read.
    if found is not None:
        signed = _read_leaves(state.leaves[: state.signed_size], into=_logged_of(found), start=kept)
    elif prefixes is not None and kept:
        signed = _read_leaves(state.leaves[:kept])
        row = prefix.encode(_prefix_of(signed, tree, kept))
        signed = _read_leaves(state.leaves[: state.signed_size], into=signed, start=kept)
    else:
        signed = _read_leaves(state.leaves[: state.signed_size])
    if prefixes is not None:
        prefixes.clear()
        if kept and row is not None:
            prefixes[row_key] = row
    vkey = None if signer is None else signer.verifier.vkey
    return ProvenLog(_PROVEN, state, tree, checkpoint, signed, trusted, vkey)


def update(
    content: Path,
    scanned: Iterable[ScannedDream],
    *,
    origin: str,
    signer: Signer | None,
    log_url: str | None = None,
    time: str | None = None,
    commitments: dict[Any, Any] | None = None,
    store: Callable[[str], dict[Any, Any]] | None = None,
    scan_rows: checked.ScanRows | None = None,
    canonical_shards: set[bytes] | None = None,
    opened: dict[Any, Any] | None = None,
    proven: ProvenLog | None = None,
    keys: filekeys.FileKeys | None = None,
) -> Log:
    """Steps 1–5 of the module docstring: :func:`plan`, then :func:`apply`."""
    planned = plan(
        content,
        scanned,
        origin=origin,
        signer=signer,
        log_url=log_url,
        commitments=commitments,
        store=store,
        scan_rows=scan_rows,
        canonical_shards=canonical_shards,
        opened=opened,
        proven=proven,
        keys=keys,
    )
    return apply(content, planned, signer=signer, time=time)


def plan(
    content: Path,
    scanned: Iterable[ScannedDream],
    *,
    origin: str,
    signer: Signer | None,
    log_url: str | None = None,
    commitments: dict[Any, Any] | None = None,
    store: Callable[[str], dict[Any, Any]] | None = None,
    scan_rows: checked.ScanRows | None = None,
    canonical_shards: set[bytes] | None = None,
    opened: dict[Any, Any] | None = None,
    proven: ProvenLog | None = None,
    keys: filekeys.FileKeys | None = None,
) -> LogPlan:
    """Steps 1–4 of the module docstring: what :func:`apply` will append, write and
    sign. Reads ``content/`` (the log state, salts, erasure requests, each new dream
    again) and writes nothing; the stored state and tree it was proven on are left
    as they were.

    ``proven`` is the log :func:`prove` proved before the scan (the build
    proves first, so the scan may check logged dreams against their leaves);
    without it, steps 1–2 run here.

    ``commitments`` maps (SHA-256 of a dream file, salt) to the commitment
    the scan computed this build (:func:`builder.content.pool.scan_dreams`).
    ``store(name)`` is a section of the build store (:mod:`builder.buildcache`),
    read when first asked for: ``logcheck``, what the last build checked
    (:mod:`builder.log.checked`), and, when that does not stand, ``commit``
    ((SHA-256 of a dream file, salt) to a commitment an earlier build
    computed) and ``salts`` (a salt file's content to its text; ``keys``:
    :mod:`builder.content.filekeys`); ``scan_rows`` names the store's scan
    row the scan took each dream from (the build store itself:
    :class:`builder.log.checked.ScanRows`), which ``logcheck`` binds.
    ``canonical_shards`` are the leaf shards already checked
    (:func:`builder.log.logstate.load`), ``opened`` a digest of a stored
    checkpoint and the keys it was verified with to the checkpoint
    (:func:`_prove_append_only`); each section used is left holding this build's."""
    if proven is None:
        proven = prove(
            content,
            origin=origin,
            signer=signer,
            canonical_shards=canonical_shards,
            opened=opened,
        )
    if (None if signer is None else signer.verifier.vkey) != proven.vkey:
        # The proof decided which leaves to trust by its key (§3.1): only that key plans.
        raise LogError(
            "the log was proven with another log key than the one the plan is given",
            hint="prove the log with the key that will sign (logbuild.prove(signer=…))",
        )
    logged = proven._take()
    state, tree = proven.state, proven.tree
    notes: list[str] = []
    policy, policy_text = _policy(content, state, origin, signer, log_url, notes)
    leaves = state.leaves
    log = Log(state=state, tree=tree, policy=policy, checkpoint=proven.checkpoint, notes=notes)
    present = {s.dream.id: s for s in scanned}
    _check_unsigned_tail(content, leaves, state.signed_size, present)
    _read_leaves(leaves, into=logged, start=state.signed_size)
    new_leaves: list[bytes] = []

    # Step 3: every logged dream still matches content/, or is erased, and
    # none was signed by a key retired before it (docs/protocol.md §3). Taken
    # as the last build checked it when every file and salt is the one it
    # checked (builder.log.checked); else dream by dream.
    known: dict[Any, Any] | None = None
    lines: checked.Hashing | None
    salt_of: dict[str, str] = {}
    as_stood: Callable[[Admitted], str] | None = None
    pending: list[tuple[str, str]] = []
    standing = _standing(tree, logged, present, store, scan_rows, keys, notes)
    if standing is not None:
        lines, as_stood = standing, _SaltAsStood(content)
    else:
        known = commitments if store is None else store("commit")
        if known is not None and store is not None and commitments:
            known.update(commitments)
        salt_reader = _SaltReader(content, None if store is None else store("salts"), keys)
        pending, salt_of, each = _check_logged(content, leaves, logged, present, known, salt_reader)
        lines = None if each is None else checked.Hashing(each)
    _check_key_rules(logged, present)
    for dream_id, reason in pending:
        logged.erasures[dream_id] = (len(leaves) + len(new_leaves), reason)
        new_leaves.append(leaffmt.encode(leaffmt.ErasureLeaf(dream_id, reason)))
        log.erased_now.append(dream_id)

    # Step 4: new dreams, refused by the anonymity rules or admitted; all their
    # new keys first, by keyId, then the dreams, by id (docs/protocol.md §3).
    fresh = _check_again([present[i] for i in sorted(present) if i not in logged.dreams])
    refused = anonymity.refusals(fresh.values(), logged.keys)
    admitted: list[Dream] = []
    for dream_id in sorted(present):
        if dream_id in logged.dreams:
            if dream_id in logged.erasures:
                log.refused.append(
                    Problem(
                        str(present[dream_id].path),
                        "",
                        f"dream {dream_id} was erased from this pool and cannot return",
                    )
                )
            continue
        retired = _retired_problem(present[dream_id], logged)
        if retired is not None:
            if present[dream_id].dream.key_id in logged.retired_at:
                # The log retired the key before this build (new key leaves come
                # after this loop): no build will ever log the dream. A file
                # merged on a stale green check must not fail every publish.
                log.set_aside.append(dataclasses.replace(retired, rule=SET_ASIDE + retired.rule))
            else:
                log.refused.append(retired)
            continue
        if dream_id in refused:
            log.refused.append(Problem(str(present[dream_id].path), *refused[dream_id]))
            continue
        admitted.append(fresh[dream_id])
    for d in sorted({d.key_id: d for d in admitted}.values(), key=lambda d: d.key_id):
        if d.key_id not in logged.keys:
            logged.add_key(d.key_id, d.author, len(leaves) + len(new_leaves))
            new_leaves.append(leaffmt.encode(leaffmt.KeyLeaf(d.key_id, d.public_key, d.author)))
    new_salts: dict[str, str] = {}
    for d in admitted:
        # A new dream's salt is always the build's own: one found beside it
        # came with the pull request (a planted salt stopped every build, and
        # a chosen one would link the commitment to the text after an
        # erasure: T47). It is written only once the build can sign.
        salt = new_salt(d.id)
        new_salts[d.id] = salt
        salt_of[d.id] = salt
        index = logged.dreams[d.id] = len(leaves) + len(new_leaves)
        committed = logged.commitments[d.id] = commitment(d.body, salt)
        new_leaves.append(leaffmt.encode(leaffmt.DreamLeaf(d.id, committed)))
        digest, blob = present[d.id].digest, present[d.id].blob
        if known is not None and digest is not None:
            # A build that checks dream by dream finds it by the file's bytes
            # and its salt, as _check_logged does, without reading its text.
            known[(digest, salt)] = committed
        if lines is not None and blob is not None:
            lines.append((d.id, index, blob, checked.salt_blob(salt)))
        else:
            lines = None
        log.admitted_now.append(d.id)
    return LogPlan(
        log,
        origin,
        new_leaves,
        new_salts,
        policy_text,
        present,
        salt_of,
        as_stood,
        logged,
        lines,
        proven.vkey,
        key_size=proven.key_size,
    )


def apply(
    content: Path, planned: LogPlan, *, signer: Signer | None, time: str | None = None
) -> Log:
    """Step 5 of the module docstring: carry out ``planned`` in ``content/``.

    The policy first (the first build's, or a log URL added), then, if the tree
    grows (or an unsigned tail was left by an interrupted build), each new dream's
    salt, synced before any leaf commits to it, the leaves, and a checkpoint signed
    with ``signer`` over the new tree; a tree that did not grow is not signed again.
    Returns the log as it now stands."""
    if planned.applied:
        # Its leaves are in the state already (or half written): again would log them twice.
        raise RuntimeError("a LogPlan is applied once; prove and plan the log again")
    planned.applied = True
    log = planned.log
    state, tree, leaves = log.state, log.tree, log.state.leaves
    new_leaves, new_salts = planned.new_leaves, planned.new_salts
    _check_signer(content, log.policy, signer, planned.origin)
    if (None if signer is None else signer.verifier.vkey) != planned.vkey:
        # Only the key the plan's proof trusted leaves by signs it (§3.1, T78).
        raise LogError(
            "the log key given to apply is not the one the plan was proven and made with",
            hint="prove and plan the log again with the key that will sign",
        )
    writes = planned.policy_text is not None or new_leaves or len(leaves) > state.signed_size
    stale = logstate.changed(content, state) if writes else None
    if stale is not None:
        # Another writer appended or signed since the plan read the state: going on
        # would write after the leaves it read, over the others, and sign a fork.
        raise LogError(
            f"the log state changed since it was planned ({stale}); nothing was written",
            hint="prove and plan the log again (one build of a pool at a time)",
        )
    # Before anything is written (review r70): the shards this build writes
    # count as canonical for the next (logstate.append), so its own leaves must be.
    logstate.check_new_leaves(new_leaves)
    if planned.policy_text is not None:
        atomic_write(logstate.log_dir(content) / "policy", planned.policy_text.encode())
        state.policy = planned.policy_text

    # Step 5: append and sign, or reuse the last checkpoint.
    if new_leaves or len(leaves) > state.signed_size:
        if signer is None:
            raise LogError(
                f"{len(log.admitted_now)} new dream(s) and {len(log.erased_now)} erasure(s) "
                "to log, but no log key was given",
                hint="set DREAMPOOL_LOG_KEY to the log's private key string or pass "
                "--log-key FILE (make one with `dreampool log-keygen --origin ORIGIN`)",
            )
        for dream_id, salt in new_salts.items():
            path = content / "dreams" / f"{dream_id}.salt"
            atomic_write(path, salt.encode() + b"\n", sync=False)
        if new_salts:  # durable before any leaf that commits to them
            # With the policy's name, and content/log's, if this build wrote it
            # (its bytes are fsynced): the syncfs here flushed them too, and a
            # power loss that kept a first build's signed leaves but not its
            # policy stops every later build (T40; review r30). Resolved: only
            # the folders below content/ must not be symlinks (check_layout).
            top = content.resolve()
            make_durable(
                content / "dreams",
                [f"{dream_id}.salt" for dream_id in new_salts],
                also=[top / "log", top] if planned.policy_text is not None else [],
            )
        for leaf in new_leaves:
            tree.append(merkle.leaf_hash(leaf))
        logstate.append(content, state, new_leaves)
        checkpoint = Checkpoint(planned.origin, tree.size, tree.root())
        note = sign_checkpoint(checkpoint, signer)
        logstate.record_checkpoint(content, state, tree.size, note, time or now_time())
        log.checkpoint = checkpoint
        log.signed_now = True
    if signer is not None:
        log.attested = tree.size if log.signed_now else planned.key_size
    # planned.logged holds the new leaves too
    _index_log(log, planned.present, planned.salt_of, planned.salt_as_stood, planned.logged)
    log.log_check = planned.lines
    return log


def _check_again(new: list[ScannedDream]) -> dict[str, Dream]:
    """Each dream about to be logged, as the scan gave it if the scan read its
    file this build, else (the scan took it from the build cache) read from
    its file and checked as the scan checks it (:func:`builder.content.pool.check_dream`);
    a :class:`LogError` if that is not the dream the cache gave. A damaged cache
    must cost time only: a wrong leaf, once signed, stays. (Checking every new
    dream again doubled the verification of a pool's first build.)"""
    checked = {s.dream.id: s.dream for s in new if not s.cached}
    again = [s for s in new if s.cached]
    results = parallel.map_ordered(check_file, [Path(s.path) for s in again])
    for s, result in zip(again, results, strict=True):
        d = s.dream
        if isinstance(result, list):
            found = (
                "a dream that fails the scan's checks ("
                + "; ".join(f"{p.pointer or '/'}: {p.rule}" for p in result[:3])
                + ")"
            )
        elif (result.id, result.key_id, result.public_key) != (d.id, d.key_id, d.public_key):
            found = f"dream {result.id}, not {d.id}"
        elif strictjson.canonical(result.body) != strictjson.canonical(d.body):
            found = "another body than the one the build was about to log"
        elif Path(s.path).name != f"{result.id}.json":
            found = f"dream {result.id}, whose file is {result.id}.json"
        else:
            checked[d.id] = result
            continue
        raise LogError(
            f"{s.path}: about to log dream {d.id}, but the file holds {found}: the build "
            "cache's copy of it is damaged (or the file changed during the build); "
            "nothing was logged",
            hint=_CACHE_HINT,
        )
    return checked


_CACHE_HINT = (
    "delete the build cache folder (.<output>.builds/cache, beside the output folder) "
    "and build again"
)


def verify_state(content: Path, scanned: Iterable[ScannedDream]) -> int:
    """Steps 1–3 without writing anything (what ``dreampool check`` runs).

    Returns the number of leaves checked; raises :class:`LogError` on damage.
    """
    state = logstate.load(content)
    if state.policy is None:
        if state.history:
            raise LogError("content/log/policy is missing but checkpoints were signed")
        return 0
    policy = parse_policy(state.policy.encode())
    try:
        origin = load_config(content).origin
    except DreampoolError:
        origin = None  # its problems are the config check's to name
    if origin is not None:
        # A changed origin passed `check` and stopped every build (a new
        # user's audit, 23rd session).
        _stored_policy(content, state.policy, origin)
    tree = merkle.MerkleTree.from_leaf_hashes(merkle.leaf_hash(leaf) for leaf in state.leaves)
    _prove_append_only(state, tree, policy)
    present = {s.dream.id: s for s in scanned}
    _check_unsigned_tail(content, state.leaves, state.signed_size, present)
    logged = _read_leaves(state.leaves)
    _check_logged(content, state.leaves, logged, present)
    _check_key_rules(logged, present)
    return len(state.leaves)


def anonymity_review(
    content: Path, scanned: Iterable[ScannedDream]
) -> tuple[list[Problem], list[Problem]]:
    """What ``dreampool check`` says by the anonymity rules (docs/protocol.md §1.2):
    the problems of the dreams not logged yet, which the next build would refuse
    (:func:`builder.content.anonymity.refusals`, as :func:`update` applies them), and a
    warning for each logged dream that asked for anonymity under its author's
    name (it stays: the log is append-only)."""
    logged = _read_leaves(logstate.load(content).leaves)
    dreams = list(scanned)
    new = [s for s in dreams if s.dream.id not in logged.dreams]
    refused = anonymity.refusals((s.dream for s in new), logged.keys)
    problems = [Problem(s.path, *refused[s.dream.id]) for s in new if s.dream.id in refused]
    warnings = []
    for s in dreams:
        named = anonymity.named_anonymized(s.dream) if s.dream.id in logged.dreams else None
        if named is not None:
            warnings.append(Problem(s.path, "/consent/anonymize", named))
    return problems, warnings


def unlogged_problems(content: Path, scanned: Iterable[ScannedDream]) -> list[Problem]:
    """What the build would refuse of what the log does not hold yet: a dream
    of ``scanned`` whose key is retired (docs/protocol.md §3, §7), and each
    salt in ``content/dreams`` whose dream the log does not hold. The build
    writes a dream's salt when it logs it, and only then; one that came
    another way (in a pull request) is refused by ``check`` and replaced by
    the build (T47). (A build killed between writing salts and appending
    leaves leaves such salts too; the next build replaces them.)"""
    read = _read_leaves(logstate.load(content).leaves)
    logged = read.dreams
    problems = [
        problem
        for s in scanned
        if s.dream.id not in logged and (problem := _retired_problem(s, read)) is not None
    ]
    try:
        entries = sorted(os.scandir(content / "dreams"), key=lambda e: e.name)
    except FileNotFoundError:
        return []
    for entry in entries:
        name, dot, suffix = entry.name.partition(".")
        if suffix == "salt" and dot and is_dream_id(name) and name not in logged:
            problems.append(
                Problem(
                    entry.path,
                    "",
                    "a salt for a dream the log does not hold: salts are written only by "
                    "the build, when it logs the dream; remove this file (the build would "
                    "replace it)",
                )
            )
    return problems


def _check_unsigned_tail(
    content: Path, leaves: list[bytes], signed_size: int, present: dict[str, ScannedDream]
) -> None:
    """Leaves after the last checkpoint were written by a build killed before it
    signed them (:mod:`builder.log.logstate`); the next build signs them as they are.
    So each must be a leaf a build writes: a key leaf of a present dream's key,
    new to the log and exactly as the build makes it; a dream leaf of a
    present dream, new to the log, after its key (its commitment is step 3's);
    an erasure leaf of a logged dream, erased once, with its erasure recorded.
    Anything else (a leaf appended by hand, say an erasure nobody asked for or a
    key leaf giving a stranger's key an author's name) is refused, never signed.
    """
    if signed_size >= len(leaves):
        return
    seen = _read_leaves(leaves[:signed_size])
    keys = {s.dream.key_id: s.dream for s in present.values()}
    for index in range(signed_size, len(leaves)):
        why = ""
        try:
            parsed: leaffmt.Leaf | None = leaffmt.parse(leaves[index])
        except leaffmt.LeafError as exc:
            parsed, why = None, f" ({exc.message})"
        ok = False
        if parsed is not None:
            # The rules every leaf keeps (sequence_problem), then what only a
            # build's own leaf is: one for the pool as it is now.
            broken = sequence_problem(parsed, seen.dreams, seen.keys, seen.erasures)
            if broken is not None:
                why = f" ({broken})"
            else:
                ok = _as_a_build_writes(content, parsed, seen, present, keys)
                seen.add(parsed, index)
        if not ok:
            raise LogError(
                f"content/log/leaves: leaf {index} is not signed yet, and is not a leaf a "
                f"build writes for the pool as it is (the signed log ends at {signed_size})"
                f"{why}",
                hint="unsigned leaves come only from a build that was killed; this one was "
                "added by hand or the pool changed since. Restore content/log from git "
                "history; the next build writes the leaves again",
            )


def _as_a_build_writes(
    content: Path,
    leaf: leaffmt.Leaf,
    seen: _Logged,
    present: dict[str, ScannedDream],
    keys: dict[str, Dream],
) -> bool:
    """Whether ``leaf``, after the leaves ``seen`` read (which it breaks no rule
    across: :func:`sequence_problem`), is one a build writes for the pool as it
    is: a present dream's key leaf exactly as the build makes it; a present
    dream's leaf after its key's leaf; an erasure of a dream no longer present,
    with that erasure recorded."""
    if isinstance(leaf, leaffmt.KeyLeaf):
        d = keys.get(leaf.key_id)
        return d is not None and leaf == leaffmt.KeyLeaf(d.key_id, d.public_key, d.author)
    if isinstance(leaf, leaffmt.DreamLeaf):
        found = present.get(leaf.id)
        return (
            found is not None
            and found.dream.key_id in seen.keys
            # A leaf the log holds is judged in log order (§7), not by the
            # key directory: a rotation merged after the killed build does
            # not reach back before its own key leaf.
            and found.dream.key_id not in seen.retired_at
        )
    return leaf.id not in present and _erasure_reason(content, leaf.id) == leaf.reason


def _check_logged(
    content: Path,
    leaves: list[bytes],
    logged: _Logged,
    present: dict[str, ScannedDream],
    commitments: dict[Any, Any] | None = None,
    salt_reader: _SaltReader | None = None,
) -> tuple[list[tuple[str, str]], dict[str, str], list[checked.Line] | None]:
    """Every logged, unerased dream is present with its salt and commits to the
    same bytes; a missing one needs a recorded erasure. Returns the erasures
    still to log, the salts of present dreams, and the lines of
    :mod:`builder.log.checked` for the present ones (None if a file or salt
    had no blob id to name)."""
    pending: list[tuple[str, str]] = []
    salts: dict[str, str] = {}
    lines: list[checked.Line] | None = []
    known = dict(commitments or {})
    if commitments is not None:
        commitments.clear()
    salt_reader = salt_reader or _SaltReader(content, None)
    for dream_id, index in logged.dreams.items():
        if dream_id in logged.erasures:
            continue
        found = present.get(dream_id)
        if found is None:
            reason = _erasure_reason(content, dream_id)
            if reason is None and os.path.lexists(content / "dreams" / f"{dream_id}.json"):
                # There, but refused by the scan (its key file broken, the file
                # edited): the cause is named with the file, and erasing the
                # dream is not the fix (a new user's audit, 23rd session).
                raise LogError(
                    f"leaf {index} logs dream {dream_id}, but content/dreams/{dream_id}.json "
                    "was refused (its problem is named with the file or its key)",
                    hint="fix that problem: restore the file or its key file from git history "
                    "if either was edited; a logged dream must stay publishable",
                )
            if reason is None:
                raise LogError(
                    f"leaf {index} logs dream {dream_id}, but content/dreams/{dream_id}.json "
                    "is missing and no erasure is recorded",
                    hint="restore the file from git history, or erase the dream with "
                    f"`dreampool erase {dream_id} --reason …`",
                )
            pending.append((dream_id, reason))
            continue
        salt = salt_reader.read(dream_id)
        if salt is None:
            raise LogError(
                f"dream {dream_id} (leaf {index}) has lost its salt content/dreams/{dream_id}.salt",
                hint="restore it from git history; without it the record cannot be published",
            )
        want = logged.commitments[dream_id]
        # The same bytes (the same SHA-256: builder.content.filekeys) with the same
        # salt have the commitment an earlier build computed.
        key = (found.digest, salt) if found.digest is not None else None
        got = known.get(key) or commitment(found.dream.body, salt)
        if commitments is not None and key is not None:
            commitments[key] = got
        if got != want:
            again = check_file(Path(found.path))
            if not isinstance(again, list) and commitment(again.body, salt) == want:
                raise LogError(
                    f"{found.path}: the file still commits to leaf {index}, but the build "
                    "cache's copy of it does not: the build cache is damaged; nothing was logged",
                    hint=_CACHE_HINT,
                )
            raise LogError(
                f"content/dreams/{dream_id}.json or its salt changed after it was logged: "
                f"leaf {index} commits to {want}",
                hint="a logged dream is never edited; restore both files from git history",
            )
        salts[dream_id] = salt
        salt_blob = salt_reader.blob_of.get(dream_id)
        if lines is not None and found.blob is not None and salt_blob is not None:
            lines.append((dream_id, index, found.blob, salt_blob))
        else:
            lines = None
    return pending, salts, lines


def _standing(
    tree: merkle.MerkleTree,
    logged: _Logged,
    present: Mapping[str, ScannedDream],
    store: Callable[[str], dict[Any, Any]] | None,
    rows: checked.ScanRows | None,
    keys: filekeys.FileKeys | None,
    notes: list[str],
) -> checked.Hashing | None:
    """Step 3 as the last build found it (:mod:`builder.log.checked`, which says
    why this suffices): the lines of every logged, unerased dream, hashed;
    None if the store's row does not stand (none, another tree, a file or
    salt that is not the one checked, or not one git vouches for), and step
    3 runs dream by dream. Each salt is then read when a page shows its
    dream (:class:`_SaltAsStood`)."""
    if store is None or rows is None or keys is None:
        return None
    data = store("logcheck").get(checked.ROW)
    row = checked.decode(data)
    if row is None:
        if data is not None:  # whole, but not what this code writes: named (r73)
            notes.append(
                "the build store's logcheck row was not one this build writes; "
                "checked every logged dream and wrote it again"
            )
        return None
    if row.size != tree.size or tree.root() != row.root:
        return None
    blobs = keys.folder("dreams")
    lines: list[checked.Line] = []
    for dream_id, index in logged.dreams.items():
        if dream_id in logged.erasures:
            continue
        found = present.get(dream_id)
        salt_blob = blobs.get(f"{dream_id}.salt")
        if found is None or found.blob is None or salt_blob is None:
            return None
        lines.append((dream_id, index, found.blob, salt_blob))
    hashing = checked.Hashing(lines)
    digests = hashing.digests(rows)
    # Each row named as this build took it: by its tag, or by its public
    # digest (a build or reader without the key), which it checked itself.
    if digests is None or digests[0] != (row.digest if rows.tagged else row.public):
        return None
    return hashing


@dataclass(frozen=True, slots=True)
class _SaltAsStood:
    """Reads the salt of a logged dream the log check took as it stood, when
    a page first shows it (:func:`salt_text`), against the commitment its
    :class:`Admitted` carries: one for the whole log, so that a build makes
    none per dream, and holding nothing but the checkout's path, so that a
    page worker is sent no more than that with each dream it renders."""

    content: Path

    def __call__(self, admitted: Admitted) -> str:
        d = admitted.dream
        return salt_text(self.content, d.id, admitted.index, d, admitted.commitment)


def salt_text(content: Path, dream_id: str, index: int, dream: Dream, want: str) -> str:
    """The salt of a logged dream the log check took as it stood
    (:func:`_standing`), read when a page first shows it. Its text must
    commit the dream as the build holds it to its leaf's value ``want``
    (docs/protocol.md §3), as step 3 would have checked: the file may have
    changed since the check, and the dream's body is the store's copy, which
    the check did not read (review r74)."""
    read = _read_salt(content, dream_id)
    if read is None:
        raise LogError(
            f"dream {dream_id} (leaf {index}) lost its salt content/dreams/{dream_id}.salt "
            "while the build ran; the site was not updated",
            hint="restore it from git history and build again",
        )
    if commitment(dream.body, read[0]) != want:
        path = content / "dreams" / f"{dream_id}.json"
        again = check_file(path)
        if not isinstance(again, list) and commitment(again.body, read[0]) == want:
            raise LogError(
                f"{path}: the file still commits to leaf {index}, but the build cache's "
                "copy of it does not: the build cache is damaged; the site was not updated",
                hint=_CACHE_HINT,
            )
        raise LogError(
            f"content/dreams/{dream_id}.json or its salt changed after it was logged: "
            f"leaf {index} commits to {want}; the site was not updated",
            hint="a logged dream is never edited; restore both files from git history",
        )
    return read[0]


@dataclass(slots=True)
class _Logged:
    dreams: dict[str, int] = field(default_factory=dict)
    commitments: dict[str, str] = field(default_factory=dict)  # dream id -> its leaf's
    keys: dict[str, int] = field(default_factory=dict)
    authors: dict[str, str] = field(default_factory=dict)  # keyId -> its key leaf's author
    erasures: dict[str, tuple[int, str]] = field(default_factory=dict)
    # docs/protocol.md §3: a key leaf retires every earlier key of its author
    # from its own index on. keyId -> the index of the key leaf that retired it.
    retired_at: dict[str, int] = field(default_factory=dict)
    current: dict[str, str] = field(default_factory=dict)  # author -> latest keyId

    def add_key(self, key_id: str, author: str, index: int) -> None:
        self.keys[key_id] = index
        self.authors[key_id] = author
        if author == anonymity.NAME:  # one-time keys share the name; none retires another (§1.2)
            return
        previous = self.current.get(author)
        if previous is not None:  # the keys before it were retired already
            self.retired_at[previous] = index
        self.current[author] = key_id

    def add(self, leaf: leaffmt.Leaf, index: int) -> None:
        """Take ``leaf``, at ``index``, as read after those taken so far."""
        if isinstance(leaf, leaffmt.DreamLeaf):
            self.dreams[leaf.id] = index
            self.commitments[leaf.id] = leaf.commitment
        elif isinstance(leaf, leaffmt.KeyLeaf):
            self.add_key(leaf.key_id, leaf.author, index)
        else:
            self.erasures[leaf.id] = (index, leaf.reason)


def _prefix_of(logged: _Logged, tree: merkle.MerkleTree, size: int) -> prefix.Prefix:
    """What the first ``size`` leaves log, as :mod:`builder.log.prefix` keeps
    it; ``logged`` holds those leaves and no other."""
    dreams = sorted(
        ((i, index, logged.commitments[i]) for i, index in logged.dreams.items()),
        key=lambda d: d[1],
    )
    keys = sorted(
        ((k, index, logged.authors[k]) for k, index in logged.keys.items()), key=lambda k: k[1]
    )
    erasures = sorted(
        ((i, index, reason) for i, (index, reason) in logged.erasures.items()),
        key=lambda e: e[1],
    )
    return prefix.Prefix(size, tree, dreams, keys, erasures)


def _logged_of(p: prefix.Prefix) -> _Logged:
    """The :class:`_Logged` of the leaves ``p`` holds, as :func:`_read_leaves`
    makes it: the key leaves taken again in log order (a key leaf retires its
    author's earlier keys)."""
    logged = _Logged()
    logged.dreams = {d[0]: d[1] for d in p.dreams}
    logged.commitments = {d[0]: d[2] for d in p.dreams}
    for key_id, index, author in p.keys:
        logged.add_key(key_id, author, index)
    logged.erasures = {e[0]: (e[1], e[2]) for e in p.erasures}
    return logged


def _read_leaves(leaves: list[bytes], *, into: _Logged | None = None, start: int = 0) -> _Logged:
    """What ``leaves[start:]`` log, added to ``into`` (a new :class:`_Logged` if
    None), each leaf read strictly (docs/protocol.md §3,
    :func:`builder.formats.leaf.parse`): the log state is in the checkout, where
    a pull request can reach it, so a leaf no build writes is a
    :class:`LogError` naming its line, never a leaf skipped or half read."""
    logged = _Logged() if into is None else into
    for index in range(start, len(leaves)):
        try:
            parsed = leaffmt.parse(leaves[index])
        except leaffmt.LeafError as exc:
            shard, line = divmod(index, logstate.SHARD)
            raise LogError(
                f"content/log/leaves/{shard:06d}.jsonl:{line + 1}: leaf {index}: "
                f"{exc.message} (docs/protocol.md §3)",
                hint="no build writes such a leaf: the log state was edited by hand; restore "
                "content/log from git history",
            ) from None
        problem = sequence_problem(parsed, logged.dreams, logged.keys, logged.erasures)
        if problem is not None:
            shard, line = divmod(index, logstate.SHARD)
            raise LogError(
                f"content/log/leaves/{shard:06d}.jsonl:{line + 1}: leaf {index}: {problem} "
                "(docs/protocol.md §3)",
                hint="no build writes such a log: the log state was edited by hand; restore "
                "content/log from git history",
            )
        logged.add(parsed, index)
    return logged


def sequence_problem(
    leaf: leaffmt.Leaf,
    dreams: Mapping[str, int],
    keys: Container[str],
    erased: Container[str],  # ids
) -> str | None:
    """What ``leaf`` breaks of docs/protocol.md §3's rules across leaves, coming after
    leaves that logged ``dreams`` (id → index of its leaf), ``keys`` (keyIds) and
    erased ``erased`` (ids); None if nothing. The rules: each dream id and each
    keyId is logged at most once, and an erasure names a dream leaf at a lower
    index, each id erased at most once. (A key leaf before its dream's leaf, naming
    its author, needs the dream's keyId, which its leaf does not hold: the build
    checks it from each present dream, :func:`_check_key_rules`; a site verifier from
    its record.)"""
    if isinstance(leaf, leaffmt.DreamLeaf):
        if leaf.id in dreams:
            return f"dream {leaf.id} is logged again (first at leaf {dreams[leaf.id]})"
    elif isinstance(leaf, leaffmt.KeyLeaf):
        if leaf.key_id in keys:
            return f"key {leaf.key_id} is logged again"
    elif isinstance(leaf, leaffmt.ErasureLeaf):
        if leaf.id not in dreams:
            return f"an erasure of dream {leaf.id}, which no earlier leaf logs"
        if leaf.id in erased:
            return f"dream {leaf.id} is erased again"
    return None


def logged_dreams(leaves: list[bytes]) -> dict[str, int]:
    """Each dream id ``leaves`` log (erased ones too), with the index of its dream
    leaf; a :class:`LogError` if a leaf is none of docs/protocol.md §3."""
    return _read_leaves(leaves).dreams


def logged_keys(content: Path) -> dict[str, int]:
    """Each keyId the log holds, with the index of its key leaf."""
    return _read_leaves(logstate.load(content).leaves).keys


def _check_key_rules(logged: _Logged, present: dict[str, ScannedDream]) -> None:
    """docs/protocol.md §3's rules of a dream leaf and its dream's key: the key leaf
    of the dream's ``sig.keyId`` comes before the dream's leaf and names the dream's
    author, and no earlier key leaf retired that key. A site verifier refuses a
    record that breaks one. The pool never logs one; a log an older dreampool wrote
    may hold a dream a retired key signed, and a pull request can append any of
    them under a log key of its own beside the pool's (T78; review r36: the pool's
    key then signed over it). Erasing the dream (its record goes, so no verifier
    can judge its key) is the only way on, once a checkpoint holds it."""
    for dream_id, index in logged.dreams.items():
        found = present.get(dream_id)
        if found is None or dream_id in logged.erasures:
            continue  # erased, or being erased: no record left to judge
        key_id = found.dream.key_id
        key_index = logged.keys.get(key_id)
        if key_index is None or key_index > index:
            where = "no key leaf" if key_index is None else f"its key leaf only at {key_index}"
            raise LogError(
                f"leaf {index} logs dream {dream_id} ({found.path}), signed by key {key_id}, "
                f"with {where} before it: a site verifier refuses a dream whose key "
                "the log did not hold first (docs/protocol.md §3)",
                hint=f"no build logs such a leaf: erase the dream with `dreampool erase "
                f"{dream_id} --reason abuse`, then build again",
            )
        if logged.authors[key_id] != found.dream.author:
            raise LogError(
                f"leaf {index} logs dream {dream_id} ({found.path}) by "
                f"{found.dream.author!r}, but key leaf {key_index} gives key {key_id} to "
                f"{logged.authors[key_id]!r}: one key signs for one author "
                "(docs/protocol.md §3)",
                hint=f"no build logs such a leaf: erase the dream with `dreampool erase "
                f"{dream_id} --reason abuse`, then build again",
            )
        retired = logged.retired_at.get(key_id)
        if retired is not None and retired < index:
            raise LogError(
                f"leaf {index} logs dream {dream_id} ({found.path}), signed by key {key_id}, "
                f"which key leaf {retired} (a later key of {found.dream.author!r}) had "
                "retired: a site verifier refuses a dream a retired key signed "
                "(docs/protocol.md §3)",
                hint=f"the retired key may have leaked: erase the dream with `dreampool erase "
                f"{dream_id} --reason abuse`, then build again",
            )


def _retired_problem(s: ScannedDream, logged: _Logged) -> Problem | None:
    """Why a dream not yet logged may not be: its key is retired, by a rotation
    in the key directory (logged or not: :func:`builder.content.pool.retired_rule`) or
    by a later key leaf of its author in the log (docs/protocol.md §3)."""
    rule = s.retired
    if rule is None and s.dream.key_id in logged.retired_at:
        index = logged.retired_at[s.dream.key_id]
        rule = (
            f"key {s.dream.key_id} is retired: key leaf {index} of the log announced a later "
            f"key of {s.dream.author!r}, so it may have leaked and signs nothing new; remove "
            "this file, sign the dream again with the current key and submit that"
        )
    return None if rule is None else Problem(s.path, "/sig/keyId", rule)


def _index_log(
    log: Log,
    present: dict[str, ScannedDream],
    salts: Mapping[str, str],
    as_stood: Callable[[Admitted], str] | None,
    logged: _Logged,
) -> None:
    """Fill in what the site publishes, from the leaves as they now stand: each
    dream's salt is its text in ``salts``, else (the log check stood) read by
    ``as_stood`` when a page shows the dream."""
    history, commitments = log.state.history, logged.commitments
    for dream_id, (index, reason) in logged.erasures.items():
        log.erased[dream_id] = Erased(
            dream_id,
            logged.dreams[dream_id],
            index,
            reason,
            logstate.leaf_date(history, index) or "",
        )
    for dream_id, index in logged.dreams.items():
        if dream_id in log.erased or dream_id not in present:
            continue
        salt = salts.get(dream_id)
        if salt is None:
            if as_stood is None:  # a present logged dream's salt is always found
                raise AssertionError(f"no salt for logged dream {dream_id}")
            salt_of: str | Callable[[Admitted], str] = as_stood
        else:
            salt_of = salt
        log.dreams[dream_id] = Admitted(
            present[dream_id].dream,
            index,
            salt_of,
            logstate.leaf_date(history, index) or "",
            commitments[dream_id],
        )
    log.key_index = dict(logged.keys)


class _SaltReader:
    """Reads ``content/dreams/<id>.salt``; with a cache (a store section:
    git blob id → (SHA-256, text), from :mod:`builder.buildcache`) a salt file
    git vouches for unchanged (:mod:`builder.content.filekeys`) is not even opened.
    Any other salt is read (its text is then at hand) and kept under the
    digests of its bytes, so the next build, once it is committed, need not
    open it. The cache is left holding the salts read this build."""

    def __init__(
        self, content: Path, cache: dict[Any, Any] | None, keys: filekeys.FileKeys | None = None
    ) -> None:
        self.content = content
        self.known = dict(cache or {})
        self.cache = cache
        self.blobs = keys.folder("dreams") if keys is not None and cache is not None else {}
        self.blob_of: dict[str, str] = {}  # dream id -> the blob id of the salt read
        if cache is not None:
            cache.clear()

    def read(self, dream_id: str) -> str | None:
        blob = self.blobs.get(f"{dream_id}.salt")
        entry = filekeys.find(self.known, blob, None)
        if entry is None:
            read = _read_salt(self.content, dream_id)
            if read is None:
                return None
            text, (blob, digest) = read
            entry = (digest, text)
        if self.cache is not None and blob is not None:
            self.cache[blob] = entry
        if blob is not None:
            self.blob_of[dream_id] = blob
        found: str = entry[1]
        return found


def _read_salt(content: Path, dream_id: str) -> tuple[str, filekeys.Key] | None:
    """A salt file's text and the content key of the bytes it was read from
    (:func:`builder.content.filekeys.of_bytes`); None if there is no file."""
    try:
        data = read_regular(content / "dreams" / f"{dream_id}.salt")
    except FileNotFoundError:
        return None
    try:
        text = data.decode("ascii").strip()
        if len(b64url_decode(text)) != SALT_SIZE:
            raise ValueError
    except ValueError:
        raise LogError(
            f"content/dreams/{dream_id}.salt: want the b64url of {SALT_SIZE} random bytes",
            hint="restore it from git history",
        ) from None
    return text, filekeys.of_bytes(data)


def _erasure_reason(content: Path, dream_id: str) -> str | None:
    path = content / "erasures" / f"{dream_id}.json"
    try:
        obj = strictjson.loads(read_regular(path))
    except FileNotFoundError:
        return None
    except strictjson.JSONError as exc:
        raise InputError([Problem(str(path), "", exc.message, exc.line)]) from None
    reason = obj.get("reason") if isinstance(obj, dict) else None
    if reason not in leaffmt.REASONS or obj.get("id") != dream_id:
        raise InputError(
            [Problem(str(path), "/reason", f"must name this dream and one of {leaffmt.REASONS}")]
        )
    return str(reason)


def _policy(
    content: Path,
    state: logstate.LogState,
    origin: str,
    signer: Signer | None,
    log_url: str | None,
    notes: list[str],
) -> tuple[Policy, str | None]:
    """The log's policy, and its text if :func:`apply` must write it: made by the
    first build (it needs the log key), read and checked by every later one, which
    also adds ``log_url`` to a log line of this origin that has no URL yet (see
    :func:`_with_log_url`)."""
    path = logstate.log_dir(content) / "policy"
    if state.policy is None:
        if state.history:
            raise LogError(f"{path} is missing but checkpoints were signed; restore it from git")
        if signer is None:
            raise LogError(
                "this pool has no log yet: the first build needs the log key",
                hint="make one with `dreampool log-keygen --origin ORIGIN` and pass it with "
                "DREAMPOOL_LOG_KEY or --log-key FILE",
            )
        _check_name(signer, origin)
        # tlog-policy: `log <vkey> [<url>]`; `quorum none` with no witnesses.
        policy = Policy((PolicyLog(signer.verifier, log_url),), (), (), "none")
        return policy, format_policy(policy)
    policy = _stored_policy(content, state.policy, origin)
    _check_signer(content, policy, signer, origin)
    if log_url is not None:
        text = _with_log_url(state.policy, origin, log_url)
        if text != state.policy:
            notes.append(f"{path}: added the log's URL {log_url} (commit it with the log state)")
            return parse_policy(text.encode()), text
    return policy, None


def _stored_policy(content: Path, text: str, origin: str) -> Policy:
    """The stored policy, which must name a log key of ``origin``."""
    policy = parse_policy(text.encode())
    if not any(v.name == origin for v in policy.log_verifiers):
        path = logstate.log_dir(content) / "policy"
        names = sorted({v.name for v in policy.log_verifiers})
        raise LogError(
            f"{content / 'pool.yaml'}: /origin: is {origin!r}, but the log's policy ({path}) "
            f"names its log {', '.join(map(repr, names))}",
            hint="a pool's origin never changes once its log has begun (every checkpoint is "
            f"signed under it): set origin back to {names[0]!r}"
            if names
            else None,
        )
    return policy


def _check_signer(content: Path, policy: Policy, signer: Signer | None, origin: str) -> None:
    """A log key given to the build must be one of the stored policy's, named by
    the origin (the checkpoints it signs are the origin's: docs/protocol.md §4)."""
    if signer is not None and signer.verifier.vkey not in {v.vkey for v in policy.log_verifiers}:
        path = logstate.log_dir(content) / "policy"
        raise LogError(
            f"the log key given ({signer.verifier.vkey}) is not the one in {path}",
            hint="use the pool's log key, or rotate the log key as docs/operators.md describes",
        )
    _check_name(signer, origin)


def _check_name(signer: Signer | None, origin: str) -> None:
    """Before anything is written: :func:`sign_checkpoint` refuses a key not named
    by the origin, which after the salts and leaves would leave an unsigned tail."""
    if signer is not None and signer.name != origin:
        raise LogError(
            f"the log key given is named {signer.name!r}, not the pool's origin {origin!r}: "
            "it cannot sign this log's checkpoints (docs/protocol.md §4)",
            hint="generate the log key with `dreampool log-keygen --origin ORIGIN`, the "
            "origin of content/pool.yaml",
        )


def _with_log_url(text: str, origin: str, url: str) -> str:
    """``text`` with ``url`` appended to each ``log <vkey>`` line of ``origin`` that
    has no URL, every other byte kept (comments, witnesses, a rotation's old key).

    The policy a first build writes names the log's URL only if that build knew
    it (``--base-url https://…``); a pool whose first build ran elsewhere, or
    without it, would otherwise never get the URL that readers pinning the policy
    and tools that fetch the log from it look for (tlog-policy: ``log <vkey>
    [<url>]``). Adding it changes nothing a verifier checks (the key stays, and
    verify.js pins the key's fingerprint, not the file's bytes); a URL that is
    there already is never replaced: moving the log is the maintainers' edit."""
    lines = text.split("\n")
    for n, line in enumerate(lines):
        words = [w for w in re.split(r"[ \t]+", line) if w]  # tlog-policy's whitespace
        if len(words) == 2 and words[0] == "log" and words[1].split("+", 1)[0] == origin:
            lines[n] = line.rstrip(" \t") + " " + url
    return "\n".join(lines)


def _log_key_of(note: bytes, policy: Policy, size: int) -> Verifier:
    """The policy's log key that signed a stored checkpoint. After a rotation the
    policy lists the old and the new key under the same origin (docs/operators.md)."""
    _, signatures = split_note(note)
    signed = {(s.name, s.key_id) for s in signatures}
    for verifier in policy.log_verifiers:
        if (verifier.name, verifier.key_id) in signed:
            return verifier
    raise LogError(
        f"content/log/checkpoints/{size} is signed by no log key of content/log/policy",
        hint="restore content/log from git history; after a rotation the policy keeps the old key",
    )


def _prove_append_only(
    state: logstate.LogState,
    tree: merkle.MerkleTree,
    policy: Policy,
    opened: dict[Any, Any] | None = None,
) -> tuple[Checkpoint | None, dict[str, int]]:
    """Step 2: every stored checkpoint verifies and matches the rebuilt tree.
    Returns the latest checkpoint, and for each log key the size of the
    largest checkpoint it signed.

    A pool signs a checkpoint per build that admits something, and verifying
    one costs ≈160 µs, so an old pool spent seconds a build verifying notes
    that never change. ``opened`` (from :mod:`builder.buildcache`) maps a
    digest of a note's bytes and of the keys it was opened with to the
    checkpoint it gave, so such a note is verified once; its root is still
    compared with the rebuilt tree every build."""
    known = dict(opened or {})
    if opened is not None:
        opened.clear()
    witnesses = policy.witness_verifiers
    latest: Checkpoint | None = None
    by_key: dict[str, int] = {}
    for entry in state.history:
        note = state.checkpoints[entry.size]
        verifier = _log_key_of(note, policy, entry.size)
        key = opened_key(verifier.vkey, [w.vkey for w in witnesses], note)
        cp = known.get(key)
        if not isinstance(cp, Checkpoint):
            cp, _ = open_checkpoint(note, verifier, witnesses)
        if opened is not None:
            opened[key] = cp
        if cp.size != entry.size:
            raise LogError(
                f"content/log/checkpoints/{entry.size} holds a checkpoint of size {cp.size}"
            )
        rebuilt = tree.root(cp.size)
        if rebuilt != cp.root:
            first = _first_mismatch(state, tree)
            raise LogError(
                "the stored leaves are not the tree the pool signed: checkpoint "
                f"{cp.size} has root {b64_encode(cp.root)}, the leaves give "
                f"{b64_encode(rebuilt)}{first}",
                hint="a leaf was changed, dropped or reordered (a hand edit or a bad merge); "
                "restore content/log from git history. Nothing was signed.",
            )
        latest = cp
        by_key[verifier.vkey] = max(by_key.get(verifier.vkey, 0), cp.size)
    return latest, by_key


def opened_key(log_vkey: str, witness_vkeys: Iterable[str], note: bytes) -> bytes:
    """The build cache's name for "``note`` opened with these keys": a SHA-256
    of every part behind its length, and of the number of witnesses, so no two
    inputs share it. (Joining the parts with newlines did not: witness W with
    note N read the same as no witness with note "W\\nN", so dropping a witness
    let a stored note with a line put in front pass unverified.)"""
    parts = [log_vkey.encode(), *sorted(w.encode() for w in witness_vkeys), note]
    h = hashlib.sha256(b"dreampool opened checkpoint v2\0")
    h.update(len(parts).to_bytes(8, "big"))
    for part in parts:
        h.update(len(part).to_bytes(8, "big"))
        h.update(part)
    return h.digest()


def _first_mismatch(state: logstate.LogState, tree: merkle.MerkleTree) -> str:
    """Narrow the damage down with the roots the pool signed at every size."""
    good = 0
    for entry in state.history:
        cp_text = state.checkpoints[entry.size].split(b"\n\n", 1)[0].decode()
        root = cp_text.split("\n")[2]
        if b64_encode(tree.root(entry.size)) != root:
            return (
                f"; checkpoint {good or 0} still matches, so the first differing leaf "
                f"is at an index in [{good}, {entry.size})"
            )
        good = entry.size
    return ""


# --- publishing (docs/protocol.md §4–§5) ------------------------------------------


def publish(log: Log) -> dict[str, bytes]:
    """The log's files for the site: ``log/…`` and ``dreams/<id>/…``."""
    plan: dict[str, bytes] = {}
    state, tree = log.state, log.tree
    if log.checkpoint is None:
        return plan
    for admitted in log.dreams.values():
        plan[f"dreams/{admitted.dream.id}/record.json"] = record_bytes(admitted)
        plan[f"dreams/{admitted.dream.id}/proof.tlog-proof"] = proof_bytes(
            state, tree, admitted.index
        )
    plan.update(publish_log(log))
    return plan


def publish_log(log: Log) -> dict[str, bytes]:
    """What :func:`publish` lays out but the logged dreams' own files (which
    :mod:`builder.site.units` makes with their pages): ``log/…``, and the proofs of
    erased dreams, which stay published (docs/protocol.md §5)."""
    plan: dict[str, bytes] = {}
    state, tree = log.state, log.tree
    if log.checkpoint is None:
        return plan
    size = tree.size
    assert size == state.signed_size
    plan["log/checkpoint"] = state.checkpoints[size]
    plan["log/policy"] = (state.policy or "").encode()
    for entry in state.history:
        plan[f"log/checkpoints/{entry.size}"] = state.checkpoints[entry.size]
        if entry.size < size:
            proof = tree.consistency_proof(entry.size, size)
            plan[f"log/consistency/{entry.size}"] = "".join(
                b64_encode(h) + "\n" for h in proof
            ).encode()
    # Every tile that existed at any published size: partial tiles stay (§4).
    # Each checkpoint adds what the one before it lacked (tiles.new_tiles);
    # all of each size's tiles (tiles_for_size) would be O(checkpoints × n/256).
    refs: set[tiles.TileRef] = set()
    before = 0
    for entry in state.history:
        refs.update(tiles.new_tiles(before, entry.size))
        before = entry.size
    for ref in sorted(refs):
        if ref.is_entry_bundle:
            span = ref.hash_indices
            data = tiles.encode_entry_bundle(state.leaves[span.start : span.stop])
        else:
            data = tiles.tile_data(tree, ref)
        plan[f"log/{ref.path}"] = data
    for erased in log.erased.values():
        plan[f"dreams/{erased.id}/proof.tlog-proof"] = proof_bytes(state, tree, erased.index)
    return plan


def record_bytes(admitted: Admitted) -> bytes:
    record = {
        "format": "dreampool-record/v1",
        "id": admitted.dream.id,
        "index": admitted.index,
        "salt": admitted.salt,
        "dream": admitted.dream.body,
    }
    return (json.dumps(record, ensure_ascii=False, indent=2) + "\n").encode("utf-8")


def proof_bytes(state: logstate.LogState, tree: merkle.MerkleTree, index: int) -> bytes:
    """docs/protocol.md §5: the proof against the checkpoint of the build that admitted
    the leaf (the first checkpoint holding it), so the file never changes."""
    holding = logstate.first_holding(state.history, index)
    if holding is None:
        raise LogError(f"leaf {index} is in no signed checkpoint yet", hint="report this")
    size = holding.size
    proof = TlogProof(
        index=index,
        extra=state.leaves[index],
        proof=tuple(tree.inclusion_proof(index, size)),
        checkpoint=state.checkpoints[size],
    )
    return format_tlog_proof(proof)
