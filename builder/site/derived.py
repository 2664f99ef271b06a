"""The build's derived state, and when it may be read back.

Beside the output link ``out`` (``site``) the build keeps ``.<out>.builds/``:
two site generations, their manifests and the store (:mod:`builder.site.writer`,
:mod:`builder.buildcache`). All of it is derived from ``content/`` and can be
made again; none of it is evidence of anything. A pull request can force-add
any of these paths (``git add -f``), and the publish build that runs after
the merge holds the log key, so before the build reads any of it:

* **Nothing git tracks is used.** If git tracks any path at or under ``out``
  or ``.<out>.builds``, the pull request (or a maintainer's mistake) put it
  there: the build discards the whole folder and the link, builds as from
  nothing, and says so in one line. (Removing them from git is the
  maintainers' step: ``dreampool check`` names each such path.)
* **No link the build did not make is followed.** The folder, each
  generation and each manifest must be a plain folder or file; anything else
  is removed as itself (a link is unlinked, never followed). The only link
  the build makes is ``out`` itself, which it replaces by ``rename``.
* **Deletions stay inside.** Everything removed here is the folder itself,
  an entry directly in it, or the link ``out``; ``shutil.rmtree`` never
  follows a link inside what it removes.

THREATS.md T44–T46 hold the attacks and their tests.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from builder.content import gitrepo
from builder.files import owner_may_change, remove_entry
from builder.site.writer import GENERATIONS, builds_dir


def secure(out: Path) -> list[str]:
    """Make the derived state beside ``out`` safe for the build to read; returns
    one line for each thing it discarded, for the build to report."""
    out = out.absolute()
    root = builds_dir(out)
    notes: list[str] = []
    planted = gitrepo.tracked(out.parent, [out.name, root.name])
    if planted is None:
        return [
            _discard(
                root,
                out,
                f"{out.parent} is in a git checkout, but git could not say which paths it "
                "tracks: a build trusts none of its own state then",
                "check that git runs here",
            )
        ]
    if planted:
        more = len(planted) - 3
        shown = ", ".join(planted[:3]) + (f" and {more} more" if more > 0 else "")
        return [
            _discard(
                root,
                out,
                f"git tracks {len(planted)} path(s) of the build's own state ({shown}): a "
                "build never trusts them",
                f"remove them from git (git rm -r --cached {root.name} {out.name})",
            )
        ]
    if _kind(root) not in (None, "dir"):
        notes.append(f"{root} was not a plain folder (a link?); removed it, not what it names")
        remove_entry(root)
        return notes
    # Restored with the mode its archive gave it (T81): 0o500 would fail every build.
    owner_may_change(root)
    owner_may_change(root / "cache")
    for name in GENERATIONS:
        owner_may_change(root / name)
        if _kind(root / name) not in (None, "dir"):
            notes.append(f"{root / name} was not a plain folder; removed it")
            remove_entry(root / name)
        manifest = root / f"manifest-{name}"
        if _kind(manifest) not in (None, "file"):
            notes.append(f"{manifest} was not a plain file; removed it")
            remove_entry(manifest)
    return notes


def store_to_read(out: Path) -> Path | None:
    """The folder of the store of the build of ``out``, for a process that only
    reads it (:class:`builder.buildcache.StoreReader`), or None if it may not be
    read: the rules of :func:`secure`, checked without discarding anything (that
    is the build's to do). So None if git tracks any path of the build's state or
    cannot say, or if the builds folder or its ``cache/`` is not a plain folder."""
    out = out.absolute()
    root = builds_dir(out)
    try:
        if gitrepo.tracked(out.parent, [out.name, root.name]) != []:
            return None
        if _kind(root) != "dir" or _kind(root / "cache") != "dir":
            return None
    except OSError:  # under a file, or a folder this user may not look into: none to read
        return None
    return root / "cache"


def new_folders(out: Path) -> list[Path]:
    """The folders a build of ``out`` would make and that do not exist yet, deepest
    first: ``.<out>.builds/`` and each missing parent (``--out new/dir/site``)."""
    missing: list[Path] = []
    for path in (root := builds_dir(out), *root.parents):
        if os.path.lexists(path):
            break
        missing.append(path)
    return missing


def forget_new(folders: list[Path], out: Path) -> None:
    """After a build that failed: remove again the ``folders`` :func:`new_folders`
    found missing before it started, so a failed first build (no pool there, no log
    key yet) leaves nothing behind. Kept if the build made its site live in them
    (``out`` links into the first), which only a failure after that could meet;
    a parent is removed only if it is empty (os.rmdir)."""
    if not folders:
        return
    root = folders[0]
    if out.is_symlink() and os.path.realpath(out).startswith(os.path.realpath(root) + os.sep):
        return
    remove_entry(root)
    for parent in folders[1:]:
        try:
            os.rmdir(parent)
        except OSError:
            return


def _discard(root: Path, out: Path, why: str, then: str) -> str:
    """Remove the builds folder and the output link (never what a link names);
    the line that says so."""
    remove_entry(root)
    if out.is_symlink() or out.exists():
        remove_entry(out)
    return f"{why}, so it discarded {root.name}/ and {out.name} and built afresh; {then}"


def _kind(path: Path) -> str | None:
    """``dir`` or ``file`` for a plain folder or a file with one link, ``other``
    for anything else (a symlink, a FIFO, a hard-linked file), None if absent."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if stat.S_ISDIR(st.st_mode):
        return "dir"
    if stat.S_ISREG(st.st_mode) and st.st_nlink == 1:
        return "file"
    return "other"
