"""Write a build's files to the output folder: atomically, and only what changed.

The output folder ``out`` is a symlink to one of two generations kept beside
it, ``.<name>.builds/a`` and ``.<name>.builds/b`` (double buffering). A build
brings the generation that is *not* live up to date, then points ``out`` at it
with one ``rename`` of a new symlink over the old one, so a reader or a killed
build sees either the old site or the new one, never a mix and never nothing.

Each generation has a manifest (``manifest-a``: a BLAKE2b digest, size and
mtime per path) that is true whenever it exists: it is removed before the
generation is touched and written (synced to the disk, then renamed into
place) after it is complete. So a build writes only the files whose bytes
differ from what that generation already holds (a file whose size or mtime
moved, edited in place by someone, is written again: each is looked at as
the build begins, so one edited while a build runs is written again by the
next build of that generation); a generation without a
sound manifest (a build was killed while updating it, it was deleted, or a
power cut left it empty or cut short: its header and checksum say so) is
emptied and written again, which costs time and nothing else. A file the
previous build wrote and this build would write again unchanged can be
*kept* by digest (:meth:`SiteWriter.keep`): hard-linked from the live
generation, never rendered. A file a generation already holds is replaced by
rename, never written into, so the two generations may share it; a path new
to the generation is written in place. Every write goes into a file it has
just made (``O_EXCL``): a name found in the generation, even a temporary
one, may be a link to a file the live site serves.

A generation may come from elsewhere: the publish workflow restores both
from a cache that code in another workflow could have written (THREATS.md
T81), and tar sets every size and mtime as its archive says. So a build
records a *seal* for the generation it made (:meth:`SiteWriter.commit`, kept
in the build store, whose rows a signing build tags): its manifest's checksum
and the inode and ctime of each of its folders, which no restore can set (a
restore makes a folder anew, or, over a checkout kept between runs, unlinks
a file before it writes it again, which stamps its folder's ctime; tar then
sets a folder's mtime, which stamps its ctime again). A generation whose
seal does not match is taken only after each file it lists is read and found
to hold the recorded digest, and everything else in it is removed; files are
read on every core (builder.parallel). Reading the manifest, checking the
seal and reading an unsealed generation's files (or, sealed, a ``stat`` of
each to find one edited in place) is the *survey* (:class:`Opening`), which
a build starts in another process as it begins and the writer takes when
the build reaches its site stage; it reads only. The seal the writer then
records is computed from an ``lstat`` of the folders the build touched, and
of the others as the survey found them (:meth:`SiteWriter._untouched`).

Paths are checked before a byte is written: relative, no ``..``, no empty or
``.`` segment, no two writers of one path.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import dataclasses
import errno
import fcntl
import functools
import hashlib
import os
import stat
import struct
from collections.abc import (
    Callable,
    Collection,
    Iterable,
    Iterator,
    Mapping,
    MutableMapping,
    Sequence,
)
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from builder import parallel
from builder.errors import DreampoolError
from builder.files import owner_may_change, remove_entry

_RENAME_EXCHANGE = 2
_AT_FDCWD = -100
GENERATIONS = ("a", "b")
DIGEST_SIZE = 16


class PlanError(DreampoolError):
    """A build plan names a path that cannot be written safely."""


_NOT_SEGMENTS = frozenset(("", ".", ".."))


def check_path(rel: str) -> None:
    # Split the string itself: PurePosixPath drops "." and empty segments, so
    # "a/./b" and "a//b" would alias "a/b" (two writers of one file) and "."
    # would name the output folder itself. An empty first segment is a
    # leading "/" (absolute).
    if not _NOT_SEGMENTS.isdisjoint(rel.split("/")) or "\\" in rel or "\x00" in rel or "\n" in rel:
        raise PlanError(f"build plan path {rel!r} is not a plain relative path")


def digest(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=DIGEST_SIZE).digest()


def builds_dir(out: Path) -> Path:
    """Where the generations, their manifests and the build caches live."""
    out = out.absolute()
    return out.parent / f".{out.name}.builds"


Entry = tuple[bytes, int, int]  # digest, size, mtime_ns of one file of a generation

# A generation's seal: its manifest's checksum, then a digest of the inode
# and ctime (nanoseconds, big-endian) of each of its folders, the generation's
# own first. See the module's docstring.
_SEAL_STAT = struct.Struct(">QQ")
SEAL_SIZE = 2 * DIGEST_SIZE


@dataclass(frozen=True)
class Survey:
    """What a build found of the generation it will write, before changing it:
    whether it has a sound manifest, whether its seal holds, its manifest's
    entries if it does (with the files edited in place, and its folders'
    inodes and ctimes), and, if it has a manifest but no seal, which of its
    files hold their recorded bytes and what else is there
    (:func:`_check_generation`; None if it was not a plain folder)."""

    manifest: bool
    sealed: bool
    entries: dict[str, Entry]
    checked: _Checked | None
    # Sealed: the entries whose file is not as recorded (its size or mtime
    # moved, or it is gone: edited in place), from a stat of each; and the
    # (inode, ctime) of each folder as the seal's check found them, packed
    # (_SEAL_STAT) in the order of _folders(entries), for the commit to seal
    # by what the build touched (SiteWriter._untouched). Packed: at 100k
    # dreams 1.7 MB to hold through the build, not a dict of 108,000 names.
    edited: frozenset[str] = frozenset()
    folders: bytes | None = None
    # Sealed: the inode and ctime of each entry's file, packed in the entries'
    # order, for the commit to find one replaced since (SiteWriter._replaced_kept).
    files: bytes | None = None
    # The live generation (None if there is none): what the writer may lend
    # from it (SiteWriter.keep) and whether its seal holds (see _LiveSurvey).
    live: _LiveSurvey | None = None


@dataclass(frozen=True)
class _LiveSurvey:
    """What the survey found of the live generation, which a build reads but
    never writes: whether its seal holds (so a file it lends is taken by its
    size and mtime, else by its bytes: SiteWriter._live_holds), and the
    entries of its manifest the generation being written does not hold as
    recorded (a path it lacks, another digest, a file edited in place).
    Only those can be lent: any other file the writer would keep is its own.
    At 100k dreams the live manifest is 314,000 entries, 86 MB once parsed,
    and a build after one new dream lends the few dozen files the build
    before it changed; parsed in the build's process it was a second of a
    +1 there, with an ``lstat`` of each folder for its seal."""

    sealed: bool
    entries: dict[str, Entry]
    # Sealed: the (inode, ctime) of each folder of ``entries``, packed
    # (_SEAL_STAT), as the seal's check found them (SiteWriter._as_surveyed).
    folders: dict[str, bytes] | None = None


class Opening:
    """A build's claim on the output folder, taken before its other stages: the
    build lock, which generation is live and which is to be written, and the
    :class:`Survey` of the latter, made in a forked process while the build
    proves the log, scans and models the pool (``background``; :mod:`builder.build`).

    Surveying reads the generation's manifest, checks its seal (an ``lstat``
    of each folder) and a ``stat`` of each file it lists (one edited in
    place is written again), or, when the seal does not hold (a generation the
    publish workflow restored from its cache: THREATS.md T81), reads every
    file it lists (at 100k dreams over 300,000 files, a gigabyte). It removes
    and writes nothing; it gives a folder restored without its owner's read,
    write or search bit (0o500, 0o000) those bits, as the writer always has
    (review r33), and that stays if the build then fails. The
    :class:`SiteWriter` made with it removes the manifest, and what the
    survey found should go, before it writes: a build that fails before its
    site stage leaves the generation's files and its manifest as they were,
    and does not wait for the survey (:meth:`close` kills its process). The
    lock is taken first and held until the writer commits, so no other build
    can change the generation between the survey and its use.

    Hand it to one :class:`SiteWriter`, or :meth:`close` it."""

    def __init__(
        self,
        out: Path,
        *,
        seals: MutableMapping[str, bytes] | None = None,
        seals_tagged: bool = False,
        background: bool = True,
        defer: bool = False,
    ) -> None:
        self.out = out.absolute()
        self.root = builds_dir(self.out)
        self.seals = seals
        self.seals_tagged = seals is not None and seals_tagged
        _plain_folder(self.root)  # a link here would lead every write elsewhere
        self._lock: int | None = _lock(self.root, self.out)
        self._stack: contextlib.ExitStack | None = None
        self._pending: parallel.Pending[Survey] | None = None
        self._background = background
        try:
            _remove_stale_links(self.out)
            self.live = _live_generation(self.out, self.root)
            self.target = GENERATIONS[1] if self.live == GENERATIONS[0] else GENERATIONS[0]
            self._args = (self.seals, self.root, self.target, self.live)
            self._result: Callable[[], Survey] = functools.partial(_survey, self._args)
            if not defer or seals is None or seals.get(self.target) is None:
                self.begin()
        except BaseException:
            self.close()
            raise

    def begin(self) -> None:
        """Start the survey in its own process, if it is to run in one and has
        not started (a second call does nothing, as does one after :meth:`close`)."""
        if not self._background or self._lock is None or self._pending is not None:
            return
        self._background = False  # once
        # The Opening's before the fork, so that close() ends the process
        # whatever line an interrupt lands on (reviews r62, r82).
        self._stack = contextlib.ExitStack()
        self._pending = parallel.background_on(
            self._stack, _survey, self._args, initializer=drop_locks
        )
        self._result = self._pending

    def survey(self) -> Survey:
        """The survey, waited for; made here if its process died (the OOM
        killer), as it is without a second core."""
        try:
            return self._result()
        except DreampoolError:
            return _survey((self.seals, self.root, self.target, self.live))
        finally:
            self._end_background(abandon=False)

    def take_lock(self) -> int:
        """The build lock, handed to the writer (which releases it)."""
        if self._lock is None:
            raise PlanError(
                "this build's claim on the output is closed or taken", hint="report this"
            )
        fd, self._lock = self._lock, None
        return fd

    def close(self) -> None:
        """End the survey's process without waiting for it, and release the
        lock, unless a writer took them. The lock goes whatever happens while
        the process ends (an interrupt, review r60)."""
        try:
            self._end_background(abandon=True)
        finally:
            if self._lock is not None:
                _LOCKS.discard(self._lock)
                os.close(self._lock)
                self._lock = None

    def _end_background(self, *, abandon: bool) -> None:
        stack, pending = self._stack, self._pending
        self._stack = self._pending = None
        if stack is None:
            return
        try:
            if abandon and pending is not None:
                pending.abandon()
        finally:
            stack.close()

    def __enter__(self) -> Opening:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _survey(args: tuple[Mapping[str, bytes] | None, Path, str, str | None]) -> Survey:
    """:class:`Survey` of generation ``target`` under ``root``, and of the live
    generation ``live`` (see there)."""
    seals, root, target, live = args
    survey = _survey_target(seals, root, target)
    if live is None:
        return survey
    if survey.sealed:
        own: Mapping[str, Entry] = survey.entries
    elif survey.checked is not None:
        own = survey.checked.held
    else:
        own = {}
    return dataclasses.replace(survey, live=_survey_live(seals, root, live, own, survey.edited))


def _survey_target(seals: Mapping[str, bytes] | None, root: Path, target: str) -> Survey:
    found = _read_manifest(root / f"manifest-{target}")
    if found is None:
        return Survey(manifest=False, sealed=False, entries={}, checked=None)
    entries, checksum = found
    gen = root / target
    folders = None
    # Each file stat-ed here, not as the build keeps it: at 100k dreams
    # 300,000 calls, made in this process while the build reads the pool
    # rather than in its site stage. Before the folders: a file replaced
    # after its stat moves its folder's ctime, which the seal's check then
    # sees (review r67: in the other order, one replaced in between was
    # taken with the seal).
    files_now = None
    if seals is not None:
        row = seals.get(target)
        if row is not None and row[:DIGEST_SIZE] == checksum:
            files_now = _files_now(str(gen), entries)
            folders = _folder_stats(gen, entries)
            if folders is not None and _seal_of(checksum, folders) != row:
                folders = None
    if seals is None or folders is not None:
        packed = None if folders is None else b"".join(folders.values())
        edited, files = files_now or _files_now(str(gen), entries)
        return Survey(True, True, entries, None, edited, packed, files=files)
    # Unsealed: its files are read, and only what they hold is needed (at 100k
    # dreams the entries are 30 MB to hand back from the survey's process).
    checked = _check_generation(str(gen), entries) if _plain(gen) else None
    return Survey(manifest=True, sealed=False, entries={}, checked=checked)


# How many files' worth of a sealed generation's folders one ``lstat`` each
# costs as much as reading and digesting one file: measured at 10k and 100k
# dreams (benchmarks/cold_floor.py), 3.3 µs a folder of about 3 files against
# about 15 µs a file read (PROFILE.md, twelfth session).
LSTATS_PER_READ = 16


def _survey_live(
    seals: Mapping[str, bytes] | None,
    root: Path,
    live: str,
    own: Mapping[str, Entry],
    edited: frozenset[str],
) -> _LiveSurvey:
    """:class:`_LiveSurvey` of generation ``live``, given what the generation
    being written holds as recorded (``own``, less ``edited``)."""
    found = _read_manifest(root / f"manifest-{live}")
    if found is None:
        return _LiveSurvey(sealed=False, entries={})
    entries, checksum = found
    lendable = {}
    for rel, entry in entries.items():
        held = own.get(rel)
        if held is None or held[0] != entry[0] or rel in edited:
            lendable[rel] = entry
    if not lendable:  # nothing to lend (a build after a build of the same site)
        return _LiveSurvey(sealed=False, entries={})
    if seals is None:
        return _LiveSurvey(sealed=True, entries=lendable)
    if len(lendable) * LSTATS_PER_READ < len(entries):
        # Fewer files to lend than the seal's lstat of every folder is worth:
        # each is read instead when lent, as from a restored generation
        # (SiteWriter._live_holds). At 100k dreams the seal's check was 0.45 s
        # of the survey (108,000 folders) for the few dozen files a +1 lends.
        return _LiveSurvey(sealed=False, entries=lendable)
    row = seals.get(live)
    stats = None
    if row is not None and row[:DIGEST_SIZE] == checksum:
        stats = _folder_stats(root / live, entries)
    if stats is None or _seal_of(checksum, stats) != row:
        return _LiveSurvey(sealed=False, entries=lendable)
    # The folders a lent file is in, as the seal's check found them: one moved
    # since (a page replaced there, as tar does, after the survey) makes the
    # writer read what it would lend from there (review r64).
    return _LiveSurvey(True, lendable, {f: stats[f] for f in _folders(lendable)})


def _sealed(
    seals: Mapping[str, bytes] | None,
    root: Path,
    gen: str,
    entries: Mapping[str, Entry],
    checksum: bytes,
) -> bool:
    """Whether ``gen`` is the generation a build of this pool sealed (its
    manifest's checksum, its folders' inodes and ctimes): True without seals."""
    if seals is None:
        return True
    # Not a plain folder (a link, or gone) and no row are both None: unsealed.
    row = seals.get(gen)
    if row is None or row[:DIGEST_SIZE] != checksum:
        return False
    return _seal(root / gen, checksum, entries) == row


def _plain(path: Path) -> bool:
    """Whether ``path`` is a folder (not a link to one)."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


