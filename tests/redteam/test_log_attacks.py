"""Attacks on the log's history (THREATS.md T25–T31), against real built sites.

A pool is built twice (sizes SMALL then LARGE); the attacks edit its committed
state (what a buggy or malicious operator, or a bad merge, does) or its published
files (what an operator or a network attacker serves). The builder must refuse to
sign over a damaged state; readers' tools (the light client, the monitor, the
independent verifier) must catch what is served. Leaf edits, truncation, reorder
and duplication of ``content/log/leaves`` are in ``tests/test_log.py``; the
monitor's verdicts on synthetic logs in ``tests/test_monitor.py``.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from builder.cli import main as cli
from builder.content import pool
from builder.errors import DreampoolError, VerificationError
from builder.formats import checkpoint as cpmod
from builder.formats import dream as dreamfmt
from builder.formats import leaf as leaffmt
from builder.formats import note
from builder.log import logbuild, logstate
from builder.readers import lightclient, monitor
from tests.independent_verifier import VerificationError as IndependentError
from tests.independent_verifier import verify_site
from tests.pools import ORIGIN, PoolFixture, make_pool
from tests.redteam import build, signed, submit, tree

SMALL = 4  # ada's key and three dreams
LARGE = 7  # then bob's key and two dreams


@dataclass(frozen=True)
class History:
    """Snapshots of one pool after each of its two builds."""

    root: Path
    log_key: str
    vkey: str

    def content(self, size: int) -> Path:
        return self.root / f"content-{size}"

    def site(self, size: int) -> Path:
        return self.root / f"site-{size}"

    def checkout(self, size: int, dest: Path) -> PoolFixture:
        """A working copy of the pool as it was after the build of ``size``."""
        shutil.copytree(self.content(size), dest / "content")
        shutil.copytree(self.site(size), dest / "site")
        return PoolFixture(dest / "content", self.log_key, self.vkey)


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> History:
    root = tmp_path_factory.mktemp("history")
    tp = make_pool(root / "work")
    h = History(root, tp.log_key, tp.vkey)
    submit(tp, *(signed("ada", title=f"Ada's dream {n}") for n in range(3)))
    build(tp, root / "work" / "site")
    shutil.copytree(tp.content, h.content(SMALL))
    shutil.copytree(root / "work" / "site", h.site(SMALL))
    submit(tp, *(signed("bob", title=f"Bob's dream {n}") for n in range(2)))
    build(tp, root / "work" / "site")
    shutil.copytree(tp.content, h.content(LARGE))
    shutil.copytree(root / "work" / "site", h.site(LARGE))
    return h


def _refuses_to_sign(tp: PoolFixture, site: Path, *words: str) -> None:
    """The build stops with the evidence, signs nothing and leaves the site as it was."""
    checkpoints = tree(tp.content / "log" / "checkpoints")
    before = tree(site)
    submit(tp, signed("cy", title="Arrives after the damage"))
    with pytest.raises(DreampoolError) as info:
        build(tp, site)
    for word in words:
        assert word in str(info.value), (word, str(info.value))
    assert tree(tp.content / "log" / "checkpoints") == checkpoints
    assert tree(site) == before
    _, scanned = pool.check(tp.content)
    with pytest.raises(DreampoolError):
        logbuild.verify_state(tp.content, scanned)


def _note_for(size: int, root: bytes, skey: str) -> bytes:
    return cpmod.sign_checkpoint(cpmod.Checkpoint(ORIGIN, size, root), note.parse_private_key(skey))


def test_checkpoint_forged_with_another_key_is_refused(history: History, tmp_path: Path) -> None:
    """T26: the stored checkpoint replaced by one over the same tree, signed by a
    key of the same name that the policy does not hold."""
    tp = history.checkout(LARGE, tmp_path)
    path = tp.content / "log" / "checkpoints" / str(LARGE)
    cp = cpmod.parse_checkpoint(path.read_bytes().split(b"\n\n")[0].decode() + "\n")
    forger, _ = note.generate_key(ORIGIN)
    path.write_bytes(_note_for(LARGE, cp.root, forger))
    _refuses_to_sign(tp, tmp_path / "site", f"checkpoints/{LARGE}")


def test_checkpoint_of_another_log_is_refused(history: History, tmp_path: Path) -> None:
    """T26: a checkpoint replayed from another log (another origin and key)."""
    tp = history.checkout(LARGE, tmp_path)
    other = make_pool(tmp_path / "other")
    submit(other, signed("ada", title="In another pool"))
    build(other, tmp_path / "other" / "site")
    foreign = next((other.content / "log" / "checkpoints").iterdir()).read_bytes()
    foreign = foreign.replace(ORIGIN.encode(), b"elsewhere.example/pool", 1)
    (tp.content / "log" / "checkpoints" / str(LARGE)).write_bytes(foreign)
    _refuses_to_sign(tp, tmp_path / "site", f"checkpoints/{LARGE}")


def test_older_checkpoint_replayed_as_the_latest_is_refused(
    history: History, tmp_path: Path
) -> None:
    """T26, T27: the committed state rolled back by replaying the SMALL checkpoint's
    signed bytes under the LARGE name."""
    tp = history.checkout(LARGE, tmp_path)
    checkpoints = tp.content / "log" / "checkpoints"
    (checkpoints / str(LARGE)).write_bytes((checkpoints / str(SMALL)).read_bytes())
    _refuses_to_sign(tp, tmp_path / "site", f"holds a checkpoint of size {SMALL}")


@pytest.mark.parametrize(
    "damage",
    [
        "history-duplicated",
        "history-reordered",
        "history-beyond-leaves",
        "shard-renamed",
        "shard-cut-short",
    ],
)
def test_damaged_log_state_is_refused_with_evidence(
    history: History, tmp_path: Path, damage: str
) -> None:
    """T25: edits to history.jsonl and to the leaf shards beyond those of
    tests/test_log.py (edit, truncate, reorder, duplicate a leaf)."""
    tp = history.checkout(LARGE, tmp_path)
    log = tp.content / "log"
    hist = log / "history.jsonl"
    lines = hist.read_bytes().splitlines(keepends=True)
    shard = log / "leaves" / "000000.jsonl"
    words: tuple[str, ...] = ()
    if damage == "history-duplicated":
        hist.write_bytes(b"".join([*lines, lines[-1]]))
        words = ("does not grow",)
    elif damage == "history-reordered":
        hist.write_bytes(b"".join(reversed(lines)))
        words = ("does not grow",)
    elif damage == "history-beyond-leaves":
        hist.write_bytes(b"".join([*lines, b'{"size": 99, "time": "2030-01-01T00:00:00Z"}\n']))
        (log / "checkpoints" / "99").write_bytes((log / "checkpoints" / str(LARGE)).read_bytes())
        words = ("leaves were lost",)
    elif damage == "shard-renamed":
        shard.rename(log / "leaves" / "000001.jsonl")
        words = ("without gaps",)
    else:
        shard.write_bytes(shard.read_bytes()[:-5])
        words = ("cut short",)
    _refuses_to_sign(tp, tmp_path / "site", *words)


def _appended(history: History) -> dict[str, bytes]:
    site = history.site(LARGE)
    first = _dream_ids(site)[0]
    record = json.loads((site / "dreams" / first / "record.json").read_text())
    stranger = note.parse_verifier_key(note.generate_key("x")[1]).public_key
    return {
        # Censorship: an erasure no one asked for, with no record in content/erasures.
        "forged-erasure": leaffmt.encode(leaffmt.ErasureLeaf(first, "abuse")),
        # Key transparency poisoned: a stranger's key announced under ada's name.
        "stranger-key-as-ada": leaffmt.encode(
            leaffmt.KeyLeaf(dreamfmt.key_id(stranger), stranger, "ada")
        ),
        "dream-logged-twice": leaffmt.encode(
            leaffmt.DreamLeaf(first, logbuild.commitment(record["dream"], record["salt"]))
        ),
        "dream-not-in-pool": leaffmt.encode(leaffmt.DreamLeaf("f" * 16, "0" * 64)),
        "missing-fields": b'{"kind":"dream"}',
        "unknown-kind": b'{"kind":"note","v":1}',
        "not-an-object": b"[1]",
    }


@pytest.mark.parametrize(
    "leaf",
    [
        "forged-erasure",
        "stranger-key-as-ada",
        "dream-logged-twice",
        "dream-not-in-pool",
        "missing-fields",
        "unknown-kind",
        "not-an-object",
    ],
)
def test_hand_appended_leaves_are_never_signed(history: History, tmp_path: Path, leaf: str) -> None:
    """T25, T33, T43 (regression): a pull request that appends one line to
    content/log/leaves. Before the fix the build signed any such unsigned tail as
    if a killed build had left it: an erasure hid a dream nobody erased, and a key
    leaf gave a stranger's key ada's name in the log for ever. ``check`` passed."""
    tp = history.checkout(LARGE, tmp_path)
    shard = tp.content / "log" / "leaves" / "000000.jsonl"
    shard.write_bytes(shard.read_bytes() + _appended(history)[leaf] + b"\n")
    _refuses_to_sign(tp, tmp_path / "site", "not signed yet")


def test_tail_left_by_a_killed_build_is_signed_by_the_next(
    history: History, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """T40 (control for the test above): a build that wrote its leaves and died
    before signing leaves a tail the next build checks, accepts and signs."""
    tp = history.checkout(LARGE, tmp_path)
    submit(tp, signed("cy", title="Admitted by a build that dies"))

    def die(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt("killed before the checkpoint")

    monkeypatch.setattr(logstate, "record_checkpoint", die)
    with pytest.raises(KeyboardInterrupt):
        build(tp, tmp_path / "site")
    monkeypatch.undo()
    assert len(logstate.load(tp.content).leaves) == LARGE + 2  # cy's key and dream, unsigned
    report = build(tp, tmp_path / "site")
    assert report.signed and report.size == LARGE + 2
    verify_site(tmp_path / "site", history.vkey)


def _monitor(history: History, tmp_path: Path, seen: int, site: Path) -> int:
    """``dreampool monitor --all`` as the command line runs it (output to capsys)."""
    policy = tmp_path / "policy"
    policy.write_bytes((history.site(seen) / "log" / "policy").read_bytes())
    state = tmp_path / "seen.checkpoint"
    if not state.exists():
        state.write_bytes((history.site(seen) / "log" / "checkpoint").read_bytes())
    return cli.main(["monitor", "--policy", str(policy), "--state", str(state), "--all", str(site)])


def test_monitor_reports_a_rollback_without_a_verdict(
    history: History, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """T27: an operator (or a stale mirror) serves the older site to a reader who saw
    the newer one. The log did sign the older checkpoint, so the two notes prove
    nothing: could not check (exit 3), naming both sizes, and the state keeps the newer."""
    assert _monitor(history, tmp_path, LARGE, history.site(SMALL)) == monitor.EXIT_UNCHECKED
    err = capsys.readouterr().err
    assert f"older checkpoint, size {SMALL}, than size {LARGE}" in err
    assert (tmp_path / "seen.checkpoint").read_bytes() == (
        history.site(LARGE) / "log" / "checkpoint"
    ).read_bytes()


@pytest.mark.parametrize("extra", [2, 3], ids=["same-size", "larger"])
def test_monitor_catches_a_fork_of_a_rebuilt_history(
    history: History, tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: int
) -> None:
    """T28: the operator restores the state of size SMALL, admits other dreams and
    signs again with the log key: a second history. A monitor that saw the first
    exits 2 and prints two checkpoints no append-only log can both have signed."""
    tp = history.checkout(SMALL, tmp_path / "fork")
    submit(tp, *(signed("cy", title=f"Cy's other history {n}") for n in range(extra)))
    fork_site = tmp_path / "fork" / "site"
    build(tp, fork_site)
    forked = (fork_site / "log" / "checkpoint").read_text()
    assert _monitor(history, tmp_path, LARGE, fork_site) == monitor.EXIT_EVIDENCE
    out = capsys.readouterr().out
    assert out.startswith("fork:"), out
    assert forked in out and (history.site(LARGE) / "log" / "checkpoint").read_text() in out
    verify_site(fork_site, history.vkey)  # the fork is self-consistent: only a witness sees it


def test_monitor_accepts_honest_growth(history: History, tmp_path: Path) -> None:
    """T27, T28 (control): the same monitor accepts the honest growth SMALL → LARGE."""
    assert _monitor(history, tmp_path, SMALL, history.site(LARGE)) == monitor.EXIT_OK


@pytest.mark.parametrize("which", ["hash-tile", "entry-bundle", "old-partial-tile"])
def test_tampered_or_missing_tiles_are_detected(
    history: History, tmp_path: Path, which: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """T29: a byte changed in a tile or an entry bundle, or a partial tile of an
    earlier size deleted (docs/protocol.md §4 keeps them): the independent verifier
    refuses the site; the monitor does not trust tiles it cannot verify."""
    site = tmp_path / "site"
    shutil.copytree(history.site(LARGE), site)
    tiles = site / "log" / "tile"
    if which == "hash-tile":
        path = tiles / "0" / f"000.p/{LARGE}"
        data = bytearray(path.read_bytes())
        data[5 * 32] ^= 1  # leaf 5, which the proof from SMALL reads
        path.write_bytes(bytes(data))
    elif which == "entry-bundle":
        path = tiles / "entries" / f"000.p/{LARGE}"
        path.write_bytes(path.read_bytes().replace(b'"kind":"dream"', b'"kind":"dreaM"', 1))
    else:
        (tiles / "0" / f"000.p/{SMALL}").unlink()
    with pytest.raises(IndependentError):
        verify_site(site, history.vkey)
    verify_site(history.site(LARGE), history.vkey)  # the untouched site verifies
    if which == "hash-tile":
        # The consistency file proves the growth, but leaf 5 is not proved by the
        # tiles, so its record cannot be checked: could not check, never a verdict.
        assert _monitor(history, tmp_path, SMALL, site) == monitor.EXIT_UNCHECKED
        err = capsys.readouterr().err
        assert "not proved under the signed root" in err
        shutil.rmtree(site / "log" / "consistency")
        assert _monitor(history, tmp_path, SMALL, site) == monitor.EXIT_UNCHECKED
        assert "fork" not in capsys.readouterr().out
        assert (tmp_path / "seen.checkpoint").read_bytes() == (
            history.site(SMALL) / "log" / "checkpoint"
        ).read_bytes()


def test_monitor_catches_a_dream_dropped_from_the_site(
    history: History, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """T65: the operator (or a mirror) serves the honest, signed log but drops a
    logged dream's folder, record and page, with no erasure leaf. The monitor names
    it (exit 2), with the signed checkpoint that logs it, and keeps its state."""
    site = tmp_path / "site"
    shutil.copytree(history.site(LARGE), site)
    dropped = _dream_ids(site)[-1]
    shutil.rmtree(site / "dreams" / dropped)
    assert _monitor(history, tmp_path, SMALL, site) == monitor.EXIT_EVIDENCE
    out = capsys.readouterr().out
    assert out.startswith(f"missing: dream {dropped} (leaf ")
    assert (site / "log" / "checkpoint").read_text() in out
    assert (tmp_path / "seen.checkpoint").read_bytes() == (
        history.site(SMALL) / "log" / "checkpoint"
    ).read_bytes()


def test_a_mirror_cannot_make_the_monitor_cry_fork(
    history: History, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """T66: a mirror serves the honest checkpoint of an honest growth, but no tiles
    and a garbled consistency file. Nothing it serves proves anything: could not check
    (exit 3), never "fork" with two honest checkpoints as false evidence."""
    site = tmp_path / "site"
    shutil.copytree(history.site(LARGE), site)
    shutil.rmtree(site / "log" / "tile")
    (site / "log" / "consistency" / str(SMALL)).write_bytes(b"garbled\n")
    assert _monitor(history, tmp_path, SMALL, site) == monitor.EXIT_UNCHECKED
    captured = capsys.readouterr()
    assert "fork" not in captured.out + captured.err
    assert "could not check" in captured.err
    assert _monitor(history, tmp_path, SMALL, history.site(LARGE)) == monitor.EXIT_OK


def _files_of(site: Path, dream_id: str) -> tuple[bytes, bytes, bytes]:
    d = site / "dreams" / dream_id
    return (
        (d / "proof.tlog-proof").read_bytes(),
        (d / "record.json").read_bytes(),
        (site / "log" / "policy").read_bytes(),
    )


def _dream_ids(site: Path) -> list[str]:
    records = sorted(site.glob("dreams/*/record.json"))
    return [
        r.parent.name for r in sorted(records, key=lambda r: json.loads(r.read_text())["index"])
    ]


def test_proofs_for_the_wrong_index_or_size_fail(history: History) -> None:
    """T30: the light client refuses a proof for another dream (step 2), a proof's
    hashes re-embedded under a later, validly signed checkpoint (step 3: a proof is
    for one tree size), and a newer checkpoint that is really older (step 5)."""
    site = history.site(LARGE)
    first, second = _dream_ids(site)[:2]
    proof, record, policy = _files_of(site, first)
    _, other_record, _ = _files_of(site, second)
    lightclient.verify_proof(proof, record, policy)  # the honest pair verifies
    with pytest.raises(VerificationError) as info:
        lightclient.verify_proof(proof, other_record, policy)
    assert info.value.step == 2
    current = (site / "log" / "checkpoint").read_bytes()
    head, _, _ = proof.partition(b"\n\n")
    assert current not in proof
    with pytest.raises(VerificationError) as info:
        lightclient.verify_proof(head + b"\n\n" + current, record, policy)
    assert info.value.step == 3
    older = (history.site(SMALL) / "log" / "checkpoint").read_bytes()
    newest_id = _dream_ids(site)[-1]
    late_proof, late_record, _ = _files_of(site, newest_id)
    with pytest.raises(VerificationError) as info:
        lightclient.verify_proof(late_proof, late_record, policy, newer=older, consistency=b"")
    assert info.value.step == 5


def test_served_checkpoint_signed_by_another_key_is_refused(
    history: History, tmp_path: Path
) -> None:
    """T26, T31: a network attacker (or an operator with another key) serves a
    checkpoint for a tree of their making: the monitor and the light client's
    step 5 refuse it; the monitor keeps what it saw."""
    site = tmp_path / "site"
    shutil.copytree(history.site(LARGE), site)
    forger, _ = note.generate_key(ORIGIN)
    forged = _note_for(LARGE + 1, bytes(32), forger)
    (site / "log" / "checkpoint").write_bytes(forged)
    assert _monitor(history, tmp_path, SMALL, site) == monitor.EXIT_UNCHECKED
    assert (tmp_path / "seen.checkpoint").read_bytes() == (
        history.site(SMALL) / "log" / "checkpoint"
    ).read_bytes()
    proof, record, policy = _files_of(site, _dream_ids(site)[0])
    with pytest.raises(VerificationError) as info:
        lightclient.verify_proof(proof, record, policy, newer=forged, consistency=b"")
    assert info.value.step == 5


def test_honest_history_verifies_independently(history: History) -> None:
    """T25–T30 (control): both honest sites verify under the independent verifier,
    so each refusal above is the attack's doing."""
    for size in (SMALL, LARGE):
        report = verify_site(history.site(size), history.vkey)
        assert report.size == size


def test_a_leaf_rewritten_after_a_cached_build_is_still_checked(tmp_path: Path) -> None:
    """T25 with the build cache: shards an earlier build found canonical are
    known by their digest, so one edited afterwards is checked line by line."""
    tp = make_pool(tmp_path)
    submit(tp, signed("ada", title="First"), signed("bob", title="Second"))
    site = tmp_path / "site"
    build(tp, site)
    build(tp, site, key=False)  # the cache now knows the shard
    shard = tp.content / "log" / "leaves" / "000000.jsonl"
    lines = shard.read_bytes().splitlines(keepends=True)
    obj = json.loads(lines[1])
    lines[1] = json.dumps(obj, indent=1).replace("\n", "").encode() + b"\n"  # same JSON, not JCS
    shard.write_bytes(b"".join(lines))
    with pytest.raises(DreampoolError, match=r"000000.jsonl:2: leaf is not canonical"):
        build(tp, site)
