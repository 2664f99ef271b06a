"""The trust boundary around the publish build (THREATS.md T44–T48).

A pull request writes any path of the pool's repository, force-adding files
that ``.gitignore`` names: caches, site generations, manifests, symlinks.
After the merge the publish build runs with the log key in its environment,
in a checkout of exactly those files. Each test plants what an attacker
would, in a real git repository, then runs the build the publish workflow
runs, and checks that the planted state ran no code, deleted nothing, and
reached no reader.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import shutil
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pytest

from builder import build as buildmod
from builder import buildcache
from builder.formats.note import parse_private_key
from builder.log import erase
from tests.pools import PoolFixture, make_pool
from tests.redteam import signed, submit, tree


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args],
        check=True,
        capture_output=True,
        text=True,
        env={
            **os.environ,
            "GIT_AUTHOR_NAME": "t",
            "GIT_AUTHOR_EMAIL": "t@t",
            "GIT_COMMITTER_NAME": "t",
            "GIT_COMMITTER_EMAIL": "t@t",
        },
    ).stdout


def _repo(tmp_path: Path) -> tuple[PoolFixture, Path]:
    """A pool in a git repository, as a pool made by ``dreampool init`` is, with
    its ``.gitignore``; returns the pool and the repository's root."""
    tp = make_pool(tmp_path)
    (tmp_path / ".gitignore").write_text("/site\n/.site.builds/\n", encoding="utf-8")
    _git(tmp_path, "init", "-q", "-b", "main")
    return tp, tmp_path


def _commit(root: Path, *force: str) -> None:
    _git(root, "add", "-A")
    if force:
        _git(root, "add", "-f", "--", *force)
    _git(root, "commit", "-q", "-m", "pull request")


def _build(tp: PoolFixture, root: Path) -> buildmod.BuildReport:
    return buildmod.build(tp.content, root / "site", signer=parse_private_key(tp.log_key))


def _pickle_frame(obj: object) -> bytes:
    """The framing of the pickle cache dreampool used to read (format 3): what an
    attacker who read the source would write."""
    payload = pickle.dumps(obj, protocol=5)
    return len(payload).to_bytes(8, "big") + hashlib.sha256(payload).digest() + payload


class _Payload:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (exec, (f"open({str(self.marker)!r}, 'w').write('ran')",))


def test_a_planted_pickle_cache_runs_no_code(tmp_path: Path) -> None:
    """T44 (regression): a pull request force-added ``.site.builds/cache/scan``,
    a pickle in the cache's own framing; the publish build unpickled it and ran
    the attacker's code with DREAMPOOL_LOG_KEY in its environment. The build
    now keeps no pickle (nor any format that runs code on load), and never
    reads derived state from a path git tracks."""
    tp, root = _repo(tmp_path)
    tp.add("ada", 2)
    marker = tmp_path / "ran"
    cache = root / ".site.builds" / "cache"
    cache.mkdir(parents=True)
    for name in ("scan", "units", "keys", "words", "notes"):
        (cache / name).write_bytes(b"dreampool-cache/3\n" + _pickle_frame(_Payload(marker)))
    _commit(root, ".site.builds")
    report = _build(tp, root)
    assert not marker.exists()
    assert len(report.admitted) == 2
    assert any(".site.builds" in n for n in report.notes), report.notes


def test_a_planted_store_is_discarded_not_read(tmp_path: Path) -> None:
    """T44: a store that git tracks is the pull request's, whatever it holds:
    the build discards it and says so, and builds as from nothing. (Here the
    planted store is a real one, from a build of another pool, so only the fact
    that git tracks it gives it away.)"""
    tp, root = _repo(tmp_path)
    tp.add("ada", 2)
    _commit(root)
    _build(tp, root)
    store = root / ".site.builds" / "cache"
    assert any(p.is_file() for p in store.iterdir())
    _commit(root, ".site.builds/cache")
    tp.add("bob", 1)
    report = _build(tp, root)
    # Nothing taken from it: the two logged dreams by their leaves, the new one in full.
    assert (report.verified, report.committed, report.rendered) == (1, 2, 3)
    assert any("git tracks" in n for n in report.notes), report.notes
    assert _git(root, "ls-files", ".site.builds") != ""  # git's copy is the maintainers' to remove


