"""The pull-request gate: what a contributor may change, and checking just that.

``dreampool check --base REF`` runs on a pull request (the scaffold's check
workflow passes ``--base HEAD^1``, the target branch in GitHub's merge
commit). It compares the two commits with git and refuses, naming each
path, every change a contributor may not make. A contributor may only
**add**, as regular files:

=====================================  ======================================
``content/dreams/<id>.json``           a signed dream (``dreampool submit``)
``content/keys/<16 hex>.yaml``         their own new key, tier ``guest``
``content/rotations/<16 hex>.json``    the rotation statement of that new key
=====================================  ======================================

Everything else belongs to the maintainers or the build (THREATS.md T49):
salts and the log state (``content/log``) are written only by the build;
existing key files (tiers, names), erasures, ``pool.yaml``, workflows, the
package, requirements, and any other path are the maintainers' to change;
the build's own state (the ``site`` link, ``.site.builds/``) is never
tracked at all. A symlink or submodule is refused wherever it is. Files a
pull request deletes or modifies are refused too: a logged dream is never
edited, only erased by a maintainer.

Then only what the pull request adds is checked (format, signature,
redaction, the key rules against the key directory, the anonymity rules of
:mod:`builder.content.anonymity`), so the work grows with
the pull request, not with the pool; the base passed this same gate, and the
publish build verifies the whole log again.

:func:`judge` is pure (paths and modes in, problems out); :func:`check_pull_request`
does the reading.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from builder.content import anonymity, gitrepo, pool
from builder.content.gitrepo import MODE_FILE, MODE_GITLINK, MODE_SYMLINK, Change
from builder.errors import DreampoolError, InputError, Problem

_ADDABLE = {
    "dreams": re.compile(r"[0-9a-f]{16}\.json"),
    "keys": re.compile(r"[0-9a-f]{16}\.yaml"),
    "rotations": re.compile(r"[0-9a-f]{16}\.json"),
}
_WHAT = (
    "a pull request may only add dreams (content/dreams/<id>.json), a new key "
    "(content/keys/<16 hex>.yaml) and its rotation statement (content/rotations/<16 hex>.json); "
)
# What a build reads under content/ (relative to it): a file git ignores
# there is named as not committed by `check --base` too (review r91).
_BUILD_READS = ("dreams", "keys", "rotations", "erasures", "log", "pool.yaml")
_MAINTAINERS = "this change is the maintainers' to make: open it separately, or ask one of them"


@dataclass(slots=True)
class Contribution:
    """The paths a pull request adds within the contributor paths, by kind."""

    dreams: list[str] = field(default_factory=list)
    keys: list[str] = field(default_factory=list)
    rotations: list[str] = field(default_factory=list)


def judge(changes: list[Change], content: str) -> tuple[list[Problem], Contribution]:
    """Which of ``changes`` (paths relative to the repository's root) a
    contributor may make, with ``content`` the pool folder's path there."""
    problems: list[Problem] = []
    added = Contribution()
    for change in changes:
        path = change.path
        if MODE_SYMLINK in (change.new_mode,):
            problems.append(
                Problem(
                    path,
                    "",
                    "is a symlink; a pool holds plain files only: replace it by the file itself",
                )
            )
            continue
        if MODE_GITLINK in (change.new_mode, change.old_mode):
            problems.append(Problem(path, "", "is a submodule; a pool holds plain files only"))
            continue
        kind = _contributor_kind(path, content)
        if kind is None:
            problems.append(Problem(path, "", _outside(path, content, change.status)))
            continue
        if change.status != "A":
            verb = {"D": "deletes", "M": "changes", "T": "changes the type of"}.get(
                change.status, "changes"
            )
            problems.append(
                Problem(
                    path,
                    "",
                    f"the pull request {verb} a file already in the pool; "
                    + (
                        "a submitted dream is never edited or removed (a maintainer "
                        "erases one with `dreampool erase`)"
                        if kind == "dreams"
                        else "tiers and names in an existing key file, and stored rotations, "
                        "are the maintainers' to change"
                    ),
                )
            )
            continue
        if change.new_mode not in MODE_FILE:
            problems.append(Problem(path, "", "is not a regular file"))
            continue
        getattr(added, kind).append(path)
    return problems, added


def _contributor_kind(path: str, content: str) -> str | None:
    parts = PurePosixPath(path).parts
    base = PurePosixPath(content).parts
    if len(parts) != len(base) + 2 or parts[: len(base)] != base:
        return None
    folder, name = parts[len(base)], parts[len(base) + 1]
    pattern = _ADDABLE.get(folder)
    return folder if pattern is not None and pattern.fullmatch(name) else None


def _outside(path: str, content: str, status: str) -> str:
    """Why ``path``, which the pull request changes as git's ``status`` letter
    says, is not a contributor path, and what to do, in the words a
    contributor needs."""
    inside = path.startswith(content.rstrip("/") + "/") if content != "." else True
    rel = path[len(content.rstrip("/")) + 1 :] if inside and content != "." else path
    if inside and rel.startswith("dreams/") and rel.endswith(".salt"):
        if status != "A":  # a logged dream's: "remove this file" was the wrong advice
            verb = "deletes" if status == "D" else "changes"
            return (
                f"the pull request {verb} the salt of a logged dream, which its record needs; "
                f"restore it from the base branch (git checkout <base> -- {path})"
            )
        return (
            "salts are written only by the build, when it logs a dream; remove this file. "
            + _MAINTAINERS
        )
    if inside and rel.startswith("log/"):
        return "the log state is written only by the build; " + _MAINTAINERS
    if is_build_state(PurePosixPath(path).parts[0]):
        return "the build's own state is never committed (git rm -r --cached it); " + _MAINTAINERS
    return "is outside the contributor paths: " + _WHAT + _MAINTAINERS


def check_pull_request(
    content: Path, base: str, notes: list[Problem] | None = None
) -> tuple[list[Problem], list[pool.ScannedDream]]:
    """Every problem of the pull request ``base..HEAD`` in the pool at ``content``
    (a folder in a git work tree), and the dreams it adds that passed.

    A key-directory problem the pull request did not cause (it is there
    without the keys it adds: say a fork two stale green checks let onto
    main) is not this pull request's to fix: it goes to ``notes``, if given,
    for the maintainers, and fails nothing."""
    root = gitrepo.work_tree(content)
    if root is None:
        raise gitrepo.GitError(
            f"{content} is not in a git checkout; --base compares two commits",
            hint="run check without --base to check the whole pool",
        )
    rel = content.resolve().relative_to(root.resolve()).as_posix()
    changes = gitrepo.changes(root, base)
    problems, added = judge(changes, rel)
    # What the commits do not hold is neither judged nor read: said, never
    # passed as if checked (a new user's audit, 23rd session).
    loose = gitrepo.uncommitted(root, rel, _BUILD_READS)
    problems += [
        Problem(
            path,
            "",
            f"is not committed: `check --base` checks the commits {base}..HEAD; commit it, "
            "or run check without --base to check the work tree as it is",
        )
        for path in loose
    ]
    problems = [dataclasses.replace(p, file=_shown(root, p.file)) for p in problems]
    problems += _unseen_by_git(content, rel, loose)
    try:
        pool.load_config(content)
    except InputError as exc:
        problems.extend(exc.problems)
    directory, key_problems = pool.load_keys(content)
    new_keys = {"sha256:" + PurePosixPath(path).stem: path for path in added.keys}
    # Compared as realpath does, which never raises: a symlink loop the pull
    # request adds is named by judge(), not a traceback (review r91).
    changed = {os.path.realpath(root / path) for path in [c.path for c in changes] + loose}
    ours, theirs = _blame(content, directory, key_problems, changed, new_keys)
    broken_on_base = {os.path.realpath(p.file) for p in theirs}
    problems.extend(ours)
    if notes is not None:
        notes.extend(theirs)
    retired = pool.retired_keys(directory)
    for path in added.rotations:
        # A rotation statement is stored for the new key it moves a name to,
        # which comes in the same pull request (`dreampool submit` writes both).
        key_id = "sha256:" + PurePosixPath(path).stem
        entry = directory.keys.get(key_id)
        if key_id not in new_keys or entry is None or entry.rotated_from is None:
            problems.append(
                Problem(
                    _shown(root, path),
                    "",
                    "a rotation statement comes with the new key it names "
                    f"(content/keys/{PurePosixPath(path).stem}.yaml, with rotatedFrom) in the "
                    "same pull request; `dreampool submit` adds both",
                )
            )
    for key_id, path in new_keys.items():
        shown = _shown(root, path)
        entry = directory.keys.get(key_id)
        if entry is not None and entry.rotated_from is None:
            # load_keys names whichever of two clashing keys sorts last; the
            # pull request's own key is the one to blame.
            held = [
                k
                for k in directory.keys.values()
                if k.key_id not in new_keys
                and pool.name_skeleton(k.author) == pool.name_skeleton(entry.author)
            ]
            if held:
                problems.append(
                    Problem(
                        shown,
                        "/author",
                        f"author name {entry.author!r} is held by key {held[0].key_id} "
                        f"({held[0].author!r}); a new key for a held name needs a rotation "
                        "statement signed by that key (`dreampool rotate`), and another "
                        "author needs another pseudonym",
                    )
                )
        if entry is not None and entry.rotated_from is not None:
            # load_keys names whichever of two rotations from one key sorts
            # last; the pull request's own is the one to blame.
            first = next(
                (
                    k
                    for k in sorted(directory.keys.values(), key=lambda k: k.key_id)
                    if k.rotated_from == entry.rotated_from and k.key_id not in new_keys
                ),
                None,
            )
            if first is not None:
                problems.append(
                    Problem(
                        shown,
                        "/rotatedFrom",
                        f"key {entry.rotated_from} is retired: {first.author!r} rotated from "
                        f"it to key {first.key_id} (content/rotations/{first.key_id[7:]}.json); "
                        "a retired key cannot move the name again: only the current key "
                        f"{pool.current_key(first.key_id, retired)} may sign a rotation",
                    )
                )
        if entry is not None and entry.tier != "guest":
            problems.append(
                Problem(
                    shown,
                    "/tier",
                    f"a new key comes in as guest, not {entry.tier}; tiers are raised "
                    "by the maintainers",
                )
            )
    scanned: list[pool.ScannedDream] = []
    signing: set[str] = set()  # the keys of the dreams this pull request adds
    for path in added.dreams:
        file = Path(_shown(root, path))
        result = pool.check_file(file)
        if isinstance(result, list):
            problems.extend(result)
            continue
        signing.add(result.key_id)
        name_id = file.stem
        if result.id != name_id:
            problems.append(
                Problem(
                    str(file), "", f"file name does not match the dream id (want {result.id}.json)"
                )
            )
            continue
        if (content / "erasures" / f"{result.id}.json").exists():
            problems.append(
                Problem(
                    str(file), "", f"dream {result.id} was erased from this pool and cannot return"
                )
            )
            continue
        if result.key_id not in directory.keys:
            key_file = content / "keys" / f"{result.key_id.removeprefix('sha256:')}.yaml"
            unknown = pool.unknown_key_rule(
                content, result.key_id, base_broken=os.path.realpath(key_file) in broken_on_base
            )
            problems.append(Problem(str(file), "/sig/keyId", unknown))
            continue
        rule = pool.check_key_rules(result, str(file), directory)
        if rule:
            problems.append(Problem(str(file), "/author", rule))
            continue
        # An added dream is not logged, so a retired key's is refused here,
        # its rotation logged or in this very pull request (docs/protocol.md §7).
        retired_rule = pool.retired_rule(result.key_id, retired)
        if retired_rule:
            problems.append(Problem(str(file), "/sig/keyId", retired_rule))
            continue
        scanned.append(pool.ScannedDream(str(file), result))
    # docs/protocol.md §7: a rotation is stored with the first dream its new
    # key signs, whose key leaf retires the old key in the log too (as
    # `dreampool submit` requires); a bare rotation would retire it in the
    # pool only, where no site verifier sees it.
    for key_id, path in new_keys.items():
        entry = directory.keys.get(key_id)
        if entry is not None and entry.rotated_from is not None and key_id not in signing:
            problems.append(
                Problem(
                    _shown(root, path),
                    "/rotatedFrom",
                    f"a rotation is stored with the first dream signed by its new key {key_id}; "
                    "add a dream signed by the new key to this pull request "
                    f"(`dreampool sign --key {key_id}`, then `dreampool submit`)",
                )
            )
    problems += _retires_pending(content, root, directory, added, new_keys)
    # docs/protocol.md §1.2: a key the pool held before this pull request has
    # signed a dream, so a one-time key among them signs no other.
    before = directory.keys.keys() - new_keys.keys()
    refused = anonymity.refusals((s.dream for s in scanned), before)
    problems += [Problem(s.path, *refused[s.dream.id]) for s in scanned if s.dream.id in refused]
    return problems, [s for s in scanned if s.dream.id not in refused]


def _retires_pending(
    content: Path,
    root: Path,
    directory: pool.KeyDirectory,
    added: Contribution,
    new_keys: dict[str, str],
) -> list[Problem]:
    """A rotation this pull request adds retires its old key at once (§7), so
    a dream of that key already merged but not logged yet (its publish run is
    queued, or failed) would be refused by every build after the merge: the
    pull request would leave the base failing `check`. Only when it adds a
    rotation is the dreams folder listed; a dream is logged once its salt is
    beside it (the build writes the salt when it logs the dream)."""
    retiring = {
        entry.rotated_from: key_id
        for key_id in new_keys
        if (entry := directory.keys.get(key_id)) is not None and entry.rotated_from is not None
    }
    if not retiring:
        return []
    ours = {os.path.realpath(root / path) for path in added.dreams}
    problems = []
    for path in sorted((content / "dreams").glob("*.json")):
        if os.path.realpath(path) in ours or path.with_suffix(".salt").exists():
            continue
        try:
            obj = json.loads(pool.read_regular(path))
            key_id = obj["sig"]["keyId"]
        except (DreampoolError, OSError, ValueError, TypeError, KeyError):
            continue  # `check` names it; not this pull request's
        new_id = retiring.get(key_id) if isinstance(key_id, str) else None
        if new_id is not None:
            problems.append(
                Problem(
                    _shown(root, new_keys[new_id]),
                    "/rotatedFrom",
                    f"this rotation retires key {key_id}, which signed {path.name} on the "
                    "base branch, merged but not logged yet: every build after the merge "
                    "would refuse it. Wait for the publish run to log it, then run the "
                    "check again (if your old key leaked and that dream is not yours, ask "
                    "a maintainer to remove the file first)",
                )
            )
    return problems


def _blame(
    content: Path,
    directory: pool.KeyDirectory,
    key_problems: list[Problem],
    changed: set[str],
    new_keys: dict[str, str],
) -> tuple[list[Problem], list[Problem]]:
    """``key_problems`` split into the pull request's (in a file it adds or
    changes, or between keys only with the keys it adds) and those already on
    the base. A key file the pull request changed was said to be broken "on
    the base branch already" (a new user's audit, 23rd session)."""
    mine = changed
    between = pool.directory_problems(content, directory)
    before = pool.KeyDirectory({k: v for k, v in directory.keys.items() if k not in new_keys})
    already = set(pool.directory_problems(content, before))
    ours: list[Problem] = []
    theirs: list[Problem] = []
    for problem in key_problems:
        if problem in between:
            caused = problem not in already
        else:  # within one key file
            caused = os.path.realpath(problem.file) in mine
        (ours if caused else theirs).append(problem)
    return ours, theirs


def _shown(root: Path, path: str) -> str:
    """``path`` (relative to the repository's root) as the user reaches it from
    the current folder: in a workflow, the root, as GitHub's annotations want.
    A name git holds as bytes that are not UTF-8, or with control or other
    invisible characters, is shown escaped (as ``builder.content.pool`` shows the
    names it finds), never raw."""
    rel = os.path.relpath(root / path)
    if rel.isprintable() and not _SURROGATE.search(rel):
        return rel
    return rel.encode("unicode_escape").decode("ascii")


_SURROGATE = re.compile("[\ud800-\udfff]")


# The folders a build lists entry by entry, refusing anything there but plain
# files and links: dreams and keys (builder.content.pool._scan) and the log's
# leaf shards (builder.log.logstate). Rotations and erasures are read by name.
_LISTED = ("dreams", "keys", "log/leaves")


def _unseen_by_git(content: Path, rel: str, loose: Sequence[str]) -> list[Problem]:
    """A problem for each entry of the folders a build lists that git does not
    name and the build refuses: a special file (FIFO, socket, device), or a
    folder under which git names nothing, neither tracked nor in ``loose``
    (:func:`builder.content.gitrepo.uncommitted`'s paths, relative to the
    work tree's root; ``rel`` is ``content``'s): an empty one, one holding
    only ignored dotfiles, one nested past the path limit. So `check --base`,
    which reads what git says, names what the build would (review r91); a
    folder git names something under is git's to report (a base branch's
    problem stays a warning: review r95). One ``scandir`` a folder, by the
    entries' types; dotfiles are skipped, as the build skips them; a folder
    that is a link, or cannot be listed, is the layout check's and judge()'s
    to name. git is asked again, once a listed folder, only where a folder is
    found in it, which no honest pool holds (reviews r96, r97)."""
    problems = []
    for name in _LISTED:
        folder = content / name
        if any(os.path.islink(content / part) for part in _prefixes(name)):
            continue
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            continue
        held: set[str] | None = None  # asked of git once a folder is found here
        for entry in entries:
            if entry.name.startswith(".") or entry.is_symlink():
                continue  # a link git lists; a dotfile the build skips
            if entry.is_file(follow_symlinks=False):
                continue
            is_folder = entry.is_dir(follow_symlinks=False)
            if is_folder:
                if held is None:
                    held = _git_names(content, rel, name, loose)
                if held is _ALL or entry.name in held:
                    continue
            shown = str(folder / entry.name.encode("unicode_escape").decode("ascii"))
            what = "a folder git holds nothing of" if is_folder else "a special file"
            problems.append(
                Problem(
                    shown,
                    "",
                    f"is {what}, which git does not carry and a build refuses (unexpected "
                    "entry); remove it",
                )
            )
    return problems


def _prefixes(name: str) -> list[str]:
    """``log/leaves`` → ``log``, ``log/leaves``."""
    parts = name.split("/")
    return ["/".join(parts[: i + 1]) for i in range(len(parts))]


# Where git cannot say what it holds: every folder counts as git's to report.
_ALL: set[str] = set()


def _git_names(content: Path, rel: str, name: str, loose: Sequence[str]) -> set[str]:
    """The names of the entries of ``content/name`` under which git names a
    path: one in ``loose`` (paths from the work tree's root), or one it
    tracks (:func:`builder.content.gitrepo.tracked_folders`: one git run,
    names compared byte for byte, never folded: review r97). :data:`_ALL`
    where git cannot say: the problem is then git's to report, never a false
    one."""
    prefix = f"{rel}/{name}/" if rel not in ("", ".") else f"{name}/"
    names = {p[len(prefix) :].partition("/")[0] for p in loose if p.startswith(prefix)}
    tracked = gitrepo.tracked_folders(content / name)
    return _ALL if tracked is None else names | tracked


# --- the whole pool (check without --base) ---------------------------------


def special_files(content: Path) -> list[Problem]:
    """A problem for every entry under ``content`` that is not a plain folder
    or a regular file with one link: symlinks, hard links, FIFOs, sockets,
    devices. None of them can come from git except symlinks; the build never
    follows or writes through any of them."""
    problems = []
    stack = [content]
    while stack:
        folder = stack.pop()
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except (FileNotFoundError, NotADirectoryError):
            continue
        for entry in entries:
            st = entry.stat(follow_symlinks=False)
            shown = os.path.join(folder, entry.name.encode("unicode_escape").decode("ascii"))
            if stat.S_ISDIR(st.st_mode):
                stack.append(Path(entry.path))
            elif stat.S_ISLNK(st.st_mode):
                problems.append(Problem(shown, "", "is a symlink; a pool holds plain files only"))
            elif not stat.S_ISREG(st.st_mode):
                problems.append(
                    Problem(shown, "", "is a special file (FIFO, socket or device); remove it")
                )
            elif st.st_nlink != 1:
                problems.append(
                    Problem(shown, "", "is a hard link; a pool holds plain files only: copy it")
                )
    return problems


def is_build_state(first: str) -> bool:
    """Whether a top-level name of the repository is the build's own state (the
    ``site`` link, a ``.<name>.builds`` folder) on some file system: compared as a
    file system that folds letter case may (macOS, Windows; APFS folds U+017F
    too; HFS+ ignores some invisible code points), so ``Site``, ``.SITE.Builds``
    and ``s<U+200C>ite`` are it as well (THREATS.md T110)."""
    folded = gitrepo.fold_name(first)
    return folded == "site" or (folded.startswith(".") and folded.endswith(".builds"))


def tracked_problems(content: Path) -> list[Problem]:
    """Symlinks and submodules git tracks anywhere in the pool's repository, and
    any tracked file of the build's own state (``site``, ``.<name>.builds/``)."""
    root = gitrepo.work_tree(content)
    if root is None:
        return []
    problems = []
    for mode, path in gitrepo.tracked_entries(root):
        first = PurePosixPath(path).parts[0]
        if mode == MODE_SYMLINK:
            problems.append(
                Problem(
                    _shown(root, path), "", "is a symlink git tracks; a pool holds plain files only"
                )
            )
        elif mode == MODE_GITLINK:
            problems.append(
                Problem(_shown(root, path), "", "is a submodule; a pool holds plain files only")
            )
        elif is_build_state(first):
            problems.append(
                Problem(
                    _shown(root, path),
                    "",
                    "is the build's own state, which is never committed (a build discards "
                    "it): git rm -r --cached it",
                )
            )
    return problems
