"""Watching a pool's log for forks and dropped dreams: ``dreampool monitor``.

A log can lie to one reader by showing them a history others never see (a *fork*),
by taking back entries it published (a *rollback*), or a site can drop a logged
dream's record. A monitor keeps the last checkpoint it accepted and, on every run,
checks that the site's current checkpoint extends it (docs/protocol.md §4–§5) and
that the logged dreams are still there::

    dreampool monitor --policy POLICY --state FILE [--sample N | --all] [--deadline S] SITE

SITE is a site directory or an http(s) URL of the site root; the log is at
``SITE/log/``. Each run:

1. fetches ``log/checkpoint`` and verifies it with the pinned policy: signed by
   the policy's log key, origin = key name, quorum met (docs/protocol.md §5 step 1);
2. reads FILE, the signed note of the checkpoint whose dreams were last all checked,
   and FILE.seen, the newest checkpoint verified since (kept even when presence could
   not be checked), and verifies them the same way. With neither it trusts the site's
   checkpoint on first use;
3. compares the site's with the newer of the two (:func:`check_site`) and, if it is
   consistent, keeps it in FILE.seen atomically before going on;
4. checks that every dream leaf it reads has its record, the logged dream itself, or
   an erasure leaf (:mod:`builder.readers.presence`: the leaves added since FILE's checkpoint
   and a random sample of ``N`` older entry bundles, or all of them);
5. only if all of that held, stores the new checkpoint in FILE atomically
   (temporary file, then rename), removes FILE.seen and prints
   ``history unchanged: size m → n``.

A run holds FILE.lock (``flock``, not waiting: a concurrent run exits 3) and ends
by its deadline (``--deadline``, :data:`DEFAULT_RUN_DEADLINE`) with exit 3.

**Only a proof makes a verdict.** Exit status 2 is printed with evidence anyone can
check against the policy: two checkpoints signed for the same size with different
roots; or a consistency proof (from ``log/consistency/<m>`` or computed from the
tiles, c2sp.org/tlog-tiles) that reproduces the NEW signed root but gives an old root
other than the one signed before (RFC 9162 §2.1.4.2: its nodes are then the new
tree's own, so the two signed trees differ in their first m leaves); or a logged
dream, not erased, whose record the site says it does not have or serves altered
(not recomputing the logged leaf). Anything else the
site does — files missing, garbled, unverifiable, stale (a smaller checkpoint, which
the log did once sign), slow or refused — is exit 3, *could not check*: it says what
could not be fetched or verified, and FILE keeps the old checkpoint. Exit 1 is a
local problem (the policy, FILE, the arguments: a SITE URL no request can carry).

Tile bytes are not trusted: a proof computed from them means something only once it
reproduces a signed root. The monitor tries the tiles first and the consistency
file second, and the first that verifies (or proves a fork) decides.

Fetching is bounded (:mod:`builder.readers.fetch`): a total deadline per file, a size cap
per kind of file, redirects only on the same host (never from https to http); a
directory is read only below its root, symlinks included.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
import time
import urllib.parse
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

from builder.errors import DreampoolError, LogError, VerificationError
from builder.formats.b64 import b64_encode
from builder.formats.checkpoint import Checkpoint
from builder.formats.merkle import (
    EMPTY_ROOT,
    HASH_SIZE,
    consistency_proof_from,
    roots_from_consistency_proof,
)
from builder.formats.note import MAX_NOTE_SIZE
from builder.formats.policy import MAX_POLICY_SIZE, Policy, parse_policy, verify_checkpoint
from builder.formats.tiles import TILE_WIDTH, TileHashReader
from builder.readers import fetch
from builder.readers.lightclient import MAX_CONSISTENCY_SIZE, parse_consistency_proof
from builder.readers.presence import (
    OversizeError,
    Presence,
    UncheckedError,
    bundles_to_check,
    check_presence,
)

__all__ = [
    "DEFAULT_RUN_DEADLINE",
    "DEFAULT_SAMPLE",
    "EXIT_EVIDENCE",
    "EXIT_OK",
    "EXIT_UNCHECKED",
    "CouldNotCheck",
    "DirectorySite",
    "HttpSite",
    "MonitorError",
    "NotFoundError",
    "Report",
    "RunDeadline",
    "Site",
    "SiteError",
    "TooLargeError",
    "Verdict",
    "check_site",
    "open_site",
    "run_monitor",
    "seen_path",
    "site_base",
]

CHECKPOINT_PATH = "log/checkpoint"
TILE_SIZE_LIMIT = TILE_WIDTH * HASH_SIZE

EXIT_OK = 0
EXIT_EVIDENCE = 2
"""A verdict, printed with its evidence: a fork, or a logged dream missing."""
EXIT_UNCHECKED = 3
"""Could not check: something could not be fetched or verified; run again later."""

DEFAULT_SAMPLE = 4
"""Entry bundles older than the state drawn at random on each run (up to 1,024 dreams)."""

DEFAULT_RUN_DEADLINE = 600.0
"""Seconds a whole run may take (fetches included); then it ends with exit 3."""


class MonitorError(DreampoolError):
    """The monitor could not run: a local file (policy, state) is missing or not acceptable."""


class CouldNotCheck(MonitorError):
    """The site gave nothing to decide on: a file missing, garbled, unverifiable or stale."""


class SiteError(CouldNotCheck):
    """A site file could not be fetched."""


class NotFoundError(SiteError):
    """The site has no file at that path (HTTP 404/410, or no such file)."""


class TooLargeError(SiteError, OversizeError):
    """The site's file at that path is over the size cap for its kind."""


