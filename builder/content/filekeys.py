"""Which bytes of a pool file a build store entry was computed from.

The build store (:mod:`builder.buildcache`) keeps, for dream, salt and key
files, what an earlier build made of them (a verified dream, a salt's text,
a key file's fields). It finds them by the file's *content*, never by where
or when the file sits on disk, so a store restored into a fresh clone
(another path, other inodes, other times: a CI checkout) still hits, and a
hit is only ever a result computed from the very bytes the file holds.

Each entry is stored under the git blob id of the bytes it was computed
from, with their SHA-256 beside it (:func:`of_bytes`, on the bytes just read
and checked). A file is then found in one of two ways:

* **git vouches for it** (:func:`builder.content.gitrepo.clean_blobs`: git's index
  holds it as a plain file, unmodified and unconverted in the work tree):
  its blob id names the entry and nothing is read, which is the point in a
  100k-file checkout;
* **anything else** (no git, untracked, modified, converted): its bytes are
  read, and the entry under their blob id counts only if its SHA-256 is
  theirs too.

So a file edited after checkout is seen as modified by git (a full stat
comparison, ctime included, and racily clean entries by content) and is
read and digested; should it change after git looked, the fresh result
lands under the digests of what was read, and the build uses those bytes.
Why a SHA-1 blob id is acceptable as the name of what git vouches for:
THREATS.md (the build store's content keys).

Pure functions of bytes, but :func:`load`, which asks git once per build.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from builder.content import gitrepo

_HEX40 = re.compile(r"[0-9a-f]{40}")
_HEX64 = re.compile(r"[0-9a-f]{64}")

# A file's content key: git's blob id of its bytes, and their SHA-256 (hex).
Key = tuple[str, str]


def git_blob_id(data: bytes) -> str:
    """git's object name of a blob holding ``data`` (SHA-1 of ``blob <size>\\0`` and the bytes)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


def of_bytes(data: bytes) -> Key:
    """The content key of ``data``, bytes just read from a file."""
    return git_blob_id(data), hashlib.sha256(data).hexdigest()


def is_blob_id(text: str) -> bool:
    return bool(_HEX40.fullmatch(text))


def is_sha256(text: str) -> bool:
    return bool(_HEX64.fullmatch(text))


def find(
    known: Mapping[str, tuple[str, Any]], blob: str | None, key: Key | None
) -> tuple[str, Any] | None:
    """The entry (SHA-256, value) that ``known`` (a store section: blob id →
    entry) holds for a file, or None: with ``key``, the file's bytes were
    read and the entry must match both their digests; else with ``blob``, git
    vouches that the file holds that blob, and its id alone names the entry
    (which was stored from bytes of that very blob id: :func:`of_bytes`)."""
    if key is not None:
        entry = known.get(key[0])
        return entry if entry is not None and entry[0] == key[1] else None
    return known.get(blob) if blob is not None else None


@dataclass(frozen=True, slots=True)
class FileKeys:
    """The blob ids git vouches for under ``content/``, by folder then file
    name (the pool's files sit directly in ``dreams/`` and ``keys/``).
    Empty where git cannot say: every file is then digested as read."""

    blobs: dict[str, dict[str, str]] = field(default_factory=dict)
    note: str | None = None  # why git could not be used, for the build to report

    def folder(self, name: str) -> dict[str, str]:
        """File name → blob id of the files of ``content/<name>``."""
        return self.blobs.get(name, {})


def load(content: Path) -> FileKeys:
    """What git's index says of ``content/`` (one ``git`` run of each kind):
    outside a git checkout, or if git fails, nothing, and every file is read
    and digested instead (slower, never wrong)."""
    found = gitrepo.clean_blobs(content)
    if found is None:
        note = None
        if gitrepo.looks_like_a_checkout(content):
            note = (
                f"git could not list {content}; the build store was looked up by "
                "the digests of each file read (check that git runs here)"
            )
        return FileKeys({}, note)
    blobs: dict[str, dict[str, str]] = {}
    for path, blob in found.items():
        folder, _, name = path.rpartition("/")
        if "/" not in folder:
            blobs.setdefault(folder, {})[name] = blob
    return FileKeys(blobs)


_T = TypeVar("_T")


def load_beside(content: Path, work: Callable[[], _T]) -> tuple[FileKeys, _T]:
    """:func:`load`, asked for in a thread while ``work()`` runs in this one;
    both results. Most of :func:`load` is waiting for git (at 100k dreams
    0.45 s of its 0.8 s), which a build spends reading its store instead.
    The thread has ended when this returns (the caller forks later)."""
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="dreampool-filekeys") as thread:
        asked = thread.submit(load, content)
        done = work()
        return asked.result(), done
