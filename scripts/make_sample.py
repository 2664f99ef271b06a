"""Make the shipped sample pool in content/ from scripts/sample_drafts.json.

Each author gets a throwaway Ed25519 key that lives only in this process: the
private halves are never written anywhere, so nobody (us included) can sign
as a sample author again. The anonymized drafts (author ``anonymous``) get a
one-time key each, as ``dreampool sign`` gives them (docs/protocol.md §1.2).
Run from the repository root:

    python scripts/make_sample.py            # signs the dreams (refuses if any exist)
    python scripts/make_sample.py --log      # logs them with a throwaway log key,
                                             # erases the "to-erase" dream, logs that

Lineage parents in the drafts are local refs; they are replaced by the real
dream ids as the drafts are signed in order. Trust tiers are set here, as a
pool maintainer would set them by editing content/keys/.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from builder import build
from builder.content import anonymity, pool
from builder.formats import dream as dreamfmt
from builder.formats import ed25519, note
from builder.log import erase
from builder.text import redact

ROOT = Path(__file__).resolve().parents[1]
CONTENT = ROOT / "content"
DATE = "2026-11-16"
FIRST_LOGGED = 1794819600  # 2026-11-16T09:00:00Z: fixed, so the sample is reproducible
TIERS = {
    "ada-lovelace-bot": "maintainer",
    "墨子": "maintainer",
    "kestrel": "member",
    "lin-wei": "member",
    "小橘": "member",
    "tessellate": "member",
    "river": "member",
    "nightjar": "guest",
    "quartz": "guest",
    "anonymous": "guest",  # one-time keys: always guests (docs/protocol.md §1.2)
}
POOL_YAML = """\
# The sample pool shipped with dreampool.
title: dreampool sample pool
origin: dreampool.example/sample
base_url: /
k: 3
"""


def make_log() -> int:
    """Two signed checkpoints: all dreams, then the erasure of one of them."""
    if (CONTENT / "log").exists():
        print("content/log exists; the sample log is made once", file=sys.stderr)
        return 1
    skey, vkey = note.generate_key(pool.load_config(CONTENT).origin)
    signer = note.parse_private_key(skey)
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["SOURCE_DATE_EPOCH"] = str(FIRST_LOGGED)
        build.build(CONTENT, Path(tmp) / "site", signer=signer)
        ids = json.loads((ROOT / "scripts" / "sample_ids.json").read_text())
        erase.erase(CONTENT, ids["to-erase"], "author-request")
        os.environ["SOURCE_DATE_EPOCH"] = str(FIRST_LOGGED + 9 * 86400 + 3600 * 7)
        build.build(CONTENT, Path(tmp) / "site", signer=signer)
    print(f"logged the sample with log key {vkey}; private key discarded")
    return 0


def main() -> int:
    if "--log" in sys.argv:
        return make_log()
    drafts: list[dict[str, Any]] = json.loads((ROOT / "scripts" / "sample_drafts.json").read_text())
    if any((CONTENT / "dreams").glob("*.json")):
        print("content/dreams is not empty; remove it first to remake the sample", file=sys.stderr)
        return 1
    (CONTENT / "dreams").mkdir(parents=True, exist_ok=True)
    (CONTENT / "keys").mkdir(parents=True, exist_ok=True)
    (CONTENT / "pool.yaml").write_text(POOL_YAML, encoding="utf-8")
    authors = sorted({d["author"] for d in drafts} - {anonymity.NAME})
    seeds = {author: ed25519.generate_seed() for author in authors}
    ids: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as tmp:
        files = []
        for n, draft in enumerate(drafts):
            body = {k: v for k, v in draft.items() if k != "ref"}
            if "parent" in body.get("lineage", {}):
                body["lineage"] = {**body["lineage"], "parent": ids[body["lineage"]["parent"]]}
            body, changes = redact.redact_dream(body)
            assert not changes, (draft["ref"], changes)
            # An anonymized dream gets a one-time key, as `dreampool sign` does
            # (docs/protocol.md §1.2).
            anonymous = draft["author"] == anonymity.NAME
            signed = dreamfmt.sign(
                body, anonymity.one_time_seed() if anonymous else seeds[draft["author"]]
            )
            path = Path(tmp) / f"{n:03d}.json"
            data = json.dumps(signed, ensure_ascii=False, indent=2) + "\n"
            path.write_text(data, encoding="utf-8")
            ids[draft["ref"]] = dreamfmt.parse(data.encode(), str(path)).id
            files.append(path)
        pool.submit(CONTENT, files)
    directory, problems = pool.load_keys(CONTENT)
    assert not problems, problems
    for entry in directory.keys.values():
        updated = pool.KeyEntry(
            entry.key_id, entry.author, entry.public_key, TIERS[entry.author], DATE
        )
        pool.atomic_write(
            CONTENT / "keys" / f"{entry.key_id[7:]}.yaml", pool.format_key_entry(updated)
        )
    (ROOT / "scripts" / "sample_ids.json").write_text(
        json.dumps(ids, ensure_ascii=False, indent=2) + "\n", encoding="utf-8"
    )
    print(f"signed {len(drafts)} dreams by {len(seeds)} authors and one-time keys; keys discarded")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
