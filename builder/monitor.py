"""Watching a pool's log for rollbacks and forks: ``dreampool monitor``.

A log can lie to one reader by showing them a history others never see (a *fork*)
or by taking back entries it published (a *rollback*). A monitor catches both: it
keeps the last checkpoint it accepted and, on every run, checks that the site's
current checkpoint extends it (docs/protocol.md §4–§5)::

    dreampool monitor --policy POLICY --state FILE SITE

SITE is a site directory or an http(s) URL of the site root; the log is at
``SITE/log/``. Each run:

1. fetches ``log/checkpoint`` and verifies it with the pinned policy: signed by
   the policy's log key, origin = key name, quorum met (docs/protocol.md §5 step 1);
2. reads FILE, the signed note of the checkpoint accepted last, and verifies it the
   same way. With no FILE it trusts the site's checkpoint on first use;
3. compares the two. A smaller size is a **rollback**; the same size with another
   root is a **fork**; a larger size needs the RFC 6962 consistency proof from the
   old size to the new one, computed from the site's tiles (c2sp.org/tlog-tiles,
   :class:`builder.tiles.TileHashReader` at the new size) or, where tiles are
   missing, read from ``log/consistency/<old size>``. It must verify against both
   signed roots (RFC 9162 §2.1.4.2); if none does, that is a **fork**;
4. stores the new checkpoint in FILE atomically (temporary file, then rename), and
   prints ``history unchanged: size m → n``.

Exit status 0: history unchanged. 2: rollback or fork; both signed checkpoints are
printed in full as evidence (two notes signed by the same log key that no
append-only log can have both published), and FILE keeps the old one. A run that
cannot decide (site unreachable, checkpoint not signed as the policy wants, no
consistency proof to be had) raises a :class:`~builder.errors.DreampoolError`, which
the CLI reports with exit status 1.

Tile bytes are not trusted: a proof computed from them means something only once it
verifies against the signed roots. A proof that verifies, from any source, proves
the old tree is a prefix of the new one, so the monitor tries the tiles first and
the consistency file second, and calls a fork only when no proof it could get
verifies.

Fetching is bounded: HTTP(S) with a timeout, a size cap per file and redirects
followed only on the same host (never from https to http); a directory is read only
below its root, symlinks included.
"""

from __future__ import annotations

import http.client
import os
import sys
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Literal, Protocol

from builder.checkpoint import Checkpoint
from builder.errors import DreampoolError, LogError, VerificationError
from builder.lightclient import MAX_CONSISTENCY_SIZE, parse_consistency_proof
from builder.merkle import EMPTY_ROOT, HASH_SIZE, consistency_proof_from, verify_consistency
from builder.note import MAX_NOTE_SIZE
from builder.policy import MAX_POLICY_SIZE, Policy, parse_policy, verify_checkpoint
from builder.tiles import TILE_WIDTH, TileHashReader

__all__ = [
    "DirectorySite",
    "HttpSite",
    "MonitorError",
    "NotFoundError",
    "Site",
    "SiteError",
    "Verdict",
    "check_site",
    "open_site",
    "run_monitor",
]

CHECKPOINT_PATH = "log/checkpoint"
TILE_SIZE_LIMIT = TILE_WIDTH * HASH_SIZE
HTTP_TIMEOUT = 20.0
MAX_REDIRECTS = 5

EXIT_OK = 0
EXIT_EVIDENCE = 2


class MonitorError(DreampoolError):
    """The monitor could not decide: a file is missing, unreadable or not acceptable."""


class SiteError(MonitorError):
    """A site file could not be fetched."""


class NotFoundError(SiteError):
    """The site has no file at that path (HTTP 404/410, or no such file)."""


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
    live generation (:mod:`builder.writer`), which each build swaps, and a
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

    def fetch(self, path: str, limit: int) -> bytes:
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
        try:
            with target.open("rb") as f:
                data = f.read(limit + 1)
        except OSError as exc:
            raise SiteError(f"{self.describe(path)}: {exc.strerror or exc}") from None
        if len(data) > limit:
            raise SiteError(f"{self.describe(path)} is over {limit} bytes, too big for its kind")
        return data


