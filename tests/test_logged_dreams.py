"""A dream the signed log already commits to is checked against its leaf, not
verified and reviewed again (docs/protocol.md §3.1)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from builder import build as buildmod
from builder.content import pool
from builder.errors import LogError
from builder.formats import dream as dreamfmt
from builder.formats import merkle
from builder.formats.note import parse_private_key
from builder.log import logbuild, logstate
from builder.text import readerview, redact
from tests.pools import ORIGIN, PoolFixture, make_pool
from tests.test_site_build import tree


class Calls:
    """Counts the signature verifications and redaction reviews a build runs."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.verify = 0
        self.review = 0
        real_verify, real_redact, real_view = (
            dreamfmt.verify,
            redact.changes,
            readerview.problems,
        )

        def verify(*args: object, **kw: object) -> object:
            self.verify += 1
            return real_verify(*args, **kw)  # type: ignore[arg-type]

        def changes(*args: object, **kw: object) -> object:
            self.review += 1
            return real_redact(*args, **kw)  # type: ignore[arg-type]

        def view(*args: object, **kw: object) -> object:
            self.review += 1
            return real_view(*args, **kw)  # type: ignore[arg-type]

        monkeypatch.setattr(dreamfmt, "verify", verify)
        monkeypatch.setattr(redact, "changes", changes)  # the review check_dream runs
        monkeypatch.setattr(readerview, "problems", view)


@pytest.fixture
def logged(tmp_path: Path) -> PoolFixture:
    tp = make_pool(tmp_path)
    tp.add("ada", 3)
    tp.add("bob", 2)
    buildmod.build(tp.content, tmp_path / "first", signer=parse_private_key(tp.log_key))
    return tp


