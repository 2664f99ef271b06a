"""The build store's scan rows as a test forges them (builder.buildcache).

A scan row keeps a dream's head in ``v`` (digest ``d``, tag ``a``) and its body
in ``b`` (digest ``bd``, tag ``ba``, over the key behind ``buildcache._BODY_KEY``).
A forger rewrites either with a digest made to match: what anyone who can write
the store can do (the digest is public); a tag, keyed with the log key's row
key, is left as it was."""

from __future__ import annotations

import sqlite3

from builder import buildcache


def scan_rows(db: sqlite3.Connection) -> list[tuple[str, bytes, bytes]]:
    """Every scan row's key, head and body."""
    return list(db.execute('SELECT k, v, b FROM "scan"'))


def forge_scan_row(
    db: sqlite3.Connection, k: str, *, head: bytes | None = None, body: bytes | None = None
) -> None:
    """Give row ``k`` this ``head`` and/or ``body``, each digest made to match."""
    if head is not None:
        db.execute(
            'UPDATE "scan" SET v = ?, d = ? WHERE k = ?',
            (head, buildcache._row_digest(k, head), k),
        )
    if body is not None:
        db.execute(
            'UPDATE "scan" SET b = ?, bd = ? WHERE k = ?',
            (body, buildcache._row_digest(buildcache._BODY_KEY + k, body), k),
        )
