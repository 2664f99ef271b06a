"""What one build remembers for the next: results keyed by their inputs, in
an SQLite store beside the output.

The store is ``.<out>.builds/cache/store.sqlite`` (see :mod:`builder.site.writer`),
never in ``content/``, which pull requests write. Every entry is a pure
function of its key, and the store as a whole is tagged with
:func:`code_digest` (the builder's own source, templates and result
libraries), so a stale entry can only miss, never be wrong. Deleting the
folder costs time, never correctness.

Sections (a table each, mapping a key to a value):

* ``scan``: git blob id of a dream file's bytes → (their SHA-256, the
  :class:`~builder.formats.dream.Dream` verified in them) (:mod:`builder.content.pool`).
  The dream's head (the fields list pages read) is decoded as the section is
  read, and the head alone kept; the body is read from the row again when the
  build reads it (:class:`_StoredBodies`): a build after one new dream reads
  the text of the few dreams it renders again, and holds no other's. A
  dream the build verifies has its row written as the scan goes
  (:meth:`BuildCache.kept_scan`) and is then held the same way, so a cold
  build holds no dream's text but a batch's; a forked worker handed one
  reads its text itself;
* ``commit``: (SHA-256 of a dream file, salt) → the commitment (:mod:`builder.log.logbuild`);
* ``salts``: git blob id of a salt file → (SHA-256, its text) (:mod:`builder.log.logbuild`);
* ``keys``: git blob id of a key file → (SHA-256, its parsed fields) (:mod:`builder.content.pool`);

Files are known by content (:mod:`builder.content.filekeys`), never by path, size,
time or inode: a file git vouches for unchanged is found by its blob id
without being read, any other is read and must match both digests. So a
store restored into a fresh clone (the publish workflow keeps it between
runs) hits, and a hit is always the result of the very bytes the file holds.
* ``shards``: digest of a leaf shard found canonical → True (:mod:`builder.log.logstate`);
* ``notes``: digest of a stored checkpoint and the keys that opened it → the
  checkpoint (:mod:`builder.log.logbuild`);
* ``units``: dream id → (key, digests of its files) (:mod:`builder.site.units`);
* ``fragments``: a unit's key → its four fragments (card, diary line, feed
  entry, search entry), read and written a row at a time (:class:`Rows`), never
  loaded whole: they are most of the store, and a build after one new dream
  reads only those of the list pages it renders again;
* ``pages``: path → (key, digest) of the list pages, feeds, agent digests and
  search shards that carry a key (:mod:`builder.site`);
* ``words``: dream id → its pattern keywords (:mod:`builder.site.patterns`),
  read and written by the forked process that computes the patterns;
* ``patterns``: the key of the patterns' inputs
  (:func:`builder.site.patterns.inputs_key`) → the patterns found from them, as
  :func:`builder.site.patterns.encode` writes them (and only its strict
  ``decode`` reads them): a build whose dreams, tiers and ``k`` the patterns
  read are as last time neither reads the words nor counts them again, and
  ``dreampool mcp --content`` answers ``dream_stats`` from it (one row, the
  last build's).
* ``counts``: the tier rule → the patterns' counts
  (:class:`builder.site.patterns.Counts`, as :func:`~builder.site.patterns.encode_counts`
  writes them and only its strict ``decode_counts`` reads them), with a digest
  of the dreams counted: a build whose counted dreams are the last build's and
  new ones adds the new ones' words to them, and reads no other dream's words.
* ``attested``: ``log`` → (size, root) of the longest prefix of the log that a
  build holding the log key stands behind: it lies inside a checkpoint that key
  signed, so each dream leaf of it that it does not itself erase was logged by
  a build with that key, which verified the dream in full (docs/protocol.md
  §3.1, THREATS.md T78). Only a build given the log key writes it;
  ``dreampool mcp --content`` reads it so that it need not verify those dreams'
  signatures again (T107, T117).

* ``logprefix``: a digest of the log's full leaf shards → what the proof of
  the log made of their leaves: the tree's stored hashes and what each leaf
  logs, as :mod:`builder.log.prefix` writes it (and only its strict
  ``decode`` reads it); one row, the last build's, so a build parses and
  hashes only the leaves of the last shard.
* ``unitbasis``: ``units`` → what the units section's keys were computed
  under (:mod:`builder.site.unitbasis`, as its ``encode`` writes it and only
  its strict ``decode`` reads it), so that a build takes a stored key where
  nothing it hashes can have moved and computes only the others.

**Read back as data, never as code.** A pull request can force-add any path
of the checkout, so what the build reads back is treated as hostile until
shown otherwise (THREATS.md T44, T45): values are data (JSON; a text's
UTF-8; a unit's and its fragments', length-prefixed binary records), decoded
by a strict reader per section that
accepts only the shapes the build writes (a pickle, which runs code as it
loads, was used here until a planted one ran an attacker's command with the
log key in the environment). Each row carries a
BLAKE2b digest of its key and value, checked before it is decoded, so a
damaged row reads as a miss, never as a wrong entry.

**Rows a build with the log key takes are its own.** Anyone who can write the
store can compute a digest, and the publish workflow restores the store from
a cache that code in another workflow could have written (THREATS.md T81). So
each row also carries a tag, BLAKE2b keyed with :func:`row_key` (derived from
the log key), and a build given the log key decodes only rows tagged with its
own row key: any other row is a miss. Builds without the key and the agents'
server check the digest alone. The store's file and
its folder must be plain (a symlink or a hard-linked file is removed, never
followed or written through), and :mod:`builder.site.derived` discards a store
that git tracks before this module opens it.

**Erasure leaves nothing.** ``secure_delete`` overwrites deleted rows, and
the rollback journal is removed at each commit, so an erased dream's text
leaves no file (THREATS.md T48).
"""

from __future__ import annotations

import base64
import contextlib
import functools
import hashlib
import hmac
import itertools
import json
import os
import re
import sqlite3
import stat
import struct
import sys
import threading
import unicodedata
import urllib.parse
import weakref
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, field
from importlib import metadata, resources
from pathlib import Path
from typing import Any

from builder import parallel
from builder.content import filekeys
from builder.errors import DreampoolError
from builder.files import remove_entry
from builder.formats.checkpoint import Checkpoint
from builder.formats.dream import ENTRY_TYPES, HEAD_FIELDS, Dream
from builder.formats.strictjson import as_int, as_list, as_str

STORE = "store.sqlite"
# 5: the patterns' counts, kept so that new counted dreams are added to them.
# 4: the patterns found, kept under the key of their inputs.
# 3: a unit's fragments are a section of their own, read a row at a time (Rows).
# 2: the scan, commit, salts and keys sections are keyed by content
# (builder.content.filekeys), no longer by a file's stat, so a restored store hits.
# 6: a dream in the scan section keeps its head apart from its body (_scan_out).
# 7: each row carries a second digest, keyed with the log key's row key (row_key).
# 8: the seals section (builder.site.writer: which generation a build made).
# 9: the attested section (the log prefix a build with the log key stands behind).
# 10: a text row (commit, salts) is its UTF-8, not a JSON string (_str_in).
# 11: the logprefix section (builder.log.prefix); a canonical shard's digest is 32 bytes.
# 12: the unitbasis section (builder.site.unitbasis).
# 13: the logcheck section (builder.log.checked).
FORMAT = "dreampool-store/13"

# What a stored head may hold, as sets (one C call a row, not a loop of them).
_HEAD_KEYS = frozenset(HEAD_FIELDS)
_ENTRY_TYPES = frozenset(ENTRY_TYPES)
_ENTRY_TYPE = {t: t for t in ENTRY_TYPES}  # one object per type, whichever row names it
_CONSENT_KEYS = frozenset({"share", "derivatives", "anonymize"})
_STR = frozenset({str})
_BOOL = frozenset({bool})
# The files SQLite keeps beside the database (rollback journal, WAL, shared memory).
_SIDECARS = ("-journal", "-wal", "-shm")
_DIGEST = 16
_blake2b = hashlib.blake2b
_HEX = re.compile("[0-9a-f]+")


# The distributions whose code computes what the cache keeps.
RESULT_LIBRARIES = (
    "jinja2",
    "markupsafe",
    "markdown-it-py",
    "cryptography",
    "rfc8785",
    "pyyaml",
    "jieba",
)


@functools.cache
def code_digest() -> str:
    """A digest of the builder's modules and templates, and of what else
    decides a cached result: the Python version and its Unicode tables (the
    redaction patterns' ``\\d``, case folding, NFKC) and the versions of the
    libraries that parse, verify and render. A new dreampool, an edited
    template or an upgraded library starts every cached result afresh."""
    h = hashlib.sha256()
    h.update(f"{sys.version}\0{unicodedata.unidata_version}\0".encode())
    for dist in RESULT_LIBRARIES:
        try:
            version = metadata.version(dist)
        except metadata.PackageNotFoundError:
            version = "-"
        h.update(f"{dist}={version}\0".encode())
    package = Path(__file__).parent
    for path in sorted(package.rglob("*.py")):
        h.update(str(path.relative_to(package)).encode() + b"\0" + path.read_bytes())
    templates = resources.files("builder.templates")
    stack = [templates]
    names = []
    while stack:
        node = stack.pop()
        for child in node.iterdir():
            if child.is_dir():
                stack.append(child)
            elif child.name.endswith((".html", ".css", ".js", ".xml", ".txt")):
                names.append(child)
    for child in sorted(names, key=lambda c: str(c)):
        h.update(child.name.encode() + b"\0" + child.read_bytes())
    return h.hexdigest()


# --- the strict codecs, one per section --------------------------------------
#
# Each encodes a key as text and a value as data bytes (JSON, UTF-8 text, or
# length-prefixed binary), and decodes only what it would have encoded: any
# other shape raises (ValueError, TypeError, KeyError …), and the row is a miss.


def _dump(obj: Any) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: Any) -> bytes:
    if not isinstance(text, str):
        raise TypeError("not base64 text")
    return base64.b64decode(text, validate=True)