def test_a_cold_build_does_not_verify_or_review_logged_dreams(
    logged: PoolFixture, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No store: the five logged dreams are taken by their commitments; the
    one new dream goes through the full admission (one verification, its two
    reviews), and the site is the one a build from the first one's store gives."""
    new = logged.add("bob", 1)
    calls = Calls(monkeypatch)
    report = buildmod.build(
        logged.content, tmp_path / "cold", signer=parse_private_key(logged.log_key)
    )
    assert report.admitted == new
    assert (report.verified, report.committed) == (1, 5)
    assert (calls.verify, calls.review) == (1, 2)
    monkeypatch.undo()
    warm = buildmod.build(logged.content, tmp_path / "first", signer=None)
    # The five from its store; the one the cold build logged, by its commitment.
    assert (warm.verified, warm.committed) == (0, 1)
    assert tree(tmp_path / "cold") == tree(tmp_path / "first")


def test_a_dream_taken_by_its_commitment_is_kept_in_the_store(
    logged: PoolFixture, tmp_path: Path
) -> None:
    """The store still saves the work: the next build reads nothing again."""
    first = buildmod.build(logged.content, tmp_path / "cold", signer=None)
    again = buildmod.build(logged.content, tmp_path / "cold", signer=None)
    assert (first.verified, first.committed) == (0, 5)
    assert (again.verified, again.committed) == (0, 0)


def _logged_file(tp: PoolFixture) -> Path:
    return sorted((tp.content / "dreams").glob("*.json"))[0]


def test_a_changed_logged_file_is_not_taken_as_it_is(
    logged: PoolFixture, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A logged dream's file whose title changed (it still parses, its old
    signature looks valid but is not) fails its commitment, so it is checked
    in full: the signature fails and the log stage refuses the build as it
    always has, naming the leaf; nothing is written."""
    path = _logged_file(logged)
    obj = json.loads(path.read_bytes())
    obj["title"] = "A title the author never signed"
    path.write_text(json.dumps(obj), encoding="utf-8")
    calls = Calls(monkeypatch)
    before = tree(logged.content / "log")
    with pytest.raises(LogError, match=f"{path.stem}.json was refused"):
        buildmod.build(logged.content, tmp_path / "cold", signer=parse_private_key(logged.log_key))
    assert calls.verify == 1  # the changed file, checked in full
    assert tree(logged.content / "log") == before
    assert not (tmp_path / "cold").exists()


def test_a_logged_file_without_its_salt_is_checked_in_full(
    logged: PoolFixture, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No salt, no commitment to compare: verified as today, then refused by
    the log stage for the lost salt."""
    path = _logged_file(logged)
    path.with_suffix(".salt").unlink()
    calls = Calls(monkeypatch)
    with pytest.raises(LogError, match="has lost its salt"):
        buildmod.build(logged.content, tmp_path / "cold", signer=None)
    assert calls.verify == 1


def test_an_unsigned_tail_leaf_is_not_proven(logged: PoolFixture, tmp_path: Path) -> None:
    """A dream leaf after the last checkpoint (a build killed before signing)
    is under no signature: prove() gives no commitment for it, so its dream
    is verified in full."""
    signer = parse_private_key(logged.log_key)
    (new,) = logged.add("ada", 1)
    state = logstate.load(logged.content)
    log = logbuild.update(
        logged.content,
        pool.scan_dreams(logged.content, pool.load_keys(logged.content)[0])[0],
        origin=ORIGIN,
        signer=signer,
    )
    # Undo the checkpoint only: the leaves stay, unsigned.
    (logged.content / "log" / "checkpoints" / str(log.tree.size)).unlink()
    history = logged.content / "log" / "history.jsonl"
    history.write_bytes(b"".join(history.read_bytes().splitlines(keepends=True)[:-1]))
    assert len(logstate.load(logged.content).leaves) == len(state.leaves) + 1
    proven = logbuild.prove(logged.content, origin=ORIGIN)
    assert proven.commitment_of(new) is None
    others = [p.stem for p in (logged.content / "dreams").glob("*.json") if p.stem != new]
    assert all(proven.commitment_of(i) is not None for i in others) and len(others) == 5
    report = buildmod.build(logged.content, tmp_path / "cold", signer=signer)
    assert (report.verified, report.committed) == (1, 5)
    assert report.signed


def test_only_prove_makes_a_proven_log(logged: PoolFixture) -> None:
    state = logstate.load(logged.content)
    tree_ = merkle.MerkleTree.from_leaf_hashes(merkle.leaf_hash(x) for x in state.leaves)
    with pytest.raises(TypeError, match=r"only by builder\.log\.logbuild\.prove"):
        logbuild.ProvenLog(object(), state, tree_, None, logbuild._read_leaves(state.leaves), 0)
    proven = logbuild.prove(logged.content, origin=ORIGIN)
    scanned = pool.scan_dreams(logged.content, pool.load_keys(logged.content)[0])[0]
    logbuild.update(logged.content, scanned, origin=ORIGIN, signer=None, proven=proven)
    with pytest.raises(RuntimeError, match="used by one update"):
        logbuild.update(logged.content, scanned, origin=ORIGIN, signer=None, proven=proven)


def test_a_changed_leaf_is_refused_before_any_dream_is_read(
    logged: PoolFixture, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A leaf rewritten to commit to another text is not proven (the signed
    root no longer matches), and the build stops before the scan."""
    shard = logged.content / "log" / "leaves" / "000000.jsonl"
    lines = shard.read_bytes().splitlines()
    for n, line in enumerate(lines):
        obj = json.loads(line)
        if obj["kind"] == "dream":
            obj["commitment"] = "0" * 64
            lines[n] = json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()
            break
    shard.write_bytes(b"\n".join(lines) + b"\n")
    scanned: list[int] = []
    monkeypatch.setattr(pool, "scan_dreams", lambda *a, **k: scanned.append(1))
    with pytest.raises(LogError, match="not the tree the pool signed"):
        buildmod.build(logged.content, tmp_path / "cold", signer=None)
    assert scanned == []
