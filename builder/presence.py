"""Presence: every logged dream that was not erased still has its record on the site.

docs/protocol.md §5: every dream leaf of the log has its folder ``dreams/<id>/``, and a
dream not erased also has its ``record.json``; the ids come from the log's dream leaves
(the entry bundles, §4), not from listing folders. The signed log says the dream
exists, so a site that answers "no such file" (HTTP 404/410, or no file on disk) for
the record of a dream with no erasure leaf is **missing** it: a verdict. A record that
could not be asked for (timeout, HTTP 5xx, connection refused) is *unchecked*, never
missing.

What is checked, and what it costs, for a log of ``size`` leaves (:func:`bundles_to_check`):

* every entry bundle holding a leaf added since ``since`` (the state's size), and
  ``sample`` entry bundles older than that, drawn at random on each run (so a site
  cannot tell which records a run asks for), or every bundle;
* each bundle's leaves are authenticated one by one against the signed root by an
  inclusion proof computed from the tiles (RFC 9162 §2.1.3.2), then one HEAD request
  (``exists``) per dream leaf, :data:`WORKERS` at a time;
* only when some record is absent: every entry bundle of the log (size / 256
  files), hashed into the tree and checked against the signed root, to find the
  erasure leaves (an erasure may come at any later index, §3).

So a run reads at most (new leaves / 256 + 1 + sample) bundles of up to 256 leaves,
a few tiles, and makes one HEAD request per dream leaf in them.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Protocol

from builder import strictjson, tiles
from builder.checkpoint import Checkpoint
from builder.errors import DreampoolError
from builder.merkle import MerkleTree, inclusion_proof_from, leaf_hash, verify_inclusion

__all__ = [
    "MAX_BUNDLE_SIZE",
    "WORKERS",
    "Presence",
    "PresenceSite",
    "bundles_to_check",
    "check_presence",
]

MAX_BUNDLE_SIZE = tiles.TILE_WIDTH * (2 + tiles.MAX_ENTRY_SIZE)
"""An entry bundle: 256 entries of at most 65,535 bytes, each after a 2-byte length."""

WORKERS = 4
"""Requests in flight at once."""

_DREAM_ID = re.compile(r"[0-9a-f]{16}")


class PresenceSite(Protocol):
    """A site whose files can be fetched and asked for (see :class:`builder.monitor.Site`).

    ``exists`` returns whether the site has a file at ``path``: False only when the site
    says there is none; any failure to ask raises a DreampoolError.
    """

    def fetch(self, path: str, limit: int) -> bytes: ...

    def exists(self, path: str) -> bool: ...

    def describe(self, path: str) -> str: ...


@dataclass(frozen=True, slots=True)
class Presence:
    """What a presence check found among the dream leaves it looked at.

    ``missing`` lists (leaf index, dream id) of dreams with neither record nor
    erasure leaf; ``unchecked`` says, per dream, why its record could not be asked for.
    """

    checked: int
    present: int
    erased: int
    missing: tuple[tuple[int, str], ...]
    unchecked: tuple[str, ...]


class UncheckedError(DreampoolError):
    """The leaves could not be read or authenticated: nothing can be said about presence."""


def bundles_to_check(
    since: int, size: int, sample: int | None, rng: random.Random | None = None
) -> list[int]:
    """The entry bundles to read: those holding a leaf at ``since`` or above, and
    ``sample`` bundles drawn from the older ones (``None``: every bundle)."""
    count = -(-size // tiles.TILE_WIDTH)
    if sample is None:
        return list(range(count))
    first_new = min(since, size) // tiles.TILE_WIDTH if since < size else count
    old = range(first_new)
    drawn = (rng or random.SystemRandom()).sample(old, min(sample, len(old)))
    return sorted({*drawn, *range(first_new, count)})


def check_presence(
    site: PresenceSite,
    cp: Checkpoint,
    bundles: Sequence[int],
    read_hash: Callable[[int, int], bytes],
) -> Presence:
    """Check the records of the dream leaves in ``bundles`` of the tree of ``cp``.

    ``read_hash`` reads stored hashes of that tree from its tiles
    (:class:`builder.tiles.TileHashReader`). Raises :class:`UncheckedError` (or the
    site's DreampoolError) when the leaves cannot be read or do not match the signed
    root; a record that cannot be asked for is reported in ``unchecked``.
    """
    dreams: list[tuple[int, str]] = []
    for n in bundles:
        for index, leaf in _bundle(site, cp, n):
            # §3: the leaf's hash, proved under the signed root, authenticates it.
            try:
                proof = inclusion_proof_from(read_hash, index, cp.size)
                verify_inclusion(leaf_hash(leaf), index, cp.size, proof, cp.root)
            except (DreampoolError, ValueError) as exc:
                raise UncheckedError(
                    f"leaf {index} of {site.describe(_bundle_path(cp, n))} is not proved "
                    f"under the signed root of size {cp.size}: {exc}",
                    hint="the site serves entries or tiles its log did not sign; run again later",
                ) from None
            kind, dream_id = _leaf_kind(leaf, index)
            if kind == "dream":
                dreams.append((index, dream_id))
    answers = _ask(site, [f"dreams/{dream_id}/record.json" for _, dream_id in dreams])
    absent = [d for d, answer in zip(dreams, answers, strict=True) if answer is False]
    unchecked = tuple(
        f"{site.describe(f'dreams/{d[1]}/record.json')}: {answer}"
        for d, answer in zip(dreams, answers, strict=True)
        if isinstance(answer, str)
    )
    erased = _erased_ids(site, cp) if absent else frozenset()
    missing = tuple(d for d in absent if d[1] not in erased)
    return Presence(
        checked=len(dreams),
        present=sum(answer is True for answer in answers),
        erased=len(absent) - len(missing),
        missing=missing,
        unchecked=unchecked,
    )


def _bundle_path(cp: Checkpoint, n: int) -> str:
    width = min(tiles.TILE_WIDTH, cp.size - n * tiles.TILE_WIDTH)
    return "log/" + tiles.entries_path(n, width)


def _bundle(site: PresenceSite, cp: Checkpoint, n: int) -> list[tuple[int, bytes]]:
    """Entry bundle ``n`` of the tree of ``cp`` (docs/protocol.md §4), with leaf indices."""
    path = _bundle_path(cp, n)
    width = min(tiles.TILE_WIDTH, cp.size - n * tiles.TILE_WIDTH)
    data = site.fetch(path, MAX_BUNDLE_SIZE)
    try:
        entries = tiles.decode_entry_bundle(data, width)
    except DreampoolError as exc:
        raise UncheckedError(
            f"{site.describe(path)}: {exc.message}",
            hint="the site serves a garbled entry bundle; run again later",
        ) from None
    start = n * tiles.TILE_WIDTH
    return [(start + i, leaf) for i, leaf in enumerate(entries)]


def _leaf_kind(leaf: bytes, index: int) -> tuple[str, str]:
    """(kind, id) of a dream or erasure leaf (docs/protocol.md §3); ("", "") for a key leaf."""
    try:
        obj = strictjson.loads(leaf, max_bytes=tiles.MAX_ENTRY_SIZE)
    except DreampoolError:
        obj = None
    kind = obj.get("kind") if isinstance(obj, dict) else None
    if kind == "key":
        return "", ""
    dream_id = obj.get("id") if isinstance(obj, dict) else None
    if kind not in ("dream", "erasure") or not (
        isinstance(dream_id, str) and _DREAM_ID.fullmatch(dream_id)
    ):
        raise UncheckedError(
            f"leaf {index} is signed by the log but is no dream, key or erasure leaf "
            "with a 16-hex id (docs/protocol.md §3)",
            hint="report it to the pool's operators; the site verifier names the rule",
        )
    return kind, dream_id


def _ask(site: PresenceSite, paths: Sequence[str]) -> list[bool | str]:
    """For each path: True (there), False (the site says not), or why it could not be asked."""

    def one(path: str) -> bool | str:
        try:
            return site.exists(path)
        except DreampoolError as exc:
            return exc.message

    if not paths:
        return []
    with ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="dreampool-presence") as pool:
        return list(pool.map(one, paths))


def _erased_ids(site: PresenceSite, cp: Checkpoint) -> frozenset[str]:
    """The ids of every erasure leaf of the tree of ``cp``, from all its entry bundles,
    checked against its signed root."""
    count = -(-cp.size // tiles.TILE_WIDTH)
    with ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="dreampool-bundles") as pool:
        bundles = list(pool.map(lambda n: _bundle(site, cp, n), range(count)))
    leaves: list[bytes] = [leaf for bundle in bundles for _, leaf in bundle]
    tree = MerkleTree.from_leaf_hashes(leaf_hash(leaf) for leaf in leaves)
    if tree.root() != cp.root:
        raise UncheckedError(
            f"the site's entry bundles do not hash to the signed root of size {cp.size}",
            hint="the site serves entries its log did not sign; run again later",
        )
    return frozenset(_erasures(leaves))


def _erasures(leaves: Iterable[bytes]) -> Iterable[str]:
    for index, leaf in enumerate(leaves):
        kind, dream_id = _leaf_kind(leaf, index)
        if kind == "erasure":
            yield dream_id