class Site(Protocol):
    """Where the monitor reads a site's files.

    Responsibility: ``fetch`` returns the bytes at ``path`` (relative to the site root,
    e.g. ``log/tile/0/000.p/7``), at most ``limit`` of them, or raises
    :class:`NotFoundError` if there is no such file and :class:`SiteError` for any
    other failure, a file over ``limit`` included. It authenticates nothing.
    """

    def fetch(self, path: str, limit: int) -> bytes: ...

    def describe(self, path: str) -> str:
        """Where ``path`` is, for messages: a URL or a file path."""
        ...


def _check_site_path(path: str) -> None:
    parts = path.split("/")
    if not path or "\\" in path or "\x00" in path or any(part in ("", ".", "..") for part in parts):
        raise SiteError(f"{path!r} is not a relative path below the site root")


class DirectorySite:
    """A site on disk. Reads only regular files below its root, after following symlinks.

    The root is resolved again on every read: a built site is a symlink to the
    live generation (:mod:`builder.site.writer`), which each build swaps, and a
    long-running reader (``dreampool mcp --site``) must follow it.
    """

    __slots__ = ("_given",)

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self._given = Path(os.path.abspath(root))
        self._resolve_root()

    def _resolve_root(self) -> Path:
        try:
            resolved = self._given.resolve(strict=True)
        except OSError as exc:
            raise SiteError(
                f"site directory {self._given}: {exc.strerror or exc}",
                hint="give the site directory (holding log/) or its http(s) URL",
            ) from None
        if not resolved.is_dir():
            raise SiteError(f"site {self._given} is not a directory")
        return resolved

    @property
    def _root(self) -> Path:
        return self._given

    def describe(self, path: str) -> str:
        return str(self._root / path)

    def _target(self, path: str) -> Path:
        """The regular file ``path`` names below the root; NotFoundError if there is none."""
        _check_site_path(path)
        root = self._resolve_root()
        try:
            target = (root / path).resolve(strict=True)
        except (FileNotFoundError, NotADirectoryError):
            raise NotFoundError(f"{self.describe(path)}: no such file") from None
        except OSError as exc:
            raise SiteError(f"{self.describe(path)}: {exc.strerror or exc}") from None
        except RuntimeError:  # Python < 3.13 reports a symlink loop so
            raise SiteError(f"{self.describe(path)}: a symlink loop") from None
        if not target.is_relative_to(root):
            raise SiteError(
                f"{self.describe(path)} leads outside the site directory (a symlink)",
                hint="a site's files must lie inside its directory",
            )
        if not target.is_file():
            raise SiteError(f"{self.describe(path)} is not a regular file")
        return target

    def fetch(self, path: str, limit: int) -> bytes:
        target = self._target(path)
        try:
            with target.open("rb") as f:
                data = f.read(limit + 1)
        except OSError as exc:
            raise SiteError(f"{self.describe(path)}: {exc.strerror or exc}") from None
        if len(data) > limit:
            raise TooLargeError(
                f"{self.describe(path)} is over {limit} bytes, too big for its kind"
            )
        return data

    def get(self, path: str, limit: int) -> bytes | None:
        """:meth:`fetch`, or None when there is no such file."""
        try:
            return self.fetch(path, limit)
        except NotFoundError:
            return None