def _blob_key(key: str) -> str:
    """A git blob id (40 lowercase hex), both ways: no other text is a key."""
    if not isinstance(key, str) or not filekeys.is_blob_id(key):
        raise ValueError("not a git blob id")
    return key


def _digested(
    value_out: Callable[[Any], bytes], value_in: Callable[[bytes], Any]
) -> tuple[Callable[[Any], bytes], Callable[[bytes], Any]]:
    """Codecs for an entry (SHA-256 of a file's bytes, value) as
    ``["<64 hex>",``, the value as ``value_out`` writes it, then ``]``
    (builder.content.filekeys): the digest's place is fixed and the value runs
    to the last byte, so any value reads back whole. The value is decoded by
    ``value_in`` alone, so no other shape reads back."""

    def out(entry: tuple[str, Any]) -> bytes:
        digest, value = entry
        if not isinstance(digest, str) or not filekeys.is_sha256(digest):
            raise ValueError("not a SHA-256")
        return b'["' + digest.encode("ascii") + b'",' + value_out(value) + b"]"

    def into(data: bytes) -> tuple[str, Any]:
        digest = data[2:66].decode("ascii")
        if data[:2] != b'["' or data[66:68] != b'",' or data[-1:] != b"]":
            raise ValueError("not an entry")
        if not filekeys.is_sha256(digest):
            raise ValueError("not a SHA-256")
        return (digest, value_in(data[68:-1]))

    return out, into


def _json(data: bytes) -> Any:
    return json.loads(data.decode("utf-8"))


def _scan_out(entry: tuple[str, Dream]) -> bytes:
    """A scan entry (SHA-256 of the file, its dream) as two lines of JSON:
    ``["<64 hex>", id, keyId, public key, head, entry types]``, then the body.
    JSON without indentation holds no newline, and :func:`_scan_in` decodes
    the first line only, leaving the body to be decoded when the build first
    reads it (:meth:`builder.formats.dream.Dream.deferred`)."""
    digest, d = entry
    if not isinstance(digest, str) or not filekeys.is_sha256(digest):
        raise ValueError("not a SHA-256")
    if not d.loaded:
        # Read from a row (its body left there); it is written again only after
        # the store was started afresh, which a build then fills as it goes:
        # reading every such body back from its file would cost more.
        raise ValueError("a dream whose body was not read")
    head = [digest, d.id, d.key_id, _b64(d.public_key), dict(d.head), list(d.entry_types)]
    return _dump(head) + b"\n" + _dump(d.body)


def _scan_in(
    data: bytes,
    bodies: tuple[_StoredBodies, str] | None = None,
    memo: dict[Any, Any] | None = None,
) -> tuple[str, Dream]:
    """A scan row as :func:`_scan_out` wrote it: its head decoded now, its body
    when the build first reads it. With ``bodies`` (where the row's body is
    read again, and the row's key: :class:`_StoredBodies`), nothing of the
    body is kept meanwhile: at 100k dreams the bodies held from the rows were
    150 MB of a no-op build's 1.08 GB, kept for the few dreams a build renders
    (issue 21: the store is the build's memory). Without it, the body is kept
    from ``data``.

    With ``memo`` (one per section read), the values many dreams share are one
    object each: an author's name and key, tag names, a consent. Entry types
    are always this module's own strings."""
    digest, dream_id, key_id, key, head, entry_types = _scan_head(data)
    if bodies is None:
        cut = data.find(b"\n")
        load = functools.partial(_body_in, data[cut + 1 :], head, entry_types, dream_id)
        if memo is not None:
            key_id, key = memo.setdefault(key_id, key_id), memo.setdefault(key, key)
            _share(head, memo)
        return digest, Dream.deferred(dream_id, key_id, key, head, entry_types, load)
    return digest, _stored_dream(bodies, (digest, dream_id, key_id, key, head, entry_types), memo)


ScanHead = tuple[str, str, str, bytes, dict[str, Any], tuple[str, ...]]


def _scan_head(data: bytes) -> ScanHead:
    """The head line of a scan row as :func:`_scan_out` wrote it, checked:
    (SHA-256 of the file, dream id, key id, public key, head, entry types).
    Any other shape raises."""
    cut = data.find(b"\n")
    if cut < 0 or not data.startswith(b"{", cut + 1) or data.find(b"\n", cut + 1) >= 0:
        raise ValueError("not a dream's head and body")
    digest, dream_id, key_id, public_key, head, types = as_list(_json(data[:cut]), 6)
    if not isinstance(digest, str) or not filekeys.is_sha256(digest):
        raise ValueError("not a SHA-256")
    if not isinstance(head, dict) or not head.keys() <= _HEAD_KEYS:
        raise TypeError("a dream's head is an object of its head fields")
    as_str(head["author"]), as_str(head["title"])
    _head_shape(head)
    # (an unhashable type, from a damaged row, raises: a miss as well)
    if not isinstance(types, list) or not set(types) <= _ENTRY_TYPES:
        raise TypeError("a dream's entry types are a list of entry types")
    key = _unb64(public_key)
    if len(key) != 32:
        raise ValueError("a public key is 32 bytes")
    dream_id, key_id = as_str(dream_id), as_str(key_id)
    return digest, dream_id, key_id, key, head, tuple(map(_ENTRY_TYPE.__getitem__, types))


# The scan section is read in two processes once its rows span this many rowids.
SCAN_SPLIT_MIN = 20_000


@dataclass(slots=True)
class _Refusals:
    """The rows a read of a section refused: their keys, and how many were
    damaged or whole but not tagged with the row key (:meth:`BuildCache._refusal`)."""

    keys: list[Any] = field(default_factory=list)
    damaged: int = 0
    untagged: int = 0

    def refuse(self, k: Any, why: str) -> None:
        """Row ``k`` refused: "untagged", or anything else ("damaged")."""
        self.keys.append(k)
        if why == "untagged":
            self.untagged += 1
        else:
            self.damaged += 1

    def add(self, other: _Refusals) -> None:
        self.keys += other.keys
        self.damaged += other.damaged
        self.untagged += other.untagged


@dataclass(frozen=True, slots=True)
class _ScanHalf:
    """The scan rows past a rowid, read and checked (:func:`_read_scan_half`):
    each row's key, its head's parts (:func:`_scan_head`), tag and public
    digest; and the rows refused."""

    rows: list[tuple[str, ScanHead, Any, Any]]  # key, head, tag, digest
    refused: _Refusals


def _read_scan_half(arg: tuple[BuildCache, int]) -> _ScanHalf:
    """The rows of ``cache``'s scan section past rowid ``split``, by the same
    rules as :meth:`BuildCache._load` (a row whose tag or shape fails is
    refused); run in a forked process beside the build's own read of the rows
    up to ``split``. Raises :class:`sqlite3.Error`, in the build's process
    then handled as its own read's."""
    cache, split = arg
    memo: dict[Any, Any] = {}  # shared values travel once through the pipe
    rows: list[tuple[str, ScanHead, Any, Any]] = []
    refused = _Refusals()
    key_in = CODECS["scan"].key_in
    with cache._connect() as db:
        for k, v, d, a in db.execute('SELECT k, v, d, a FROM "scan" WHERE rowid > ?', (split,)):
            refusal = cache._refusal(k, v, d, a)
            if refusal is not None:
                refused.refuse(k, refusal)
                continue
            try:
                key_in(k)
                parts = _scan_head(v)
            except Exception:  # any damage is a miss, never an error or a wrong entry
                refused.refuse(k, "damaged")
                continue
            digest, dream_id, key_id, key, head, entry_types = parts
            key_id, key = memo.setdefault(key_id, key_id), memo.setdefault(key, key)
            _share(head, memo)
            rows.append((k, (digest, dream_id, key_id, key, head, entry_types), a, d))
    return _ScanHalf(rows, refused)


def _stored_dream(
    bodies: tuple[_StoredBodies, str], parts: ScanHead, memo: dict[Any, Any] | None
) -> Dream:
    """The dream of a scan row whose head :func:`_scan_head` read, its body
    read again from the row ``bodies`` names when first asked for. With
    ``memo``, the values many dreams share are one object each."""
    digest, dream_id, key_id, key, head, entry_types = parts
    if memo is not None:
        key_id, key = memo.setdefault(key_id, key_id), memo.setdefault(key, key)
        _share(head, memo)
    source, k = bodies
    load = functools.partial(source.body, k, digest, head, entry_types, dream_id)
    return Dream.deferred(dream_id, key_id, key, head, entry_types, load)


def _head_shape(head: dict[str, Any]) -> None:
    """The head's tags, lineage and consent are of the shapes a verified dream's
    are (builder.formats.dream.validate), as far as the site model reads them:
    the body is checked against the head only when it is read, and a head of
    another shape listed a dream under wrong tags or stopped the build with a
    traceback in build_model (review r31). Raises, so the row is a miss."""
    tags = head.get("tags", [])
    if not isinstance(tags, list) or not set(map(type, tags)) <= _STR:
        raise TypeError("a dream's tags are a list of strings")
    lineage = head.get("lineage")
    if lineage is not None:
        if not isinstance(lineage, dict) or not set(lineage) <= {"parent", "generation"}:
            raise TypeError("a dream's lineage is an object {parent?, generation}")
        if "parent" in lineage:
            as_str(lineage["parent"])
        generation = lineage.get("generation")
        if generation is not None:
            as_int(generation)
    consent = head["consent"]
    if not isinstance(consent, dict):
        raise TypeError("a dream's consent is an object of booleans")
    flags = (consent.get(k, False) for k in _CONSENT_KEYS)
    if not set(map(type, flags)) <= _BOOL:
        raise TypeError("a dream's consent is an object of booleans")


def _entry_shape(entry: dict[str, Any]) -> bool:
    """An entry of the shape a verified dream's has, as far as pages read it."""
    return (
        isinstance(entry.get("text"), str)
        and isinstance(entry.get("confidence"), str)
        and isinstance(entry.get("source"), (str, type(None)))  # pages read .get("source")
    )