class SiteWriter:
    """One build's writes into the generation that is not live.

    Use as a context manager: leaving it without an exception makes the new
    generation live (:meth:`commit`); an exception leaves ``out`` untouched.
    """

    def __init__(
        self,
        out: Path,
        *,
        erasures: int = 0,
        seals: MutableMapping[str, bytes] | None = None,
        seals_tagged: bool = False,
        opening: Opening | None = None,
    ) -> None:
        # How many erased dreams the log holds: recorded in the manifest, so
        # that a later build can tell whether the other generation may still
        # show one of them (see retire_stale).
        self.erasures = erasures
        if opening is None:
            opening = Opening(out, seals=seals, seals_tagged=seals_tagged, background=False)
        elif seals is not None or seals_tagged or opening.out != out.absolute():
            # The opening's seals, tag and output are the ones used: any other is a mistake.
            raise PlanError(
                "a SiteWriter made with an Opening takes its output and seals from it",
                hint="report this",
            )
        # The seals of both generations (see seal): given by a build, read
        # from its store, and updated by commit. Without them (write_tree),
        # a generation is taken as its manifest records it.
        self._seals = opening.seals
        # Whether only a holder of the log key can have written the seals: rows
        # a signing build took from its store, each tagged with its row key
        # (builder.buildcache). Anyone who can write the store can write any
        # other seal, together with a link in the generation it vouches for.
        self._seals_tagged = opening.seals_tagged
        self.out, self.root = opening.out, opening.root
        self._lock = opening.take_lock()
        try:
            self._open(opening)
        except BaseException:
            # Not left taken: this process's next build would find it so.
            self._release()
            raise

    def _open(self, opening: Opening) -> None:
        """Take the generation that is not live for writing, as its survey
        (:class:`Opening`) found it."""
        live, self.target = opening.live, opening.target
        self.live = live
        self.gen = self.root / self.target
        self._gen = str(self.gen)
        self._live = f"{self.root}/{live}"
        self._live_manifest: dict[str, Entry] = {}
        self._live_sealed = True
        # The live generation's files read to lend so far (not vouched for by
        # its seal): each as it was, or None (see _lendable).
        self._live_read: dict[str, Entry | None] = {}
        survey = opening.survey()
        # Those folders as the survey's check of the live seal found them.
        self._live_stats: dict[str, bytes] | None = None
        if survey.live is not None:
            self._live_manifest = survey.live.entries
            self._live_sealed = survey.live.sealed
            self._live_stats = survey.live.folders
        # From here until commit the target generation is being changed.
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.root / f"manifest-{self.target}")
        if self._seals is not None:
            self._seals.pop(self.target, None)
        had = survey.entries
        # The files of ``had`` not as recorded: a sealed generation's, from the
        # survey's stat of each (so none is stat-ed again as it is kept); an
        # unsealed one's kept files were just read whole.
        self._edited = survey.edited if survey.sealed else frozenset()
        if not survey.manifest:
            remove_entry(self.gen)
        _plain_folder(self.gen)
        if not survey.sealed:
            # What the survey found (the files that hold their recorded bytes;
            # what else is there goes now), or, for a folder that was not a
            # plain one, nothing: _plain_folder made it anew, empty.
            had = survey.checked.apply(self._gen) if survey.checked is not None else {}
        elif not self._seals_tagged and _remove_links(self._gen):
            # A generation restored from the publish workflow's cache may hold a
            # link where a folder was (THREATS.md T45, T81): writes and hard links
            # made through it landed outside (review r32). Its seal, if any, is
            # no evidence: who planted the link could write the seal too. What
            # was removed is no longer had as recorded, whatever the survey's
            # stat said (review r63), nor is a file of a folder that was a link,
            # which the survey stat-ed through it (review r64): each file again.
            self._edited = _edited(self._gen, had)
        # Else its seal, tagged, is the one this pool's signing build recorded as
        # it made the generation, with no link in it (a writer makes none), and
        # it still holds: no folder of the generation gained, lost or replaced an
        # entry since, for that stamps the folder's ctime. So it holds no link,
        # and is not walked to find one (at 10k dreams 41,000 entries, a tenth
        # of a build after one new dream).
        self.had: dict[str, Entry] = had
        # The folders' (inode, ctime) as the survey found them, before this
        # build changed any: commit seals by them and what it touched. Only
        # under a tagged seal: an untagged one's generation was walked for links.
        self._folder_stats = survey.folders if survey.sealed and self._seals_tagged else None
        self._file_stats = survey.files if self._folder_stats is not None else None
        # The folders this build changed an entry of, and the files it wrote
        # or lent (see commit).
        self._touched: set[str] = {""}
        self._rewritten: set[str] = set()
        self.written: dict[str, Entry] = {}
        self._claimed: set[str] = set()
        self._folders_made: set[str] = set()  # by prepare(folder=True)
        self.changed = 0

    def __enter__(self) -> SiteWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            if exc_type is None:
                self.commit()
        finally:
            self._release()

    def _release(self) -> None:
        _LOCKS.discard(self._lock)
        os.close(self._lock)

    @property
    def live_manifest(self) -> dict[str, Entry]:
        """The entries of the live generation's manifest that this one does not
        hold as recorded: the files it may lend (found by the survey,
        :class:`_LiveSurvey`); empty if there is no live generation."""
        return self._live_manifest

    def _live_holds(self, rel: str, entry: Entry) -> bool:
        """Whether the live generation's file at ``rel`` may be lent as its
        manifest records it (:meth:`_lendable`). Asked by :meth:`can_keep`;
        :meth:`keep` asks again, of the file it links."""
        if rel in self._live_read:
            return self._live_read[rel] is not None
        opened = _open_beneath(self._live, rel)
        if opened is None:
            return False
        fd, folders = opened
        try:
            return self._lendable(rel, fd, folders, entry) is not None
        finally:
            os.close(fd)

    def _lendable(self, rel: str, fd: int, folders: Sequence[bytes], entry: Entry) -> Entry | None:
        """The entry of the live generation's file at ``rel``, open on ``fd``
        (:func:`_open_beneath`: reached through plain folders only, whose
        inode and ctime after the open are ``folders``), if it holds what
        ``entry`` records; else None.

        In a sealed generation, by its size and mtime, if every folder on its
        way is as the survey's check of the seal found it: none gained, lost
        or replaced an entry since (that stamps the folder's ctime), so this
        is the file the survey stat-ed (a page replaced there as tar does,
        size and mtime kept, after the survey: review r64). Else by its
        bytes, read on ``fd``: an unsealed generation (restored: THREATS.md
        T81), a seal a few files to lend do not pay for (``LSTATS_PER_READ``),
        a folder moved since (also on overlayfs, where lending a file
        copies its folders up, which stamps their ctimes: review r85), or
        where a lent file is copied, not linked (no /proc), which reads it
        anyway: one edited in place is then rendered, not refused by every
        build (review r87). Never a file this process may not read: lent,
        it would be published unreadable, and copied, not read (r87)."""
        try:
            st = os.fstat(fd)
        except OSError:
            return None
        if not stat.S_ISREG(st.st_mode) or st.st_size != entry[1] or not _may_read(fd):
            return None
        if (
            rel not in self._live_read
            and self._live_sealed
            and _links_by_fd()  # a copy reads it anyway (r87)
            and st.st_mtime_ns == entry[2]
            and self._as_surveyed(rel, folders)
        ):
            return entry
        try:
            with _reading(fd) as readable:
                held = _holds_at(f"{self._live}/{rel}", entry, readable)
        except OSError:  # not ours to read
            held = None
        now = None if held is None else held[0]
        self._live_read.setdefault(rel, now)
        return now

    def _as_surveyed(self, rel: str, folders: Sequence[bytes]) -> bool:
        """Whether the live generation's folders on the way to ``rel`` (its
        own first) had, as ``folders`` records them, the inode and ctime the
        survey's check of its seal found (True with no seals: write_tree)."""
        known = self._live_stats
        if known is None:
            return True
        ways = ("", *reversed(list(_folders_of(rel))))
        return len(ways) == len(folders) and all(
            known.get(f) == now for f, now in zip(ways, folders, strict=True)
        )

    # --- adding files -----------------------------------------------------

    def add(self, rel: str, data: bytes) -> bytes:
        """The file at ``rel`` holds ``data`` in the new site; returns its digest."""
        self._claim(rel)
        entry, changed = self.store(rel, data)
        self.record(rel, entry, changed)
        return entry[0]

    def store(self, rel: str, data: bytes) -> tuple[Entry, bool]:
        """Put ``data`` at ``rel`` in the generation unless it holds it already;
        returns the manifest entry and whether the file was written. Touches
        no shared state, so a forked worker may call it for a path the parent
        claimed (:meth:`prepare`) and hand the result back to :meth:`record`."""
        check_path(rel)
        d = digest(data)
        entry = self.had.get(rel)
        final = f"{self._gen}/{rel}"
        if entry is not None and entry[0] == d and rel not in self._edited:
            return entry, False
        fd = -1
        if entry is None:
            # A path this generation does not hold yet is written in place:
            # the generation is not live, and no other one shares the file.
            try:
                fd = _in_folder(self._gen, rel, final, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
            except FileExistsError:  # left by a killed build, or a folder of a past site
                fd = -1
        tmp = None
        if fd < 0:
            # A file a past build wrote may be hard-linked into the live
            # generation (keep): replace it, never write into it. So may a
            # file left under the temporary name: a new one is made.
            tmp = self._tmp(rel)
            _unlink_if_there(tmp)
            fd = _in_folder(self._gen, rel, tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        try:
            _write_all(fd, data)
            st = os.fstat(fd)
        finally:
            os.close(fd)
        if tmp is not None:
            _replace(tmp, final)
        return (d, st.st_size, st.st_mtime_ns), True

    def prepare(self, rel: str, *, folder: bool = False) -> None:
        """Claim ``rel`` for :meth:`store` in another process: the path is
        checked and counted once. With ``folder``, its folder is made now
        (if missing), so workers storing files side by side in a new folder
        never race to make it (only one of two ``mkdir`` calls succeeds)."""
        self._claim(rel)
        head = rel.rpartition("/")[0]
        if folder and head and head not in self._folders_made:
            _make_dirs(self._gen, head)
            self._folders_made.add(head)

    @property
    def total_bytes(self) -> int:
        """The new generation's size: the sum of its files' sizes, as its manifest
        records them (kept files included), without walking the tree."""
        return sum(entry[1] for entry in self.written.values())

    def record(self, rel: str, entry: Entry, changed: bool) -> None:
        """``rel`` was rendered to ``entry`` (by :meth:`store`, here or in a
        forked worker): written if ``changed``, else found as it was."""
        self.written[rel] = entry
        if changed:
            self._changed_file(rel)

    def _changed_file(self, rel: str) -> None:
        """``rel`` was written or lent into the generation: its folder's
        ctime moved (see :meth:`_untouched`)."""
        self.changed += 1
        self._touched.add(rel.rpartition("/")[0])
        self._rewritten.add(rel)

    def add_all(self, files: Iterable[tuple[str, bytes]] | Mapping[str, bytes]) -> None:
        items = files.items() if isinstance(files, Mapping) else files
        for rel, data in items:
            self.add(rel, data)

    def can_keep(self, rel: str, want: bytes) -> bool:
        """Whether the file at ``rel`` with digest ``want`` is on hand in a
        generation (recorded in its manifest, and its size and mtime say nobody
        edited it since), so it can be kept without its bytes."""
        entry = self.had.get(rel)
        if entry is not None and entry[0] == want and rel not in self._edited:
            return True
        entry = self.live_manifest.get(rel)
        return entry is not None and entry[0] == want and self._live_holds(rel, entry)

    def keep_all(self, files: Sequence[tuple[str, bytes]], *, held: bool | None = None) -> bool:
        """Keep every one of ``files`` (path, digest of the bytes a past build
        wrote there) if the generations hold them all; else keep none and
        return False (the caller renders them). ``held`` is what
        :meth:`holds_own` said of ``files`` just before (in a worker), if it was
        asked; else it is asked here."""
        if (self.holds_own(files) if held is None else held) and self._claim_own(files):
            return True
        if not all(self.can_keep(rel, want) for rel, want in files):
            return False
        for rel, want in files:
            self.keep(rel, want)
        return True

    def keep_each(self, batch: Iterable[Sequence[tuple[str, bytes]]]) -> list[bool]:
        """:meth:`keep_all` of each of ``batch`` in turn (asking :meth:`holds_own`
        here), and whether each was kept: the same claims in the same order,
        in one loop. A build after one new dream keeps every other dream's
        three files, and at 100k dreams three calls a unit were most of it."""
        had, edited, claimed, written = self.had, self._edited, self._claimed, self.written
        kept: list[bool] = []
        for files in batch:
            for rel, want in files:
                entry = had.get(rel)
                if entry is None or entry[0] != want or rel in edited or rel in claimed:
                    kept.append(self.keep_all(files))  # not its own (or claimed): as ever
                    break
            else:
                for rel, _ in files:
                    claimed.add(rel)
                    written[rel] = had[rel]
                kept.append(True)
        return kept

    def holds_own(self, files: Sequence[tuple[str, bytes]]) -> bool:
        """Whether this generation holds every one of ``files`` as recorded,
        unedited: the common case of an incremental build, made cheap (no
        link, and no stat: the survey found which files were edited in place).
        It changes nothing, so a forked worker may ask
        it (builder.site.units) for the writer to claim the files after
        (:meth:`keep_all`). The paths come from a manifest and the cache,
        written by builds that checked them (:func:`check_path`) when they
        stored them."""
        had, edited = self.had, self._edited
        for rel, want in files:
            entry = had.get(rel)
            if entry is None or entry[0] != want or rel in edited:
                return False
        return True

    def _claim_own(self, files: Sequence[tuple[str, bytes]]) -> bool:
        """Keep ``files``, which :meth:`holds_own` found in this generation as
        recorded, unless one is claimed already (then keep none)."""
        claimed = self._claimed
        if any(rel in claimed for rel, _ in files):
            return False
        had, written = self.had, self.written
        for rel, _ in files:
            claimed.add(rel)
            written[rel] = had[rel]
        return True

    def keep(self, rel: str, want: bytes) -> None:
        """The file at ``rel`` is unchanged from a build whose bytes had digest
        ``want``; :meth:`can_keep` must have said so just before."""
        self._claim(rel)
        entry = self.had.get(rel)
        # Only as it was recorded: a copy edited in place is replaced from the
        # live generation (can_keep said one of the two would do).
        if entry is not None and entry[0] == want and rel not in self._edited:
            self.written[rel] = entry
            return
        entry = self.live_manifest.get(rel)
        if entry is None or entry[0] != want:
            raise PlanError(f"{rel}: kept, but no generation holds it", hint="report this")
        # What is linked is the very file checked, on the descriptor it was
        # checked on: reached through plain folders only, never a link
        # (review r34), and checked again here, not by a path that another
        # process writing the live site meanwhile may have pointed elsewhere
        # (a file replaced, a folder made a link: reviews r82, r84, r85).
        opened = _open_beneath(self._live, rel)
        if opened is None:
            raise _changed_meanwhile(self._live, rel)
        fd, folders = opened
        try:
            held = self._lendable(rel, fd, folders, entry)
            if held is None:
                raise _changed_meanwhile(self._live, rel)
            tmp = self._tmp(rel)
            entry = _link_open(fd, self._gen, rel, tmp, held, f"{self._live}/{rel}")
        finally:
            os.close(fd)
        if entry is None:  # unlinked since it was opened
            raise _changed_meanwhile(self._live, rel)
        _replace(tmp, f"{self._gen}/{rel}")
        # When the generation already held the live file (the same inode),
        # rename(2) did nothing and left the link: it would be published,
        # and a later store() of this path would find it under its tmp name.
        _unlink_if_there(tmp)
        self.written[rel] = entry
        self._changed_file(rel)

    def _claim(self, rel: str) -> None:
        if rel in self._claimed:
            raise PlanError(
                f"{rel} is written twice in one build",
                hint="each site path has one owner; report this",
            )
        check_path(rel)
        self._claimed.add(rel)

    def _tmp(self, rel: str) -> str:
        head, _, name = rel.rpartition("/")
        return f"{self._gen}/{head}/.{name}.tmp" if head else f"{self._gen}/.{name}.tmp"

    # --- finishing --------------------------------------------------------

    def retire_stale(self) -> bool:
        """After :meth:`commit`: remove the generation that was live before it
        (and its manifest) if it was built when the log held fewer erasures
        than now, so no file under the checkout keeps an erased dream's text
        (THREATS.md T48), whichever build logged the erasure (this one, one
        that died after signing it, or another checkout's). Its manifest's
        header says how many it was built with; one that cannot be read is
        stale. The next build writes that generation in full, which costs
        time once. Returns whether it removed it."""
        if self.live is None or self.live == self.target:
            return False
        manifest = self.root / f"manifest-{self.live}"
        built_with = _manifest_erasures(manifest)
        if built_with is not None and built_with >= self.erasures:
            return False
        with contextlib.suppress(FileNotFoundError):
            os.unlink(manifest)
        remove_entry(self.root / self.live)
        if self._seals is not None:
            self._seals.pop(self.live, None)
        return True

    def commit(self) -> None:
        """Remove what the new site no longer has, record the manifest, go live."""
        gone = self.had.keys() - self.written.keys()
        for rel in gone:
            _unlink_gone(f"{self._gen}/{rel}")
            self.changed += 1
        gone_folders = {r.rpartition("/")[0] for r in gone}
        self._touched |= gone_folders
        _remove_empty_dirs(self.gen, gone_folders)
        checksum = _write_manifest(
            self.root / f"manifest-{self.target}", self.written, erasures=self.erasures
        )
        _go_live(self.out, self.root, self.target)
        if self._seals is not None:
            # After the last change to the folder: the next build finds it as sealed.
            # The folders of what it now holds, found once for both (0.13 s at 100k).
            folders = _folders(self.written)
            known = self._untouched(folders)
            seal = _seal(self.gen, checksum, folders, known, folders_given=True)
            # A file kept as it was, replaced since the survey (in a folder this
            # build touched, so its ctime is read again): no seal, and the next
            # build of this generation reads it whole (review r65, T81). Looked
            # at after the folders, so a file replaced meanwhile is seen by one
            # or the other (review r66).
            if seal is not None and not self._replaced_kept(known):
                self._seals[self.target] = seal

    def _replaced_kept(self, known: Mapping[str, bytes] | None) -> bool:
        """Whether a file this build kept as the generation held it, in a folder
        the seal is about to ``lstat`` again (not in ``known``), is no longer
        the file the survey stat-ed: another inode or ctime. A page replaced
        there as tar does (unlink, write, the old mtime) after the survey was
        kept by its size and mtime, and a seal taken then would vouch for it
        (review r65). Only under a tagged seal (``known`` given)."""
        stats = self._file_stats
        if known is None:
            return False
        if stats is None or len(stats) != _SEAL_STAT.size * len(self.had):
            return True
        size, written, gen, rewritten = _SEAL_STAT.size, self.written, self._gen, self._rewritten
        for i, (rel, entry) in enumerate(self.had.items()):
            # Kept: recorded unchanged, its entry equal to the one had (a forked
            # worker's store() hands back a copy, not the object: review r66).
            if rel in rewritten or written.get(rel) != entry:
                continue  # written or lent anew, or not in the new site
            if rel.rpartition("/")[0] in known:
                continue  # in a folder the seal takes as the survey found it
            try:
                st = os.lstat(f"{gen}/{rel}")
            except OSError:
                return True
            if _SEAL_STAT.pack(st.st_ino, st.st_ctime_ns) != stats[i * size : (i + 1) * size]:
                return True
        return False

    def _untouched(self, now: Collection[str]) -> dict[str, bytes] | None:
        """The folders of a sealed generation this build changed no entry of,
        each with the (inode, ctime) the survey found before the build began,
        for the seal to take without an ``lstat`` (108,000 folders at 100k
        dreams, where a build after one new dream changes a few dozen).

        A folder's ctime moves when an entry of it is made, replaced or
        removed, which this build did only in the folders of the files it
        wrote or linked (:meth:`record`) or removed (:meth:`commit`), in the
        folders that hold a folder it made or removed, and in the
        generation's own. Should any other folder have changed, the seal
        recorded holds the value from before the change, so the next build
        finds the generation unsealed and reads it whole (T81): never a seal
        for a state this build did not see. Sound only under a tagged seal,
        whose generation was not walked for links (:meth:`_open`). ``now``
        is :func:`_folders` of what the generation holds now."""
        packed = self._folder_stats
        if packed is None:
            return None
        size = _SEAL_STAT.size
        before = {
            rel: packed[i * size : (i + 1) * size] for i, rel in enumerate(_folders(self.had))
        }
        if len(before) * size != len(packed):  # not what the survey found of these entries
            return None
        touched = set(self._touched)
        # A folder made (not there before) or removed (not there now): an
        # entry of the folder above it changed.
        for rel in now:
            if rel and rel not in before:
                touched.add(rel.rpartition("/")[0])
        for rel in before:
            if rel and rel not in now:
                touched.add(rel.rpartition("/")[0])
        return {rel: packed for rel, packed in before.items() if rel not in touched}


def _unlink_gone(path: str) -> None:
    """Remove the file at ``path`` the new site no longer has. The path may now
    be a folder this build made, or lie under a file it wrote (a restored
    manifest may list either, THREATS.md T81): that is the new site's."""
    try:
        os.unlink(path)
    except (FileNotFoundError, NotADirectoryError):
        pass
    except OSError:  # EISDIR; EPERM on macOS
        if not stat.S_ISDIR(os.lstat(path).st_mode):
            raise


def _in_folder(gen: str, rel: str, path: str, flags: int) -> int:
    """``os.open(path, flags)``, making the folders of ``rel`` if missing."""
    try:
        return os.open(path, flags, 0o644)
    except (FileNotFoundError, NotADirectoryError):
        _make_dirs(gen, rel.rpartition("/")[0])
        return os.open(path, flags, 0o644)


def _unchanged(path: str, entry: Entry) -> bool:
    """Whether the file at ``path`` is as ``entry`` records it: a plain file
    (never a link, of whatever size and mtime: review r63) of its size and
    mtime, unread. Enough only in a sealed generation (the module's docstring;
    an unsealed one was read whole by _check_generation first: THREATS.md T81)."""
    try:
        st = os.stat(path, follow_symlinks=False)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_size == entry[1] and st.st_mtime_ns == entry[2]


def _seal(
    folder: Path,
    checksum: bytes,
    entries: Iterable[str],
    known: Mapping[str, bytes] | None = None,
    *,
    folders_given: bool = False,
) -> bytes | None:
    """The seal of the generation in ``folder`` whose manifest has ``checksum``
    and lists ``entries``; None if it or a folder of theirs is gone or not a
    plain folder. Every folder counts, not only the generation's: tar over a
    checkout kept between runs replaces a file by unlinking it, which stamps
    the ctime of its own folder alone (review r33). A folder in ``known`` is
    taken as it says, without an ``lstat`` (see :meth:`SiteWriter.commit`).
    With ``folders_given``, ``entries`` is already :func:`_folders` of them."""
    stats = _folder_stats(folder, entries, known, folders_given=folders_given)
    return None if stats is None else _seal_of(checksum, stats)


def _seal_of(checksum: bytes, stats: Mapping[str, bytes]) -> bytes:
    """The seal: the manifest's checksum, then a digest of each folder's
    packed (inode, ctime), in :func:`_folders`' order."""
    h = _checksum()
    for packed in stats.values():
        h.update(packed)
    return checksum + h.digest()


def _folder_stats(
    folder: Path,
    entries: Iterable[str],
    known: Mapping[str, bytes] | None = None,
    *,
    folders_given: bool = False,
) -> dict[str, bytes] | None:
    """Each folder of ``entries`` (:func:`_folders`, in its order; ``entries``
    itself with ``folders_given``) → its inode and ctime packed
    (:data:`_SEAL_STAT`), from an ``lstat`` unless ``known`` holds it; None if
    one is gone or not a plain folder."""
    known = known or {}
    stats: dict[str, bytes] = {}
    base = str(folder)
    for rel in entries if folders_given else _folders(entries):
        packed = known.get(rel)
        if packed is None:
            try:
                st = os.lstat(f"{base}/{rel}" if rel else base)
            except OSError:
                return None
            if not stat.S_ISDIR(st.st_mode):
                return None
            packed = _SEAL_STAT.pack(st.st_ino, st.st_ctime_ns)
        stats[rel] = packed
    return stats


def _edited(gen: str, entries: Mapping[str, Entry]) -> frozenset[str]:
    """The entries of a sealed generation whose file is not as recorded: its
    size or mtime moved (edited in place), or it is gone (:func:`_unchanged`)."""
    return frozenset(rel for rel, entry in entries.items() if not _unchanged(f"{gen}/{rel}", entry))


def _files_now(gen: str, entries: Mapping[str, Entry]) -> tuple[frozenset[str], bytes]:
    """:func:`_edited`, and the inode and ctime of each entry's file packed
    (:data:`_SEAL_STAT`, zeros for one that is not a plain file), in the
    entries' order: from one ``stat`` of each (SiteWriter._replaced_kept)."""
    edited = []
    stats = []
    zero = _SEAL_STAT.pack(0, 0)
    for rel, entry in entries.items():
        try:
            st = os.stat(f"{gen}/{rel}", follow_symlinks=False)
        except OSError:
            edited.append(rel)
            stats.append(zero)
            continue
        if not stat.S_ISREG(st.st_mode):
            edited.append(rel)
            stats.append(zero)
            continue
        if st.st_size != entry[1] or st.st_mtime_ns != entry[2]:
            edited.append(rel)
        stats.append(_SEAL_STAT.pack(st.st_ino, st.st_ctime_ns))
    return frozenset(edited), b"".join(stats)


def _folders(entries: Iterable[str]) -> dict[str, None]:
    """Each folder of ``entries`` (file paths) and every folder above it, the
    generation's own (``""``) first, each once, in an order fixed by the
    entries' order: the folder of each entry as met, then the folders above
    them. One pass of C-speed ``dict.fromkeys`` over the entries' folders
    (a generation at 10k dreams has 31,566 files in 10,920 folders), then a
    short climb from each: parents first, entry by entry, took as long as
    the ``lstat`` of every folder."""
    folders = dict.fromkeys(["", *(rel.rpartition("/")[0] for rel in entries)])
    for rel in list(folders):
        for head in _folders_of(rel):
            if head in folders:
                break
            folders[head] = None
    return folders


# A file bigger than this with less than half its size on the disk (holes)
# is not read: see _holds.
_SPARSE_FROM = 1 << 16


def _holds(path: str, entry: Entry) -> Entry | None:
    """The entry of the plain file at ``path`` if its bytes have the digest
    ``entry`` records, as it is now (size and mtime); None if they do not, or
    it is not a plain file (never followed: a link is not one). A file of
    another size than recorded, or mostly holes, is not read: tar restores a
    sparse file of terabytes from a few bytes of archive (THREATS.md T81,
    review r33), so what is read is bounded by what the disk holds."""
    held = _holds_at(path, entry)
    return None if held is None else held[0]


def _holds_at(path: str, entry: Entry, fd: int | None = None) -> tuple[Entry, int] | None:
    """:func:`_holds`, with the inode of the file read; of the file open on
    ``fd`` if given (the file at ``path``, opened by the caller: read from
    its start, left open), else of the one ``path`` names, never followed."""
    want = entry[0]
    if fd is None:
        try:
            opened = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | _NOCTTY)
        except OSError:
            return None
    else:
        opened = fd
    try:
        st = os.fstat(opened)
        if not stat.S_ISREG(st.st_mode) or st.st_size != entry[1]:
            return None
        if st.st_size > _SPARSE_FROM and st.st_blocks * 512 < st.st_size // 2:
            return None
        h = _checksum()
        at = 0
        while chunk := os.pread(opened, 1 << 20, at):
            h.update(chunk)
            at += len(chunk)
    except OSError:
        return None
    finally:
        if fd is None:
            os.close(opened)
    return ((want, st.st_size, st.st_mtime_ns), st.st_ino) if h.digest() == want else None


_NOCTTY = getattr(os, "O_NOCTTY", 0)  # a device is never opened as a terminal

# Folders opened only to reach a file and fstat: O_PATH, where there is one,
# needs no read permission and reads nothing.
_FOLDER = getattr(os, "O_PATH", os.O_RDONLY) | os.O_DIRECTORY | os.O_NOFOLLOW


def _open_beneath(root: str, rel: str) -> tuple[int, list[bytes]] | None:
    """The plain file at ``rel`` under the folder ``root``, opened one name at
    a time, each folder relative to the one before and none followed if it
    is a link (``O_NOFOLLOW``), nor the file; with each folder's (inode,
    ctime) on the way, ``root``'s first, taken after the file was opened
    (:meth:`SiteWriter._lendable`). None if any is missing, a link, or not
    what it should be. The file is opened with ``O_PATH`` where it can be
    read through /proc (:func:`_reading`), so that nothing but a plain file
    is ever opened for reading: a device node in its place would have its
    driver's open run (review r86). The caller closes the descriptor."""
    *names, name = rel.split("/")
    folders: list[int] = []
    try:
        folders.append(os.open(root, _FOLDER))
        for folder in names:
            folders.append(os.open(folder, _FOLDER, dir_fd=folders[-1]))
        fd = os.open(name, _file_flags(), dir_fd=folders[-1])
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                os.close(fd)
                return None
            stats = [os.fstat(f) for f in folders]
        except OSError:
            os.close(fd)
            raise
    except OSError:
        return None
    finally:
        for f in folders:
            os.close(f)
    return fd, [_SEAL_STAT.pack(st.st_ino, st.st_ctime_ns) for st in stats]


@functools.cache
def _links_by_fd() -> bool:
    """Whether an open file can be given a name, and opened again, through
    /proc/self/fd/N (Linux with /proc mounted)."""
    return os.path.isdir("/proc/self/fd")


def _file_flags() -> int:
    """How :func:`_open_beneath` opens the file: ``O_PATH`` (opens nothing)
    where /proc can open it again for reading, else for reading."""
    if _links_by_fd() and hasattr(os, "O_PATH"):
        return os.O_PATH | os.O_NOFOLLOW
    return os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | _NOCTTY


def _may_read(fd: int) -> bool:
    """Whether this process may read the file open on ``fd`` (from
    :func:`_open_beneath`; one opened for reading may)."""
    if not _file_flags() & getattr(os, "O_PATH", 0):
        return True
    return os.access(
        f"/proc/self/fd/{fd}", os.R_OK, effective_ids=os.access in os.supports_effective_ids
    )


@contextlib.contextmanager
def _reading(fd: int) -> Iterator[int]:
    """A descriptor to read the plain file open on ``fd`` (from
    :func:`_open_beneath`): the file itself, opened again through /proc if
    ``fd`` is an ``O_PATH`` one."""
    if not _file_flags() & getattr(os, "O_PATH", 0):
        yield fd
        return
    readable = os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | os.O_NONBLOCK | _NOCTTY)
    try:
        yield readable
    finally:
        os.close(readable)


