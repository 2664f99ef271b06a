#!/usr/bin/env python3
"""What one pull request's shape costs: bytes, files and build time.

    benchmarks/contribution.py SHAPE N [--work DIR]

SHAPE is one contributor's N dreams, submitted at once:

* ``zero``: a chain, each naming the one before as parent, all generation 0
* ``chain``: the same chain, generations counted 0, 1, 2 …
* ``fan``: one parent and N-1 children of it
* ``tags``: no lineage, eight tags of its own on every dream

The pool is made in a new temporary folder (left there to look at) and
built once, cold, with a throwaway log key; the line says the
build's wall seconds and the bytes and files of the site and of its lineage/
and tags/ folders. Output size should be linear in N for every shape
(tests/test_growth.py holds it at 60 and 120 dreams). Not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from builder import build
from builder.content import pool
from builder.formats import dream as dreamfmt
from builder.formats import note
from builder.formats.b64 import b64url_decode

SEED = bytes([7] * 32)
ORIGIN = "bench.example/contribution"


def lineage(shape: str, i: int, ids: list[str]) -> dict[str, Any] | None:
    if shape == "tags":
        return None
    if not ids:
        return {"generation": 0}
    if shape == "fan":
        return {"parent": ids[0], "generation": 1}
    return {"parent": ids[-1], "generation": 0 if shape == "zero" else min(i, 1000)}


def draft(shape: str, i: int, ids: list[str]) -> dict[str, Any]:
    body: dict[str, Any] = {
        "author": "bench",
        "title": f"Link {i} of one contribution",
        "summary": "One of many dreams that one contributor sent at once.",
        "entries": [
            {"text": "The build must stay linear.", "type": "lesson", "confidence": "confirmed"}
        ],
        "tags": [f"t{i}-{j}" for j in range(8)] if shape == "tags" else ["bench"],
        "consent": {"share": True, "derivatives": True, "anonymize": False},
    }
    if (lin := lineage(shape, i, ids)) is not None:
        body["lineage"] = lin
    return body


def folder(root: Path, under: str = "") -> tuple[int, int]:
    files = [p for p in (root / under).rglob("*") if p.is_file()]
    return sum(p.stat().st_size for p in files), len(files)


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("shape", choices=["zero", "chain", "fan", "tags"])
    ap.add_argument("n", type=int)
    ap.add_argument("--work", type=Path, help="make the pool in a new folder in this one")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix=f"contribution-{args.shape}-{args.n}-", dir=args.work))
    content = work / "content"
    (content / "dreams").mkdir(parents=True)
    (content / "keys").mkdir()
    (content / "pool.yaml").write_text(
        f"title: Contribution bench\norigin: {ORIGIN}\nbase_url: /\nk: 2\n"
    )
    os.environ.setdefault("DREAMPOOL_HOME", str(work / "home"))
    (work / "in").mkdir()
    ids: list[str] = []
    files = []
    for i in range(args.n):
        signed = dreamfmt.sign(draft(args.shape, i, ids), SEED)
        ids.append(dreamfmt.dream_id(b64url_decode(signed["sig"]["value"])))
        path = work / "in" / f"{i}.json"
        path.write_text(json.dumps(signed, ensure_ascii=False), encoding="utf-8")
        files.append(path)
    pool.submit(content, files)
    skey, _ = note.generate_key(ORIGIN)
    site = work / "site"
    start = time.monotonic()
    build.build(content, site, signer=note.parse_private_key(skey))
    seconds = time.monotonic() - start
    out = site.resolve()
    parts = ", ".join(
        f"{name or 'site'} {size:,} B in {count:,} files"
        for name in ("", "lineage", "tags")
        for size, count in [folder(out, name)]
    )
    print(f"{args.shape} n={args.n}: build {seconds:.2f} s wall; {parts}")


if __name__ == "__main__":
    main()