def _same_json(a: Any, b: Any) -> bool:
    """Whether two decoded JSON values are the same value: equal, and of the
    same type all through (in Python 1 == True == 1.0). Walked here, not
    compared as dumped text: two dumps were most of the cost of reading a body."""
    if type(a) is not type(b):
        return False
    if type(a) is dict:
        return bool(a.keys() == b.keys()) and all(_same_json(v, b[k]) for k, v in a.items())
    if type(a) is list:
        return len(a) == len(b) and all(_same_json(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


class StoreDamaged(DreampoolError):
    """A row of the build's store read back, whose digest held, is not what
    this code writes: only something that wrote the store itself makes one."""


def _share(head: dict[str, Any], memo: dict[Any, Any]) -> None:
    """Make the values of ``head`` that many dreams hold alike (the author's
    name, tag names, a consent) the objects ``memo`` already holds, in place."""
    head["author"] = memo.setdefault(head["author"], head["author"])
    if "tags" in head:
        head["tags"] = [memo.setdefault(t, t) for t in head["tags"]]
    consent = head["consent"]
    if consent.keys() <= _CONSENT_KEYS:  # of booleans then (_head_shape): 1 is not True
        head["consent"] = memo.setdefault(tuple(consent.items()), consent)


def _body_in(
    data: bytes, head: dict[str, Any], types: tuple[str, ...], dream_id: str
) -> dict[str, Any]:
    """A dream's body as :func:`_scan_out` stored it, when the build first reads
    it; it must hold the very head and entry types read with it."""
    try:
        body = _json(data)
    except (ValueError, RecursionError):  # arrays nested past the decoder's depth (r72)
        body = None
    return _body_checked(body, head, types, dream_id)


def _body_checked(
    body: Any, head: dict[str, Any], types: tuple[str, ...], dream_id: str
) -> dict[str, Any]:
    """``body`` if it holds the very head and entry types stored with it."""
    if (
        not isinstance(body, dict)
        # Equal as JSON, not only by ==: 1 == True and 0 == False, so a body
        # whose consent said 0 passed for the head's false (review r31).
        or not _same_json({k: body[k] for k in HEAD_FIELDS if k in body}, head)
        or not isinstance(body.get("entries"), list)
        or tuple(e.get("type") if isinstance(e, dict) else None for e in body["entries"]) != types
        # What the pages read of the text (DreamView.summary, .entries): of
        # another shape, a page that shows it stopped with a traceback (r31).
        or not isinstance(body.get("summary", ""), str)
        or not all(_entry_shape(e) for e in body["entries"])
    ):
        raise StoreDamaged(
            f"dream {dream_id}: its body in the build store does not match the head "
            "stored with it (only something that wrote the store itself makes one)",
            hint="delete the build store (the `cache` folder in the builds folder "
            "beside the site) and build again",
        )
    return body


def _commit_key(key: tuple[str, str]) -> str:
    digest, salt = key
    if not isinstance(salt, str) or not salt or " " in salt or not filekeys.is_sha256(digest):
        raise ValueError("not a (SHA-256, salt)")
    return f"{digest} {salt}"


def _commit_key_of(text: str) -> tuple[str, str]:
    digest, _, salt = text.partition(" ")
    _commit_key((digest, salt))  # refuses any other shape
    return (digest, salt)


# A text row is its UTF-8, not a JSON string: 200,000 of them at 100k dreams
# (commitments, salts), and json.loads was most of reading one. Strict both ways:
# a str UTF-8 cannot hold is not kept, and bytes that are not UTF-8 are a miss.
def _str_out(v: str) -> bytes:
    return as_str(v).encode("utf-8")


def _str_in(data: bytes) -> str:
    return data.decode("utf-8")


def _fields_out(v: dict[str, Any]) -> bytes:
    if not isinstance(v, dict) or not all(
        isinstance(k, str) and isinstance(x, str) for k, x in v.items()
    ):
        raise TypeError("key file fields are strings")
    return _dump(v)


def _fields_in(data: bytes) -> dict[str, str]:
    v = _json(data)
    if not isinstance(v, dict) or not all(isinstance(x, str) for x in v.values()):
        raise TypeError("key file fields are strings")
    return v


def _true_in(data: bytes) -> bool:
    if data != b"true":
        raise ValueError("not true")
    return True


def _checkpoint_out(cp: Checkpoint) -> bytes:
    return _dump([cp.origin, cp.size, _b64(cp.root), list(cp.extensions)])


def _checkpoint_in(data: bytes) -> Checkpoint:
    origin, size, root, extensions = as_list(_json(data), 4)
    return Checkpoint(
        as_str(origin), as_int(size), _unb64(root), tuple(map(as_str, as_list(extensions)))
    )


# A unit's row and its fragments' row are binary, not JSON (fragments are most
# of the store, and base64 in JSON doubled both its size and the time to read
# it back): big-endian lengths, then the parts they count. Data only, and every
# length checked.
#
# units: the key, the paths joined by newlines (a site path holds none:
# builder.site.writer.check_path) and the 16-byte digests of those paths'
# files, in order. fragments: the four fragments, under the unit's key.
_UNIT_HEAD = struct.Struct(">3I")
_FRAGMENTS_HEAD = struct.Struct(">4I")
_UNIT_DIGEST = 16


def _parts(head: struct.Struct, data: bytes) -> list[bytes]:
    lengths = head.unpack_from(data)
    if head.size + sum(lengths) != len(data):
        raise ValueError("a row's lengths do not add up")
    parts = []
    pos = head.size
    for n in lengths:
        parts.append(data[pos : pos + n])
        pos += n
    return parts


def _unit_out(v: tuple[str, tuple[tuple[str, bytes], ...]]) -> bytes:
    key, files = v
    _unit_key(key)
    if any(len(d) != _UNIT_DIGEST or "\n" in p for p, d in files):
        raise ValueError("not a unit")
    parts = [
        key.encode("ascii"),
        "\n".join(p for p, _ in files).encode("utf-8"),
        b"".join(d for _, d in files),
    ]
    return _UNIT_HEAD.pack(*map(len, parts)) + b"".join(parts)


def _unit_in(data: bytes) -> tuple[str, tuple[tuple[str, bytes], ...]]:
    key, paths, digests = _parts(_UNIT_HEAD, data)
    names = paths.decode("utf-8").split("\n") if paths else []
    if len(digests) != _UNIT_DIGEST * len(names):
        raise ValueError("a unit names as many files as it has digests")
    files = tuple(
        (name, digests[i * _UNIT_DIGEST : (i + 1) * _UNIT_DIGEST]) for i, name in enumerate(names)
    )
    # Only what Units.key makes: a stored key is taken as a dream's key when its
    # basis stands (builder.site.unitbasis), not only compared (review r73).
    return _unit_key(key.decode("ascii")), files


def _unit_key(key: str) -> str:
    """A unit's key (builder.site.units.Units.key): 32 lowercase hex, both ways."""
    if not isinstance(key, str) or len(key) != 32 or not _HEX.fullmatch(key):
        raise ValueError("not a unit key")
    return key


def _fragments_out(v: tuple[bytes, ...]) -> bytes:
    if len(v) != 4 or not all(isinstance(f, bytes) for f in v):
        raise ValueError("not four fragments")
    return _FRAGMENTS_HEAD.pack(*map(len, v)) + b"".join(v)


def _fragments_in(data: bytes) -> tuple[bytes, ...]:
    return tuple(_parts(_FRAGMENTS_HEAD, data))


def _page_out(v: tuple[str, bytes]) -> bytes:
    return _dump([v[0], v[1].hex()])


def _page_in(data: bytes) -> tuple[str, bytes]:
    key, digest = as_list(_json(data), 2)
    return (as_str(key), bytes.fromhex(as_str(digest)))


def _words_out(v: tuple[tuple[str, ...], tuple[tuple[str, tuple[str, ...]], ...]]) -> bytes:
    own, entries = v
    return _dump([list(own), [[t, list(ws)] for t, ws in entries]])


def _words_in(data: bytes) -> tuple[tuple[str, ...], tuple[tuple[str, tuple[str, ...]], ...]]:
    own, entries = as_list(_json(data), 2)
    return (
        tuple(sys.intern(as_str(w)) for w in as_list(own)),
        tuple(
            (as_str(t), tuple(sys.intern(as_str(w)) for w in as_list(ws)))
            for t, ws in (as_list(e, 2) for e in as_list(entries))
        ),
    )


def _sha256_key(key: str) -> str:
    """A SHA-256 (64 lowercase hex), both ways: no other text is a key."""
    if not isinstance(key, str) or not filekeys.is_sha256(key):
        raise ValueError("not a SHA-256")
    return key


def _bytes_out(v: bytes) -> bytes:
    if not isinstance(v, bytes):
        raise TypeError("not bytes")
    return v


def _bytes_in(data: bytes) -> bytes:
    return data


# A seals row (builder.site.writer.SiteWriter's seals, which sits above the
# store: tests/test_writer.py checks the two agree): a generation's name, and
# its manifest's checksum, folder inode and ctime.
_GENERATIONS = ("a", "b")
SEAL_SIZE = 32


def _generation(name: str) -> str:
    """A site generation's name, both ways."""
    if name not in _GENERATIONS:
        raise ValueError("not a generation")
    return name


def _seal_out(v: bytes) -> bytes:
    if not isinstance(v, bytes) or len(v) != SEAL_SIZE:
        raise TypeError("not a seal")
    return v


def _seal_in(data: bytes) -> bytes:
    if len(data) != SEAL_SIZE:
        raise ValueError("not a seal")
    return bytes(data)


_ATTESTED = re.compile(rb"(0|[1-9][0-9]{0,18}) ([0-9a-f]{64})")


def _log_key(name: str) -> str:
    """The one key of the attested and logcheck sections, both ways."""
    if name != "log":
        raise ValueError("not the attested or logcheck section's key")
    return name


def _attested_out(v: tuple[int, bytes]) -> bytes:
    size, root = v
    if type(size) is not int or size < 0 or not isinstance(root, bytes) or len(root) != 32:
        raise TypeError("not a (size, root)")
    return b"%d %s" % (size, root.hex().encode("ascii"))


def _attested_in(data: bytes) -> tuple[int, bytes]:
    """``<size> <root, 64 lowercase hex>``, decimal without leading zeros; nothing else."""
    m = _ATTESTED.fullmatch(data)
    if m is None:
        raise ValueError("not a (size, root)")
    return int(m[1]), bytes.fromhex(m[2].decode("ascii"))


def _units_key(name: str) -> str:
    """The unitbasis section's one key, both ways."""
    if name != "units":
        raise ValueError("not the unitbasis section's key")
    return name


def _tier(name: str) -> str:
    """A tier rule's name (builder.site.patterns.MIN_TIER's kind), both ways."""
    if name not in ("guest", "member", "maintainer"):
        raise ValueError("not a tier")
    return name


def _same(text: str) -> str:
    return as_str(text)


@dataclass(frozen=True, slots=True)
class Codec:
    key_out: Callable[[Any], str]
    key_in: Callable[[str], Any]
    value_out: Callable[[Any], bytes]
    value_in: Callable[[bytes], Any]


CODECS: dict[str, Codec] = {
    "scan": Codec(_blob_key, _blob_key, _scan_out, _scan_in),
    "commit": Codec(_commit_key, _commit_key_of, _str_out, _str_in),
    "salts": Codec(_blob_key, _blob_key, *_digested(_str_out, _str_in)),
    "keys": Codec(_blob_key, _blob_key, *_digested(_fields_out, _fields_in)),
    "shards": Codec(bytes.hex, bytes.fromhex, lambda v: b"true", _true_in),
    "notes": Codec(bytes.hex, bytes.fromhex, _checkpoint_out, _checkpoint_in),
    "units": Codec(_same, _same, _unit_out, _unit_in),
    "fragments": Codec(_unit_key, _unit_key, _fragments_out, _fragments_in),
    "pages": Codec(_same, _same, _page_out, _page_in),
    "words": Codec(_same, _same, _words_out, _words_in),
    "patterns": Codec(_sha256_key, _sha256_key, _bytes_out, _bytes_in),
    "counts": Codec(_tier, _tier, _bytes_out, _bytes_in),
    "seals": Codec(_generation, _generation, _seal_out, _seal_in),
    "attested": Codec(_log_key, _log_key, _attested_out, _attested_in),
    "logprefix": Codec(_sha256_key, _sha256_key, _bytes_out, _bytes_in),
    "unitbasis": Codec(_units_key, _units_key, _bytes_out, _bytes_in),
    # What the last build checked of the logged dreams' files (builder.log.checked).
    "logcheck": Codec(_log_key, _log_key, _bytes_out, _bytes_in),
}


def _table_sql(name: str) -> str:
    # A rowid table, not WITHOUT ROWID: SQLite stores a WITHOUT ROWID
    # row whole in its B-tree, and rows of kilobytes (dreams,
    # fragments) then filled half the file with overflow pages. Measured
    # at 10k dreams: the file 121 MB against 55, and a fragment read
    # by key 39 µs against 8.
    # d: the row's digest, which anyone can compute (damage); a: its tag under
    # the row key (row_key), NULL when a build without the log key wrote it.
    return f'CREATE TABLE "{name}" (k TEXT PRIMARY KEY, v BLOB NOT NULL, d BLOB NOT NULL, a BLOB)'


def _row_digest(k: str, v: bytes, key: bytes = b"") -> bytes:
    """BLAKE2b of the key's length (8 bytes, big-endian), the key and the value;
    keyed with ``key`` (BLAKE2b's own keyed mode, RFC 7693 §2.5: a MAC) when
    one is given. One call on the joined bytes: a build reads tens of
    thousands of rows, and three updates cost twice as much as the copy."""
    kb = k.encode()
    return _blake2b(len(kb).to_bytes(8, "big") + kb + v, digest_size=_DIGEST, key=key).digest()


ROW_KEY_LABEL = b"dreampool build store rows v1"


def row_key(seed: bytes) -> bytes:
    """The key a build that holds the log key tags its store's rows with:
    HMAC-SHA256 (RFC 2104, as a pseudorandom function) of
    :data:`ROW_KEY_LABEL` under the log key's 32-byte Ed25519 seed. Only a
    holder of the log key can compute it, and from it nothing about the seed
    follows. THREATS.md T81: the publish workflow restores the store from
    GitHub's cache, which code running in another workflow on main could
    have written; such a row carries no valid tag, and a build with the log
    key takes it for a miss."""
    return hmac.new(seed, ROW_KEY_LABEL, hashlib.sha256).digest()


def _code_key(key: bytes) -> bytes:
    """The key rows are tagged with: HMAC-SHA256 of the store's format and
    :func:`code_digest` under the row key. The meta row naming the code that
    made the store carries no tag, and rows of another code are a miss only
    because that row says so: a signing build of an older dreampool tagged its
    rows with the same row key, and with the meta row set to this code's
    (public) digest they were all taken, units and fragments an older renderer
    made among them (THREATS.md T81, review r32)."""
    return hmac.new(key, f"{FORMAT}\0{code_digest()}".encode(), hashlib.sha256).digest()


# --- the store ---------------------------------------------------------------


class BuildCache:
    """The store; each section is read as a dict when first used and written
    back by :meth:`save` (only the rows that changed) if it was used.

    No connection is held between calls: the build forks workers, and an
    SQLite connection must never cross a fork. ``notes`` collects one line
    per thing the store had to discard (damage, a link it did not make), for
    the build to report.
    """

    SECTIONS = tuple(CODECS)
    # Whether a scan row's body is read from the store again when asked for
    # (_StoredBodies), rather than kept from the row as the section is read.
    REREAD = True

    def __init__(self, folder: Path | None, *, key: bytes | None = None) -> None:
        self.folder = folder
        # The row key (row_key) of the build's log key, or None: see _sound;
        # bound to this code (_code_key).
        self._key = None if key is None else _code_key(key)
        self.sections: dict[str, dict[Any, Any]] = {}
        # per loaded section: a shallow copy as read (save() compares values by
        # identity: entries are immutable and reused, never edited in place)
        self._loaded: dict[str, dict[Any, Any]] = {}
        self.notes: list[str] = []
        self._ready = False
        # Rows sections whose Rows.retain could not delete: name -> the keys to keep.
        self._retain: dict[str, set[str]] = {}
        # per loaded section: the keys of the rows _load refused (damaged, or not
        # tagged with this build's row key), which _save deletes. Never loaded,
        # such a row was never deleted either: with row tags, the rows a build
        # without the log key wrote outlived every signing build, an erased
        # dream's text among them (T48, review r32).
        self._refused: dict[str, list[Any]] = {}
        # ``dream_files(id, sha256)``: the body of the dream file ``<id>.json`` if
        # its bytes have that SHA-256, else None. Where a scan row's body is
        # found if the row cannot be read again (_StoredBodies); set by whoever
        # knows the pool (builder.content.pool.dream_body).
        self.dream_files: Callable[[str, str], Any | None] | None = None
        self._bodies = _StoredBodies(self)
        # Within splitting_scan: where the scan rows split, and the process
        # forked to read those past it, until the section's read takes them.
        self._split: tuple[int, parallel.Pending[_ScanHalf]] | None = None
        self._memo: dict[Any, Any] = {}  # what many heads hold alike, one object each (_share)
        # Blob id → the digest of the scan row as this build read or wrote it,
        # the one _sound verified: its tag under the row key, else its public
        # digest. What a logcheck line names (builder.log.checked, scan_row).
        self._scan_digests: dict[str, bytes] = {}
        # With a row key, the public digest beside each of those rows too, as
        # the store holds it: what a reader without the key takes it by.
        self._scan_public: dict[str, bytes] = {}
        # The scan rows of dreams verified this build, written as they come
        # (kept_scan), and their keys: _save deletes no refused row of one.
        self._scan_rows: Rows | None = None
        # Whether a save wrote the section after its Rows failed: every entry the
        # Rows still holds is then as the section says (see save).
        self._scan_settled = False
        self._streamed: dict[str, set[str]] = {}
        # In a process forked after this cache was made (a page or unit worker,
        # the patterns' process): the notes it had then, and the first failure
        # of the store met since, which the build's process applies
        # (take_report, absorb_report). Discarding the store from there would
        # delete its files under the build, and the note would end there too.
        self._child = False
        self._notes_at = 0
        self._failure: tuple[sqlite3.Error, str] | None = None
        self._unsaved: set[str] = set()  # sections a forked process failed to save
        self._refused_at_fork: set[str] = set()
        self._discarded = False
        self._token = next(_TOKENS)
        _CACHES[self._token] = self

    def _forked(self) -> None:
        self._child = True
        self._notes_at = len(self.notes)
        self._failure = None
        self._unsaved = set()
        # The parent's deletions still to make are the parent's: sent back
        # (take_report), or applied by a save here, they could delete rows
        # it wrote after the fork (review r48).
        self._retain = {}
        # Rows the parent refused as read are the parent's to delete (its own
        # _refused): reported from here, they would carry its keys as at the fork.
        self._refused_at_fork = {n for n, keys in self._refused.items() if keys}

    def take_report(self) -> StoreReport:
        """What this forked process found wrong with the store since it last
        asked: the notes it added; the failure it met (the store left as it
        was: the first, or the first that was not a busy store's); and, if it
        could not write, the rows to keep of each section it changed (or
        that holds rows refused as read) and could not save, and of each
        Rows it could not prune, so that the build's process deletes the
        others (:meth:`absorb_report`); those deletions are then the build's
        process's, never sent again.
        In the process that made the cache, nothing: it notes and applies
        as it goes."""
        if not self._child:
            return NOTHING_REPORTED
        retain = dict(self._retain) if self._failure is not None else {}
        for name in self._unsaved if self._failure is not None else ():
            # Only the rows that hold what it meant to write: an old row it
            # meant to replace or delete may hold an erased dream's text
            # (T48), and one refused as read (never in _loaded) was planted
            # or damaged (T81).
            codec, loaded, gone = CODECS[name], self._loaded.get(name, {}), object()
            kept = {
                codec.key_out(k) for k, v in self.sections[name].items() if loaded.get(k, gone) == v
            }
            retain[name] = retain[name] & kept if name in retain else kept
        report = StoreReport(
            tuple(self.notes[self._notes_at :]),
            self._failure,
            tuple((name, frozenset(keys)) for name, keys in sorted(retain.items())),
        )
        self._notes_at = len(self.notes)
        if self._failure is not None:
            self._retain = {}  # the build's process's to apply now (absorb_report)
        self._failure = None
        self._unsaved = set()
        return report

    def absorb_report(self, report: StoreReport) -> None:
        """Add a forked process's notes (each once); keep only the rows it
        says to keep of the sections it could not write (deleted by the next
        :meth:`save`, before any section, as after a :meth:`Rows.retain` that
        failed here); and apply its failure, as :meth:`_damaged` does, unless
        this build already discarded the store."""
        for note in report.notes:
            if note not in self.notes:
                self.notes.append(note)
        for name, keys in report.retain:
            self._retain[name] = self._retain[name] & keys if name in self._retain else set(keys)
        if report.failure is not None and not self._discarded:
            self._damaged(*report.failure)

    def kept_scan(self, blob: str, entry: tuple[str, Dream]) -> tuple[str, Dream]:
        """A dream the scan just verified, as the scan section will hold it
        (``blob`` → ``entry``): its row written now, a batch at a time
        (:class:`Rows`), and the entry given back holding the dream's head, its
        body read again when asked for (:class:`_StoredBodies`), as if the
        section had been read. A cold build then holds no dream's text beyond
        the batch: at 100k dreams every body was in memory until the build's
        end. :meth:`save` writes no row for it again. Without a store the
        entry is given back as it is."""
        if self.folder is None or (self._scan_rows is not None and self._scan_rows.failed):
            return entry  # (a store that failed: save() writes it, if it can)
        if self._scan_rows is None:
            self["scan"]  # read first: save() compares with the section as read
            self._scan_rows = Rows(self, "scan")
        self._scan_rows.put(blob, entry)
        self._streamed.setdefault("scan", set()).add(CODECS["scan"].key_out(blob))
        digest, d = entry
        head, types = dict(d.head), d.entry_types
        _share(head, self._memo)
        key_id, key = (
            self._memo.setdefault(d.key_id, d.key_id),
            self._memo.setdefault(d.public_key, d.public_key),
        )
        load = functools.partial(self._bodies.body, blob, digest, head, types, d.id)
        kept = (digest, Dream.deferred(d.id, key_id, key, head, types, load))
        self._loaded["scan"][blob] = kept
        return kept

    def _sound(self, k: Any, v: Any, d: Any, a: Any) -> bool:
        """Whether a row read back may be decoded. With a row key (a build that
        holds the log key), only if its tag ``a`` is that key's over the key
        and value: a row written by anything else is a miss, whether it was
        damaged or planted (T81). Without one (a build that signs nothing,
        ``dreampool mcp`` reading the store), if its digest ``d`` matches: a
        damaged row is a miss."""
        if not isinstance(k, str) or not isinstance(v, bytes):
            return False
        if self._key is None:
            return bool(_row_digest(k, v) == d)
        return isinstance(a, bytes) and hmac.compare_digest(_row_digest(k, v, self._key), a)

    def _refusal(self, k: Any, v: Any, d: Any, a: Any) -> str | None:
        """None for a row that may be decoded (:meth:`_sound`); else why not:
        "untagged" (:meth:`_untagged`) or "damaged"."""
        if self._sound(k, v, d, a):
            return None
        return "untagged" if self._untagged(k, v, d) else "damaged"

    def _untagged(self, k: Any, v: Any, d: Any) -> bool:
        """Whether a row :meth:`_sound` refused is whole but not tagged with
        this build's row key: written by a build without the log key (or
        with another), or planted; else it is damaged."""
        return (
            self._key is not None
            and isinstance(k, str)
            and isinstance(v, bytes)
            and _row_digest(k, v) == d
        )

    def _row(self, k: str, v: bytes) -> tuple[str, bytes, bytes, bytes | None]:
        """A row to write: its key, value, digest and (with a row key) tag."""
        return k, v, _row_digest(k, v), None if self._key is None else _row_digest(k, v, self._key)

    def __getitem__(self, name: str) -> dict[Any, Any]:
        if name not in CODECS:
            raise KeyError(name)
        if name not in self.sections:
            self.sections[name] = self._load(name)
            self._loaded[name] = dict(self.sections[name])
        return self.sections[name]

    @property
    def path(self) -> Path | None:
        return None if self.folder is None else self.folder / STORE

    # --- opening ----------------------------------------------------------

    def _prepare(self) -> None:
        """Make the folder a plain folder holding only the store: anything
        else in it (a link, a file of an older dreampool's pickle cache, its
        compiled templates) is removed, links as links. Once per build."""
        if self._ready or self.folder is None:
            return
        self._ready = True
        folder = self.folder
        if _plain(folder, stat.S_ISDIR) is False:
            remove_entry(folder)
            self.notes.append(f"{folder} was not a plain folder; removed it")
        folder.mkdir(parents=True, exist_ok=True)
        keep = {STORE, *(STORE + s for s in _SIDECARS)}
        for entry in os.scandir(folder):
            if entry.name not in keep:
                remove_entry(Path(entry.path))
            elif (
                not entry.is_file(follow_symlinks=False)
                or entry.stat(follow_symlinks=False).st_nlink != 1
            ):
                remove_entry(Path(entry.path))
                self.notes.append(f"{entry.path} was a link or not a plain file; removed it")

    @contextlib.contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        """A connection to a store of this code (a store of other code is
        emptied first), closed on leaving. Raises :class:`sqlite3.Error`; see
        :meth:`_damaged` for what the callers make of it."""
        db = self._open()
        try:
            yield db
        finally:
            db.close()

    def _open(self, *, any_thread: bool = False) -> sqlite3.Connection:
        """A new connection (see :meth:`_connect`); the caller closes it. With
        ``any_thread``, one that any thread may use (the caller serializes)."""
        self._prepare()
        assert self.path is not None
        db = sqlite3.connect(
            self.path, timeout=60, isolation_level=None, check_same_thread=not any_thread
        )
        try:
            db.execute("PRAGMA secure_delete=ON")
            # The rollback journal, removed at each commit (no file keeps a
            # deleted row), synced as SQLite's default does: a power cut
            # leaves the last committed state, never a damaged file.
            db.execute("PRAGMA journal_mode=DELETE")
            db.execute("PRAGMA synchronous=FULL")
            self._ensure_schema(db)
        except BaseException:
            db.close()
            raise
        return db

    def rows(self, name: str) -> Rows:
        """Section ``name`` read and written a row at a time (:class:`Rows`),
        never as a whole dict: for a section too large to hold in memory."""
        if name not in CODECS:
            raise KeyError(name)
        return Rows(self, name)

    def _damaged(self, exc: sqlite3.Error, doing: str) -> None:
        """A store that fails is started afresh, which costs time only; one
        that is only busy (another process holds it past the timeout) is
        left as it is and this build does without it."""
        if self._child:  # the build's process applies it (take_report)
            if self._failure is None or (_busy(self._failure[0]) and not _busy(exc)):
                self._failure = (exc, doing)
            return
        if _busy(exc):
            note = f"the build store {self.path} was busy; {doing} without it"
            if note not in self.notes:
                self.notes.append(note)
            return
        self._discard(f"could not be {doing.split()[0]} ({exc})")

    def _discard(self, why: str) -> None:
        assert self.path is not None
        for suffix in ("", *_SIDECARS):
            remove_entry(Path(str(self.path) + suffix))
        for name in self.sections:  # what this build saves next starts a new file
            self._loaded[name] = {}
        self._refused.clear()
        self._scan_digests.clear()
        self._scan_public.clear()
        # No section read row by row reads it again this build (each would
        # fail to open it, and discard the new one): their rows stay in memory.
        for rows in list(_ALL):
            if rows._cache is self:
                rows._stop()
        self._discarded = True
        self.notes.append(f"the build store {self.path} {why}; started it afresh")

    def _ensure_schema(self, db: sqlite3.Connection) -> None:
        db.execute("CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)")
        if _of_this_code(db):
            return
        db.execute("BEGIN IMMEDIATE")
        for name in CODECS:
            db.execute(f'DROP TABLE IF EXISTS "{name}"')
            db.execute(_table_sql(name))
        db.execute("DELETE FROM meta")
        db.executemany(
            "INSERT INTO meta VALUES (?, ?)", [("format", FORMAT), ("code", code_digest())]
        )
        db.execute("COMMIT")

    # --- reading and writing ---------------------------------------------

    def _load(self, name: str) -> dict[Any, Any]:
        if self.folder is None:
            return {}
        key_in, value_in = CODECS[name].key_in, CODECS[name].value_in
        section: dict[Any, Any] = {}
        refused = _Refusals()
        self._refused[name] = refused.keys
        # A dream's body is read from its row again when first asked for (by
        # the build: a StoreReader keeps them, see there).
        bodies = self._bodies if name == "scan" and self.REREAD else None
        scan, digests, public = name == "scan", self._scan_digests, self._scan_public
        keyed = self._key is not None
        try:
            # The scan rows past ``split``, if splitting_scan forked a process
            # for them, are read there meanwhile.
            split, other = (None, None)
            if bodies is not None and self._split is not None:
                (split, other), self._split = self._split, None
            with self._connect() as db:
                # Row by row, never all rows at once: at 10k dreams the scan
                # section's values alone are 16 MB, which the process would
                # keep (freed, but not given back) for the rest of the build.
                query = f'SELECT k, v, d, a FROM "{name}"'
                rows = (
                    db.execute(query)
                    if split is None
                    else db.execute(query + " WHERE rowid <= ?", (split,))
                )
                for k, v, d, a in rows:
                    refusal = self._refusal(k, v, d, a)
                    if refusal is not None:
                        refused.refuse(k, refusal)
                        continue
                    try:
                        if bodies is None:
                            section[key_in(k)] = value_in(v)
                        else:
                            section[key_in(k)] = _scan_in(v, (bodies, k), self._memo)
                    except Exception:  # any damage is a miss, never an error or a wrong entry
                        refused.refuse(k, "damaged")
                        continue
                    if scan:  # the one _sound verified (review r76: d is not, under a key)
                        digests[k] = a if keyed else d
                        if keyed:
                            public[k] = d
            if other is not None and split is not None:
                half = self._scan_half_taken(other, split)
                for k, parts, a, d in half.rows:
                    assert bodies is not None
                    section[key_in(k)] = (
                        parts[0],
                        _stored_dream((bodies, k), parts, self._memo),
                    )
                    digests[k] = a if keyed else d
                    if keyed:
                        public[k] = d
                refused.add(half.refused)
        except sqlite3.Error as exc:
            self._damaged(exc, "read this build")
            return {}
        if refused.damaged:
            self.notes.append(
                f"the build store's {name} had {refused.damaged} damaged row(s); ignored"
            )
        if refused.untagged:
            self.notes.append(untagged_note(name, refused.untagged))
        return section

    @contextlib.contextmanager
    def splitting_scan(self, initializer: Callable[[], None] | None = None) -> Iterator[None]:
        """Within it, the build's first read of the scan section is shared with
        a process forked as it is entered (:func:`_read_scan_half`: the rows
        past the middle rowid), so before any thread the caller starts inside
        it (a fork copies a thread's locks and descriptors, never the thread:
        review r81); ``initializer`` runs first there (the build's drops its
        copy of the output's lock). Leaving ends that process if no read took
        its rows. Nothing is forked on one core, for a section whose rows
        span fewer than :data:`SCAN_SPLIT_MIN` rowids, or one already read.

        At 100k dreams the section's read was 2 s of the build's one busy
        core, of which this process now does half, and takes the other half's
        checked heads from the pipe (0.4 s)."""
        with contextlib.ExitStack() as stack:
            if self.REREAD and "scan" not in self.sections:
                self._split = self._scan_split(stack, initializer)
            try:
                yield
            finally:
                self._split = None

    def _scan_split(
        self, stack: contextlib.ExitStack, initializer: Callable[[], None] | None
    ) -> tuple[int, parallel.Pending[_ScanHalf]] | None:
        """The rowid past which a process forked now reads the scan rows, and
        its result, entered on ``stack``; None to read every row here."""
        if self.folder is None or parallel.workers() < 2:
            return None
        try:
            with self._connect() as db:
                low, high = db.execute('SELECT min(rowid), max(rowid) FROM "scan"').fetchone()
        except sqlite3.Error:  # the read meets it again, and says what it makes of it
            return None
        if not isinstance(low, int) or not isinstance(high, int) or high - low < SCAN_SPLIT_MIN:
            return None
        split = (low + high) // 2
        # No process to be had, parallel reads the rows here when asked for.
        pending = parallel.background_on(
            stack, _read_scan_half, (self, split), initializer=initializer
        )
        return split, pending

    def _scan_half_taken(self, pending: parallel.Pending[_ScanHalf], split: int) -> _ScanHalf:
        """The rows past ``split`` as the forked process read them, or, if it
        failed or died, as this process reads them now."""
        try:
            return pending()
        except DreampoolError:
            return _read_scan_half((self, split))

    def save(self, *names: str) -> None:
        """Write the rows that changed in the sections used (or those named),
        each section in one transaction: a killed build leaves the old rows."""
        if self.folder is None:
            return
        put_back = False
        if self._scan_rows is not None and (not names or "scan" in names):
            self._scan_rows.flush()
            # Once a save has written the section after the failure, its entries
            # are what the section's owner left there (put back and written,
            # replaced, or deleted); putting one back again, when loaded and the
            # section agree after that save, would undo a replacement (r53).
            put_back = self._scan_rows.failed and not self._scan_settled
            if put_back:
                # Its rows put and not written: _save writes them (not streamed).
                streamed = self._streamed.get("scan", set())
                loaded, section = self._loaded["scan"], self.sections["scan"]
                for blob, entry in self._scan_rows.unwritten().items():
                    streamed.discard(CODECS["scan"].key_out(blob))
                    held, kept = section.get(blob), loaded.get(blob)
                    if held is None or held is entry:
                        continue  # gone (its row deleted if loaded), or put back already
                    if held is kept or (
                        kept is None  # the store started afresh (_discard)
                        and not held[1].loaded
                        and held[0] == entry[0]
                        and held[1].id == entry[1].id
                    ):
                        # Not popped from loaded: a save that finds the store
                        # busy writes nothing, and an entry that then leaves
                        # must still delete the row loaded names (r52, T48).
                        # The put-back entry is not the kept one, so it is
                        # written as changed.
                        section[blob] = entry  # its body, to write
        todo = [n for n in (names or tuple(self.sections)) if n in self.sections]
        if not todo and not self._retain:
            return
        saved: list[str] = []
        try:
            with self._connect() as db:
                # Before any section: a build that cannot delete what a Rows
                # section no longer names leaves the last build's rows whole.
                for name, wanted in self._retain.items():
                    _delete_except(db, name, wanted)
                self._retain.clear()
                for name in todo:
                    self._save(db, name)
                    saved.append(name)
                    if name == "scan" and put_back:
                        self._scan_settled = True
        except sqlite3.Error as exc:
            if self._child:  # reported with the rows to keep (take_report)
                self._unsaved.update(
                    n
                    for n in todo
                    if n not in saved
                    and (
                        self._changed(n)
                        or (self._refused.get(n) and n not in self._refused_at_fork)
                    )
                )
            self._damaged(exc, "written this build")

    @property
    def tagged(self) -> bool:
        """Whether this build tags its rows and takes only tagged ones (it
        holds the log key's row key): :meth:`scan_row` names rows by tag."""
        return self._key is not None

    def scan_row(self, blob: str) -> bytes | None:
        """The digest of the scan row under ``blob`` as this build read it
        from the store or wrote it there (builder.log.checked), the one a
        row is taken by: its tag under the row key (a build with the log
        key), else its public digest; None if it did neither. Never the
        public digest beside a tagged row, which no check covers: anyone
        who can write the store could set it to name another row (review
        r76)."""
        return self._scan_digests.get(blob)

    def scan_row_public(self, blob: str) -> bytes | None:
        """The public digest of the scan row under ``blob`` as the store holds
        it (:meth:`scan_row` without a row key): what a reader without the key
        (``dreampool mcp --content``) takes the row by and checks itself."""
        if self._key is None:
            return self._scan_digests.get(blob)
        return self._scan_public.get(blob)

    def _wrote_scan(
        self, rows: list[tuple[str, bytes, bytes, bytes | None]], gone: list[str]
    ) -> None:
        """Note the digests of the scan rows just committed (as :meth:`scan_row`
        names them), and the rows deleted."""
        digests, public = self._scan_digests, self._scan_public
        for k, _v, d, a in rows:
            digests[k] = d if a is None else a
            if a is not None:
                public[k] = d
        for k in gone:
            digests.pop(k, None)
            public.pop(k, None)

    def _changed(self, name: str) -> bool:
        """Whether section ``name`` differs from the store as read (by identity,
        as :meth:`_save` decides what to write)."""
        loaded, section = self._loaded.get(name, {}), self.sections[name]
        if loaded.keys() != section.keys():
            return True
        return any(loaded[k] is not v for k, v in section.items())

    def _save(self, db: sqlite3.Connection, name: str) -> None:
        codec = CODECS[name]
        section = self.sections[name]
        loaded = self._loaded.get(name, {})
        missing = object()
        upsert = []
        for key, value in section.items():
            if loaded.get(key, missing) is value:
                continue
            try:
                k, v = codec.key_out(key), codec.value_out(value)
            except (TypeError, ValueError):
                continue  # not a shape the store keeps: the entry is computed again
            upsert.append(self._row(k, v))
        deleted = [(codec.key_out(k),) for k in loaded if k not in section]
        # Rows refused as read go too (those still wanted are written again below).
        written = {row[0] for row in upsert} | self._streamed.get(name, set())
        deleted += [(k,) for k in self._refused.get(name, ()) if k not in written]
        if upsert or deleted:
            db.execute("BEGIN IMMEDIATE")
            db.executemany(f'DELETE FROM "{name}" WHERE k = ?', deleted)
            db.executemany(f'INSERT OR REPLACE INTO "{name}" VALUES (?, ?, ?, ?)', upsert)
            db.execute("COMMIT")
            if name == "scan":
                self._wrote_scan(upsert, [k for (k,) in deleted])
        self._streamed.pop(name, None)
        self._refused.pop(name, None)
        self._loaded[name] = dict(section)


def _of_this_code(db: sqlite3.Connection) -> bool:
    """Whether the store was made by this code: its format and code digest,
    and every section's table as this code makes it. The tables too, not only
    the meta row: a section of another shape (columns in another order, say)
    would read every row as damaged and be written back the same way, build
    after build."""
    tables = dict(db.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'"))
    if "meta" not in tables:
        return False
    meta = dict(db.execute("SELECT name, value FROM meta").fetchall())
    return meta == {"format": FORMAT, "code": code_digest()} and all(
        tables.get(name) == _table_sql(name) for name in CODECS
    )


class StoreReader(BuildCache):
    """The store as a process other than the build reads it: never changed.

    ``dreampool mcp --content`` reads the sections of the build beside the
    checkout (:func:`builder.site.derived.store_to_read` says whether it may),
    so that it need not verify, commit and find the keywords of every dream
    again. The rules are the build's (module doc): a row whose digest fails
    is a miss, a file that is a link or not plain is not opened. A store
    that is missing, of other code or another shape, busy or damaged reads
    as empty, so every lookup misses and the caller computes; unlike the
    build, the reader removes, remakes and writes nothing, not even a
    damaged store, which is the build's to replace.

    A dream's body is kept from its row as the section is read, not read
    again when asked for as the build does (:data:`BuildCache.REREAD`): the
    store file is checked once as it is opened (no link, no second name, not
    in WAL mode), and a server may ask for a body hours later, when the file
    may be another (review r39)."""

    REREAD = False

    def _load(self, name: str) -> dict[Any, Any]:
        self._prepare()
        return super()._load(name)

    def readable(self) -> bool:
        """Whether the store can be read: there, plain, of this code and not busy
        (opened once to see; a caller then need not look a row up in vain)."""
        self._prepare()
        if self.folder is None:
            return False
        try:
            with self._connect():
                return True
        except sqlite3.Error as exc:
            self._damaged(exc, "read")
            return False

    def _prepare(self) -> None:
        if self._ready or self.folder is None:
            return
        self._ready = True
        path = self.folder / STORE
        st: os.stat_result | None = None
        plain: bool | None = None
        try:
            st = os.lstat(path)
            plain = _plain(self.folder, stat.S_ISDIR)
        except OSError:
            st = None
        if not plain or st is None or not stat.S_ISREG(st.st_mode):
            self.folder = None  # nothing to read (or a link): every section is empty
        elif st.st_nlink != 1:
            self.notes.append(f"{path} is hard-linked, not the build's own file; not read")
            self.folder = None
        elif _in_wal_mode(path):
            # SQLite, even with mode=ro, would create -wal and -shm beside it.
            self.notes.append(f"{path} is in WAL mode, which the build never sets; not read")
            self.folder = None

    def _open(self, *, any_thread: bool = False) -> sqlite3.Connection:
        assert self.path is not None
        # Read-only: SQLite opens no journal of its own and refuses any write.
        uri = f"file:{urllib.parse.quote(str(self.path))}?mode=ro"
        db = sqlite3.connect(
            uri, uri=True, timeout=5, isolation_level=None, check_same_thread=not any_thread
        )
        try:
            if not _of_this_code(db):
                raise sqlite3.DatabaseError("it was made by another version of dreampool")
        except BaseException:
            db.close()
            raise
        return db

    def _damaged(self, exc: sqlite3.Error, doing: str) -> None:
        self.notes.append(f"the build store {self.path} was not read ({exc}); did without it")
        self.folder = None  # one note, and no other section tried

    def save(self, *names: str) -> None:
        raise TypeError("a StoreReader never writes the build's store")

    def rows(self, name: str) -> Rows:
        raise TypeError("a StoreReader reads whole sections only")


def untagged_note(name: str, count: int) -> str:
    """The note for ``count`` rows of section ``name`` not tagged with the log key
    (:func:`merged_notes` says them once, for every section)."""
    return f"the build store's {name} had {count} row(s) not tagged with this log key; ignored"


_UNTAGGED = re.compile(
    r"the build store's (\S+) had (\d+) row\(s\) not tagged with this log key; ignored"
)


def merged_notes(notes: Sequence[str]) -> list[str]:
    """``notes`` with the store's rows not tagged with the log key, one note
    a section, said once, and what they most likely are: a build without
    the key (a local preview) writes rows a build with it does not trust
    (THREATS.md T81), and said so in three lines that read like an alarm in
    ordinary use (a new user's audit, 23rd session)."""
    kept: list[str] = []
    untagged: list[str] = []
    for n in notes:
        m = _UNTAGGED.fullmatch(n)
        if m is None:
            kept.append(n)
        else:
            untagged.append(f"{m[1]} {m[2]}")
    if untagged:
        kept.append(
            "the build store held rows not tagged with this log key ("
            + ", ".join(untagged)
            + "): most likely written by a build without the key, else by another hand "
            "(THREATS.md T81); not trusted, and written again"
        )
    return kept


def _in_wal_mode(path: Path) -> bool:
    """Whether the database header of ``path`` says WAL (its read and write
    versions, bytes 18 and 19, are 2; the build's stores are 1, journal_mode
    DELETE): a reader opening it, read-only or not, makes the -wal and -shm
    files. A file it cannot read, or shorter than a header, is left for SQLite
    to judge (it then fails, or reads an empty database, and makes no file)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return False
    try:
        head = os.read(fd, 100)
    except OSError:
        return False
    finally:
        os.close(fd)
    return len(head) == 100 and 2 in head[18:20]


def _delete_except(db: sqlite3.Connection, name: str, wanted: Collection[str]) -> None:
    """Delete every row of section ``name`` whose key is not in ``wanted``."""
    stale = [(k,) for (k,) in db.execute(f'SELECT k FROM "{name}"') if k not in wanted]
    if stale:
        db.execute("BEGIN IMMEDIATE")
        db.executemany(f'DELETE FROM "{name}" WHERE k = ?', stale)
        db.execute("COMMIT")


# Every Rows with a reading connection open: closed before any fork
# (os.register_at_fork below), so no SQLite connection is ever copied into a
# child, whichever code forks (the patterns' keyword workers above
# BACKGROUND_PATTERNS_LIMIT fork while list pages are being rendered).
_OPEN: weakref.WeakSet[Rows] = weakref.WeakSet()
# Every Rows: in a process forked after it was made, each starts its findings
# afresh and keeps a failure of the store to report (Rows._forked).
_ALL: weakref.WeakSet[Rows] = weakref.WeakSet()


def _close_before_fork() -> None:
    for rows in list(_OPEN):
        rows.close()


# Every BuildCache, likewise (BuildCache._forked), by token: what a forked
# process reports comes back to the cache it was found in (_take_reports).
_CACHES: weakref.WeakValueDictionary[int, BuildCache] = weakref.WeakValueDictionary()


def _in_child() -> None:
    for rows in list(_ALL):
        rows._forked()
    for cache in list(_CACHES.values()):
        cache._forked()


def _take_reports() -> list[tuple[int, StoreReport]]:
    """In a forked worker, with each batch of its results (builder.parallel)."""
    found = [(token, cache.take_report()) for token, cache in list(_CACHES.items())]
    return [(token, report) for token, report in found if report != NOTHING_REPORTED]


def _absorb_reports(reports: list[tuple[int, StoreReport]]) -> None:
    for token, report in reports:
        cache = _CACHES.get(token)
        if cache is not None:
            cache.absorb_report(report)


parallel.report_back(_take_reports, _absorb_reports)


def _busy(exc: sqlite3.Error) -> bool:
    """Whether ``exc`` says another process holds the store (past the timeout)."""
    return isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc)


os.register_at_fork(before=_close_before_fork, after_in_child=_in_child)


class _StoredBodies:
    """Where the body of a dream read from the scan section is found when the
    build first asks for it (:func:`_scan_in` keeps none): its row, read
    again by key and checked as :meth:`BuildCache._load` checks a row (its
    digest, or its tag with a row key); or, if that row no longer holds, is
    gone or the store cannot be read (busy, damaged: the store only ever
    saves time), the dream's own file through :attr:`BuildCache.dream_files`,
    taken only if its bytes are those the row was made from (their SHA-256).
    Either body must hold the head and entry types read with it.

    One connection, opened on the first read, used under a lock by whichever
    thread asks, and closed before any fork with the lock held until the fork
    is done (:func:`_bodies_before_fork`): no connection crosses a fork, and
    a forked worker opens its own. A read that fails leaves the store alone
    (the section it came from decides about the store) and says so once."""

    def __init__(self, cache: BuildCache) -> None:
        self._cache = cache
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        self._failed = False
        self._token = next(_TOKENS)
        _BODIES[self._token] = self

    def __reduce__(self) -> tuple[Callable[[int], _StoredBodies], tuple[int]]:
        # A deferred dream handed to a forked worker (pickled: builder.parallel)
        # names this by token: the worker has its own copy, and reads the store
        # itself (its connection is its own: _bodies_before_fork).
        return (_bodies_of, (self._token,))

    def body(
        self, k: str, digest: str, head: dict[str, Any], types: tuple[str, ...], dream_id: str
    ) -> dict[str, Any]:
        writing = self._cache._scan_rows
        pending = None if writing is None else writing.pending(k)
        if pending is not None:  # verified by this build, its row not yet written
            return _body_checked(pending[1].body, head, types, dream_id)
        v = self._row(k)
        if v is not None:
            return _body_in(v[v.find(b"\n") + 1 :], head, types, dream_id)
        files = self._cache.dream_files
        found = None if files is None else files(dream_id, digest)
        if found is None:
            raise StoreDamaged(
                f"dream {dream_id}: its row in the build store (read or written by this "
                "build) no longer holds, and no file of the same bytes is there now "
                "that its text is read",
                hint="build again (a dream file that changed while the build ran is "
                "read afresh then)",
            )
        return _body_checked(found, head, types, dream_id)

    def _row(self, k: str) -> bytes | None:
        """The value of scan row ``k`` if it is there and sound, else None."""
        with self._lock:
            if self._failed or self._cache.folder is None:
                return None
            try:
                if self._db is None:
                    self._db = self._cache._open(any_thread=True)
                row = self._db.execute('SELECT v, d, a FROM "scan" WHERE k = ?', (k,)).fetchone()
            except sqlite3.Error as exc:
                self._failed = True
                self._close()
                self._cache.notes.append(
                    f"the build store {self._cache.path} could not be read again ({exc}); "
                    "dreams' texts were read from their files"
                )
                return None
        if row is None or not self._cache._sound(k, *row):
            return None
        v: bytes = row[0]
        return v

    def _close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    def close(self) -> None:
        """Close the connection (the next read opens another)."""
        with self._lock:
            self._close()


# Every _StoredBodies, by token: each closes its connection before a fork, and
# holds its lock until the fork is done, so no thread opens another in between.
_BODIES: weakref.WeakValueDictionary[int, _StoredBodies] = weakref.WeakValueDictionary()
_TOKENS = itertools.count()


def _bodies_of(token: int) -> _StoredBodies:
    """The :class:`_StoredBodies` a pickled deferred dream names: this process's
    own, inherited when it was forked (builder.parallel forks its workers)."""
    found = _BODIES.get(token)
    if found is None:
        raise ValueError("a dream's body was sent to a process that cannot read the build store")
    return found


def _bodies_before_fork() -> None:
    for bodies in list(_BODIES.values()):
        bodies._lock.acquire()
        bodies._close()


def _bodies_after_fork() -> None:
    for bodies in list(_BODIES.values()):
        if bodies._lock.locked():
            bodies._lock.release()


os.register_at_fork(
    before=_bodies_before_fork,
    after_in_parent=_bodies_after_fork,
    after_in_child=_bodies_after_fork,
)


class Rows:
    """One section of the store read and written a row at a time.

    :meth:`get` queries one key through a connection opened on the first
    read and kept until :meth:`close`, or until the process forks (an SQLite
    connection must never cross a fork: it is closed first, and the next read
    opens another). :meth:`put` buffers
    rows and writes them every :data:`FLUSH` rows, a batch per transaction, so
    what a build renders is never all in memory at once. Rows are checked and
    decoded as :meth:`BuildCache._load` does: a damaged one is a miss. Without
    a store folder, rows stay in memory (as a section would).
    """

    FLUSH = 1024
    _BATCH = 500  # keys to a query: SQLite allows 32,766 parameters, any number works

    def __init__(self, cache: BuildCache, name: str) -> None:
        self._cache = cache
        self._name = name
        self._codec = CODECS[name]
        self._pending: dict[Any, Any] = {}
        self._db: sqlite3.Connection | None = None
        self._failed = cache.folder is None
        # The keys (as stored) of rows found damaged, and of rows whole but not
        # tagged with the build's row key (T81): sets, so a row read twice, or
        # by two processes whose findings are merged (absorb), counts once.
        self.damaged_keys: set[Any] = set()
        self.untagged_keys: set[Any] = set()
        # Used by a forked process (a page worker): a failure of the store is
        # recorded for take_findings, and the build's process applies it.
        self._child = False
        self._failure: tuple[sqlite3.Error, str] | None = None
        _ALL.add(self)

    def _forked(self) -> None:
        """In a process just forked: what the parent found is the parent's to
        count (a worker returns only its own findings), and the store is the
        parent's to discard (BuildCache._discard here would delete its files
        under the build, and its note would end with this process)."""
        self._child = True
        self.damaged_keys = set()
        self.untagged_keys = set()
        self._failure = None

    def get(self, key: Any) -> Any | None:
        if key in self._pending:
            return self._pending[key]
        if self._failed:
            return None
        k = self._codec.key_out(key)
        try:
            if self._db is None:
                self._db = self._cache._open()
                _OPEN.add(self)
            row = self._db.execute(
                f'SELECT v, d, a FROM "{self._name}" WHERE k = ?', (k,)
            ).fetchone()
        except sqlite3.Error as exc:
            self._fail(exc, "read this build")
            return None
        if row is None:
            return None
        return self._decode(k, *row)

    @property
    def failed(self) -> bool:
        """Whether the store failed this section (its rows then stay in memory)."""
        return self._failed

    def pending(self, key: Any) -> Any | None:
        """The entry of ``key`` put and not yet written, if any."""
        return self._pending.get(key)

    def unwritten(self) -> dict[Any, Any]:
        """Every entry put and not yet written (all of them, once the store failed)."""
        return dict(self._pending)

    def get_many(self, keys: Collection[Any]) -> dict[Any, Any]:
        """The entries of ``keys`` that the store holds undamaged (as :meth:`get`),
        read a few hundred to a query."""
        found = {k: self._pending[k] for k in keys if k in self._pending}
        wanted = {self._codec.key_out(k): k for k in keys if k not in found}
        if self._failed or not wanted:
            return found
        names = list(wanted)
        try:
            if self._db is None:
                self._db = self._cache._open()
                _OPEN.add(self)
            for i in range(0, len(names), self._BATCH):
                batch = names[i : i + self._BATCH]
                marks = ",".join("?" * len(batch))
                query = f'SELECT k, v, d, a FROM "{self._name}" WHERE k IN ({marks})'
                for k, v, d, a in self._db.execute(query, batch):
                    value = self._decode(k, v, d, a)
                    if value is not None and k in wanted:
                        found[wanted[k]] = value
        except sqlite3.Error as exc:
            self._fail(exc, "read this build")
        return found

    @property
    def damaged(self) -> int:
        """How many distinct rows were found damaged (each a miss)."""
        return len(self.damaged_keys)

    @property
    def untagged(self) -> int:
        """How many distinct rows were whole but not tagged with the row key."""
        return len(self.untagged_keys)

    def take_findings(self) -> Findings:
        """What a forked worker found since it last asked (the keys of the
        damaged and of the untagged rows, and a failure of the store), and
        forget it: the worker returns it to the build's process for
        :meth:`absorb`. In the process that made this Rows, what it finds is
        counted, and a failure applied, as it happens: nothing to take."""
        if not self._child:
            return _NOTHING_FOUND
        found = Findings(frozenset(self.damaged_keys), frozenset(self.untagged_keys), self._failure)
        self.damaged_keys.clear()
        self.untagged_keys.clear()
        self._failure = None
        return found

    def absorb(self, findings: Findings) -> None:
        """Count what :meth:`take_findings` gave, in this process or another,
        and apply a failure of the store a worker met (once: a second
        worker of the window may have met it too)."""
        self.damaged_keys |= findings.damaged
        self.untagged_keys |= findings.untagged
        if findings.failure is not None and not self._failed:
            self._fail(*findings.failure)

    def _decode(self, k: Any, v: Any, d: Any, a: Any) -> Any | None:
        if not self._cache._sound(k, v, d, a):
            if self._cache._untagged(k, v, d):
                self.untagged_keys.add(k)
            else:
                self.damaged_keys.add(k)
            return None
        try:
            return self._codec.value_in(v)
        except Exception:  # damage is a miss, never an error or a wrong entry
            self.damaged_keys.add(k)
            return None

    def put(self, key: Any, value: Any) -> None:
        self._pending[key] = value
        if len(self._pending) >= self.FLUSH and not self._failed:
            self.flush()

    def flush(self) -> None:
        """Write the buffered rows, in one transaction."""
        if self._failed or not self._pending:
            return
        rows = []
        for key, value in self._pending.items():
            try:
                k, v = self._codec.key_out(key), self._codec.value_out(value)
            except (TypeError, ValueError):
                continue  # not a shape the store keeps: made again next time
            rows.append(self._cache._row(k, v))
        try:
            with self._cache._connect() as db:
                db.execute("BEGIN IMMEDIATE")
                db.executemany(f'INSERT OR REPLACE INTO "{self._name}" VALUES (?, ?, ?, ?)', rows)
                db.execute("COMMIT")
        except sqlite3.Error as exc:
            self._fail(exc, "written this build")
            return
        if self._name == "scan":
            self._cache._wrote_scan(rows, [])
        self._pending.clear()

    def retain(self, keys: Collection[Any]) -> None:
        """Delete every row whose key is not in ``keys`` (flushing first): what no
        current entry names leaves no row (an erased dream's text, THREATS.md T48)."""
        self.flush()
        wanted = {self._codec.key_out(k) for k in keys}
        if self._failed:
            # Busy (or started afresh) earlier in this build: the store may
            # still hold rows no entry names, an erased dream's text among
            # them. BuildCache.save deletes them with the sections it writes,
            # or writes nothing (T48).
            if self._cache.folder is not None:
                self._cache._retain[self._name] = wanted
            return
        try:
            with self._cache._connect() as db:
                _delete_except(db, self._name, wanted)
        except sqlite3.Error as exc:
            self._cache._retain[self._name] = wanted
            self._fail(exc, "written this build")

    def close(self) -> None:
        """Close the reading connection (the next :meth:`get` opens another)."""
        if self._db is not None:
            self._db.close()
            self._db = None
            _OPEN.discard(self)

    def _stop(self) -> None:
        """From here on the rows stay in memory (the store failed, or was discarded)."""
        self.close()
        self._failed = True

    def _fail(self, exc: sqlite3.Error, doing: str) -> None:
        """As :meth:`BuildCache._damaged`; from here on the rows stay in memory.
        In a forked process, recorded for :meth:`take_findings` instead."""
        self._stop()
        if self._child:
            if self._failure is None:
                self._failure = (exc, doing)
            return
        self._cache._damaged(exc, doing)


@dataclass(frozen=True, slots=True)
class Findings:
    """What a :class:`Rows` used in a forked process found (Rows.take_findings):
    the keys, as stored, of the rows found damaged and of those whole but
    not tagged with the build's row key (T81), and the first error the
    store raised there, with what it was doing, for the build's process to
    apply (Rows.absorb)."""

    damaged: frozenset[Any]
    untagged: frozenset[Any]
    failure: tuple[sqlite3.Error, str] | None = None


_NOTHING_FOUND = Findings(frozenset(), frozenset())


@dataclass(frozen=True, slots=True)
class StoreReport:
    """What a forked process found wrong with the store (BuildCache.take_report):
    the notes it added, and the error the store raised there, with what it
    was doing, for the build's process to apply (BuildCache.absorb_report)."""

    notes: tuple[str, ...] = ()
    failure: tuple[sqlite3.Error, str] | None = None
    # With a failure: per section it changed (or holding refused rows) and
    # could not write, or could not prune (Rows.retain), the keys of the rows
    # to keep.
    retain: tuple[tuple[str, frozenset[str]], ...] = ()


NOTHING_REPORTED = StoreReport()


def _plain(path: Path, kind: Callable[[int], bool]) -> bool | None:
    """Whether ``path`` is of ``kind`` and no link (None if it does not exist)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    return kind(st.st_mode)