def _link_open(fd: int, gen: str, rel: str, tmp: str, held: Entry, source: str) -> Entry | None:
    """Make ``tmp`` (the temporary name of ``rel`` in generation ``gen``) the
    file open on ``fd``, checked to hold ``held``; returns its entry, or None
    if that file lost its last name since it was opened, or was edited. A
    hard link of the very inode checked, or, where an open file cannot be
    linked (no /proc; a file at its file system's link limit, on another
    mount, or one protected_hardlinks keeps: review r86), a copy of its
    bytes, checked again as they are copied (``source``, the file's path,
    names it if they are not what was checked)."""
    with contextlib.suppress(FileNotFoundError, NotADirectoryError):
        remove_entry(Path(tmp))  # whatever a killed build, or a hand, left there
    if not _links_by_fd():
        return _copy_open(fd, gen, rel, tmp, held, source)
    head, name = tmp.rsplit("/", 1)
    try:
        folder = os.open(head, _FOLDER)
    except (FileNotFoundError, NotADirectoryError):  # its folder is new here
        _make_dirs(gen, rel.rpartition("/")[0])
        folder = os.open(head, _FOLDER)
    try:
        # linkat(AT_FDCWD, "/proc/self/fd/N", folder, name, AT_SYMLINK_FOLLOW):
        # linkat(2)'s own way to name an open file; os.link passes the flag
        # only with a dst_dir_fd (else it calls link(2), which follows nothing).
        os.link(f"/proc/self/fd/{fd}", name, dst_dir_fd=folder)
    except FileNotFoundError:
        if os.fstat(fd).st_nlink == 0:  # unlinked since it was opened
            return None
        return _copy_open(fd, gen, rel, tmp, held, source)  # /proc that cannot link (gVisor)
    except OSError as exc:
        if exc.errno not in (errno.EMLINK, errno.EXDEV, errno.EPERM):
            raise
        return _copy_open(fd, gen, rel, tmp, held, source)
    finally:
        os.close(folder)
    st = os.lstat(tmp)
    if not stat.S_ISREG(st.st_mode) or (st.st_size, st.st_mtime_ns) != held[1:]:
        _unlink_if_there(tmp)  # edited in place since it was checked
        return None
    return held


