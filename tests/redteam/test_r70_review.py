"""Review r70 of 8cf0902e (the shards a build writes count as canonical).

The two defects found (an error that said "nothing was written" after the
policy and salts were, and an empty shard file `check` passed) are fixed;
their tests now guard the fix, beside the reviewer's guards."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from builder import buildcache
from builder.agents import mcp_server
from builder.buildcache import BuildCache
from builder.errors import LogError
from builder.formats import leaf as leaffmt
from builder.formats import strictjson
from builder.formats.note import parse_private_key
from builder.log import erase, logbuild, logstate
from builder.site import writer
from tests.pools import PoolFixture, make_pool
from tests.test_log import do_build, tree_files
from tests.test_log_prefix import calls_to

SHARD = 4  # a few leaves fill a shard


@pytest.fixture
def tp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> PoolFixture:
    monkeypatch.setattr(logstate, "SHARD", SHARD)
    return make_pool(tmp_path)


def _digest(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=32).digest()


def _section(tp: PoolFixture, out: Path) -> set[bytes]:
    key = buildcache.row_key(parse_private_key(tp.log_key).seed)
    return set(BuildCache(writer.builds_dir(out) / "cache", key=key)["shards"])


def _leaf_files(tp: PoolFixture) -> list[Path]:
    return sorted((tp.content / "log" / "leaves").glob("*.jsonl"))


def _ledger(monkeypatch: pytest.MonkeyPatch) -> dict[bytes, bytes]:
    """Every shard's bytes the log state code reads or writes from now on, by digest."""
    seen: dict[bytes, bytes] = {}
    read, write = logstate.read_regular_big, logstate.atomic_write  # type: ignore[attr-defined]

    def reading(path: Path) -> bytes:
        data = read(path)
        if path.suffix == ".jsonl" and path.parent.name == "leaves":
            seen[_digest(data)] = data
        return data

    def writing(path: Path, data: bytes, **kw: object) -> None:
        if path.suffix == ".jsonl" and path.parent.name == "leaves":
            seen[_digest(data)] = data
        write(path, data, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(logstate, "read_regular_big", reading)
    monkeypatch.setattr(logstate, "atomic_write", writing)
    return seen


def _checked(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """The lines strictjson.is_canonical is handed from now on."""
    return calls_to(monkeypatch, strictjson, "is_canonical")


def _respell(path: Path, line: int) -> bytes:
    """Line ``line`` (1-based) of ``path`` spelled non-canonically (same JSON value)."""
    lines = path.read_bytes().split(b"\n")
    lines[line - 1] = lines[line - 1].replace(b'{"', b'{ "', 1)
    assert not strictjson.is_canonical(lines[line - 1])
    path.write_bytes(b"\n".join(lines))
    return lines[line - 1]


# --- passing guard tests: what held ----------------------------------------------


def test_guard_every_digest_the_store_keeps_is_of_bytes_canonical_through(
    tp: PoolFixture, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GUARD (passes), T25/T81: over builds that fill a shard exactly, cross a
    shard boundary, append an erasure leaf and do nothing, every digest the
    `shards` section holds after each build is one of bytes read or written
    whose every line is canonical, the section holds the shards on disk, and
    the next build checks no line."""
    out = tmp_path / "site"
    ledger = _ledger(monkeypatch)
    checked = _checked(monkeypatch)

    def after_build() -> None:
        section = _section(tp, out)
        on_disk = {_digest(p.read_bytes()) for p in _leaf_files(tp)}
        assert on_disk <= section
        for digest in section:
            data = ledger[digest]  # a digest of bytes this code saw
            assert all(strictjson.is_canonical(x) for x in data.split(b"\n")[:-1])
        checked.clear()
        do_build(tp, out)  # nothing new: no line checked again
        assert checked == []

    ids = tp.add("ada", 3)  # key leaf + 3 dreams: exactly one full shard
    do_build(tp, out)
    assert [len(p.read_bytes().split(b"\n")) - 1 for p in _leaf_files(tp)] == [SHARD]
    after_build()
    tp.add("bob", 2)  # 3 leaves more: into a second shard
    do_build(tp, out)
    after_build()
    erase.erase(tp.content, ids[0], "author-request")  # an erasure leaf: the 8th, a full shard
    do_build(tp, out)
    assert [len(p.read_bytes().split(b"\n")) - 1 for p in _leaf_files(tp)] == [SHARD, SHARD]
    after_build()
    tp.add("ada", 2)  # 000002.jsonl
    do_build(tp, out)
    after_build()


@pytest.mark.parametrize("which", [0, -1])
def test_guard_a_respelled_line_of_a_shard_a_build_wrote_is_named_by_file_and_line(
    tp: PoolFixture, tmp_path: Path, which: int
) -> None:
    """GUARD (passes), T25: after a build whose append rewrote a full shard and
    began the next (both digests now in the store), a line respelled by hand in
    either is refused with the file and line, as before 8cf0902e."""
    out = tmp_path / "site"
    tp.add("ada", 2)
    do_build(tp, out)  # 3 leaves
    tp.add("bob", 2)
    do_build(tp, out)  # 6: 000000 rewritten full, 000001 new
    files = _leaf_files(tp)
    assert len(files) == 2 and {_digest(p.read_bytes()) for p in files} <= _section(tp, out)
    target = files[which]
    _respell(target, 2)
    with pytest.raises(LogError, match=rf"{target.name}:2: leaf is not canonical"):
        do_build(tp, out)


def test_guard_a_build_killed_before_signing_leaves_no_digest_and_its_tail_is_checked(
    tp: PoolFixture, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GUARD (passes), T40/T25: a build that wrote its shards and died before
    the checkpoint saves no store; a pull request that then respells a line of
    the unsigned tail is refused by file and line."""
    out = tmp_path / "site"
    tp.add("ada", 2)
    do_build(tp, out)
    before = _section(tp, out)
    tp.add("bob", 2)

    def killed(*a: object, **k: object) -> None:
        raise KeyboardInterrupt

    with monkeypatch.context() as m:
        m.setattr(logstate, "record_checkpoint", killed)
        with pytest.raises(KeyboardInterrupt):
            do_build(tp, out)
    assert _section(tp, out) == before
    last = _leaf_files(tp)[-1]
    assert _digest(last.read_bytes()) not in before
    _respell(last, 2)  # leaf 6: bob's first dream, unsigned
    with pytest.raises(LogError, match=rf"{last.name}:2: leaf is not canonical"):
        do_build(tp, out)


def test_guard_a_shard_changed_between_plan_and_apply_is_not_recorded(
    tp: PoolFixture, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GUARD (passes), T25/T81: another writer respells the last shard after the
    build planned: apply refuses ("changed since it was planned"), the store
    keeps nothing of it, and the next build names the file and line."""
    out = tmp_path / "site"
    tp.add("ada", 2)
    do_build(tp, out)
    tp.add("bob", 1)
    before = _section(tp, out)
    last = _leaf_files(tp)[-1]
    apply = logbuild.apply

    def racing(*a: object, **k: object) -> object:
        _respell(last, 1)
        return apply(*a, **k)  # type: ignore[arg-type]

    with monkeypatch.context() as m:
        m.setattr(logbuild, "apply", racing)
        with pytest.raises(LogError, match="changed since it was planned"):
            do_build(tp, out)
    assert _section(tp, out) == before
    with pytest.raises(LogError, match=rf"{last.name}:1: leaf is not canonical"):
        do_build(tp, out)


def test_guard_a_full_shard_changed_during_the_build_is_checked_next_time(
    tp: PoolFixture, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GUARD (passes), T25/T81: logstate.changed() compares only the last shard,
    so a full shard respelled after load goes unnoticed by apply, and append
    keeps load's digest for it (of the bytes load checked, not those on disk):
    the store holds no digest of the respelled bytes and the next build names
    the file and line."""
    out = tmp_path / "site"
    tp.add("ada", 3)
    tp.add("bob", 1)
    do_build(tp, out)  # 6 leaves: 000000.jsonl full, 000001.jsonl the last
    tp.add("ada", 1)
    first = _leaf_files(tp)[0]
    apply = logbuild.apply

    def racing(*a: object, **k: object) -> object:
        _respell(first, 3)
        return apply(*a, **k)  # type: ignore[arg-type]

    with monkeypatch.context() as m:
        m.setattr(logbuild, "apply", racing)
        do_build(tp, out)  # rewrites 000001.jsonl and signs
    assert _digest(first.read_bytes()) not in _section(tp, out)
    with pytest.raises(LogError, match=rf"{first.name}:3: leaf is not canonical"):
        do_build(tp, out)


def test_guard_the_mcp_reader_takes_the_store_but_checks_a_respelled_shard(
    tp: PoolFixture, tmp_path: Path
) -> None:
    """GUARD (passes), T81/T63: `dreampool mcp --content` reads the section a
    build left (its digests now include the shards it wrote) and writes
    nothing; a line respelled after that build is still named by file and
    line."""
    out = tmp_path / "site"
    tp.add("ada", 2)
    do_build(tp, out)
    tp.add("bob", 2)
    do_build(tp, out)
    store = writer.builds_dir(out) / "cache"
    reader = buildcache.StoreReader(store)
    assert {_digest(p.read_bytes()) for p in _leaf_files(tp)} <= set(reader["shards"])
    mcp_server.content_plan(tp.content, buildcache.StoreReader(store))  # taken, no error
    last = _leaf_files(tp)[-1]
    _respell(last, 1)
    with pytest.raises(LogError, match=rf"{last.name}:1: leaf is not canonical"):
        mcp_server.content_plan(tp.content, buildcache.StoreReader(store))
    assert _digest(last.read_bytes()) not in _section(tp, out)


# --- defects ---------------------------------------------------------------------


def test_a_new_leaf_refused_by_append_says_nothing_was_written_but_the_build_wrote(
    tp: PoolFixture, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """T40 (LOW: a false statement in an error): append's new check refuses a
    non-canonical new leaf with "nothing was written", but by then apply has
    written the policy and every new dream's salt (fsynced) under content/.
    The operator is told the checkout is as it was; it is not."""
    tp.add("ada", 2)
    before = tree_files(tp.content)
    encode = leaffmt.encode

    def buggy(leaf: leaffmt.Leaf) -> bytes:  # the bug the check is there for
        return encode(leaf).replace(b'{"', b'{ "', 1)

    monkeypatch.setattr(leaffmt, "encode", buggy)
    with pytest.raises(LogError, match="nothing was written") as info:
        do_build(tp, tmp_path / "site")
    added = sorted(set(tree_files(tp.content)) - set(before))
    assert added == [], f"{info.value.message!r}, yet the build wrote {added}"


def test_an_empty_trailing_shard_is_refused_by_check_and_build_alike(
    tp: PoolFixture, tmp_path: Path, run: object
) -> None:
    """T25 (found by review r70, older than 8cf0902e, which it probed: "shard
    digests that do not line up with leaves"). A pull request added an empty
    ``content/log/leaves/000001.jsonl`` to a log of exactly one full shard:
    load() took it (one digest more than there are shards of leaves),
    `dreampool check` said "no problems", and every build that appended then
    failed with "the log state changed since it was planned … (one build of a
    pool at a time)", blaming a concurrent build. Now load() refuses a shard of
    no leaves, naming it, in check and build alike."""
    out = tmp_path / "site"
    tp.add("ada", 3)
    do_build(tp, out)  # 4 leaves: 000000.jsonl full
    (tp.content / "log" / "leaves" / "000001.jsonl").write_bytes(b"")
    checked = run("check", "--content", tp.content)  # type: ignore[operator]
    assert checked.code != 0 and "000001.jsonl: holds no leaves" in checked.out + checked.err
    tp.add("bob", 1)
    with pytest.raises(LogError, match=r"000001\.jsonl: holds no leaves"):
        do_build(tp, out)
