"""Small pools made in tests: fixed author seeds, a fresh log key per pool."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from builder.content import anonymity, pool
from builder.formats import dream as dreamfmt
from builder.formats import note
from builder.formats.ed25519 import public_key_of
from tests.conftest import draft

SEEDS = {"ada": bytes([1] * 32), "bob": bytes([2] * 32), "墨子": bytes([3] * 32)}
ORIGIN = "test.example/pool"


@dataclass
class PoolFixture:
    content: Path
    log_key: str
    vkey: str

    def add(self, author: str, n: int, **fields: Any) -> list[str]:
        """Sign and submit n distinct dreams by author; return their ids. An
        anonymized one is signed as `dreampool sign` does, by a one-time key."""
        ids = []
        files = []
        for i in range(n):
            title = fields.pop("title", None) or f"{author} dream {i} {self.counter()}"
            body = draft(author=author, title=title, **fields)
            if anonymity.is_anonymized(body):
                # As `dreampool sign` signs it (docs/protocol.md §1.2): under the
                # name anonymous, with a key of its own (fixed here, from the title).
                one_time = hashlib.sha256(b"one-time " + title.encode("utf-8")).digest()
                body = dreamfmt.sign(anonymity.anonymous_draft(body), one_time)
            else:
                body = dreamfmt.sign(body, SEEDS[author])
            path = self.content.parent / f"in-{title}.json".replace("/", "_")
            path.write_text(json.dumps(body, ensure_ascii=False), encoding="utf-8")
            files.append(path)
            ids.append(dreamfmt.parse(path.read_bytes(), "x").id)
        pool.submit(self.content, files)
        return ids

    _n = 0

    def counter(self) -> int:
        PoolFixture._n += 1
        return PoolFixture._n


def make_pool(root: Path, *, base_url: str = "/") -> PoolFixture:
    content = root / "content"
    (content / "dreams").mkdir(parents=True)
    (content / "keys").mkdir()
    (content / "pool.yaml").write_text(
        f"title: Test pool\norigin: {ORIGIN}\nbase_url: {base_url}\nk: 2\n", encoding="utf-8"
    )
    skey, vkey = note.generate_key(ORIGIN)
    return PoolFixture(content, skey, vkey)


def key_id_of(author: str) -> str:
    return dreamfmt.key_id(public_key_of(SEEDS[author]))