def _copy_open(fd: int, gen: str, rel: str, tmp: str, held: Entry, source: str) -> Entry:
    """:func:`_link_open` by a copy: the bytes of the file open on ``fd``,
    read once and checked against ``held``, written to ``tmp``."""
    chunks, at = [], 0
    try:
        with _reading(fd) as readable:
            while at <= held[1] and (chunk := os.pread(readable, 1 << 20, at)):
                chunks.append(chunk)
                at += len(chunk)
    except OSError:  # its mode changed since it was checked
        chunks = []
    data = b"".join(chunks)
    if len(data) != held[1] or digest(data) != held[0]:
        # Changed since it was checked, or taken by its size and mtime (its
        # generation sealed) and copied because linkat refused: edited in
        # place, which every build would meet again (review r87).
        raise PlanError(
            f"{source} does not hold the bytes its generation's manifest records",
            hint="it was edited in place, or is being: remove it, then build again "
            "(the build renders it anew)",
        )
    out = _in_folder(gen, rel, tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    try:
        _write_all(out, data)
        st = os.fstat(out)
    finally:
        os.close(out)
    return (held[0], st.st_size, st.st_mtime_ns)


def _changed_meanwhile(live: str, rel: str) -> PlanError:
    return PlanError(
        f"{live}/{rel} changed while this build ran",
        hint="another process is writing the live site: stop it, then build again",
    )


@dataclass(frozen=True)
class _Checked:
    """What :func:`_check_generation` found: the listed files that hold their
    recorded bytes (``held``, each entry as the file now is), and, as paths
    under the generation, what goes: entries no manifest lists or of a type a
    build never makes (``others``), listed files whose bytes differ
    (``differ``), folders left without a file to keep (``empty``)."""

    held: dict[str, Entry]
    others: list[str]
    differ: list[str]
    empty: list[str]

    def apply(self, gen: str) -> dict[str, Entry]:
        """Remove from ``gen`` what goes, each as itself; returns ``held``."""
        for rel in self.others:
            remove_entry(Path(f"{gen}/{rel}"))
        for rel in self.differ:
            _unlink_if_there(f"{gen}/{rel}")
        for rel in self.empty:
            remove_entry(Path(f"{gen}/{rel}"))
        return self.held


def _check_generation(gen: str, listed: Mapping[str, Entry]) -> _Checked:
    """Which entries of ``listed`` the unsealed generation ``gen`` holds with
    their recorded bytes, and what else is in it (:class:`_Checked`), removing
    nothing (only a folder restored without its owner's bits gets them,
    :func:`~builder.files.owner_may_change`). Every other
    entry under ``gen`` goes, as itself: a file the manifest does not list, or
    whose bytes differ, a link, anything but a plain file or folder (the
    folder goes live whole, and its manifest's checksum is public: T46 and
    T81 without git). Read by forked workers (builder.parallel): at 10k
    dreams, 31,566 files, 0.36 s on two cores against 0.68 s in one process
    and 1.9 s in four threads (each file is a few short calls, and threads
    mostly waited for the GIL)."""
    found: list[str] = []
    others: list[str] = []
    folders = [(gen, "")]
    walked: list[str] = []
    owner_may_change(gen)
    # The folders the listed files are in: any other goes whole (planted, it
    # would go live, and the seal would not hold it: review r33).
    listed_folders: set[str] = set()
    for rel in listed:
        head = rel.rpartition("/")[0]
        while head and head not in listed_folders:
            listed_folders.add(head)
            head = head.rpartition("/")[0]
    while folders:
        folder, prefix = folders.pop()
        with os.scandir(folder) as entries:
            for item in entries:
                rel = prefix + item.name
                if item.is_dir(follow_symlinks=False) and rel in listed_folders:
                    # A folder of mode 0o500 restored (T81): nothing in it could go.
                    owner_may_change(item.path, item.stat(follow_symlinks=False))
                    folders.append((item.path, rel + "/"))
                    walked.append(rel)
                elif rel in listed and item.is_file(follow_symlinks=False):
                    found.append(rel)
                else:
                    others.append(rel)
    held = parallel.map_ordered(lambda rel: _holds(f"{gen}/{rel}", listed[rel]), found)
    out: dict[str, Entry] = {}
    differ: list[str] = []
    for rel, entry in zip(found, held, strict=True):
        if entry is None:
            differ.append(rel)
        else:
            out[rel] = entry
    # A folder the manifest names that no file kept is in goes too.
    kept = {head for rel in out for head in _folders_of(rel)}
    empty = []
    for rel in walked:
        parent = rel.rpartition("/")[0]
        if rel not in kept and (not parent or parent in kept):
            empty.append(rel)
    return _Checked(out, others, differ, empty)


def _folders_of(rel: str) -> Iterable[str]:
    """The folders ``rel`` is in, innermost first."""
    head = rel.rpartition("/")[0]
    while head:
        yield head
        head = head.rpartition("/")[0]


def write_tree(out: Path, plan: Mapping[str, bytes]) -> int:
    """Make ``out`` hold exactly the files of ``plan``; returns how many changed."""
    for rel in plan:
        check_path(rel)
    with SiteWriter(out) as w:
        w.add_all(plan)
    return w.changed


# --- generations ----------------------------------------------------------


def live_site(out: Path) -> tuple[Path, dict[str, Entry]] | None:
    """The live generation's folder and its manifest (path → digest, size,
    mtime), or None if ``out`` is not a site a build made (no link to a
    generation, or no sound manifest for it). Used by ``dreampool deploy``:
    the manifest, not a walk of the folder, is the list of what the build made."""
    out = out.absolute()
    root = builds_dir(out)
    live = _live_generation(out, root)
    if live is None:
        return None
    found = _read_manifest(root / f"manifest-{live}")
    if found is None:
        return None
    return root / live, found[0]


def _live_generation(out: Path, root: Path) -> str | None:
    """Which generation ``out`` points at; None if it is missing or not ours
    (a plain folder from an older dreampool, or a symlink elsewhere)."""
    try:
        target = os.readlink(out)
    except (FileNotFoundError, OSError):
        return None
    for gen in GENERATIONS:
        if target == f"{root.name}/{gen}":
            return gen
    return None


def _go_live(out: Path, root: Path, gen: str) -> None:
    link = out.parent / f".{out.name}.link-{os.getpid()}"
    remove_entry(link)
    os.symlink(f"{root.name}/{gen}", link)
    if out.is_dir() and not out.is_symlink():
        # A plain folder (an older dreampool, or made by hand): swap it for the
        # symlink in one step, then delete it.
        if _renameat2_exchange(link, out):
            remove_entry(link)
            return
        old = out.parent / f".{out.name}.old-{os.getpid()}"
        os.rename(out, old)
        os.rename(link, out)
        remove_entry(old)
        return
    os.replace(link, out)


def _renameat2_exchange(a: Path, b: Path) -> bool:
    libc_name = ctypes.util.find_library("c")
    if libc_name is None:
        return False
    libc = ctypes.CDLL(libc_name, use_errno=True)
    func = getattr(libc, "renameat2", None)
    if func is None:
        return False
    result = func(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
    return bool(result == 0)


_LOCKS: set[int] = set()  # lock descriptors this process holds (see drop_locks)


def drop_locks() -> None:
    """In a forked process that never writes the output: close its copies of
    the build lock. A process that outlived a killed build would otherwise
    keep the lock taken; closing the copy leaves the parent's lock as it is
    (flock(2): every duplicate must be closed). Workers that write into the
    generation keep theirs, so no build starts while one still writes."""
    for fd in _LOCKS:
        with contextlib.suppress(OSError):
            os.close(fd)
    _LOCKS.clear()


def _lock(root: Path, out: Path) -> int:
    """One build at a time per output folder."""
    # The folder itself, not a lock file in it: a hard-linked copy of the
    # folder (cp -al, a backup) would share a file's lock, never the folder's.
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise PlanError(
            f"another build is writing {out}", hint="wait for it to finish, then build again"
        ) from None
    _LOCKS.add(fd)
    return fd


def _remove_stale_links(out: Path) -> None:
    """Symlinks left by builds killed just before going live."""
    for leftover in out.parent.glob(f".{out.name}.link-*"):
        if leftover.is_symlink():  # only links: a build makes nothing else by that name
            with contextlib.suppress(OSError):
                leftover.unlink()


def _plain_folder(path: Path) -> None:
    """``path`` as a plain folder: whatever else is there (a symlink, a file)
    is removed as itself first."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        path.mkdir(parents=True)
        return
    if not stat.S_ISDIR(st.st_mode):
        remove_entry(path)
        path.mkdir()


def _make_dirs(gen: str, rel: str) -> None:
    """``gen/rel`` as a folder, removing files a past site had in its way."""
    path = f"{gen}/{rel}"
    try:
        os.mkdir(path)
    except FileExistsError:
        if os.path.islink(path) or not os.path.isdir(path):
            os.unlink(path)
            os.mkdir(path)
    except FileNotFoundError:
        parent = rel.rpartition("/")[0]
        if not parent:
            raise
        _make_dirs(gen, parent)
        os.mkdir(path)
    except NotADirectoryError:  # a file where a parent folder should be
        _make_dirs(gen, rel.rpartition("/")[0])
        os.mkdir(path)


def _replace(tmp: str, dest: str) -> None:
    try:
        os.replace(tmp, dest)
    except IsADirectoryError:  # a past site had a folder here
        remove_entry(Path(dest))
        os.replace(tmp, dest)


def _remove_links(gen: str) -> frozenset[str]:
    """Remove, as itself, every entry under ``gen`` that is neither a plain
    folder nor a plain file (a link above all: never followed); returns their
    paths under ``gen``. Each folder's entries are typed by ``scandir`` as it
    lists them (the type the directory entry holds, no ``stat`` per file: at
    10k dreams a generation is 30,000 files); one whose type the listing does
    not give is asked with ``lstat``."""
    removed: list[str] = []
    folders = [(gen, "")]
    while folders:
        folder, prefix = folders.pop()
        with os.scandir(folder) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    folders.append((entry.path, f"{prefix}{entry.name}/"))
                elif not entry.is_file(follow_symlinks=False):
                    remove_entry(Path(entry.path))
                    removed.append(prefix + entry.name)
    return frozenset(removed)


def _remove_empty_dirs(gen: Path, candidates: set[str]) -> None:
    for rel in sorted(candidates, key=lambda r: r.count("/"), reverse=True):
        while rel:
            try:
                os.rmdir(gen / rel)
            except OSError:
                break
            rel = rel.rpartition("/")[0]


# --- manifests ------------------------------------------------------------
#
#   dreampool-manifest 3 <number of entries> <erased dreams in the log>
#   <hex digest> <size> <mtime_ns> <path>      (one line per entry)
#   end <hex BLAKE2b of every byte above>
#
# A manifest vouches for a whole generation, so one that is empty, cut at a
# line's end, zeroed by a power cut or of another format must read as none:
# the header and the closing checksum see to it. (Formats 1 and 2 read as
# none: one full rewrite of each generation.) Every path is checked as a plan
# path is (check_path): a manifest's paths are unlinked by the next commit.

MANIFEST_FORMAT = b"dreampool-manifest 3"
# A bigger manifest reads as damaged (the generation is written again). A
# line is ≈100 bytes a file and a dream ≈3 files: 1M dreams make ≈370 MB.
MAX_MANIFEST_SIZE = 1 << 30
_MANIFEST_END = b"end "


def _read_manifest(path: Path) -> tuple[dict[str, Entry], bytes] | None:
    """The manifest's entries and checksum, or None if it is missing or
    damaged (the generation is then rewritten in full)."""
    try:
        data = _read_plain(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    if data is None:
        return None
    checked = _checked_body(data)
    if checked is None:
        return None
    body, checksum = checked
    try:
        entries = _parse_entries(str(body, "utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    return None if entries is None else (entries, checksum)


def _read_plain(path: Path) -> bytes | None:
    """The bytes of ``path`` if it is a regular file reached without a link,
    readable and at most :data:`MAX_MANIFEST_SIZE`, else None (a FIFO would
    block a plain read, a link lead anywhere): a manifest, which is then taken
    for a damaged one."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        # A link, or a file restored without its owner's read bit (T81; review r60).
        if exc.errno in (errno.ELOOP, errno.EACCES):
            return None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        # Bounded: tar restores terabytes of holes, or of zeros a cache's
        # compression stored in a few bytes, and read whole they stopped every
        # build (MemoryError; reviews r60, r61). Not judged by the blocks it
        # holds, which a compressing file system also makes fewer.
        if st.st_size > MAX_MANIFEST_SIZE:
            return None
        with os.fdopen(fd, "rb", closefd=False) as f:
            return f.read()
    finally:
        os.close(fd)


def _checked_body(data: bytes) -> tuple[memoryview, bytes] | None:
    """``data`` up to its closing line, and its checksum, if that line holds it."""
    if not data.endswith(b"\n"):
        return None  # cut short, or empty
    start = data.rfind(b"\n", 0, len(data) - 1) + 1
    body = memoryview(data)[:start]
    checksum = _checksum(body)
    if data[start:-1] != _MANIFEST_END + checksum.hexdigest().encode():
        return None
    return body, checksum.digest()


def _checksum(data: bytes | memoryview = b"") -> hashlib.blake2b:
    return hashlib.blake2b(data, digest_size=DIGEST_SIZE)


def _parse_header(line: str) -> tuple[int, int] | None:
    """(entries, erasures) of a manifest's first line, or None."""
    parts = line.split(" ")
    if len(parts) != 4 or " ".join(parts[:2]).encode() != MANIFEST_FORMAT:
        return None
    if not (parts[2].isdigit() and parts[3].isdigit()):
        return None
    return int(parts[2]), int(parts[3])


def _parse_entries(text: str) -> dict[str, Entry] | None:
    lines = text.split("\n")
    header = _parse_header(lines[0])
    entries = lines[1:-1]  # the body ends with a newline: the last item is ""
    if header is None or header[0] != len(entries):
        return None
    out: dict[str, Entry] = {}
    for line in entries:
        hexdigest, size, mtime, rel = line.split(" ", 3)
        if len(hexdigest) != 2 * DIGEST_SIZE:
            return None
        try:
            check_path(rel)
        except PlanError:
            return None
        out[rel] = (bytes.fromhex(hexdigest), int(size), int(mtime))
    return out


def _manifest_erasures(path: Path) -> int | None:
    """The erasures a generation was built with, from its manifest's first
    line alone (the whole file need not be read); None if unreadable."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        first = os.read(fd, 128).split(b"\n", 1)[0]
    finally:
        os.close(fd)
    header = _parse_header(first.decode("ascii", "replace"))
    return None if header is None else header[1]


def _write_manifest(path: Path, entries: Mapping[str, Entry], *, erasures: int = 0) -> bytes:
    """Write ``entries`` under a temporary name, flush it to the disk, then
    rename it into place: unsynced, a power cut can leave the new name on
    an empty file (the rename reached the disk, the bytes did not). Returns
    its checksum."""
    tmp = str(path.with_name(path.name + ".tmp"))
    with open(_create_new(tmp), "wb") as f:
        check = _checksum()
        for chunk in _manifest_chunks(entries, erasures):
            check.update(chunk)
            f.write(chunk)
        f.write(_MANIFEST_END + check.hexdigest().encode() + b"\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return check.digest()


def _manifest_chunks(
    entries: Mapping[str, Entry], erasures: int, per_chunk: int = 4096
) -> Iterable[bytes]:
    """The manifest's header and entry lines, a few thousand at a time (a
    pool of a million dreams has millions of files: one string would be
    hundreds of megabytes)."""
    yield MANIFEST_FORMAT + f" {len(entries)} {erasures}\n".encode()
    lines: list[str] = []
    for rel, (d, size, mtime) in entries.items():
        lines.append(f"{d.hex()} {size} {mtime} {rel}\n")
        if len(lines) == per_chunk:
            yield "".join(lines).encode()
            lines.clear()
    yield "".join(lines).encode()


def _create_new(path: str) -> int:
    """A descriptor for writing a new, empty file at ``path``: whatever is
    there goes first. Never opening an existing file for writing matters
    here, as one found under a temporary name may be a hard link to a file
    the live generation serves (left by a killed build, or by hand)."""
    _unlink_if_there(path)
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)


def _unlink_if_there(path: str) -> None:
    """Remove ``path`` if it exists (its folder may not, or may be a file)."""
    with contextlib.suppress(FileNotFoundError, NotADirectoryError):
        os.unlink(path)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
