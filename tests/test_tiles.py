"""c2sp.org/tlog-tiles v0.1.0: paths, the tiles of a tree, entry bundles, proofs from tiles."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from builder.errors import LogError, VerificationError
from builder.formats.merkle import (
    MerkleTree,
    consistency_proof_from,
    inclusion_proof_from,
    leaf_hash,
    root_from,
    verify_consistency,
    verify_inclusion,
)
from builder.formats.tiles import (
    ENTRY_BUNDLE_LEVEL,
    TileHashReader,
    TileRef,
    decode_entry_bundle,
    encode_entry_bundle,
    entries_path,
    new_tiles,
    parse_tile_path,
    tile_data,
    tile_path,
    tiles_for_size,
    verify_root_from_tiles,
)

# --- Paths ----------------------------------------------------------------------------


def test_index_encoding_example() -> None:
    # c2sp.org/tlog-tiles: "index 1234067 will be encoded as x001/x234/067".
    assert tile_path(0, 1234067) == "tile/0/x001/x234/067"
    assert tile_path(0, 1234067, 8) == "tile/0/x001/x234/067.p/8"
    assert entries_path(1234067) == "tile/entries/x001/x234/067"
    assert entries_path(1234067, 8) == "tile/entries/x001/x234/067.p/8"
    assert TileRef(ENTRY_BUNDLE_LEVEL, 1234067, 8).path == "tile/entries/x001/x234/067.p/8"


@pytest.mark.parametrize(
    ("index", "encoded"),
    [
        (0, "000"),
        (5, "005"),
        (999, "999"),
        (1000, "x001/000"),
        (1001, "x001/001"),
        (999_999, "x999/999"),
        (1_000_000, "x001/x000/000"),
        (2**32 - 1, "x004/x294/x967/295"),
    ],
)
def test_index_encoding(index: int, encoded: str) -> None:
    assert tile_path(3, index) == f"tile/3/{encoded}"
    assert tile_path(3, index, 255) == f"tile/3/{encoded}.p/255"


def test_tile_path_refuses_out_of_range() -> None:
    for level, index, width in [(64, 0, 256), (-1, 0, 256), (0, -1, 256), (0, 0, 0), (0, 0, 257)]:
        with pytest.raises(ValueError):
            tile_path(level, index, width)


@pytest.mark.parametrize(
    "path",
    [
        "tile/0/000",
        "tile/0/000.p/1",
        "tile/0/000.p/255",
        "tile/63/x001/x234/067.p/8",
        "tile/entries/x001/x234/067",
        "tile/entries/x001/000.p/17",
        "tile/10/999",
    ],
)
def test_parse_tile_path_round_trips(path: str) -> None:
    assert parse_tile_path(path).path == path


@pytest.mark.parametrize(
    "path",
    [
        "",
        "tile/0",
        "tile/0/",
        "/tile/0/000",
        "tile/0/000/",
        "tile/00/000",  # leading zero in <L>
        "tile/01/000",
        "tile/64/000",  # <L> above 63
        "tile/-1/000",
        "tile/0/0",  # <N> elements are 3 digits
        "tile/0/0000",
        "tile/0/1234067",
        "tile/0/x000/001",  # redundant leading group
        "tile/0/x000/x000/000",
        "tile/0/001/002",  # all but the last element begin with x
        "tile/0/x001/x002",  # the last does not
        "tile/0/x1/000",
        "tile/0/000.p/0",  # width 1…255
        "tile/0/000.p/256",  # a full tile has no .p/
        "tile/0/000.p/08",  # leading zero in <W>
        "tile/0/000.p/",
        "tile/0/000.p/1/",
        "tile/0/000.p/1000",
        "tile/0/000\n",
        "tile/0/０００",  # non-ASCII digits
        "tile/ENTRIES/000",
        "tile/entries/000.p/256",
        "tile/data/000",
        "log/tile/0/000",
        "tile/0/" + "x999/" * 40 + "000",  # bounded
    ],
)
def test_parse_tile_path_is_strict(path: str) -> None:
    with pytest.raises(ValueError):
        parse_tile_path(path)


@given(
    st.integers(min_value=-1, max_value=63),
    st.integers(min_value=0, max_value=2**40),
    st.integers(min_value=1, max_value=256),
)
def test_parse_inverts_path(level: int, index: int, width: int) -> None:
    ref = TileRef(level, index, width)
    assert parse_tile_path(ref.path) == ref


# --- The tiles of a tree ---------------------------------------------------------------


def _paths(size: int) -> list[str]:
    return [ref.path for ref in tiles_for_size(size)]


def test_tiles_of_small_trees() -> None:
    assert _paths(0) == []
    assert _paths(1) == ["tile/entries/000.p/1", "tile/0/000.p/1"]
    assert _paths(255) == ["tile/entries/000.p/255", "tile/0/000.p/255"]
    # c2sp.org/tlog-tiles: "a tree of size 256 will be represented by a full
    # level 0 tile and a partial level 1 tile of width 1".
    assert _paths(256) == ["tile/entries/000", "tile/0/000", "tile/1/000.p/1"]
    assert _paths(257) == [
        "tile/entries/000",
        "tile/entries/001.p/1",
        "tile/0/000",
        "tile/0/001.p/1",
        "tile/1/000.p/1",
    ]
    assert _paths(1000) == [  # 1000 = 3·256 + 232
        "tile/entries/000",
        "tile/entries/001",
        "tile/entries/002",
        "tile/entries/003.p/232",
        "tile/0/000",
        "tile/0/001",
        "tile/0/002",
        "tile/0/003.p/232",
        "tile/1/000.p/3",
    ]


def _by_level(size: int) -> dict[int, list[TileRef]]:
    levels: dict[int, list[TileRef]] = {}
    for ref in tiles_for_size(size):
        levels.setdefault(ref.level, []).append(ref)
    return levels


def test_tiles_of_70000_leaves() -> None:
    # c2sp.org/tlog-tiles: "a tree of size 70,000 will be represented by 273
    # full level 0 tiles, one partial level 0 tile of width 112, one full level
    # 1 tile, one partial level 1 tile of width 17, and one partial level 2
    # tile of width 1".
    levels = _by_level(70_000)
    assert sorted(levels) == [ENTRY_BUNDLE_LEVEL, 0, 1, 2]
    assert levels[0] == [TileRef(0, n) for n in range(273)] + [TileRef(0, 273, 112)]
    assert levels[1] == [TileRef(1, 0), TileRef(1, 1, 17)]
    assert levels[2] == [TileRef(2, 0, 1)]
    assert [(r.index, r.width) for r in levels[ENTRY_BUNDLE_LEVEL]] == [
        (r.index, r.width) for r in levels[0]
    ]
    assert levels[0][-1].path == "tile/0/273.p/112"
    assert levels[1][-1].path == "tile/1/001.p/17"
    assert levels[2][-1].path == "tile/2/000.p/1"


def test_tiles_of_1234067_leaves() -> None:
    # 1,234,067 = 4820·256 + 147; 4820 = 18·256 + 212; 18 < 256.
    levels = _by_level(1_234_067)
    assert sorted(levels) == [ENTRY_BUNDLE_LEVEL, 0, 1, 2]
    assert len(levels[0]) == 4821
    assert levels[0][-2].path == "tile/0/x004/819"
    assert levels[0][-1].path == "tile/0/x004/820.p/147"
    assert levels[ENTRY_BUNDLE_LEVEL][-1].path == "tile/entries/x004/820.p/147"
    assert [r.path for r in levels[1][-2:]] == ["tile/1/017", "tile/1/018.p/212"]
    assert len(levels[1]) == 19
    assert [r.path for r in levels[2]] == ["tile/2/000.p/18"]


@settings(max_examples=200, deadline=None)
@given(
    st.integers(min_value=0, max_value=200_000),
    st.integers(min_value=0, max_value=70_000),
)
def test_new_tiles_is_exactly_what_is_new(old_size: int, growth: int) -> None:
    new_size = old_size + growth
    old, new = set(tiles_for_size(old_size)), tiles_for_size(new_size)
    added = new_tiles(old_size, new_size)
    assert added == sorted(added)
    assert added == sorted(set(new) - old)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=70_000), max_size=12, unique=True).map(sorted))
def test_each_checkpoints_new_tiles_add_up_to_all_of_them(sizes: list[int]) -> None:
    # What builder.log.logbuild.publish_log publishes: every tile of every
    # published size, gathered one checkpoint's new tiles at a time.
    chained: set[TileRef] = set()
    for before, size in zip([0, *sizes], sizes, strict=False):
        chained.update(new_tiles(before, size))
    assert chained == {ref for size in sizes for ref in tiles_for_size(size)}


def test_new_tiles_never_removes_and_refuses_going_back() -> None:
    assert new_tiles(300, 300) == []
    # The partial tile of size 300 stays valid and published; 512 only adds.
    assert [r.path for r in new_tiles(300, 512)] == [
        "tile/entries/001",
        "tile/0/001",
        "tile/1/000.p/2",
    ]
    with pytest.raises(ValueError):
        new_tiles(10, 9)


# --- Entry bundles ---------------------------------------------------------------------


@given(st.lists(st.binary(max_size=300), min_size=1, max_size=256))
def test_entry_bundle_round_trip(entries: list[bytes]) -> None:
    data = encode_entry_bundle(entries)
    assert len(data) == sum(2 + len(e) for e in entries)
    assert decode_entry_bundle(data) == entries
    assert decode_entry_bundle(data, width=len(entries)) == entries


def test_entry_bundle_format() -> None:
    # Big-endian uint16 length, then the bytes (c2sp.org/tlog-tiles "Log entries").
    assert encode_entry_bundle([b"", b"ab", b"c" * 258]) == (
        b"\x00\x00" + b"\x00\x02ab" + b"\x01\x02" + b"c" * 258
    )
    assert decode_entry_bundle(encode_entry_bundle([b"x" * 65535])) == [b"x" * 65535]


def test_encode_entry_bundle_refuses() -> None:
    with pytest.raises(ValueError, match="65536 bytes"):
        encode_entry_bundle([b"x" * 65536])
    with pytest.raises(ValueError):
        encode_entry_bundle([])
    with pytest.raises(ValueError):
        encode_entry_bundle([b""] * 257)


@pytest.mark.parametrize(
    "data",
    [
        b"",  # empty bundle
        b"\x00",  # truncated length
        b"\x00\x03ab",  # truncated entry
        b"\x00\x01a\x00",  # trailing byte
        b"\x00\x01a\x00\x02b",  # trailing partial entry
        b"\x00\x00" * 257,  # more than 256 entries
    ],
)
def test_decode_entry_bundle_is_strict(data: bytes) -> None:
    with pytest.raises(LogError):
        decode_entry_bundle(data)


def test_decode_entry_bundle_checks_width() -> None:
    with pytest.raises(LogError, match="has 2 entries, want 3"):
        decode_entry_bundle(b"\x00\x01a\x00\x01b", width=3)


# --- Tile contents and proofs from tiles ------------------------------------------------

Site = dict[str, bytes]


def _leaves(n: int) -> list[bytes]:
    return [b"entry %d" % i for i in range(n)]


def _publish(tree: MerkleTree, leaves: list[bytes], sizes: list[int]) -> Site:
    """Publish the log at each size in turn, as a build does: only new files, never deletes."""
    site: Site = {}
    published = 0
    for size in sizes:
        for ref in new_tiles(published, size):
            assert ref.path not in site, ref.path  # tiles are immutable: never rewritten
            span = ref.hash_indices
            if ref.is_entry_bundle:
                site[ref.path] = encode_entry_bundle(leaves[span.start : span.stop])
            else:
                site[ref.path] = tile_data(tree, ref)
        published = size
    return site


def _reader(site: Site, size: int, fetched: list[str] | None = None) -> TileHashReader:
    def fetch(path: str) -> bytes:
        if fetched is not None:
            fetched.append(path)
        return site[path]

    return TileHashReader(fetch, size)


SMALL = 2000
SMALL_LEAVES = _leaves(SMALL)


@pytest.fixture(scope="module")
def small_tree() -> MerkleTree:
    return MerkleTree.from_leaf_hashes(leaf_hash(e) for e in SMALL_LEAVES)


@pytest.fixture(scope="module")
def small_site(small_tree: MerkleTree) -> Site:
    # A checkpoint at every size: every partial tile of every size is published.
    return _publish(small_tree, SMALL_LEAVES, list(range(1, SMALL + 1)))


def test_tile_contents_follow_the_spec(small_tree: MerkleTree, small_site: Site) -> None:
    # Level 0: leaf hashes. Level 1: each hash is MTH of a full level-0 tile.
    assert small_site["tile/0/000"] == b"".join(leaf_hash(e) for e in SMALL_LEAVES[:256])
    assert small_site["tile/1/000.p/1"] == small_tree.root(256)
    seventh = MerkleTree.from_leaf_hashes(leaf_hash(e) for e in SMALL_LEAVES[6 * 256 : 7 * 256])
    assert small_site["tile/1/000.p/7"][32 * 6 :] == seventh.root()
    # A partial tile is a prefix of every later tile at its place.
    for width in range(1, 256):
        assert small_site["tile/0/001"].startswith(small_site[f"tile/0/001.p/{width}"])
    # Each entry hashes to the matching level-0 hash.
    for path, data in small_site.items():
        ref = parse_tile_path(path)
        if ref.is_entry_bundle:
            hashes = b"".join(leaf_hash(e) for e in decode_entry_bundle(data, ref.width))
            assert hashes == small_site[TileRef(0, ref.index, ref.width).path]


def test_tile_data_refuses_what_the_tree_lacks(small_tree: MerkleTree) -> None:
    with pytest.raises(LogError):
        tile_data(small_tree, TileRef(0, 7))  # needs 2,048 leaves
    with pytest.raises(LogError):
        tile_data(small_tree, TileRef(1, 0, 8))  # 8 full level-0 tiles need 2,048
    with pytest.raises(ValueError):
        tile_data(small_tree, TileRef(ENTRY_BUNDLE_LEVEL, 0))


@st.composite
def size_index_size1(draw: st.DrawFn) -> tuple[int, int, int]:
    size = draw(st.integers(min_value=1, max_value=SMALL))
    index = draw(st.integers(min_value=0, max_value=size - 1))
    size1 = draw(st.integers(min_value=1, max_value=size))
    return size, index, size1


@settings(max_examples=150, deadline=None)
@given(size_index_size1())
def test_proofs_from_tiles_equal_tree_proofs(
    small_tree: MerkleTree, small_site: Site, case: tuple[int, int, int]
) -> None:
    size, index, size1 = case
    fetched: list[str] = []
    reader = _reader(small_site, size, fetched)
    root = small_tree.root(size)
    assert root_from(reader.read_hash, size) == root
    verify_root_from_tiles(reader, root)

    proof = inclusion_proof_from(reader.read_hash, index, size)
    assert proof == small_tree.inclusion_proof(index, size)
    verify_inclusion(leaf_hash(SMALL_LEAVES[index]), index, size, proof, root)

    proof = consistency_proof_from(reader.read_hash, size1, size)
    assert proof == small_tree.consistency_proof(size1, size)
    verify_consistency(size1, size, small_tree.root(size1), root, proof)

    # Only the tiles that exist for this size are fetched, each once.
    assert set(fetched) <= set(_paths(size))
    assert len(fetched) == len(set(fetched))


def test_proofs_from_tiles_at_70000() -> None:
    leaves = _leaves(70_000)
    tree = MerkleTree.from_leaf_hashes(leaf_hash(e) for e in leaves)
    checkpoints = [1, 255, 256, 257, 1000, 65_535, 65_536, 65_537, 69_999, 70_000]
    site = _publish(tree, leaves, checkpoints)
    assert len(site) == len(set(site))
    for size in checkpoints:
        reader = _reader(site, size)
        verify_root_from_tiles(reader, tree.root(size))
        for index in {0, size // 3, size - 1, min(65_536, size - 1)}:
            proof = inclusion_proof_from(reader.read_hash, index, size)
            assert proof == tree.inclusion_proof(index, size)
        for size1 in checkpoints:
            if size1 <= size:
                proof = consistency_proof_from(reader.read_hash, size1, size)
                assert proof == tree.consistency_proof(size1, size)
                verify_consistency(size1, size, tree.root(size1), tree.root(size), proof)
    # Hashes at levels between tile levels come from hashing inside one tile.
    reader = _reader(site, 70_000)
    for level in range(17):
        assert reader.read_hash(level, 0) == tree.hash_at(level, 0)
        last = (70_000 >> level) - 1
        assert reader.read_hash(level, last) == tree.hash_at(level, last)


def _tampered(site: Site, path: str, change: Callable[[bytes], bytes]) -> Site:
    return {**site, path: change(site[path])}


def test_reader_checks_tile_length(small_site: Site) -> None:
    short = _tampered(small_site, "tile/0/000.p/7", lambda b: b[:-1])
    with pytest.raises(LogError, match="223 bytes, want 224"):
        _reader(short, 7).read_hash(0, 0)


def test_tampered_tiles_fail_verification(small_tree: MerkleTree, small_site: Site) -> None:
    def flip(b: bytes) -> bytes:
        return bytes([b[0] ^ 1]) + b[1:]

    bad_edge = _tampered(small_site, "tile/0/003.p/232", flip)
    with pytest.raises(VerificationError, match="want"):
        verify_root_from_tiles(_reader(bad_edge, 1000), small_tree.root(1000))
    # A tampered full tile inside the tree is caught by the proof that uses it.
    bad_inner = _tampered(small_site, "tile/0/001", flip)
    proof = inclusion_proof_from(_reader(bad_inner, 1000).read_hash, 257, 1000)
    with pytest.raises(VerificationError):
        verify_inclusion(leaf_hash(SMALL_LEAVES[257]), 257, 1000, proof, small_tree.root(1000))


def test_reader_refuses_hashes_outside_the_tree(small_site: Site) -> None:
    reader = _reader(small_site, 1000)
    with pytest.raises(ValueError):
        reader.read_hash(0, 1000)
    with pytest.raises(ValueError):
        reader.read_hash(10, 0)  # 1024 > 1000: not a complete subtree
    with pytest.raises(ValueError):
        reader.tile(0, 4)
    assert TileHashReader(lambda path: b"", 0).size == 0
    assert root_from(TileHashReader(lambda path: b"", 0).read_hash, 0) == MerkleTree().root()