class _SameHostRedirects(urllib.request.HTTPRedirectHandler):
    """Follow a redirect only to the same host, and never from https to http."""

    max_redirections = MAX_REDIRECTS

    def redirect_request(
        self,
        req: urllib.request.Request,
        fp: IO[bytes],
        code: int,
        msg: str,
        headers: http.client.HTTPMessage,
        newurl: str,
    ) -> urllib.request.Request | None:
        old = urllib.parse.urlsplit(req.full_url)
        new = urllib.parse.urlsplit(urllib.parse.urljoin(req.full_url, newurl))
        downgrade = old.scheme == "https" and new.scheme != "https"
        if new.scheme not in ("http", "https") or new.hostname != old.hostname or downgrade:
            raise SiteError(
                f"{req.full_url} redirects to another host or scheme ({new.scheme}://"
                f"{new.hostname}); the monitor does not follow it",
                hint="give the URL the site is served from",
            )
        return super().redirect_request(req, fp, code, msg, headers, newurl)


class HttpSite:
    """A site served over http(s); ``base`` is the site root URL."""

    __slots__ = ("_base", "_opener", "_timeout")

    def __init__(self, base: str, *, timeout: float = HTTP_TIMEOUT) -> None:
        parts = urllib.parse.urlsplit(base)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise SiteError("site URL must be http(s)://host/path", hint="give the site root URL")
        if parts.query or parts.fragment or parts.username or parts.password:
            raise SiteError(
                "site URL must not carry a query, fragment or credentials",
                hint="give the site root URL, e.g. https://example.org/dreams/",
            )
        self._base = base if base.endswith("/") else base + "/"
        self._timeout = timeout
        self._opener = urllib.request.build_opener(_SameHostRedirects())

    def describe(self, path: str) -> str:
        return self._base + path

    def fetch(self, path: str, limit: int) -> bytes:
        _check_site_path(path)
        url = self.describe(path)
        request = urllib.request.Request(
            url,
            headers={
                "User-Agent": "dreampool-monitor",
                "Accept-Encoding": "identity",
                # A stale cached checkpoint would look like a rollback.
                "Cache-Control": "no-cache",
            },
        )
        try:
            with self._opener.open(request, timeout=self._timeout) as response:
                length = response.headers.get("Content-Length")
                if length is not None and length.isdigit() and int(length) > limit:
                    raise SiteError(f"{url} is {length} bytes, over {limit} for its kind")
                data: bytes = response.read(limit + 1)
        except urllib.error.HTTPError as exc:
            exc.close()
            if exc.code in (404, 410):
                raise NotFoundError(f"{url}: HTTP {exc.code}") from None
            raise SiteError(f"{url}: HTTP {exc.code} {exc.reason}") from None
        except urllib.error.URLError as exc:
            raise SiteError(
                f"{url}: {exc.reason}", hint="check the URL and the network; run again later"
            ) from None
        except (OSError, http.client.HTTPException) as exc:
            raise SiteError(f"{url}: {exc}", hint="run again later") from None
        if len(data) > limit:
            raise SiteError(f"{url} is over {limit} bytes, too big for its kind")
        return data


def open_site(site: str) -> Site:
    """A :class:`HttpSite` for an http(s) URL, a :class:`DirectorySite` for anything else."""
    if site.startswith(("http://", "https://")):
        return HttpSite(site)
    if "://" in site:
        raise SiteError(
            "site URL scheme is not http or https",
            hint="give a site directory or an http(s) URL",
        )
    return DirectorySite(site)


@dataclass(frozen=True, slots=True)
class Verdict:
    """What one monitor run found.

    ``status`` is ``first-use`` (no earlier checkpoint), ``consistent`` (the new
    checkpoint extends the old one: same tree or a proven prefix), ``rollback`` or
    ``fork``. For the last two, ``old_note`` and ``new_note`` are the evidence.
    """

    status: Literal["first-use", "consistent", "rollback", "fork"]
    new: Checkpoint
    new_note: bytes
    old: Checkpoint | None = None
    old_note: bytes | None = None
    reason: str = ""
    warnings: tuple[str, ...] = ()


