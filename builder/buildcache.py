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
* ``units``: dream id → (key, fragments, digests of its files) (:mod:`builder.units`);
* ``pages``: path → (key, digest) of tag pages and diaries (:mod:`builder.site`);
* ``words``: dream id → its pattern keywords (:mod:`builder.patterns`),
  read and written by the forked process that computes the patterns.

The file is a pickle: it is as trusted as the site it sits beside (whoever
can write it can write the site), like ``__pycache__``.
"""

from __future__ import annotations

import functools
import hashlib
import os
import pickle
from importlib import resources
from pathlib import Path
from typing import Any

FORMAT = b"dreampool-cache/1\n"


@functools.cache
def code_digest() -> str:
    """A digest of the builder's modules and templates: a new dreampool
    version or an edited template starts every cached result afresh."""
    h = hashlib.sha256()
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
    written back by :meth:`save` only if it was used."""

    SECTIONS = ("scan", "commit", "salts", "keys", "shards", "units", "pages", "words")

    def __init__(self, folder: Path | None) -> None:
        self.folder = folder
        self.sections: dict[str, dict[Any, Any]] = {}

    def __getitem__(self, name: str) -> dict[Any, Any]:
        if name not in self.SECTIONS:
            raise KeyError(name)
        if name not in self.sections:
            self.sections[name] = self._load(name)
        return self.sections[name]

    def _load(self, name: str) -> dict[Any, Any]:
        if self.folder is None:
            return {}
        try:
            data = (self.folder / name).read_bytes()
        except OSError:
            return {}
        if not data.startswith(FORMAT):
            return {}
        try:
            code, section = pickle.loads(data[len(FORMAT) :])
        except Exception:  # a damaged cache is a cold build, never an error
            return {}
        if code != code_digest() or not isinstance(section, dict):
            return {}
        return section

    def save(self, *names: str) -> None:
        """Write the sections used (or those named) atomically: a killed
        build leaves the old files."""
        if self.folder is None:
            return
        if self.folder.is_file():  # the single-file cache of an earlier version
            self.folder.unlink()
        self.folder.mkdir(parents=True, exist_ok=True)
        for name in names or tuple(self.sections):
            path = self.folder / name
            tmp = path.with_name(f".{name}.tmp-{os.getpid()}")
            tmp.write_bytes(FORMAT + pickle.dumps((code_digest(), self.sections[name]), protocol=5))
            os.replace(tmp, path)