@pytest.mark.parametrize("target", ["relative", "absolute"])
def test_a_symlink_in_the_cache_never_leads_a_delete(tmp_path: Path, target: str) -> None:
    """T45 (regression): a pull request force-added the symlink
    ``.site.builds/cache/jinja → ../../content``; the build cleared "stale
    compiled templates" through it, so content/ lost its dreams, salts, keys,
    leaves and checkpoints, and the publish workflow would have committed the
    deletions. The build keeps no compiled templates now, never follows a link
    it did not make, and deletes only inside folders it made."""
    tp, root = _repo(tmp_path)
    tp.add("ada", 3)
    _commit(root)
    _build(tp, root)
    before = tree(tp.content)
    shutil.rmtree(root / ".site.builds")
    cache = root / ".site.builds" / "cache"
    cache.mkdir(parents=True)
    link = "../../content" if target == "relative" else str(tp.content)
    (cache / "jinja").symlink_to(link)
    (cache / "scan").symlink_to(link)
    _commit(root, ".site.builds")
    report = _build(tp, root)
    assert tree(tp.content) == before
    assert report.refused == []


def test_an_untracked_symlink_in_the_cache_is_not_followed_either(tmp_path: Path) -> None:
    """T45: without git (a pool that is a plain folder) the same links are
    removed as links, never followed."""
    tp = make_pool(tmp_path)
    tp.add("ada", 3)
    site = tmp_path / "site"
    buildmod.build(tp.content, site, signer=parse_private_key(tp.log_key))
    before = tree(tp.content)
    root = tmp_path / ".site.builds"
    shutil.rmtree(root / "cache")
    (root / "cache").symlink_to("../content")
    (root / "a").rename(root / "a-old")
    (root / "a").symlink_to("../content")
    buildmod.build(tp.content, site, signer=parse_private_key(tp.log_key))
    assert tree(tp.content) == before
    assert (root / "cache").is_dir() and not (root / "cache").is_symlink()


def _empty_manifest() -> bytes:
    """A sound manifest of no files, as builder.site.writer reads them (format 3)."""
    body = b"dreampool-manifest 3 0 0\n"
    return body + b"end " + hashlib.blake2b(body, digest_size=16).hexdigest().encode() + b"\n"


def test_a_planted_generation_never_goes_live(tmp_path: Path) -> None:
    """T46 (regression): a pull request force-added ``site → .site.builds/a``, a
    sound empty ``.site.builds/manifest-b`` and ``.site.builds/b/{welcome.html,
    static/pwn.js}``; after the next build those files were live, and a
    same-origin script can rewrite what the browser verifier remembers."""
    tp, root = _repo(tmp_path)
    tp.add("ada", 2)
    builds = root / ".site.builds"
    (builds / "a").mkdir(parents=True)
    (builds / "b" / "static").mkdir(parents=True)
    (builds / "b" / "welcome.html").write_text("<script src=static/pwn.js></script>")
    (builds / "b" / "static" / "pwn.js").write_text("localStorage.clear()")
    (builds / "a" / "index.html").write_text("planted")
    (builds / "manifest-b").write_bytes(_empty_manifest())
    (root / "site").symlink_to(".site.builds/a")
    _commit(root, ".site.builds", "site")
    report = _build(tp, root)
    site = root / "site"
    assert (site / "index.html").read_text() != "planted"
    assert not (site / "welcome.html").exists()
    assert not (site / "static" / "pwn.js").exists()
    for gen in ("a", "b"):
        assert not (builds / gen / "static" / "pwn.js").exists()
    assert any("git tracks" in n for n in report.notes), report.notes


def test_a_salt_planted_beside_a_new_dream_wedges_nothing(tmp_path: Path, run: Any) -> None:
    """T47 (regression): a new dream with a planted ``<id>.salt`` of
    ``not-a-salt`` passed ``check``, and every later build failed, honest
    contributions included. A salt is the build's to write: ``check`` names
    the planted one, and the build replaces it with its own (a salt the
    submitter chose, even a well-formed one, would let them link the commitment
    to the text after an erasure)."""
    tp = make_pool(tmp_path)
    (planted,) = submit(tp, signed("ada", title="Carries a planted salt"))
    (chosen,) = submit(tp, signed("ada", title="Carries a chosen salt"))
    (tp.content / "dreams" / f"{planted}.salt").write_text("not-a-salt\n")
    chosen_salt = "A" * 43
    (tp.content / "dreams" / f"{chosen}.salt").write_text(chosen_salt + "\n")
    checked = run("check", "--content", tp.content)
    assert checked.code == 1
    for dream_id in (planted, chosen):
        assert f"{tp.content}/dreams/{dream_id}.salt: a salt for a dream" in checked.err, checked
    (honest,) = submit(tp, signed("bob", title="An honest contribution"))
    report = buildmod.build(tp.content, tmp_path / "site", signer=parse_private_key(tp.log_key))
    assert sorted(report.admitted) == sorted([planted, chosen, honest])
    salt = (tp.content / "dreams" / f"{chosen}.salt").read_text().strip()
    assert salt != chosen_salt
    record = json.loads((tmp_path / "site" / "dreams" / chosen / "record.json").read_bytes())
    assert record["salt"] == salt
    again = buildmod.build(tp.content, tmp_path / "site", signer=parse_private_key(tp.log_key))
    assert again.admitted == [] and not again.signed