class HttpSite:
    """A site served over http(s); ``base`` is the site root URL. Every read goes
    through :mod:`builder.readers.fetch` (total deadline, size cap, checked redirects).

    ``until`` (a :func:`time.monotonic` time) is the end of the whole run: no fetch
    starts after it, and none runs past it (:class:`RunDeadline`).
    """

    __slots__ = ("_base", "_deadline", "_until")

    def __init__(
        self, base: str, *, deadline: float | None = None, until: float | None = None
    ) -> None:
        self._base = site_base(base)
        self._deadline = deadline
        self._until = until

    def describe(self, path: str) -> str:
        return self._base + urllib.parse.quote(path)

    def _seconds(self, path: str) -> float | None:
        """This fetch's deadline: the per-fetch one, cut to what is left of the run's."""
        if self._until is None:
            return self._deadline
        left = self._until - time.monotonic()
        if left <= 0:
            raise RunDeadline(
                f"the run's deadline passed before {self.describe(path)} was fetched",
                hint="the site is too slow for the run's deadline (--deadline); run again later",
            )
        return min(fetch.DEFAULT_DEADLINE if self._deadline is None else self._deadline, left)

    def fetch(self, path: str, limit: int) -> bytes:
        _check_site_path(path)
        try:
            return fetch.get(self.describe(path), limit, deadline=self._seconds(path))
        except fetch.NotFound as exc:
            raise NotFoundError(exc.message, hint=exc.hint) from None
        except fetch.TooLarge as exc:
            raise TooLargeError(exc.message, hint=exc.hint) from None
        except fetch.FetchError as exc:
            if self._until is not None and time.monotonic() >= self._until:
                raise RunDeadline(
                    f"the run's deadline passed while fetching {self.describe(path)}",
                    hint="the site is too slow for the run's deadline (--deadline); "
                    "run again later",
                ) from None
            raise SiteError(exc.message, hint=exc.hint) from None

    def get(self, path: str, limit: int) -> bytes | None:
        """:meth:`fetch`, or None when there is no such file."""
        try:
            return self.fetch(path, limit)
        except NotFoundError:
            return None


class RunDeadline(SiteError):
    """The run's total deadline passed: nothing more is fetched."""


_URL_SAFE = "/%:@!$&'()*+,;=-._~"


