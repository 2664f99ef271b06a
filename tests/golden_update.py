"""The golden fixture: a small pool whose built site is committed under tests/golden/site.

`python -m tests.golden_update` rebuilds tests/golden/site from
tests/golden/content (the fixture pool, with its log already signed, so no
key is needed). Review the diff before committing: it is every byte a reader
gets.

The fixture pool itself was made once by `make_fixture()` with throwaway keys
that were not kept.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path

from builder import build as buildmod
from builder.content import pool
from builder.formats import dream as dreamfmt
from builder.formats import note

HERE = Path(__file__).resolve().parent / "golden"


def tree(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def build_golden() -> dict[str, bytes]:
    """Every file of the fixture's site but static/ (copied verbatim from
    templates/static, which tests/test_render.py already compares)."""
    with tempfile.TemporaryDirectory() as tmp:
        content = Path(tmp) / "content"
        shutil.copytree(HERE / "content", content)
        buildmod.build(content, Path(tmp) / "site", signer=None)
        return {k: v for k, v in tree(Path(tmp) / "site").items() if not k.startswith("static/")}


def make_fixture() -> None:
    from builder.formats import ed25519

    content = HERE / "content"
    if content.exists():
        sys.exit("tests/golden/content exists; delete it to make a new fixture")
    (content / "dreams").mkdir(parents=True)
    (content / "pool.yaml").write_text(
        "title: Golden fixture pool\norigin: golden.example/pool\nbase_url: /\nk: 2\n"
    )
    seeds = {"ada": ed25519.generate_seed(), "林": ed25519.generate_seed()}
    drafts = [
        ("ada", "First lesson", ["testing"], {"generation": 0}, False),
        ("林", "第二个梦：缓存", ["testing", "缓存"], None, False),
        ("ada", "A child dream", ["testing"], "parent", False),
        ("林", "匿名的梦", ["缓存"], None, True),
    ]
    files = []
    ids: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        for n, (author, title, tags, lineage, anonymize) in enumerate(drafts):
            body: dict[str, object] = {
                "author": author,
                "title": title,
                "summary": f"Summary of **{title}** with a [link](https://example.org/).",
                "entries": [
                    {"text": f"{title}: a fact", "type": "fact", "confidence": "confirmed"},
                    {
                        "text": f"{title}: a rule",
                        "type": "rule",
                        "confidence": "unconfirmed",
                        "source": "review",
                    },
                ],
                "tags": tags,
                "consent": {"share": True, "derivatives": True, "anonymize": anonymize},
            }
            if lineage == "parent":
                body["lineage"] = {"parent": ids[0], "generation": 1}
            elif lineage:
                body["lineage"] = lineage
            signed = dreamfmt.sign(body, seeds[author])
            path = Path(tmp) / f"{n}.json"
            path.write_text(json.dumps(signed, ensure_ascii=False, indent=2) + "\n")
            ids.append(dreamfmt.parse(path.read_bytes(), "x").id)
            files.append(path)
        pool.submit(content, files)
    skey, _ = note.generate_key("golden.example/pool")
    import os

    os.environ["SOURCE_DATE_EPOCH"] = "1764460800"  # 2025-11-30T00:00:00Z
    buildmod.build(content, Path(tempfile.mkdtemp()) / "site", signer=note.parse_private_key(skey))


def main() -> None:
    if "--make-fixture" in sys.argv:
        make_fixture()
    site = build_golden()
    target = HERE / "site"
    shutil.rmtree(target, ignore_errors=True)
    for rel, data in site.items():
        (target / rel).parent.mkdir(parents=True, exist_ok=True)
        (target / rel).write_bytes(data)
    print(f"wrote {len(site)} files to {target}")


if __name__ == "__main__":
    main()
