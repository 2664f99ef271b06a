"""Review r32: store rows tagged with a key derived from the log key (d0290ab, T81).

A failing test is a defect found in review.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
from pathlib import Path

import pytest

from builder import build as buildmod
from builder import buildcache
from builder.formats.note import parse_private_key
from builder.log import erase
from tests.pools import make_pool
from tests.redteam import build, signed, submit

CANARIES = ("rtwoquillcanary", "rtwodriftcanary", "rtwotagcanary")


def _store_bytes(out: Path) -> bytes:
    """Every row of the store beside ``out``, raw (keys, values, digests, tags)."""
    path = out.parent / f".{out.name}.builds" / "cache" / buildcache.STORE
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        return b"\n".join(
            repr(row).encode() for t in tables for row in db.execute(f'SELECT * FROM "{t}"')
        )
    finally:
        db.close()


def test_an_erased_dream_a_keyless_build_stored_leaves_no_row_after_a_keyed_build(
    tmp_path: Path,
) -> None:
    """T48 (with T81's row tags): a build with the log key takes no row it did
    not tag, and so never loaded, and never deleted, the rows a build without
    the key wrote (a preview after an upgrade started the store afresh). The
    erased dream's scan row, its text whole, stayed in the store after
    ``erase`` and a signing build; before the tags that build read the row
    and deleted it with the dream's file."""
    tp = make_pool(tmp_path)
    (gone,) = submit(
        tp,
        signed(
            "ada",
            title=f"The {CANARIES[0]}",
            entries=[{"text": f"Found {CANARIES[1]}.", "type": "fact", "confidence": "confirmed"}],
            tags=[CANARIES[2]],
        ),
    )
    submit(tp, signed("bob", title="Bob stays"))
    site = tmp_path / "site"
    build(tp, site)  # logged and signed
    # A new dreampool (or a deleted cache folder) starts the store afresh, and
    # the maintainer previews before publishing: every row is untagged.
    shutil.rmtree(tmp_path / ".site.builds" / "cache")
    build(tp, site, key=False)
    assert CANARIES[0].encode() in _store_bytes(site)
    for path in tmp_path.glob("in-*.json"):
        path.unlink()
    erase.erase(tp.content, gone, "author-request")
    build(tp, site)
    store = _store_bytes(site)
    assert [c for c in CANARIES if c.encode() in store] == []


def test_a_restored_generation_forged_without_the_log_key_is_not_published(
    tmp_path: Path,
) -> None:
    """T81: the publish workflow restores the two site generations with the
    store from the same cache (scaffold publish.yml: ``.site.builds`` and
    ``site``), and whoever can forge a store row there can edit a generation's
    file. The row tags stop forged rows, but the writer keeps a file whose
    manifest digest matches the (tagged) units row when its size and mtime are
    the manifest's, without reading it: a dream page edited in place, its size
    and mtime kept (tar restores both as the archive says), was published by
    the build that holds the log key."""
    from tests.test_store_restore import _fresh_clone, _published, site_files

    tp, origin = _published(tmp_path)
    clone = _fresh_clone(tmp_path, origin)
    live = (clone / "site").resolve()
    page = next(live.glob("dreams/*/index.html"))
    st = page.stat()
    data = page.read_bytes()
    title = data[data.index(b"<title>") + 7 : data.index(b"</title>")]
    forged = b"PWNED" + b"!" * (len(title) - 5)
    assert len(title) >= 5
    page.write_bytes(data.replace(title, forged))
    os.utime(page, ns=(st.st_atime_ns, st.st_mtime_ns))
    signer = parse_private_key(tp.log_key)
    report = buildmod.build(clone / "content", clone / "site", signer=signer)
    built = site_files(clone / "site")
    assert not any(b"PWNED" in v for v in built.values()), report.notes


def test_a_store_of_older_code_replayed_under_this_codes_digest_is_not_taken(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """T81: the store's format and code digest (meta) carry no tag, and a row's
    tag binds its key and value only. Rows a signing build of an older
    dreampool wrote (same log key: tagged) are kept in caches that any workflow
    on main can read; with the meta row set to this code's digest (public: it
    hashes the installed builder), they were all taken, so units, pages and
    fragments an older (say, since fixed) renderer made were published by this
    code: a unit's key leaves the code out because a store of other code was
    discarded whole."""
    tp = make_pool(tmp_path)
    tp.add("ada", 2)
    site = tmp_path / "site"
    real = buildcache.code_digest()
    monkeypatch.setattr(buildcache, "code_digest", lambda: "an older dreampool")
    build(tp, site)
    monkeypatch.setattr(buildcache, "code_digest", lambda: real)
    store = tmp_path / ".site.builds" / "cache" / buildcache.STORE
    db = sqlite3.connect(store, isolation_level=None)
    db.execute("UPDATE meta SET value = ? WHERE name = 'code'", (real,))
    db.close()
    report = build(tp, site)
    assert report.rendered == 2, report.notes


def _target_copied_from_live(clone: Path) -> tuple[Path, str]:
    """The generation the next build writes into, made a copy of the live one
    with its manifest (sound: its checksum is public), as a restored cache may
    hold it; returns the builds folder and that generation's name."""
    builds = clone / ".site.builds"
    live = (clone / "site").resolve().name
    target = "b" if live == "a" else "a"
    shutil.rmtree(builds / target, ignore_errors=True)
    shutil.copytree(builds / live, builds / target)
    shutil.copy2(builds / f"manifest-{live}", builds / f"manifest-{target}")
    return builds, target


def test_a_file_planted_in_a_restored_generation_beside_a_sound_manifest_is_not_published(
    tmp_path: Path,
) -> None:
    """T81 (T46 without git): the publish workflow restores the generations and
    manifests from the cache, and uploads the live generation's folder
    (``upload-pages-artifact`` of ``site``). A generation the build writes
    into, with a sound manifest (its checksum is public) and one file more than
    it lists, kept that file: the build removes only what the manifest names.
    T46's defence (git tracks it) does not see a restored cache, and the build
    that signs published a planted script."""
    from tests.test_store_restore import _fresh_clone, _published, site_files

    tp, origin = _published(tmp_path)
    clone = _fresh_clone(tmp_path, origin)
    builds, target = _target_copied_from_live(clone)
    (builds / target / "static").mkdir(exist_ok=True)
    (builds / target / "static" / "pwn.js").write_text("alert('PWNED')\n")
    report = buildmod.build(clone / "content", clone / "site", signer=parse_private_key(tp.log_key))
    assert (clone / "site").resolve().name == target
    built = site_files(clone / "site")
    assert "static/pwn.js" not in built, report.notes


def test_a_link_inside_a_restored_generation_leads_no_write_outside(tmp_path: Path) -> None:
    """T45, T81: the generations come from the restored cache; only the
    builds folder, each generation and each manifest are checked to be plain.
    A folder inside the generation the build writes into, replaced by a link
    to a folder outside, must lead no write there."""
    from tests.test_store_restore import _fresh_clone, _published

    tp, origin = _published(tmp_path)
    clone = _fresh_clone(tmp_path, origin)
    builds, target = _target_copied_from_live(clone)
    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.rmtree(builds / target / "dreams")
    (builds / target / "dreams").symlink_to(outside)
    buildmod.build(clone / "content", clone / "site", signer=parse_private_key(tp.log_key))
    assert list(outside.iterdir()) == []
