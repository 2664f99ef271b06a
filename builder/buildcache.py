"""What one build remembers for the next: results keyed by their inputs.

The cache sits beside the output folder, in ``.<out>.builds/cache`` (see
:mod:`builder.writer`), never in ``content/``, which pull requests write.
Every entry is a pure function of its key, and every key includes
:func:`code_digest` (the builder's own source and templates), so a stale
entry can only miss, never be wrong. A missing, damaged or foreign cache
file is ignored: the build does all the work again, which costs time only.

Sections (each a dict):

* ``scan``: dream file (name, size, mtime, inode) → the verified
  :class:`~builder.dream.Dream` (:mod:`builder.pool`);
* ``commit``: (dream id, salt) → the commitment (:mod:`builder.logbuild`);
* ``units``: dream id → (key, card, digests of its files) (:mod:`builder.units`);
* ``words``: dream id → its pattern keywords (:mod:`builder.patterns`).

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
    SECTIONS = ("scan", "commit", "units", "words")

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.sections: dict[str, dict[Any, Any]] = {name: {} for name in self.SECTIONS}
        if path is not None:
            self._load(path)

    def __getitem__(self, name: str) -> dict[Any, Any]:
        return self.sections[name]

    def _load(self, path: Path) -> None:
        try:
            data = path.read_bytes()
        except OSError:
            return
        if not data.startswith(FORMAT):
            return
        try:
            code, sections = pickle.loads(data[len(FORMAT) :])
        except Exception:
            return
        if code != code_digest() or not isinstance(sections, dict):
            return
        for name in self.SECTIONS:
            if isinstance(sections.get(name), dict):
                self.sections[name] = sections[name]

    def save(self) -> None:
        """Write the cache atomically (a killed build leaves the old one)."""
        if self.path is None:
            return
        tmp = self.path.with_name(self.path.name + f".tmp-{os.getpid()}")
        data = FORMAT + pickle.dumps((code_digest(), self.sections), protocol=5)
        tmp.write_bytes(data)
        os.replace(tmp, self.path)
