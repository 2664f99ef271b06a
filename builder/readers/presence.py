"""Presence: every logged dream that was not erased still has its record on the site.

docs/protocol.md §5: every dream leaf of the log has its folder ``dreams/<id>/``, and a
dream not erased also has its ``record.json``; the ids come from the log's dream leaves
(the entry bundles, §4), not from listing folders. The signed log says the dream
exists, so for a dream with no erasure leaf, a site that answers "no such file" (HTTP
404/410, or no file on disk) for its record is **missing** it, and one that serves
something else there (another dream's record, an altered one, an SPA's index.html,
an empty file) has **altered** it: both are verdicts. "Present" means the record was
fetched (at most :data:`builder.readers.lightclient.MAX_RECORD_SIZE` bytes), parsed strictly
and its leaf recomputed (the commitment over its dream and salt, §2–§3) equals the
logged leaf byte for byte (:func:`builder.readers.lightclient.check_record`, step 2 of §5).
A record that could not be fetched (timeout, HTTP 5xx, connection refused, over the
size cap) is *unchecked*, never missing.

What is checked, and what it costs, for a log of ``size`` leaves (:func:`bundles_to_check`):

* every entry bundle holding a leaf added since ``since`` (the state's size), and
  ``sample`` entry bundles older than that, drawn at random on each run (so a site
  cannot tell which records a run asks for), or every bundle;
* each bundle's leaves are authenticated one by one against the signed root by an
  inclusion proof computed from the tiles (RFC 9162 §2.1.3.2), then one GET of the
  record per dream leaf, :data:`WORKERS` at a time;
* only when some record is missing or altered: every entry bundle of the log (size /
  256 files), read one at a time, each checked against the tiles' hash of its leaves
  and dropped, keeping one hash per leaf; the hashes are then checked against the
  signed root, to find the erasure leaves (an erasure may come at any later index, §3).

So a run reads at most (new leaves / 256 + 1 + sample) bundles of up to 256 leaves,
a few tiles, and one record (up to 256 KiB) per dream leaf in them; memory holds at
most one bundle and :data:`WORKERS` records at a time, plus 32 bytes per leaf.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Literal, Protocol

from builder.errors import DreampoolError
from builder.formats import leaf as leaffmt
from builder.formats import tiles
from builder.formats.checkpoint import Checkpoint
from builder.formats.merkle import (
    MerkleTree,
    inclusion_proof_from,
    leaf_hash,
    subtree_hash_from,
    verify_inclusion,
)
from builder.readers.lightclient import MAX_RECORD_SIZE, check_record

__all__ = [
    "MAX_BUNDLE_SIZE",
    "WORKERS",
    "OversizeError",
    "Presence",
    "PresenceSite",
    "bundles_to_check",
    "check_presence",
]

MAX_BUNDLE_SIZE = tiles.TILE_WIDTH * (2 + tiles.MAX_ENTRY_SIZE)
"""An entry bundle: 256 entries of at most 65,535 bytes, each after a 2-byte length."""

WORKERS = 4
"""Requests in flight at once."""


class PresenceSite(Protocol):
    """A site whose files can be fetched (see :class:`builder.readers.monitor.Site`).

    ``get`` is ``fetch`` that returns None when the site says there is no file at
    ``path`` (HTTP 404/410, no such file); any other failure raises a DreampoolError.
    """

    def fetch(self, path: str, limit: int) -> bytes: ...

    def get(self, path: str, limit: int) -> bytes | None: ...

    def describe(self, path: str) -> str: ...


@dataclass(frozen=True, slots=True)
class Presence:
    """What a presence check found among the dream leaves it looked at.

    ``missing`` lists (leaf index, dream id) of dreams with neither record nor
    erasure leaf; ``altered`` (leaf index, dream id, why) those with no erasure leaf
    whose record the site serves is not the logged dream (another dream, an altered
    one, a page or garbage); ``unchecked`` says, per dream, why its record could not
    be fetched.
    """

    checked: int
    present: int
    erased: int
    missing: tuple[tuple[int, str], ...]
    unchecked: tuple[str, ...]
    altered: tuple[tuple[int, str, str], ...] = ()


class OversizeError(DreampoolError):
    """The site serves a file over the size cap for its kind (a site's ``fetch`` raises
    one that is also this, so presence can tell "too big to be the record" apart)."""


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
    (:class:`builder.formats.tiles.TileHashReader`). Raises :class:`UncheckedError` (or the
    site's DreampoolError) when the leaves cannot be read or do not match the signed
    root; a record that cannot be fetched is reported in ``unchecked``.
    """
    dreams: list[tuple[int, str, bytes]] = []
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
                dreams.append((index, dream_id, leaf))
    answers = _check_records(site, dreams)
    absent = [
        (d[0], d[1]) for d, answer in zip(dreams, answers, strict=True) if answer[0] == "absent"
    ]
    unchecked = tuple(
        f"{site.describe(_record_path(d[1]))}: {answer[1]}"
        for d, answer in zip(dreams, answers, strict=True)
        if answer[0] == "unchecked"
    )
    erased = _erased_ids(site, cp, read_hash) if absent else frozenset()
    why = {d[1]: answer[1] for d, answer in zip(dreams, answers, strict=True)}
    missing = tuple(d for d in absent if d[1] not in erased and why[d[1]] == "")
    altered = tuple(
        (index, dream_id, why[dream_id])
        for index, dream_id in absent
        if dream_id not in erased and why[dream_id] != ""
    )
    return Presence(
        checked=len(dreams),
        present=sum(answer[0] == "present" for answer in answers),
        erased=sum(d[1] in erased for d in absent),
        missing=missing,
        unchecked=unchecked,
        altered=altered,
    )