def site_base(base: str) -> str:
    """The site root URL ``base``, checked and in the ASCII form http.client sends.

    Refuses (:class:`SiteError`) a URL that is not http(s) with a host, one with a
    query, fragment or credentials, and one with white space or a control character
    anywhere (no request could carry it: a typo, never the site's fault). A non-ASCII
    host is encoded with IDNA (RFC 3490, Python's ``idna`` codec), a non-ASCII path
    percent-encoded as UTF-8. The result ends with ``/``.
    """
    if any(c.isspace() or not c.isprintable() for c in base):
        raise SiteError(
            "site URL contains white space or a control character, which no request can carry",
            hint="percent-encode it (a space is %20) or fix the URL",
        )
    try:
        parts = fetch.check_url(base)
    except fetch.FetchError:
        raise SiteError(
            "site URL must be http(s)://host/path", hint="give the site root URL"
        ) from None
    if parts.query or parts.fragment or parts.username or parts.password:
        raise SiteError(
            "site URL must not carry a query, fragment or credentials",
            hint="give the site root URL, e.g. https://example.org/dreams/",
        )
    netloc = parts.netloc
    host = parts.hostname or ""
    if not host.isascii():
        try:
            ascii_host = host.encode("idna").decode("ascii")
        except UnicodeError:
            raise SiteError(
                "site URL host is not an internationalized domain name IDNA can encode",
                hint="give the host in its ASCII form (xn--…)",
            ) from None
        netloc = ascii_host + (f":{parts.port}" if parts.port is not None else "")
    path = urllib.parse.quote(parts.path, safe=_URL_SAFE)
    url = urllib.parse.urlunsplit((parts.scheme, netloc, path, "", ""))
    return url if url.endswith("/") else url + "/"


def open_site(site: str, *, until: float | None = None) -> DirectorySite | HttpSite:
    """A :class:`HttpSite` for an http(s) URL, a :class:`DirectorySite` for anything else."""
    if site.startswith(("http://", "https://")):
        return HttpSite(site, until=until)
    if "://" in site:
        raise SiteError(
            "site URL scheme is not http or https",
            hint="give a site directory or an http(s) URL",
        )
    return DirectorySite(site)


@dataclass(frozen=True, slots=True)
class Verdict:
    """What comparing the site's checkpoint with the one accepted last found.

    ``status`` is ``first-use`` (no earlier checkpoint), ``consistent`` (the new
    checkpoint extends the old one: same tree or a proven prefix), ``rollback`` (the
    site serves a smaller checkpoint: stale or withheld, *not* a verdict) or ``fork``
    (proved: ``old_note`` and ``new_note`` are the evidence, with ``proof`` — the
    consistency proof whose nodes reproduce the new root — when the sizes differ).
    """

    status: Literal["first-use", "consistent", "rollback", "fork"]
    new: Checkpoint
    new_note: bytes
    old: Checkpoint | None = None
    old_note: bytes | None = None
    reason: str = ""
    warnings: tuple[str, ...] = ()
    proof: tuple[bytes, ...] = ()


def check_site(policy: Policy, state: bytes | None, site: Site) -> Verdict:
    """Steps 1–3 of a monitor run: fetch and verify the site's checkpoint, compare it.

    ``state`` is the note of the checkpoint accepted last, or None. Raises
    :class:`CouldNotCheck` when the site gives nothing to decide on, and
    :class:`MonitorError` when ``state`` is not acceptable; returns the verdict
    otherwise. Stores nothing.
    """
    # 1. The site's checkpoint, by docs/protocol.md §5 step 1 rules. One the policy
    # does not accept proves nothing (anyone can serve one): could not check.
    new_note = site.fetch(CHECKPOINT_PATH, MAX_NOTE_SIZE)
    try:
        new, _ = verify_checkpoint(policy, new_note)
    except DreampoolError as exc:
        raise CouldNotCheck(
            f"{site.describe(CHECKPOINT_PATH)}: {exc.message}",
            hint=exc.hint or "the site's checkpoint is not signed as the policy requires",
        ) from exc
    # 2. The checkpoint accepted last.
    if state is None:
        return Verdict("first-use", new, new_note)
    try:
        old, _ = verify_checkpoint(policy, state)
    except DreampoolError as exc:
        raise MonitorError(
            f"state file: {exc.message}",
            hint="the state holds no checkpoint this policy accepts; if the pool changed its "
            "log key, check that out of band, then delete the state file to trust anew",
        ) from exc
    if old.origin != new.origin:
        raise MonitorError(
            f"the state holds a checkpoint of log {old.origin}, the site serves {new.origin}",
            hint="use one state file per log",
        )

    # 3. Compare.
    def verdict(
        status: Literal["consistent", "rollback", "fork"],
        reason: str = "",
        warnings: tuple[str, ...] = (),
        proof: tuple[bytes, ...] = (),
    ) -> Verdict:
        return Verdict(status, new, new_note, old, state, reason, warnings, proof)

    if new.size < old.size:
        return verdict(
            "rollback",
            f"the site serves an older checkpoint, size {new.size}, than size {old.size} "
            "accepted before: a stale copy, or the log withholding its newer entries",
        )
    if new.size == old.size:
        if new.root != old.root:
            return verdict("fork", f"two different roots are signed for tree size {new.size}")
        return verdict("consistent")
    if old.size == 0:
        # Every tree extends the empty one, whose root is fixed (RFC 6962 §2.1).
        if old.root != EMPTY_ROOT:
            return verdict("fork", "a checkpoint of size 0 signs a root other than SHA-256()")
        return verdict("consistent")
    return _prove_consistency(site, old, new, verdict)