def test_a_build_without_the_key_writes_no_salt(tmp_path: Path) -> None:
    """T47: a build that cannot sign (no key, new dreams waiting) wrote the new
    dreams' salts before it failed, and the publish workflow commits what a
    failed build leaves; now it writes nothing to content/ before it can sign."""
    tp = make_pool(tmp_path)
    submit(tp, signed("ada", title="Logged first"))
    buildmod.build(tp.content, tmp_path / "site", signer=parse_private_key(tp.log_key))
    (new,) = submit(tp, signed("ada", title="Waits for the key"))
    before = tree(tp.content)
    with pytest.raises(Exception, match="no log key"):
        buildmod.build(tp.content, tmp_path / "site", signer=None)
    assert tree(tp.content) == before
    assert not (tp.content / "dreams" / f"{new}.salt").exists()


CANARIES = ("boundaryquillcanary", "boundarydriftcanary", "boundarytagcanary")


def _store_text(root: Path) -> bytes:
    """Every value the build store holds, decoded (fragments inflated): what a
    byte search of the store's file could miss."""
    out = []
    for path in root.rglob("*.sqlite"):
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
            for table in tables:
                for row in db.execute(f'SELECT * FROM "{table}"'):
                    out.append(repr(row).encode())
        finally:
            db.close()
    cache = buildcache.BuildCache(root / ".site.builds" / "cache")
    from builder.site.units import unsqueeze

    for name in cache.SECTIONS:
        out.append(repr(cache[name]).encode())
        if name == "fragments":  # card, diary line, feed and search entry, maybe deflated
            out += [unsqueeze(f) for value in cache[name].values() for f in value]
    return b"\n".join(out)


def test_erasure_leaves_no_residue_anywhere_under_the_checkout(tmp_path: Path) -> None:
    """T48 (regression): after ``erase`` and a build, the erased title, entries
    and tags were still in the other site generation (``.site.builds/a/…``),
    and in the build cache. Zero residue holds for every file under the pool's
    repository: both generations, manifests, the store (its rows decoded too),
    search shards, feeds."""
    tp = make_pool(tmp_path)
    (gone,) = submit(
        tp,
        signed(
            "ada",
            title=f"The {CANARIES[0]}",
            summary="Short.",
            entries=[{"text": f"Found {CANARIES[1]}.", "type": "fact", "confidence": "confirmed"}],
            tags=[CANARIES[2]],
        ),
    )
    submit(tp, signed("bob", title="Bob stays"))
    site = tmp_path / "site"
    signer = parse_private_key(tp.log_key)
    buildmod.build(tp.content, site, signer=signer)
    submit(tp, signed("bob", title="Bob again"))
    buildmod.build(tp.content, site, signer=signer)  # both generations hold the dream
    record = json.loads((site / "dreams" / gone / "record.json").read_text())
    needles = [c.encode() for c in CANARIES] + [record["dream"]["sig"]["value"].encode()]
    holders = [p for p, data in tree(tmp_path).items() if any(n in data for n in needles)]
    assert any(p.startswith(".site.builds/a/") for p in holders)
    assert any(p.startswith(".site.builds/b/") for p in holders)
    for path in tmp_path.glob("in-*.json"):
        path.unlink()  # the submitted copies, outside the pool
    erase.erase(tp.content, gone, "author-request")
    buildmod.build(tp.content, site, signer=signer)
    holders = [p for p, data in tree(tmp_path).items() if any(n in data for n in needles)]
    assert holders == []
    store = _store_text(tmp_path)
    assert [n for n in needles if n in store] == []