def _record_path(dream_id: str) -> str:
    return f"dreams/{dream_id}/record.json"


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
    del data
    start = n * tiles.TILE_WIDTH
    return [(start + i, leaf) for i, leaf in enumerate(entries)]


def _leaf_kind(leaf: bytes, index: int) -> tuple[str, str]:
    """(kind, id) of a dream or erasure leaf; ("", "") for a key leaf. A leaf that
    docs/protocol.md §3 refuses (:func:`builder.formats.leaf.parse`) is an
    :class:`UncheckedError` naming the rule it breaks."""
    try:
        parsed = leaffmt.parse(leaf)
    except leaffmt.LeafError as exc:
        raise UncheckedError(
            f"leaf {index} is signed by the log but is no dream, key or erasure leaf of "
            f"docs/protocol.md §3: {exc.message}",
            hint="report it to the pool's operators; the site verifier names the rule",
        ) from None
    if isinstance(parsed, leaffmt.KeyLeaf):
        return "", ""
    return parsed.kind, parsed.id


_Answer = tuple[Literal["present", "absent", "unchecked"], str]


def _check_records(site: PresenceSite, dreams: Sequence[tuple[int, str, bytes]]) -> list[_Answer]:
    """For each (index, id, leaf): its record fetched and checked against the leaf.

    ("present", "") when the site serves the logged dream; ("absent", "") when the site
    says there is no such file; ("absent", why) when it serves something else there
    (another dream, an altered one, an SPA page, garbage); ("unchecked", why) when the
    record could not be fetched (timeout, HTTP 5xx, over the size cap).
    """

    def one(dream: tuple[int, str, bytes]) -> _Answer:
        index, dream_id, leaf = dream
        try:
            record = site.get(_record_path(dream_id), MAX_RECORD_SIZE)
        except OversizeError:
            # No record is that large (§1: a dream's JCS is at most 65,536 bytes).
            return "absent", f"the site serves over {MAX_RECORD_SIZE} bytes, more than any record"
        except DreampoolError as exc:
            return "unchecked", exc.message
        if record is None:
            return "absent", ""
        try:
            check_record(record, index, leaf)
        except DreampoolError as exc:
            return "absent", exc.message
        return "present", ""

    if not dreams:
        return []
    with ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="dreampool-presence") as pool:
        return list(pool.map(one, dreams))


def _erased_ids(
    site: PresenceSite, cp: Checkpoint, read_hash: Callable[[int, int], bytes]
) -> frozenset[str]:
    """The ids of every erasure leaf of the tree of ``cp``, from all its entry bundles,
    checked against its signed root.

    The bundles are read one at a time, each checked against the tiles' hash of its
    subtree and dropped: what is kept is one 32-byte hash per leaf and the erasure
    ids, so a site serving every bundle at the maximum size costs one bundle of memory.
    """
    count = -(-cp.size // tiles.TILE_WIDTH)
    tree = MerkleTree()
    erased: set[str] = set()
    malformed: UncheckedError | None = None
    for n in range(count):
        bundle = _bundle(site, cp, n)
        hashes = [leaf_hash(leaf) for _, leaf in bundle]
        start = n * tiles.TILE_WIDTH
        try:
            expected = subtree_hash_from(read_hash, start, start + len(hashes))
        except (DreampoolError, ValueError) as exc:
            raise UncheckedError(
                f"the tiles for {site.describe(_bundle_path(cp, n))}: {exc}",
                hint="the site serves garbled tiles; run again later",
            ) from None
        if MerkleTree.from_leaf_hashes(hashes).root() != expected:
            raise UncheckedError(
                f"{site.describe(_bundle_path(cp, n))} does not hash to the tiles' hash of "
                "its leaves",
                hint="the site serves entries or tiles its log did not sign; run again later",
            )
        tree.extend(hashes)
        for index, leaf in bundle:
            try:
                kind, dream_id = _leaf_kind(leaf, index)
            except UncheckedError as exc:
                malformed = malformed or exc  # said only once the leaves are proved signed
                continue
            if kind == "erasure":
                erased.add(dream_id)
        del bundle
    if tree.root() != cp.root:
        raise UncheckedError(
            f"the site's entry bundles do not hash to the signed root of size {cp.size}",
            hint="the site serves entries its log did not sign; run again later",
        )
    if malformed is not None:
        raise malformed
    return frozenset(erased)
