"""The Merkle tree and its entries as static tiles, according to c2sp.org/tlog-tiles (v0.1.0).

A log publishes its tree as *tiles*: files of up to 256 consecutive hashes at
one tree height (tile height 8), from which a client computes any root or
proof it needs (:class:`TileHashReader`), and its leaf data as *entry
bundles*. Paths are relative to the log prefix (``log/`` on the site)::

    tile/<L>/<N>[.p/<W>]        hashes, level L = 0..63
    tile/entries/<N>[.p/<W>]    leaf data

* ``<N>`` is the tile index in 3-digit groups, every group but the last
  prefixed with ``x``: index 1234067 is ``x001/x234/067``, index 5 is ``005``.
* Tile n at level l holds, for i = 0…255, MTH(D[(n·256 + i)·256^l :
  (n·256 + i + 1)·256^l]): the stored hashes of :mod:`builder.formats.merkle` at tree
  level 8·l, indices n·256 … n·256 + 255. A full tile is 256 hashes (8,192
  bytes); level 0 holds leaf hashes.
* The rightmost tile of each level may be *partial*: for a tree of size s it
  has W = floor(s / 256^l) mod 256 hashes and the path ends ``.p/<W>``; W = 0
  means no partial tile. A partial tile is never hashed into the level above.
* An entry bundle is the leaf data of the level-0 tile with the same
  ``<N>``/``<W>``, each entry as a big-endian uint16 length then the bytes.

Worked example (the spec's): a tree of 70,000 leaves is 273 full level-0
tiles, ``tile/0/273.p/112``, one full level-1 tile ``tile/1/000``,
``tile/1/001.p/17`` and ``tile/2/000.p/1`` (plus the entry bundles matching
level 0). A tree of 256 leaves is ``tile/0/000`` and ``tile/1/000.p/1``.

Tiles are immutable: a full tile never changes, and a partial tile of width W
is a prefix of every later tile at its place. docs/protocol.md §4 keeps every
partial tile once published, so growing the log only ever adds files
(:func:`new_tiles`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from builder.errors import LogError, VerificationError
from builder.formats.merkle import HASH_SIZE, MerkleTree, node_hash, root_from

__all__ = [
    "ENTRY_BUNDLE_LEVEL",
    "MAX_ENTRY_SIZE",
    "MAX_LEVEL",
    "TILE_HEIGHT",
    "TILE_WIDTH",
    "TileHashReader",
    "TileRef",
    "decode_entry_bundle",
    "encode_entry_bundle",
    "entries_path",
    "new_tiles",
    "parse_tile_path",
    "tile_data",
    "tile_path",
    "tiles_for_size",
    "verify_root_from_tiles",
]

TILE_HEIGHT = 8
"""Tree levels per tile level (c2sp.org/tlog-tiles: tiles are 2^8 = 256 hashes wide)."""

TILE_WIDTH = 1 << TILE_HEIGHT
"""Hashes (or entries) in a full tile (or bundle)."""

MAX_LEVEL = 63
"""Highest tile level ``<L>`` a path may name (c2sp.org/tlog-tiles)."""

ENTRY_BUNDLE_LEVEL = -1
"""The :attr:`TileRef.level` of an entry bundle (Go's sumdb/tlog calls these data tiles, L = -1)."""

MAX_ENTRY_SIZE = 0xFFFF
"""Largest entry an entry bundle can hold: its length is a big-endian uint16."""

_MAX_PATH_LENGTH = 128  # far beyond any real path; bounds the work parse_tile_path does

_TILE_PATH = re.compile(
    r"tile/(?P<level>entries|0|[1-9][0-9]?)"
    r"/(?P<index>(?:x[0-9]{3}/)*[0-9]{3})"
    r"(?:\.p/(?P<width>[1-9][0-9]{0,2}))?",
    re.ASCII,
)


@dataclass(frozen=True, slots=True, order=True)
class TileRef:
    """One tile or entry bundle: its level, index and width.

    ``level`` is 0…63 for a hash tile and :data:`ENTRY_BUNDLE_LEVEL` (-1) for an
    entry bundle; ``width`` is 1…256, 256 being a full tile. Refs sort entry
    bundles first, then by level, index and width.
    """

    level: int
    index: int
    width: int = TILE_WIDTH

    def __post_init__(self) -> None:
        if not ENTRY_BUNDLE_LEVEL <= self.level <= MAX_LEVEL:
            raise ValueError(
                f"tile level {self.level} is outside 0…{MAX_LEVEL} (or -1 for entries)"
            )
        if self.index < 0:
            raise ValueError(f"tile index {self.index} is negative")
        if not 1 <= self.width <= TILE_WIDTH:
            raise ValueError(f"tile width {self.width} is outside 1…{TILE_WIDTH}")

    @property
    def is_entry_bundle(self) -> bool:
        """Whether this is an entry bundle rather than a tile of hashes."""
        return self.level == ENTRY_BUNDLE_LEVEL

    @property
    def is_partial(self) -> bool:
        """Whether this holds fewer than 256 hashes (entries): its path ends ``.p/<W>``."""
        return self.width < TILE_WIDTH

    @property
    def tree_level(self) -> int:
        """The Merkle tree level of the hashes it holds: 8·level (0 for an entry bundle)."""
        return TILE_HEIGHT * max(self.level, 0)

    @property
    def hash_indices(self) -> range:
        """The indices, at :attr:`tree_level`, of its hashes; for a bundle, its leaf indices."""
        start = self.index * TILE_WIDTH
        return range(start, start + self.width)

    @property
    def path(self) -> str:
        """Its path below the log prefix, e.g. ``tile/0/x001/x234/067.p/8``."""
        if self.is_entry_bundle:
            return entries_path(self.index, self.width)
        return tile_path(self.level, self.index, self.width)


def _index_path(index: int) -> str:
    # c2sp.org/tlog-tiles: zero-padded 3-digit elements, all but the last
    # beginning with "x" — 1234067 is x001/x234/067.
    if index < 0:
        raise ValueError(f"tile index {index} is negative")
    elements = [f"{index % 1000:03d}"]
    index //= 1000
    while index > 0:
        elements.append(f"x{index % 1000:03d}")
        index //= 1000
    return "/".join(reversed(elements))


def _width_suffix(width: int) -> str:
    if not 1 <= width <= TILE_WIDTH:
        raise ValueError(f"tile width {width} is outside 1…{TILE_WIDTH}")
    # c2sp.org/tlog-tiles: ".p/<W>" only on partial tiles, W = 1…255.
    return "" if width == TILE_WIDTH else f".p/{width}"


def tile_path(level: int, index: int, width: int = TILE_WIDTH) -> str:
    """Return the path ``tile/<L>/<N>[.p/<W>]`` of a hash tile (c2sp.org/tlog-tiles).

    Requires 0 <= level <= 63, index >= 0 and 1 <= width <= 256 (256: full, no suffix).
    """
    if not 0 <= level <= MAX_LEVEL:
        raise ValueError(f"tile level {level} is outside 0…{MAX_LEVEL}")
    return f"tile/{level}/{_index_path(index)}{_width_suffix(width)}"


def entries_path(index: int, width: int = TILE_WIDTH) -> str:
    """Return the path ``tile/entries/<N>[.p/<W>]`` of an entry bundle (c2sp.org/tlog-tiles).

    Requires index >= 0 and 1 <= width <= 256.
    """
    return f"tile/entries/{_index_path(index)}{_width_suffix(width)}"


def parse_tile_path(path: str) -> TileRef:
    """Return the tile or entry bundle a path names; the inverse of :attr:`TileRef.path`.

    Strict: only the one canonical spelling of each tile is accepted (no
    leading zeros in ``<L>`` or ``<W>``, no ``x000/`` group in front of
    ``<N>``, no ``.p/256``, no width 0, level at most 63). Raises ValueError
    for anything else.
    """
    if len(path) > _MAX_PATH_LENGTH:
        raise ValueError(f"tile path is {len(path)} characters, want at most {_MAX_PATH_LENGTH}")
    match = _TILE_PATH.fullmatch(path)
    if match is None:
        raise ValueError("not a tile path: want tile/<L>/<N>[.p/<W>] or tile/entries/<N>[.p/<W>]")
    level_text = match["level"]
    level = ENTRY_BUNDLE_LEVEL if level_text == "entries" else int(level_text)
    if level > MAX_LEVEL:
        raise ValueError(f"tile level {level} is above {MAX_LEVEL}")
    width = TILE_WIDTH
    if match["width"] is not None:
        width = int(match["width"])
        if width >= TILE_WIDTH:  # c2sp.org/tlog-tiles: <W> is 1…255
            raise ValueError(f"partial tile width {width} is above {TILE_WIDTH - 1}")
    index = int(match["index"].replace("x", "").replace("/", ""))
    ref = TileRef(level, index, width)
    if ref.path != path:
        # Only a redundant leading "x000/" group gets this far.
        raise ValueError(f"tile path is not canonical: want {ref.path}")
    return ref


def _level_tiles(level: int, size: int) -> tuple[int, int]:
    """Return (full tiles, partial width) at tile ``level`` of a tree of ``size``; width 0: none."""
    hashes = size >> (TILE_HEIGHT * level)  # complete subtrees at tree level 8·level
    return hashes >> TILE_HEIGHT, hashes & (TILE_WIDTH - 1)


def _check_size(size: int) -> None:
    if size < 0:
        raise ValueError(f"tree size {size} is negative")


def tiles_for_size(size: int) -> list[TileRef]:
    """Return every tile and entry bundle of a tree of ``size`` leaves, sorted.

    Full tiles at every level, plus the one partial tile at the right edge of
    each level whose width floor(size / 256^l) mod 256 is not 0
    (c2sp.org/tlog-tiles "Partial Tiles"); entry bundles mirror level 0. A
    tree of size 0 has none. Partial tiles of earlier sizes are not included:
    see :func:`new_tiles`.
    """
    return new_tiles(0, size)


def new_tiles(old_size: int, new_size: int) -> list[TileRef]:
    """Return the tiles and entry bundles a tree of ``new_size`` has that one of ``old_size`` lacks.

    Requires 0 <= old_size <= new_size. Every ref returned names a file that
    did not exist at ``old_size``: the full tiles completed since, and each
    level's new partial tile. Nothing is ever removed — a partial tile of
    ``old_size`` stays published after its full tile exists (docs/protocol.md §4) —
    so publishing these files is the whole update. Sorted like
    :class:`TileRef`.
    """
    _check_size(old_size)
    if new_size < old_size:
        raise ValueError(f"tree size goes backwards: {old_size} to {new_size}")
    refs: list[TileRef] = []
    level = 0
    while level <= MAX_LEVEL and new_size >> (TILE_HEIGHT * level):
        old_full, old_width = _level_tiles(level, old_size)
        new_full, new_width = _level_tiles(level, new_size)
        for index in range(old_full, new_full):
            refs.append(TileRef(level, index))
        if new_width and (new_full, new_width) != (old_full, old_width):
            refs.append(TileRef(level, new_full, new_width))
        level += 1
    bundles = [TileRef(ENTRY_BUNDLE_LEVEL, ref.index, ref.width) for ref in refs if ref.level == 0]
    return bundles + refs


def tile_data(tree: MerkleTree, ref: TileRef) -> bytes:
    """Return the contents of hash tile ``ref``: its hashes concatenated (c2sp.org/tlog-tiles).

    The tile at level l holds the tree's stored hashes at level 8·l, indices
    :attr:`TileRef.hash_indices`. Requires ``ref`` to be a hash tile the tree
    has (it is in :func:`tiles_for_size` of some size <= ``tree.size``);
    raises LogError otherwise. An entry bundle is
    ``encode_entry_bundle(leaves[ref.hash_indices.start : ref.hash_indices.stop])``:
    the tree holds hashes, not leaf data.
    """
    if ref.is_entry_bundle:
        raise ValueError(f"{ref.path} is an entry bundle: use encode_entry_bundle on the leaf data")
    span = ref.hash_indices
    return tree.hashes_at(ref.tree_level, span.start, span.stop)


def encode_entry_bundle(entries: Sequence[bytes]) -> bytes:
    """Return an entry bundle: each entry as a big-endian uint16 length, then its bytes.

    c2sp.org/tlog-tiles "Log entries". Requires 1 to 256 entries (a bundle is
    never empty), each at most 65,535 bytes; raises ValueError otherwise.
    """
    if not 1 <= len(entries) <= TILE_WIDTH:
        raise ValueError(f"entry bundle of {len(entries)} entries, want 1…{TILE_WIDTH}")
    parts: list[bytes] = []
    for i, entry in enumerate(entries):
        if len(entry) > MAX_ENTRY_SIZE:
            raise ValueError(
                f"entry {i} is {len(entry)} bytes, want at most {MAX_ENTRY_SIZE} (uint16 length)"
            )
        parts.append(len(entry).to_bytes(2, "big"))
        parts.append(bytes(entry))
    return b"".join(parts)


def decode_entry_bundle(data: bytes, width: int | None = None) -> list[bytes]:
    """Return the entries of an entry bundle; the inverse of :func:`encode_entry_bundle`.

    Strict: a truncated length or entry, more than 256 entries, an empty
    bundle, or (when ``width`` is given, from the bundle's path) a number of
    entries other than ``width`` raises LogError — bundle bytes come from a
    log, and a malformed one is evidence against it.
    """
    entries: list[bytes] = []
    offset = 0
    end = len(data)
    while offset < end:
        if len(entries) == TILE_WIDTH:
            raise LogError(
                f"entry bundle has bytes after entry {TILE_WIDTH - 1} at offset {offset}, "
                f"want at most {TILE_WIDTH} entries"
            )
        if offset + 2 > end:
            raise LogError(f"entry bundle ends inside the length of entry {len(entries)}")
        length = int.from_bytes(data[offset : offset + 2], "big")
        offset += 2
        if offset + length > end:
            raise LogError(
                f"entry bundle ends inside entry {len(entries)}: it wants {length} bytes, "
                f"{end - offset} remain"
            )
        entries.append(bytes(data[offset : offset + length]))
        offset += length
    if not entries:
        raise LogError("entry bundle is empty, want at least 1 entry")
    if width is not None and len(entries) != width:
        raise LogError(f"entry bundle has {len(entries)} entries, want {width}")
    return entries


class TileHashReader:
    """Reads stored hashes of a tree of ``size`` leaves from its published tiles.

    ``read_hash`` is a :data:`builder.formats.merkle.HashReader`, so
    ``merkle.inclusion_proof_from(reader.read_hash, i, size)``,
    ``consistency_proof_from`` and ``root_from`` compute proofs and roots from
    tiles alone. Hashes come from the full tile where the tree of ``size`` has
    one and from that size's rightmost partial tile otherwise (which
    docs/protocol.md §4 keeps published); a level-L tile gives the hashes at tree
    levels 8L … 8L+7, those above 8L hashed from it. Each tile is fetched at
    most once.

    Responsibility: ``fetch(path)`` returns the bytes at ``path`` (relative
    to the log prefix, e.g. ``tile/0/000.p/7``) or raises. This reader checks
    each tile's length and nothing else: tile bytes are not authenticated.
    Before trusting anything computed from them, check it against a root from
    a verified checkpoint — ``merkle.verify_inclusion`` /
    ``merkle.verify_consistency`` on a computed proof, or
    :func:`verify_root_from_tiles` for the tiles on the right edge.
    """

    __slots__ = ("_fetch", "_hashes", "_size", "_tiles")

    def __init__(self, fetch: Callable[[str], bytes], size: int) -> None:
        _check_size(size)
        self._fetch = fetch
        self._size = size
        self._tiles: dict[TileRef, bytes] = {}
        self._hashes: dict[tuple[int, int], bytes] = {}  # hashes rebuilt inside tiles

    @property
    def size(self) -> int:
        """The tree size whose tiles this reader reads."""
        return self._size

    def tile(self, level: int, index: int) -> bytes:
        """Return the bytes of tile (level, index) as it exists at :attr:`size`, fetching it once.

        Requires that the tree of :attr:`size` has a full or partial tile there.
        Raises LogError if the fetched bytes are not width · 32 long.
        """
        full, width = _level_tiles(level, self._size)
        if index < full:
            width = TILE_WIDTH
        elif index > full or width == 0:
            raise ValueError(f"a tree of size {self._size} has no tile {level}/{index}")
        ref = TileRef(level, index, width)
        data = self._tiles.get(ref)
        if data is None:
            data = bytes(self._fetch(ref.path))
            if len(data) != width * HASH_SIZE:
                raise LogError(
                    f"tile {ref.path} is {len(data)} bytes, want {width * HASH_SIZE} "
                    f"({width} hashes)"
                )
            self._tiles[ref] = data
        return data

    def read_hash(self, level: int, index: int) -> bytes:
        """Return the stored hash MTH(D[index·2^level : (index+1)·2^level]) from the tiles.

        Requires the subtree to be complete inside the tree: (index + 1) · 2^level <= size.
        """
        if level < 0 or index < 0 or (index + 1) << level > self._size:
            raise ValueError(
                f"no complete subtree at level {level}, index {index} "
                f"in a tree of size {self._size}"
            )
        tile_level, height = divmod(level, TILE_HEIGHT)
        if tile_level > MAX_LEVEL:
            raise ValueError(f"level {level} is above the highest tile level {MAX_LEVEL}")
        cached = self._hashes.get((level, index))
        if cached is not None:
            return cached
        # The subtree is 2^height consecutive hashes at tree level 8·tile_level,
        # all inside one tile because tiles are aligned to 256 = 2^8 of them.
        first = index << height
        tile_index, offset = divmod(first, TILE_WIDTH)
        data = self.tile(tile_level, tile_index)
        hashes = [
            data[i : i + HASH_SIZE]
            for i in range(offset * HASH_SIZE, (offset + (1 << height)) * HASH_SIZE, HASH_SIZE)
        ]
        # c2sp.org/tlog-tiles: the levels between tile levels are rebuilt by
        # hashing the tile's hashes (RFC 6962 §2.1, a complete subtree).
        while len(hashes) > 1:
            hashes = [node_hash(hashes[i], hashes[i + 1]) for i in range(0, len(hashes), 2)]
        if height:
            self._hashes[(level, index)] = hashes[0]
        return hashes[0]


def verify_root_from_tiles(reader: TileHashReader, root: bytes) -> None:
    """Check that the tiles ``reader`` fetches give ``root`` for the tree of ``reader.size``.

    Authenticates the tiles this root is computed from (the right edge of each
    level); any other tile is authenticated by verifying the proof computed
    from it. Raises VerificationError with both roots on a mismatch.
    """
    calculated = root_from(reader.read_hash, reader.size)
    if calculated != root:
        raise VerificationError(
            f"tiles give root {calculated.hex()} for tree size {reader.size}, want {root.hex()}"
        )
