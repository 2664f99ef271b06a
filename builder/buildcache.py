"""What one build remembers for the next: results keyed by their inputs.

The cache sits beside the output folder, in ``.<out>.builds/cache/`` (see
:mod:`builder.writer`), never in ``content/``, which pull requests write.
Every entry is a pure function of its key, and every key includes
:func:`code_digest` (the builder's own source and templates), so a stale
entry can only miss, never be wrong. A missing, damaged or foreign cache
file is ignored: the build does all the work again, which costs time only.

Sections (each a dict, in a file of its own):

* ``scan``: dream file (name, size, mtime, ctime, inode) → the verified
  :class:`~builder.dream.Dream` (:mod:`builder.pool`);
* ``commit``: (dream file stamp, salt) → the commitment (:mod:`builder.logbuild`);
* ``salts``: salt file stamp → its text (:mod:`builder.logbuild`);
* ``keys``: key file stamp → its parsed entry (:mod:`builder.pool`);
* ``shards``: digest of a leaf shard found canonical → True (:mod:`builder.logstate`);
* ``notes``: digest of a stored checkpoint and the keys that opened it → the
  checkpoint (:mod:`builder.logbuild`);
* ``units``: dream id → (key, fragments, digests of its files) (:mod:`builder.units`);
* ``pages``: path → (key, digest) of the list pages, feeds, agent digests and
  search shards that carry a key (:mod:`builder.site`);
* ``words``: dream id → its pattern keywords (:mod:`builder.patterns`),
  read and written by the forked process that computes the patterns.

The file is a pickle: it is as trusted as the site it sits beside (whoever
can write it can write the site), like ``__pycache__``. It is not trusted to
be intact: every frame carries a SHA-256 of its bytes, checked before it is
unpickled, so a flipped bit or a garbled string (which may still unpickle,
into a wrong entry) reads as a torn frame: a miss, never a wrong result.
:mod:`builder.logbuild` also reads every dream it logs from its file again,
so nothing enters the log on the cache's word alone.
"""

from __future__ import annotations

import functools
import gc
import hashlib
import os
import pickle
import sys
import unicodedata
from collections.abc import Iterator
from importlib import metadata, resources
from pathlib import Path
from typing import Any

FORMAT = b"dreampool-cache/3\n"
# A frame: the length of its pickle (8 bytes, big-endian), the SHA-256 of the
# pickle, then the pickle. (SHA-256, not BLAKE2b: with the SHA extensions of
# current CPUs it runs at twice the speed, 1.6 GB/s, ≈35 ms a load for the
# 58 MB cache of a 10,000-dream pool.)
_LENGTH = 8
_DIGEST = 32
_HEADER = _LENGTH + _DIGEST


def _digest(payload: bytes | memoryview) -> bytes:
    return hashlib.sha256(payload).digest()


def _frame(obj: Any) -> bytes:
    payload = pickle.dumps(obj, protocol=5)
    return len(payload).to_bytes(_LENGTH, "big") + _digest(payload) + payload


class _Hashing:
    """A file that hashes what is written to it (pickle.dump streams a
    section: no second copy of it in memory)."""

    def __init__(self, f: Any) -> None:
        self.f = f
        self.h = hashlib.sha256()
        self.size = 0

    def write(self, data: bytes) -> int:
        self.h.update(data)
        self.size += len(data)
        return int(self.f.write(data))


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
    for path in sorted(package.glob("*.py")):
        h.update(path.name.encode() + b"\0" + path.read_bytes())
    templates = resources.files("builder.templates")
    stack = [templates]
    names = []
    while stack:
        node = stack.pop()
        for child in node.iterdir():
            if child.is_dir():
                stack.append(child)
            elif child.name.endswith((".html", ".css", ".js")):
                names.append(child)
    for child in sorted(names, key=lambda c: str(c)):
        h.update(child.name.encode() + b"\0" + child.read_bytes())
    return h.hexdigest()


