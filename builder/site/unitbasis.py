"""What the last build's unit keys were computed under: the store's ``unitbasis`` row.

A unit's key (:meth:`builder.site.units.Units.key`) hashes a dream's view, its
parent's and children's titles and tiers, its proof's checkpoint and that
checkpoint's note, and the site's own inputs. Computing it for every dream
was most of what a build after one new dream did with its units (8 µs a
dream, 0.8 s of CPU at 100k dreams). Most of those inputs cannot change once
a dream is logged and signed: its leaf fixes its text, index and lineage, and
the checkpoint history fixes its date and proof size. So the build records,
beside the units, what the others depended on (:class:`Basis`), and the next
build takes a stored key as it stands where it can show nothing it hashes
moved (:meth:`builder.site.units.Units.write`):

* ``size`` and ``root``: the log the keys were made from. The current log must
  hold that tree as its prefix: the same leaves, so the same dreams at the
  same indices with the same text (docs/protocol.md §3);
* ``site``: the site's title, origin, base URL and first checkpoint date;
* ``history``: each checkpoint's size and date, which the current history must
  begin with (a dream's date and proof size come from it);
* ``notes``: each checkpoint's note digest; a witness that cosigns a
  published checkpoint later changes the proofs of the dreams it first holds;
* ``erased``: the erased ids (a page names an erased parent as such);
* ``tags``: each tag's slug (two names whose short slugs meet both move to
  long ones: :func:`builder.site.model.slugs`);
* ``digest``: over the dreams the keys were made for, in log order, each
  one's id, index, tier, author slug and unit key (:func:`line`). It binds
  the row to the units section it was written with (the two are saved in
  separate transactions), and it catches what else can move under a logged
  dream: a key's tier, an author's slug, a dream that left or came back.

A row that fails to decode, or one written by other code (the store is voided
then: :func:`builder.buildcache.code_digest`), is no basis: every key is
computed. It is derived state like the rest of the store: a build without it
computes every key and writes the same bytes.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

from builder.formats.strictjson import as_int, as_list, as_str

ROW = "units"  # the section's one key

_HEX32 = re.compile(r"[0-9a-f]{32}")
_HEX64 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True, slots=True)
class Basis:
    size: int
    root: bytes  # the tree's root at ``size`` (RFC 6962 §2.1)
    site: tuple[str, str, str, str | None]
    history: tuple[tuple[int, str], ...]  # (size, date), oldest first
    notes: tuple[tuple[int, bytes], ...]  # (size, digest of the published note)
    erased: tuple[str, ...]  # sorted
    tags: tuple[tuple[str, str], ...]  # (name, slug)
    digest: bytes


def line(dream_id: str, index: int, tier: str, author_slug: str | None, key: str) -> str:
    """One dream's part of :attr:`Basis.digest`. None of these holds a tab or
    a newline (an id, a number, a tier name, a slug, 32 hex)."""
    return f"{dream_id}\t{index}\t{tier}\t{author_slug}\t{key}"


def digest(lines: list[str]) -> bytes:
    return hashlib.blake2b("\n".join(lines).encode(), digest_size=16).digest()


def encode(b: Basis) -> bytes:
    return json.dumps(
        {
            "size": b.size,
            "root": b.root.hex(),
            "site": list(b.site),
            "history": [list(h) for h in b.history],
            "notes": [[size, d.hex()] for size, d in b.notes],
            "erased": list(b.erased),
            "tags": [list(t) for t in b.tags],
            "digest": b.digest.hex(),
        },
        ensure_ascii=False,
        separators=(",", ":"),
    ).encode()


def decode(data: bytes | None) -> Basis | None:
    """The basis ``data`` holds, or None for no row or anything but what
    :func:`encode` writes (a damaged row is no basis, never an error)."""
    if data is None:
        return None
    try:
        return _decode(json.loads(data))
    except (ValueError, TypeError, KeyError, RecursionError):
        return None


def _hex(text: Any, pattern: re.Pattern[str]) -> bytes:
    if not pattern.fullmatch(as_str(text)):
        raise ValueError("not hex of the right length")
    return bytes.fromhex(text)


def _count(value: Any) -> int:
    n = as_int(value)
    if n < 0:
        raise ValueError("a negative size")
    return n


def _decode(obj: Any) -> Basis:
    if not isinstance(obj, dict) or set(obj) != {
        "size",
        "root",
        "site",
        "history",
        "notes",
        "erased",
        "tags",
        "digest",
    }:
        raise ValueError("not a basis")
    title, origin, base_url, first = as_list(obj["site"], 4)
    pairs = [as_list(h, 2) for h in as_list(obj["history"])]
    notes = [as_list(n, 2) for n in as_list(obj["notes"])]
    tags = [as_list(t, 2) for t in as_list(obj["tags"])]
    return Basis(
        size=_count(obj["size"]),
        root=_hex(obj["root"], _HEX64),
        site=(as_str(title), as_str(origin), as_str(base_url), _optional_str(first)),
        history=tuple((_count(size), as_str(date)) for size, date in pairs),
        notes=tuple((_count(size), _hex(d, _HEX32)) for size, d in notes),
        erased=tuple(as_str(i) for i in as_list(obj["erased"])),
        tags=tuple((as_str(name), as_str(slug)) for name, slug in tags),
        digest=_hex(obj["digest"], _HEX32),
    )


def _optional_str(value: Any) -> str | None:
    return None if value is None else as_str(value)