def _prove_consistency(site: Site, old: Checkpoint, new: Checkpoint, verdict: _Make) -> Verdict:
    """Step 3 for a larger size: the first proof that reproduces the new signed root decides.

    Tries the proof computed from the tiles at the new size, then
    ``log/consistency/<old size>``. A proof whose new root is the signed one and whose
    old root is the signed old one proves consistency; one whose old root is another
    proves a fork (RFC 9162 §2.1.4.2). A proof that cannot be had, does not parse or
    does not reproduce the new signed root proves nothing; if no proof decides,
    raises :class:`CouldNotCheck` naming each source and what went wrong.
    """
    problems: list[str] = []
    for source, get in (("tiles", _proof_from_tiles), (None, _proof_from_file)):
        name = source or site.describe(f"log/consistency/{old.size}")
        try:
            seed, proof = get(site, old, new)
            old_root, new_root = roots_from_consistency_proof(old.size, new.size, seed, proof)
        except (SiteError, LogError, VerificationError, ValueError) as exc:
            problems.append(f"{name}: {exc}")
            continue
        if new_root != new.root:
            problems.append(
                f"{name}: the proof gives new root {new_root.hex()}, not the signed "
                f"{new.root.hex()}, so it proves nothing"
            )
            continue
        warnings = tuple(f"{problem} (but {name} verifies)" for problem in problems)
        if old_root == old.root:
            return verdict("consistent", warnings=warnings)
        full = tuple(proof) if old.size & (old.size - 1) else (seed, *proof)
        return verdict(
            "fork",
            f"the {source or 'consistency file'} reproduce{'' if source else 's'} the new "
            f"root of size {new.size}, and with it the root of its first {old.size} leaves, "
            f"{old_root.hex()}, which is not the root {old.root.hex()} signed before",
            warnings=warnings,
            proof=full,
        )
    raise CouldNotCheck(
        f"no proof that size {old.size} → {new.size} only appended: " + "; ".join(problems),
        hint="no consistency proof the site serves reproduces its signed root (files "
        "missing, garbled or stale); run again later, or report it to the pool's operators",
    )


class _Make(Protocol):
    def __call__(
        self,
        status: Literal["consistent", "rollback", "fork"],
        reason: str = "",
        warnings: tuple[str, ...] = (),
        proof: tuple[bytes, ...] = (),
    ) -> Verdict: ...