class BuildCache:
    """The cache folder; each section is a file, read when first used and
    written back by :meth:`save` only if it was used.

    A section's file is a first frame, the whole dict, then *delta* frames,
    each the entries set and the keys deleted by one build. A build that
    changes a few entries of a large section (one new dream among 100,000)
    appends a delta instead of writing the whole section again; once the
    deltas hold more than :data:`COMPACT_FRACTION` of the section, or the
    file ended in a torn frame (a killed build), the next save writes it
    whole. Every frame carries :func:`code_digest` and a digest of its bytes;
    a reader stops at the first frame it cannot read or whose digest differs
    (a damaged first frame is an empty section), and since every entry is a
    pure function of its key, a lost delta costs time only.
    """

    SECTIONS = ("scan", "commit", "salts", "keys", "shards", "notes", "units", "pages", "words")
    COMPACT_FRACTION = 0.25
    MAX_DELTAS = 64

    def __init__(self, folder: Path | None) -> None:
        self.folder = folder
        self.sections: dict[str, dict[Any, Any]] = {}
        # per loaded section: a shallow copy as read (save() compares values by
        # identity: entries are immutable and reused, never edited in place),
        # and the deltas the file holds, or None when it must be written whole
        self._loaded: dict[str, dict[Any, Any]] = {}
        self._deltas: dict[str, tuple[int, int] | None] = {}

    def __getitem__(self, name: str) -> dict[Any, Any]:
        if name not in self.SECTIONS:
            raise KeyError(name)
        if name not in self.sections:
            self.sections[name] = self._load(name)
            self._loaded[name] = dict(self.sections[name])
        return self.sections[name]

    def _load(self, name: str) -> dict[Any, Any]:
        self._deltas[name] = None
        if self.folder is None:
            return {}
        try:
            data = (self.folder / name).read_bytes()
        except OSError:
            return {}
        if not data.startswith(FORMAT):
            return {}
        # Unpickling makes millions of objects, none of them garbage: without
        # this, the collector walks them over and over while they are made.
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            return self._read_frames(name, memoryview(data))
        finally:
            if gc_was_enabled:
                gc.enable()

    def _read_frames(self, name: str, data: memoryview) -> dict[Any, Any]:
        frames = _frames(data)
        try:
            code, section = next(frames)
        except Exception:  # a damaged cache is a cold build, never an error
            return {}
        if code != code_digest() or not isinstance(section, dict):
            return {}
        count = entries = 0
        while True:
            try:
                frame = next(frames, _END)
                if frame is _END:
                    break
                code, changed, deleted = frame
                if code != code_digest():
                    return section
                changed = dict(changed)
                deleted = list(deleted)
            except Exception:  # a torn or damaged frame: keep what was read, rewrite
                return section
            for key in deleted:
                section.pop(key, None)
            section.update(changed)
            count += 1
            entries += len(changed) + len(deleted)
        self._deltas[name] = (count, entries)
        return section

    def save(self, *names: str) -> None:
        """Write the sections used (or those named): a delta appended in one
        write, or the whole section atomically. A killed build leaves the
        old file, or the old file and a torn delta the next load skips."""
        if self.folder is None:
            return
        if self.folder.is_file():  # the single-file cache of an earlier version
            self.folder.unlink()
        self.folder.mkdir(parents=True, exist_ok=True)
        for name in names or tuple(self.sections):
            section = self.sections[name]
            loaded = self._loaded.get(name, {})
            missing = object()
            changed = {k: v for k, v in section.items() if loaded.get(k, missing) is not v}
            deleted = [k for k in loaded if k not in section]
            deltas = self._deltas.get(name)
            path = self.folder / name
            if deltas is not None and not changed and not deleted:
                continue
            if (
                deltas is not None
                and deltas[0] < self.MAX_DELTAS
                and deltas[1] + len(changed) + len(deleted) <= len(section) * self.COMPACT_FRACTION
                and _sole_link(path)
            ):
                frame = _frame((code_digest(), changed, deleted))
                with open(path, "ab") as f:
                    f.write(frame)  # one write: a killed build leaves a torn frame
                self._deltas[name] = (deltas[0] + 1, deltas[1] + len(changed) + len(deleted))
            else:
                tmp = path.with_name(f".{name}.tmp-{os.getpid()}")
                with open(tmp, "wb") as f:  # streamed: no second copy of a large section
                    f.write(FORMAT + bytes(_HEADER))
                    out = _Hashing(f)
                    pickle.dump((code_digest(), section), out, protocol=5)
                    f.seek(len(FORMAT))
                    f.write(out.size.to_bytes(_LENGTH, "big") + out.h.digest())
                os.replace(tmp, path)
                self._deltas[name] = (0, 0)
            self._loaded[name] = dict(section)


_END: Any = object()


def _frames(data: memoryview) -> Iterator[Any]:
    """The objects of the frames after :data:`FORMAT`, in order; a
    :class:`ValueError` at a torn frame or at one whose digest differs (which
    is never unpickled)."""
    pos = len(FORMAT)
    while pos + _HEADER <= len(data):
        size = int.from_bytes(data[pos : pos + _LENGTH], "big")
        start = pos + _HEADER
        end = start + size
        if end > len(data):
            break
        payload = data[start:end]
        if _digest(payload) != data[pos + _LENGTH : start]:
            raise ValueError("a cache frame does not match its digest")
        yield pickle.loads(payload)
        pos = end
    if pos != len(data):
        raise ValueError("a torn cache frame")


def _sole_link(path: Path) -> bool:
    """Whether appending to ``path`` changes no other name's file. A copy of the
    build folder made with hard links (``cp -al``, ``rsync --link-dest``
    snapshots) shares the section files; a delta appended in place would
    change the copy too, so such a file is written whole, by rename."""
    try:
        return os.stat(path).st_nlink == 1
    except OSError:
        return False
