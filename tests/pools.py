"""Small pools made in tests: fixed author seeds, a fresh log key per pool."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from builder.content import anonymity, pool
from builder.formats import checkpoint as cpmod
from builder.formats import dream as dreamfmt
from builder.formats import note
from builder.formats import policy as policymod
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


@dataclass(frozen=True)
class Cosigned:
    """A stored checkpoint a witness cosigned (:func:`cosign_stored`)."""

    policy: policymod.Policy  # the log's policy, the witness added
    checkpoint: Path
    before: bytes  # the checkpoint's bytes before the cosignature
    line: str  # the cosignature line appended


def cosign_stored(content: Path, size: int) -> Cosigned:
    """Add witness ``w1`` to the pool's log policy and its cosignature
    (c2sp.org/tlog-cosignature) to the stored checkpoint of ``size`` leaves."""
    wkey, wvkey = cpmod.generate_cosigner_key("witness.example/w1")
    policy_path = content / "log" / "policy"
    policy = policymod.parse_policy(policy_path.read_bytes())
    witness = policymod.PolicyWitness("w1", cpmod.parse_cosigner_key(wvkey))
    with_witness = policymod.Policy(policy.logs, (witness,), (), "w1")
    policy_path.write_text(policymod.format_policy(with_witness))
    stored = content / "log" / "checkpoints" / str(size)
    before = stored.read_bytes()
    text = before.split(b"\n\n")[0].decode() + "\n"
    line = cpmod.cosign(text, cpmod.parse_cosigner_private_key(wkey), 1767225600)
    stored.write_bytes(before + line.encode())
    return Cosigned(with_witness, stored, before, line)