def _proof_from_tiles(
    site: Site, old: Checkpoint, new: Checkpoint
) -> tuple[bytes, Sequence[bytes]]:
    """The consistency proof computed from the tiles of the new size, and the old root
    they give (the seed a proof from a power-of-two size leaves out)."""

    def fetch_tile(path: str) -> bytes:
        return site.fetch("log/" + path, TILE_SIZE_LIMIT)

    reader = TileHashReader(fetch_tile, new.size)
    proof = consistency_proof_from(reader.read_hash, old.size, new.size)
    if old.size & (old.size - 1):
        return proof[0], proof
    return reader.read_hash(old.size.bit_length() - 1, 0), proof


def _proof_from_file(site: Site, old: Checkpoint, new: Checkpoint) -> tuple[bytes, Sequence[bytes]]:
    """``log/consistency/<m>`` (docs/protocol.md §4); for a power-of-two m, the signed old
    root stands in for the old tree's node, which the proof leaves out."""
    path = f"log/consistency/{old.size}"
    proof = parse_consistency_proof(site.fetch(path, MAX_CONSISTENCY_SIZE))
    return (old.root if not old.size & (old.size - 1) else proof[0] if proof else b""), proof


# --- the command ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Report:
    """What a run prints (stdout lines, each to pass :func:`builder.errors.printable`)
    and its exit status."""

    code: int
    lines: tuple[str, ...]


def run_monitor(
    policy_path: str | os.PathLike[str],
    state_path: str | os.PathLike[str],
    site: str | os.PathLike[str],
    *,
    sample: int | None = DEFAULT_SAMPLE,
    deadline: float = DEFAULT_RUN_DEADLINE,
) -> Report:
    """``dreampool monitor``: check SITE against FILE, store its checkpoint if all holds.

    ``sample`` is the number of older entry bundles whose dreams are checked for
    presence (None: all); ``deadline`` the seconds the whole run may take. Returns a
    report of status 0 (history unchanged, every checked dream present, checkpoint
    stored) or 2 (a proved fork, or logged dreams missing or altered: the evidence is
    in the lines). Raises :class:`CouldNotCheck` (exit 3) when the site gave nothing
    to decide on, the deadline passed or another run holds FILE, and
    :class:`MonitorError` (exit 1) for a local problem.

    FILE is written only with status 0. Every checkpoint the run verified and found
    consistent with what it knew is kept in FILE.seen (:func:`seen_path`) whatever
    presence says, so the next run compares the site's checkpoint with it too.
    """
    until = time.monotonic() + deadline
    policy = parse_policy(_read_local(policy_path, MAX_POLICY_SIZE, "policy"))
    state_file = Path(state_path)
    try:
        source = open_site(os.fspath(site), until=until)
    except SiteError as exc:  # the argument itself: a local problem
        raise MonitorError(exc.message, hint=exc.hint) from None
    with _locked(state_file):
        try:
            return _run(policy, state_file, source, sample)
        except CouldNotCheck as exc:
            if time.monotonic() < until or isinstance(exc, RunDeadline):
                raise
            raise CouldNotCheck(
                f"the run's deadline of {deadline:g} s passed: {exc.message}",
                hint=f"the site is too slow for --deadline; run again later ({exc.hint})",
            ) from None


def seen_path(state_file: Path) -> Path:
    """FILE.seen: the newest checkpoint verified, whether or not its dreams could be checked."""
    return state_file.with_name(state_file.name + ".seen")


@contextmanager
def _locked(state_file: Path) -> Iterator[None]:
    """Hold FILE.lock (``flock``, not waiting) for the run: one run at a time per state."""
    lock = state_file.with_name(state_file.name + ".lock")
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise MonitorError(
            f"cannot open the lock file {lock}: {exc.strerror or exc}",
            hint="create the state file's directory, or give --state a path in a writable one",
        ) from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise CouldNotCheck(
                f"another monitor run holds the state {state_file} (lock {lock})",
                hint="runs overlap: run less often, or give --deadline under the interval",
            ) from None
        except OSError as exc:
            raise MonitorError(f"cannot lock {lock}: {exc.strerror or exc}") from None
        yield
    finally:
        os.close(fd)  # releases the lock; the file stays (removing it would race)


