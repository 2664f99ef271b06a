"""Red-team tests: the attacks of ``THREATS.md``, each against the defence that stops it.

Each module takes one class of adversary (input, files, privacy, readers, log, Sybil,
crash, fuzzing); every test names the threat id it proves in its docstring. The
helpers here make small pools with any author name (seeds derived from the name),
sign dreams, and compare trees of files.
"""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path
from typing import Any

from builder import build as buildmod
from builder.content import pool
from builder.formats import dream as dreamfmt
from builder.formats.note import parse_private_key
from tests.conftest import draft
from tests.gitrun import git
from tests.pools import PoolFixture, make_pool


def seed_of(author: str) -> bytes:
    """A fixed Ed25519 seed per author name (tests only)."""
    return hashlib.sha256(b"dreampool red team " + author.encode("utf-8")).digest()


def signed(author: str = "ada", *, seed: bytes | None = None, **fields: Any) -> dict[str, Any]:
    """A dream by ``author`` signed with its seed (or ``seed``); fields override the draft."""
    body = draft(author=author, **copy.deepcopy(fields))
    return dreamfmt.sign(body, seed_of(author) if seed is None else seed)


def dump(obj: Any) -> bytes:
    return json.dumps(obj, ensure_ascii=False).encode("utf-8")


def submit(tp: PoolFixture, *dreams: dict[str, Any]) -> list[str]:
    """Submit signed dreams through ``pool.submit``; return their ids."""
    files = []
    for obj in dreams:
        d = dreamfmt.parse(dump(obj), "x")
        path = tp.content.parent / f"in-{d.id}.json"
        path.write_bytes(dump(obj))
        files.append(path)
    pool.submit(tp.content, files)
    return [dreamfmt.parse(p.read_bytes(), "x").id for p in files]


def set_tier(tp: PoolFixture, author: str, tier: str) -> None:
    """What a maintainer does by hand: raise an author's key in content/keys."""
    key_id = dreamfmt.key_id(dreamfmt.ed25519.public_key_of(seed_of(author)))
    path = tp.content / "keys" / f"{key_id.removeprefix('sha256:')}.yaml"
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("tier: guest", f"tier: {tier}"), encoding="utf-8")


def build(tp: PoolFixture, out: Path, *, key: bool = True) -> buildmod.BuildReport:
    return buildmod.build(tp.content, out, signer=parse_private_key(tp.log_key) if key else None)


def tree(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` by relative path (symlinks not followed)."""
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


def published_with_id_keyword(origin: Path) -> tuple[PoolFixture, str]:
    """A pool in the git repository ``origin``, published (its store beside
    it) and committed on ``main``, whose dream (the id returned) holds ``$Id$``,
    the keyword git's ``ident`` attribute expands on checkout (T80's tests)."""
    tp = make_pool(origin)
    [dream_id] = submit(tp, signed("ada", title="Keep the $Id$ keyword in templates"))
    submit(tp, signed("bob", title="Bob's other dream"))
    git(origin, "init", "-q", "-b", "main")
    build(tp, origin / "site")
    git(origin, "add", "content")
    git(origin, "commit", "-q", "-m", "published")
    return tp, dream_id
