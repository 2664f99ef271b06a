"""Review r33: the generation seals (ce2a01c, THREATS.md T81).

A failing test is a defect found in review.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from builder import build as buildmod
from builder.formats.note import parse_private_key
from builder.site import writer
from tests.redteam.test_r32_review import _target_copied_from_live
from tests.test_store_restore import _cold, _fresh_clone, _published, site_files


def _sound_manifest(builds: Path, gen: str, files: dict[str, bytes]) -> None:
    """A manifest for ``gen`` listing ``files`` as they are on disk there: sound,
    as anyone can write one (its checksum is public)."""
    entries: dict[str, writer.Entry] = {}
    for rel, data in files.items():
        path = builds / gen / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        st = path.stat()
        entries[rel] = (writer.digest(data), st.st_size, st.st_mtime_ns)
    (builds / f"manifest-{gen}").unlink(missing_ok=True)
    writer._write_manifest(builds / f"manifest-{gen}", entries)


def test_a_restored_file_where_the_site_has_a_folder_is_no_traceback(tmp_path: Path) -> None:
    """T81: a restored generation whose sound manifest lists ``patterns`` as a
    file (on disk, with its digest) where the site has the folder ``patterns/``.
    The build makes the folder in its place, then commit unlinks ``patterns``
    as a file it no longer has: IsADirectoryError, a traceback from the build
    that signs (and the publish run fails)."""
    tp, origin = _published(tmp_path)
    clone = _fresh_clone(tmp_path, origin)
    builds, target = _target_copied_from_live(clone)
    shutil.rmtree(builds / target)
    _sound_manifest(builds, target, {"patterns": b"not a folder\n"})
    buildmod.build(clone / "content", clone / "site", signer=parse_private_key(tp.log_key))
    assert (clone / "site").resolve().name == target
    assert site_files(clone / "site") == _cold(clone / "content", tmp_path)


def test_a_restored_folder_where_the_site_has_a_file_is_no_traceback(tmp_path: Path) -> None:
    """T81: the reverse: a sound manifest lists ``index.html/x`` (a folder where
    the site has the file ``index.html``). The build replaces the folder with
    the page, then commit unlinks ``index.html/x``: NotADirectoryError."""
    tp, origin = _published(tmp_path)
    clone = _fresh_clone(tmp_path, origin)
    builds, target = _target_copied_from_live(clone)
    shutil.rmtree(builds / target)
    _sound_manifest(builds, target, {"index.html/x": b"a file under a page\n"})
    buildmod.build(clone / "content", clone / "site", signer=parse_private_key(tp.log_key))
    assert (clone / "site").resolve().name == target
    assert site_files(clone / "site") == _cold(clone / "content", tmp_path)


def test_a_restored_sparse_file_is_not_read_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """T81 (new with the seals): a generation no seal vouches for is read whole
    (_check_generation), each listed file to its end, whatever its size. A restored
    cache is a tar archive, and tar restores a sparse file (GNU sparse
    members) from a few bytes: one listed file of terabytes of holes, with a
    sound manifest recording that size, makes the signing build hash it all
    (about a second a gigabyte): past the job's 30-minute timeout, the run is
    cancelled, the cache step that would replace the poisoned state is skipped
    (``!cancelled()``), and every later publish restores it again. Here 512 MiB
    of holes: the build hashes them all, though no page of the site is that
    big and the build wants no file of that digest."""
    tp, origin = _published(tmp_path)
    clone = _fresh_clone(tmp_path, origin)
    builds, target = _target_copied_from_live(clone)
    found = writer._read_manifest(builds / f"manifest-{target}")
    assert found is not None
    entries = dict(found[0])
    size = 1 << 29
    hole = builds / target / "static" / "big.bin"
    with open(hole, "wb") as f:
        f.truncate(size)
    entries["static/big.bin"] = (bytes(16), size, hole.stat().st_mtime_ns)
    (builds / f"manifest-{target}").unlink()
    writer._write_manifest(builds / f"manifest-{target}", entries)
    # Counted in a file: the generation is read in the survey's process
    # (writer.Opening), which a list in this one would not see (review r60).
    hashed = tmp_path / "hashed"
    checksum = writer._checksum

    def count(n: int) -> None:
        with open(hashed, "a") as f:
            f.write(f"{n}\n")

    class Counted:
        def __init__(self, data: bytes | memoryview = b"") -> None:
            self.h = checksum(data)
            count(len(data))

        def update(self, data: bytes | memoryview) -> None:
            count(len(data))
            self.h.update(data)

        def digest(self) -> bytes:
            return self.h.digest()

        def hexdigest(self) -> str:
            return self.h.hexdigest()

    monkeypatch.setattr(writer, "_checksum", Counted)
    buildmod.build(clone / "content", clone / "site", signer=parse_private_key(tp.log_key))
    assert "static/big.bin" not in site_files(clone / "site")
    assert sum(map(int, hashed.read_text().split())) < size // 4


def test_a_deep_folder_in_a_restored_generation_is_no_traceback(tmp_path: Path) -> None:
    """T81: a generation without a sound manifest is removed whole
    (remove_entry: shutil.rmtree, which recurses once per level on Python
    3.11 and 3.12, an open descriptor each). A restored generation holding
    a chain of 1,200 nested folders (2,400 bytes of path: tar makes it)
    raises RecursionError from the signing build; the generation stays, the
    workflow saves it back (the build failed, the run was not cancelled),
    and every later publish fails the same way."""
    tp, origin = _published(tmp_path)
    clone = _fresh_clone(tmp_path, origin)
    builds, target = _target_copied_from_live(clone)
    (builds / f"manifest-{target}").unlink()
    deep = builds / target / "d"
    deep.mkdir()
    fd = os.open(deep, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(1200):
            os.mkdir("d", dir_fd=fd)
            nxt = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = nxt
    finally:
        os.close(fd)
    try:
        buildmod.build(clone / "content", clone / "site", signer=parse_private_key(tp.log_key))
        assert (clone / "site").resolve().name == target
        assert site_files(clone / "site") == _cold(clone / "content", tmp_path)
    finally:
        _remove_deep(builds / target)


def _remove_deep(top: Path) -> None:
    """Remove ``top`` however deep it goes, without recursion (pytest's own
    cleanup uses shutil.rmtree too)."""
    if not top.exists():
        return
    chain = [top]
    files: list[Path] = []
    while True:
        subs = []
        for p in chain[-1].iterdir():
            (subs if p.is_dir() and not p.is_symlink() else files).append(p)
        if not subs:
            break
        chain.append(subs[0])
        for other in subs[1:]:
            _remove_deep(other)
    for f in files:
        f.unlink()
    for p in reversed(chain):
        p.rmdir()


def test_a_page_a_cache_restores_over_a_kept_checkout_is_not_published(tmp_path: Path) -> None:
    """T81: the seal is the generation folder's inode and ctime, and a restore
    is said to make the folder anew. tar makes only what is missing: where
    the checkout is kept between runs (a self-hosted runner's workspace, or
    the same steps run by hand: docs/operators.md "Publishing without
    GitHub"), an archive holding one page and no entry for its folders
    (GNU tar, as actions/cache runs it: ``--posix``, ``-xf``) replaces that
    page in ``dreams/<id>/`` with its size and nanosecond mtime, and leaves
    the generation folder, its inode and its ctime, as they were. The seal
    matches, the page is kept unread by the build that signs, and published."""
    tp, origin = _published(tmp_path)
    buildmod.build(tp.content, origin / "site", signer=parse_private_key(tp.log_key))
    live = (origin / "site").resolve().name
    target = "b" if live == "a" else "a"
    rel = next((origin / ".site.builds" / target).glob("dreams/*/index.html"))
    rel = rel.relative_to(origin)
    page = origin / rel
    data = page.read_bytes()
    title = data[data.index(b"<title>") + 7 : data.index(b"</title>")]
    forged = data.replace(title, b"PWNED" + b"!" * (len(title) - 5))
    staged = tmp_path / "staged" / rel
    staged.parent.mkdir(parents=True)
    staged.write_bytes(forged)
    mtime = page.stat().st_mtime_ns
    os.utime(staged, ns=(mtime, mtime))
    archive = tmp_path / "cache.tar"
    subprocess.run(
        ["tar", "--posix", "-cf", str(archive), "-C", str(tmp_path / "staged"), str(rel)],
        check=True,
    )
    subprocess.run(["tar", "-xf", str(archive), "-P", "-C", str(origin)], check=True)
    assert page.read_bytes() == forged and page.stat().st_mtime_ns == mtime
    report = buildmod.build(tp.content, origin / "site", signer=parse_private_key(tp.log_key))
    assert (origin / "site").resolve().name == target
    built = site_files(origin / "site")
    assert not any(b"PWNED" in v for v in built.values()), report.notes


def test_remove_entry_follows_no_link_in_a_tree(tmp_path: Path) -> None:
    """T45: the iterative removal (review r33's fix for the deep folder) removes
    links as themselves, at any depth, and nothing they name."""
    from builder.files import remove_entry

    outside = tmp_path / "outside"
    (outside / "sub").mkdir(parents=True)
    (outside / "sub" / "keep.txt").write_text("keep")
    tree = tmp_path / "tree"
    (tree / "a" / "b" / "c").mkdir(parents=True)
    (tree / "a" / "b" / "c" / "f").write_text("x")
    (tree / "a" / "file").write_text("y")
    (tree / "a" / "b" / "dirlink").symlink_to(outside)
    (tree / "a" / "filelink").symlink_to(outside / "sub" / "keep.txt")
    (tree / "e").mkdir()
    os.mkfifo(tree / "e" / "fifo")
    remove_entry(tree)
    assert not tree.exists() and not tree.is_symlink()
    assert (outside / "sub" / "keep.txt").read_text() == "keep"


_READ_ONLY_FOLDER = r"""
import os, shutil, sys
from pathlib import Path
from builder.site import derived, writer

tmp, step = Path(sys.argv[1]), sys.argv[2]
plan = {f"dreams/{i:03}/index.html": f"page {i}".encode() for i in range(5)}
out, copy = tmp / "site", tmp / "restored"
if step == "setup":
    seals = {}
    for _ in range(2):
        with writer.SiteWriter(out, seals=seals) as w:
            w.add_all(plan)
    # As a restore makes it: new folders, no seal; the generation the next
    # build writes holds a file its manifest does not list, in a folder of
    # mode 0o500.
    copy.mkdir()
    shutil.copytree(writer.builds_dir(out), copy / ".site.builds", symlinks=True)
    os.symlink(os.readlink(out), copy / "site")
    target = copy / ".site.builds" / ("a" if os.readlink(out).endswith("b") else "b")
    (target / "dreams" / "000" / "planted.js").write_text("alert(1)")
    os.chmod(target / "dreams" / "000", 0o500)
    os.chmod(copy / ".site.builds", 0o500)
else:
    derived.secure(copy / "site")  # as build.build does first
    with writer.SiteWriter(copy / "site", seals={}) as w:
        w.add_all(plan)
"""


def test_a_read_only_folder_in_a_restored_generation_wedges_no_build() -> None:
    """T81: tar restores a folder's mode as its archive says (umask 022 leaves
    the owner's bits). The builds folder of mode 0o500: no manifest can be
    written. A folder of mode 0o500 in the generation the build writes,
    holding a file its manifest does not list: the writer cannot unlink the
    file (PermissionError from the signing build); the manifest is gone by
    then, so the next build removes the generation whole, and cannot either.
    Every build fails, and the publish workflow saves the same state back
    after each (the build failed, the run was not cancelled). Run as an
    unprivileged user (root ignores the mode)."""
    import sys
    import tempfile

    # Not under tmp_path: pytest's folders are root's alone.
    work = Path(tempfile.mkdtemp(prefix="r33-"))
    cmd = [sys.executable, "-c", _READ_ONLY_FOLDER, str(work)]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    if os.geteuid() == 0:
        os.chown(work, 65534, 65534)
        cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *cmd]
    try:
        for step in ("setup", "build", "build again"):
            # A failed build leaves the generation for the next to try.
            done = subprocess.run([*cmd, step], env=env, capture_output=True, text=True)
            assert done.returncode == 0, f"{step}: {done.stderr}"
    finally:
        for folder, dirs, _ in os.walk(work):
            for d in dirs:
                os.chmod(os.path.join(folder, d), 0o755)
        shutil.rmtree(work)


def test_a_live_generation_that_is_a_link_is_not_taken_as_sealed(tmp_path: Path) -> None:
    """T81, T45 (defence in depth): ``_sealed`` compares the store's row with
    the folder's seal, and both are None when there is no row and the
    generation is not a plain folder (a link): the writer took it as sealed,
    and kept a page of the folder the link names by its size and mtime,
    unread. A build removes such a link first (derived.secure), so only the
    writer's own check is at fault here; it should not depend on that."""
    out, seals = tmp_path / "site", {}
    plan = {"x/a.html": b"AAAA", "x/b.html": b"BBBB"}
    with writer.SiteWriter(out, seals=seals) as w:
        w.add_all(plan)
    root = writer.builds_dir(out)
    live = os.readlink(out).rsplit("/", 1)[1]
    forged = tmp_path / "forged"
    shutil.copytree(root / live, forged)
    page = forged / "x" / "a.html"
    st = page.stat()
    page.write_bytes(b"EVIL")
    os.utime(page, ns=(st.st_atime_ns, st.st_mtime_ns))
    shutil.rmtree(root / live)
    (root / live).symlink_to(forged)
    with writer.SiteWriter(out, seals={}) as w:
        if not w.keep_all([("x/a.html", writer.digest(b"AAAA"))]):
            w.add("x/a.html", b"AAAA")
        w.add("x/b.html", b"BBBB")
    assert (out / "x" / "a.html").read_bytes() == b"AAAA"


def _folders(site: Path) -> set[str]:
    root = site.resolve()
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_dir()}


def test_a_folder_planted_in_a_restored_generation_is_not_published(tmp_path: Path) -> None:
    """T81 (T46 without git): the writer removes every file the manifest does
    not list, but no folder: folders planted in a restored generation
    (``.well-known/``, ``static/evil/``) went live, empty, with the site
    (the artifact is the folder whole). Worse, the build then seals the
    generation with them: they are no folder of the manifest, so a file tar
    later adds in one, over a kept checkout, stamps no folder the seal
    holds, and goes live too."""
    tp, origin = _published(tmp_path)
    clone = _fresh_clone(tmp_path, origin)
    builds, target = _target_copied_from_live(clone)
    (builds / target / ".well-known" / "acme").mkdir(parents=True)
    (builds / target / "static" / "evil").mkdir()
    (builds / target / "static" / "evil" / "pwn.js").write_text("alert(1)")
    # A folder the manifest names, whose file is not what it records.
    (builds / target / "static" / "listed").mkdir()
    (builds / target / "static" / "listed" / "x.js").write_text("alert(2)")
    found = writer._read_manifest(builds / f"manifest-{target}")
    assert found is not None
    entries = {**found[0], "static/listed/x.js": (bytes(16), 8, 0)}
    (builds / f"manifest-{target}").unlink()
    writer._write_manifest(builds / f"manifest-{target}", entries)
    buildmod.build(clone / "content", clone / "site", signer=parse_private_key(tp.log_key))
    assert (clone / "site").resolve().name == target
    cold = tmp_path / "cold-out" / "site"
    assert site_files(clone / "site") == _cold(clone / "content", tmp_path)
    assert _folders(clone / "site") == _folders(cold)