def _stored(policy: Policy, note: bytes, path: Path) -> Checkpoint:
    try:
        cp, _ = verify_checkpoint(policy, note)
    except DreampoolError as exc:
        raise MonitorError(
            f"{path}: {exc.message}",
            hint="it holds no checkpoint this policy accepts; if the pool changed its log key, "
            "check that out of band, then delete the state file and its .seen file to trust anew",
        ) from exc
    return cp


def _run(
    policy: Policy, state_file: Path, source: DirectorySite | HttpSite, sample: int | None
) -> Report:
    checked = _read_state(state_file)  # the last checkpoint whose dreams were all checked
    seen_file = seen_path(state_file)
    seen = _read_state(seen_file)  # the newest checkpoint verified, maybe unchecked
    checked_cp = None if checked is None else _stored(policy, checked, state_file)
    seen_cp = None if seen is None else _stored(policy, seen, seen_file)
    # Compare the site with the newer of the two (consistent with the older: it was
    # stored only once proved so), so a fork against either is found.
    anchor, anchor_file = checked, state_file
    if seen is not None and seen_cp is not None:
        if checked_cp is not None and checked_cp.origin != seen_cp.origin:
            raise MonitorError(
                f"{state_file} and {seen_file} hold checkpoints of different logs",
                hint="use one state file per log",
            )
        if checked_cp is None or seen_cp.size > checked_cp.size:
            anchor, anchor_file = seen, seen_file
        elif seen_cp.size == checked_cp.size and seen_cp.root != checked_cp.root:
            assert checked is not None
            return Report(
                EXIT_EVIDENCE,
                (
                    f"fork: two different roots are signed for tree size {seen_cp.size}",
                    f"evidence: the checkpoint accepted before, from {state_file}:",
                    *_note_lines(checked),
                    f"evidence: the checkpoint seen since, from {seen_file}:",
                    *_note_lines(seen),
                    "the state files are unchanged; keep this evidence",
                ),
            )
    verdict = check_site(policy, anchor, source)
    warnings = [f"warning: {warning}" for warning in verdict.warnings]
    lines: list[str] = []
    new = verdict.new
    if verdict.status == "rollback":
        raise CouldNotCheck(
            verdict.reason,
            hint=f"run again later; {state_file} is unchanged. If the site keeps serving "
            "the older checkpoint, it is withholding entries",
        )
    if verdict.status == "fork":
        assert verdict.old_note is not None
        lines += [f"fork: {verdict.reason}", *warnings]
        lines += [f"evidence: the checkpoint accepted before, from {anchor_file}:"]
        lines += _note_lines(verdict.old_note)
        lines += [
            f"evidence: the checkpoint the site serves now, {source.describe(CHECKPOINT_PATH)}:"
        ]
        lines += _note_lines(verdict.new_note)
        if verdict.proof:
            assert verdict.old is not None
            lines += [
                f"evidence: consistency proof from size {verdict.old.size} to {new.size} "
                "(RFC 9162 §2.1.4.2; for a power-of-two size the first hash is the old "
                "tree's root, which a proof leaves out):"
            ]
            lines += [b64_encode(h) for h in verdict.proof]
        lines += [f"the state file {state_file} is unchanged; keep this evidence"]
        return Report(EXIT_EVIDENCE, tuple(lines))
    lines += warnings
    # Verified, and consistent with every checkpoint kept: keep it whatever follows,
    # so a different one signed for its size later is a fork, not a first use.
    if verdict.new_note != anchor:
        _store(seen_file, verdict.new_note)
    # 4. Presence of every dream leaf checked (docs/protocol.md §5): every leaf added
    # since the last full check, and a sample of the older ones.
    since = new.size if verdict.old is None else verdict.old.size
    if checked_cp is not None:
        since = checked_cp.size
    presence = _presence(source, new, bundles_to_check(since, new.size, sample))
    if presence.missing or presence.altered:
        lines += [
            f"missing: dream {dream_id} (leaf {index}) has no record on the site "
            f"({source.describe(f'dreams/{dream_id}/record.json')}) and no erasure leaf"
            for index, dream_id in presence.missing
        ]
        lines += [
            f"altered: dream {dream_id} (leaf {index}) has no erasure leaf, and what the site "
            f"serves as its record ({source.describe(f'dreams/{dream_id}/record.json')}) is "
            f"not the logged dream: {why}"
            for index, dream_id, why in presence.altered
        ]
        lines += [f"unchecked: {why}" for why in presence.unchecked]
        count = len(presence.missing) + len(presence.altered)
        lines += [
            f"evidence: the signed checkpoint of size {new.size} whose entry bundles log "
            f"{'these dreams' if count > 1 else 'this dream'}, "
            f"{source.describe(CHECKPOINT_PATH)}:"
        ]
        lines += _note_lines(verdict.new_note)
        lines += [f"the state file {state_file} is unchanged"]
        return Report(EXIT_EVIDENCE, tuple(lines))
    if presence.unchecked:
        raise CouldNotCheck(
            f"{len(presence.unchecked)} of {presence.checked} dream record(s) could not "
            f"be asked for: {presence.unchecked[0]}"
            + (f" (and {len(presence.unchecked) - 1} more)" if len(presence.unchecked) > 1 else ""),
            hint=f"run again later; {state_file} is unchanged",
        )
    # 5. All held: store. FILE is now the newest checkpoint kept; FILE.seen is done.
    _store(state_file, verdict.new_note)
    with suppress(FileNotFoundError):
        os.unlink(seen_file)
    found = (
        f"{presence.checked} dreams checked: {presence.present} present, {presence.erased} erased"
    )
    if checked is None:
        lines += [
            f"no state file: trusting {new.origin} at size {new.size} on first use; "
            f"stored its checkpoint in {state_file}; {found}"
        ]
    else:
        assert verdict.old is not None
        lines += [f"history unchanged: size {verdict.old.size} → {new.size}; {found}"]
    return Report(EXIT_OK, tuple(lines))