def check_site(policy: Policy, state: bytes | None, site: Site) -> Verdict:
    """Steps 1–3 of a monitor run: fetch and verify the site's checkpoint, compare it.

    ``state`` is the note of the checkpoint accepted last, or None. Raises
    :class:`MonitorError` (or another DreampoolError) when it cannot decide; returns
    the verdict otherwise. Stores nothing.
    """
    # 1. The site's checkpoint, by docs/protocol.md §5 step 1 rules.
    new_note = site.fetch(CHECKPOINT_PATH, MAX_NOTE_SIZE)
    try:
        new, _ = verify_checkpoint(policy, new_note)
    except DreampoolError as exc:
        raise MonitorError(
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
    ) -> Verdict:
        return Verdict(status, new, new_note, old, state, reason, warnings)

    if new.size < old.size:
        return verdict(
            "rollback",
            f"the site's checkpoint has size {new.size}, smaller than size {old.size} "
            "accepted before: the log took back published entries",
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
    failures, warnings = _prove_consistency(site, old, new)
    if failures:
        return verdict(
            "fork",
            f"no consistency proof from size {old.size} to {new.size} verifies: "
            + "; ".join(failures),
        )
    return verdict("consistent", warnings=warnings)


def _prove_consistency(
    site: Site, old: Checkpoint, new: Checkpoint
) -> tuple[list[str], tuple[str, ...]]:
    """Find a consistency proof from ``old`` to ``new`` that verifies against both roots.

    Tries the proof computed from the tiles at the new size, then
    ``log/consistency/<old size>``. Returns ([], warnings) once one verifies, and
    (why each failed, ()) when none does. A proof that could not be obtained (the
    files are missing or unreachable) does not count as failed; if no proof could be
    obtained at all, raises MonitorError: without one, nothing can be decided.
    """
    failed: list[str] = []
    unavailable: list[str] = []
    proofs: list[tuple[str, Sequence[bytes]]] = []

    def fetch_tile(path: str) -> bytes:
        return site.fetch("log/" + path, TILE_SIZE_LIMIT)

    try:
        reader = TileHashReader(fetch_tile, new.size)
        proofs.append(("tiles", consistency_proof_from(reader.read_hash, old.size, new.size)))
    except LogError as exc:  # a tile of the wrong size: served, and wrong
        failed.append(f"tiles: {exc.message}")
    except SiteError as exc:
        unavailable.append(f"tiles: {exc.message}")
    consistency_path = f"log/consistency/{old.size}"
    try:
        data = site.fetch(consistency_path, MAX_CONSISTENCY_SIZE)
        proofs.append((consistency_path, parse_consistency_proof(data)))
    except VerificationError as exc:  # malformed: served, and wrong
        failed.append(f"{consistency_path}: {exc.message}")
    except SiteError as exc:
        unavailable.append(f"{consistency_path}: {exc.message}")
    for source, proof in proofs:
        try:
            # RFC 9162 §2.1.4.2, against both signed roots.
            verify_consistency(old.size, new.size, old.root, new.root, proof)
        except VerificationError as exc:
            failed.append(f"{source}: {exc.message}")
            continue
        return [], tuple(f"{failure} (but {source} verifies)" for failure in failed)
    if not failed:
        raise MonitorError(
            f"cannot check that size {old.size} → {new.size} only appended: "
            + "; ".join(unavailable),
            hint="the site serves neither the tiles nor the consistency proof; run again "
            "later, or report it to the pool's operators",
        )
    return failed, ()


# --- the command ----------------------------------------------------------------------


def run_monitor(
    policy_path: str | os.PathLike[str],
    state_path: str | os.PathLike[str],
    site: str | os.PathLike[str],
) -> int:
    """``dreampool monitor``: check SITE's checkpoint against FILE, store it if it extends it.

    Returns 0 when history is unchanged (or on first use), 2 on rollback or fork after
    printing the evidence. Raises a DreampoolError when it cannot decide.
    """
    policy = parse_policy(_read_local(policy_path, MAX_POLICY_SIZE, "policy"))
    state_file = Path(state_path)
    state = _read_state(state_file)
    source = open_site(os.fspath(site))
    verdict = check_site(policy, state, source)
    for warning in verdict.warnings:
        print(f"warning: {warning}")
    new = verdict.new
    if verdict.status in ("rollback", "fork"):
        assert verdict.old_note is not None
        print(f"{verdict.status}: {verdict.reason}")
        print(f"evidence: the checkpoint accepted before, from {state_file}:")
        sys.stdout.write(verdict.old_note.decode("utf-8"))
        print(f"evidence: the checkpoint the site serves now, {source.describe(CHECKPOINT_PATH)}:")
        sys.stdout.write(verdict.new_note.decode("utf-8"))
        print(f"the state file {state_file} is unchanged; keep both checkpoints as evidence")
        return EXIT_EVIDENCE
    _store(state_file, verdict.new_note)
    if verdict.status == "first-use":
        print(
            f"no state file: trusting {new.origin} at size {new.size} on first use; "
            f"stored its checkpoint in {state_file}"
        )
    else:
        assert verdict.old is not None
        print(f"history unchanged: size {verdict.old.size} → {new.size}")
    return EXIT_OK


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
