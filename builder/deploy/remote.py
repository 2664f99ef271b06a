"""The manifest a deploy leaves in the bucket: what the prefix holds, by path.

It lives at ``PREFIX/.dreampool-deploy.json.gz`` (a dot name: a build never
makes one, and :func:`builder.deploy.local.load` refuses a site holding one).
Its wire format is gzip (RFC 1952: the digests and paths of a 10,000-dream
site take 2.6 MB as JSON, 0.9 MB gzipped, and a deploy writes it at least
twice) of JSON read by :func:`builder.formats.strictjson.loads`::

    {"format": "dreampool-deploy", "version": 1,
     "files": {"<site path>": ["<32 hex: BLAKE2b-128 of the bytes>", <size>, <rules>], ...}}

``rules`` is :data:`builder.deploy.headers.RULES_VERSION` when the object was
stored: an object stored under other header rules is uploaded again.

Anyone with write access to the bucket can change this object, so it is
untrusted input: :func:`parse` returns the entries or a reason, never raises,
and a caller treats "no manifest" and "a damaged or foreign manifest" alike,
as an empty prefix (every object is uploaded; nothing is skipped). The
manifest never lists an object the bucket does not hold: a deploy adds a
path only after its upload succeeded (:mod:`builder.deploy.push`).
"""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Mapping

from builder.formats import strictjson

NAME = ".dreampool-deploy.json.gz"
FORMAT = "dreampool-deploy"
VERSION = 1
# 100 bytes an entry covers a few million objects; a bigger one is not ours.
# The bound holds for the unzipped bytes too: a gzip bomb stops there.
MAX_BYTES = 512 * 1024 * 1024
HEX = frozenset("0123456789abcdef")

RemoteEntry = tuple[str, int, int]  # hex digest, size, header rules version


def parse(data: bytes) -> tuple[dict[str, RemoteEntry] | None, str]:
    """The manifest's entries and "", or None and why it was not used."""
    text = _gunzip(data)
    if text is None:
        return None, f"not one gzip stream of at most {MAX_BYTES} bytes"
    try:
        doc = strictjson.loads(text, max_bytes=MAX_BYTES)
    except strictjson.JSONError as exc:
        return None, f"not strict JSON ({exc})"
    if not isinstance(doc, dict) or set(doc) != {"format", "version", "files"}:
        return None, 'expected an object with exactly "format", "version" and "files"'
    if doc["format"] != FORMAT or doc["version"] != VERSION:
        return None, f'/format and /version are not "{FORMAT}" and {VERSION}'
    files = doc["files"]
    if not isinstance(files, dict):
        return None, "/files is not an object"
    out: dict[str, RemoteEntry] = {}
    for rel, entry in files.items():
        problem = _entry_problem(rel, entry)
        if problem:
            return None, f"/files entry {len(out) + 1}: {problem}"
        out[rel] = (entry[0], entry[1], entry[2])
    return out, ""


def _gunzip(data: bytes) -> bytes | None:
    """The bytes of exactly one gzip member, never more than MAX_BYTES of them."""
    z = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    try:
        out = z.decompress(data, MAX_BYTES + 1)
    except zlib.error:
        return None
    if len(out) > MAX_BYTES or z.unconsumed_tail or z.unused_data or not z.eof:
        return None
    return out


def _entry_problem(rel: str, entry: object) -> str:
    if not plain_path(rel):
        return "the path is not a plain relative path"
    if not (isinstance(entry, list) and len(entry) == 3):
        return "expected [digest, size, rules]"
    hexdigest, size, rules = entry
    if not (isinstance(hexdigest, str) and len(hexdigest) == 32 and set(hexdigest) <= HEX):
        return "the digest is not 32 lowercase hex digits"
    for value in (size, rules):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            return "size and rules must be non-negative integers"
    return ""


def plain_path(rel: str) -> bool:
    """A site path as the writer allows one (builder.site.writer.check_path),
    and not the manifest's own name."""
    return (
        bool(rel)
        and rel != NAME
        and not any(part in ("", ".", "..") for part in rel.split("/"))
        and not any(ch in rel for ch in "\\\x00\n\r")
    )


def dumps(files: Mapping[str, RemoteEntry]) -> bytes:
    body = {k: list(files[k]) for k in sorted(files)}
    doc = {"format": FORMAT, "version": VERSION, "files": body}
    text = (json.dumps(doc, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")
    return gzip.compress(text, compresslevel=6, mtime=0)