def _presence(site: DirectorySite | HttpSite, new: Checkpoint, bundles: Sequence[int]) -> Presence:
    def fetch_tile(path: str) -> bytes:
        return site.fetch("log/" + path, TILE_SIZE_LIMIT)

    reader = TileHashReader(fetch_tile, new.size)
    try:
        return check_presence(site, new, bundles, reader.read_hash)
    except (UncheckedError, SiteError) as exc:
        raise CouldNotCheck(f"the dreams' records: {exc.message}", hint=exc.hint) from None


def _note_lines(note: bytes) -> list[str]:
    return note.decode("utf-8", "replace").splitlines()


def _read_local(path: str | os.PathLike[str], limit: int, what: str) -> bytes:
    try:
        with Path(path).open("rb") as f:
            data = f.read(limit + 1)
    except OSError as exc:
        raise MonitorError(
            f"{what} {os.fspath(path)}: {exc.strerror or exc}",
            hint=f"check the {what} path",
        ) from None
    if len(data) > limit:
        raise MonitorError(f"{what} {os.fspath(path)} is over {limit} bytes")
    return data


def _read_state(path: Path) -> bytes | None:
    if not path.exists() and not path.is_symlink():
        return None
    return _read_local(path, MAX_NOTE_SIZE, "state file")


def _store(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically: a temporary file beside it, then a rename."""
    directory = path.parent
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    except OSError as exc:
        raise MonitorError(
            f"cannot write the state file in {directory}: {exc.strerror or exc}",
            hint="create the directory, or give --state a path in a writable one",
        ) from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        with suppress(OSError):
            os.unlink(tmp)
        raise MonitorError(f"cannot write the state file {path}: {exc.strerror or exc}") from None
    except BaseException:
        with suppress(OSError):
            os.unlink(tmp)
        raise
