"""The log state, committed with the pool under ``content/``.

A clean clone rebuilds the identical log from these files alone::

    content/log/policy               the pool's C2SP tlog-policy: the log's verifier
                                     key, witnesses, quorum (what readers pin)
    content/log/leaves/000000.jsonl  leaf data, one JCS object per line, 4,096 leaves
    content/log/leaves/000001.jsonl  per file; leaf i is line i % 4096 of file i // 4096.
                                     Append-only: lines are only ever added at the end.
    content/log/checkpoints/<size>   every checkpoint ever signed (signed note, with any
                                     witness cosignature lines), as published
    content/log/history.jsonl        one line per checkpoint: {"size": n, "time": "…Z"};
                                     a leaf's date is the time of the first checkpoint
                                     that holds it
    content/dreams/<id>.salt         the dream's 32-byte commitment salt (b64url), kept
                                     only beside the dream (docs/protocol.md §2)
    content/erasures/<id>.json       why a dream was erased: {"id", "reason"} or the
                                     author's signed dreampool.erase/v1 request

JCS never emits a raw newline (RFC 8785 §3.2.2.2 escapes control characters), so
a line is exactly one leaf. Leaves are written before the checkpoint that signs
them: a build killed in between leaves an unsigned tail that the next build
checks and signs, never a checkpoint without its leaves.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

from builder.content.pool import atomic_write, read_regular
from builder.errors import LogError
from builder.formats import strictjson

SHARD = 4096
_SHARD_RE = re.compile(r"(\d{6})\.jsonl")
_SIZE_RE = re.compile(r"0|[1-9]\d{0,15}")


@dataclass(frozen=True, slots=True)
class HistoryEntry:
    size: int
    time: str


@dataclass(slots=True)
class LogState:
    """What ``content/log`` holds, as read; the leaves are raw leaf data."""

    leaves: list[bytes] = field(default_factory=list)
    history: list[HistoryEntry] = field(default_factory=list)
    checkpoints: dict[int, bytes] = field(default_factory=dict)
    # BLAKE2b-256 of each leaf shard file's bytes, in order, as read or as
    # append() wrote them (builder.log.prefix; a build's canonical shards).
    shard_digests: list[bytes] = field(default_factory=list)
    policy: str | None = None

    @property
    def signed_size(self) -> int:
        return self.history[-1].size if self.history else 0


def log_dir(content: Path) -> Path:
    return content / "log"


def load(content: Path, *, canonical_shards: set[bytes] | None = None) -> LogState:
    """Read the log state; every malformed file is a :class:`LogError`.

    ``canonical_shards`` (from :mod:`builder.buildcache`) holds the BLAKE2b
    digests of leaf shards whose every line an earlier build found canonical;
    those are not checked line by line again. It is left holding this read's."""
    root = log_dir(content)
    for folder in (root, root / "leaves", root / "checkpoints"):
        if folder.is_symlink():
            raise LogError(
                f"{folder}: is a symlink; the log state is plain folders and files",
                hint="restore content/log from git history",
            )
    state = LogState()
    policy = root / "policy"
    if policy.exists():
        state.policy = read_regular(policy).decode("utf-8")
    state.leaves = _load_leaves(root / "leaves", canonical_shards, state.shard_digests)
    state.history = _load_history(root / "history.jsonl")
    for entry in state.history:
        path = root / "checkpoints" / str(entry.size)
        try:
            state.checkpoints[entry.size] = read_regular_big(path)
        except FileNotFoundError:
            raise LogError(
                f"{path}: missing, but history.jsonl lists a checkpoint of size {entry.size}",
                hint="restore it from git history (`git checkout -- content/log`)",
            ) from None
    if state.signed_size > len(state.leaves):
        raise LogError(
            f"{root}/leaves: holds {len(state.leaves)} leaves but checkpoint "
            f"{state.signed_size} was signed: leaves were lost",
            hint="restore content/log/leaves from git history; never delete log state",
        )
    return state


def _load_leaves(
    folder: Path, canonical: set[bytes] | None = None, digests: list[bytes] | None = None
) -> list[bytes]:
    known = set(canonical or ())
    if canonical is not None:
        canonical.clear()
    try:
        names = sorted(e.name for e in os.scandir(folder))
    except FileNotFoundError:
        return []
    # Names starting with a dot are skipped: atomic_write's temporaries
    # (.tmp-…), which a build killed mid-write leaves behind, among them.
    names = [name for name in names if not name.startswith(".")]
    leaves: list[bytes] = []
    for n, name in enumerate(names):
        match = _SHARD_RE.fullmatch(name)
        if match is None or int(match.group(1)) != n:
            raise LogError(
                f"{folder / name}: unexpected file; shards are named 000000.jsonl, 000001.jsonl, … "
                "without gaps",
                hint="restore content/log/leaves from git history",
            )
        path = folder / name
        data = read_regular_big(path)
        if data and not data.endswith(b"\n"):
            raise LogError(f"{path}: the last line is cut short (no final newline)")
        lines = data.split(b"\n")[:-1] if data else []
        if not lines:  # append() never writes one (review r70: check passed it, builds stopped)
            raise LogError(
                f"{path}: holds no leaves; a shard holds 1 to {SHARD}",
                hint="restore content/log/leaves from git history",
            )
        if n < len(names) - 1 and len(lines) != SHARD:
            raise LogError(f"{path}: holds {len(lines)} leaves, a full shard holds {SHARD}")
        if len(lines) > SHARD:
            raise LogError(f"{path}: holds {len(lines)} leaves, more than {SHARD}")
        digest = hashlib.blake2b(data, digest_size=32).digest()
        if digest not in known:
            for i, line in enumerate(lines, start=1):
                if not strictjson.is_canonical(line):
                    raise LogError(
                        f"{path}:{i}: leaf is not canonical JSON (RFC 8785); "
                        "the log state was edited by hand",
                        hint="restore content/log/leaves from git history",
                    )
        if canonical is not None:
            canonical.add(digest)
        if digests is not None:
            digests.append(digest)
        leaves.extend(lines)
    return leaves


def read_regular_big(path: Path) -> bytes:
    """Read a regular file (no symlink) of any size; FileNotFoundError if there is none."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise LogError(
                f"{path}: is a symlink; the log state is plain files",
                hint="restore content/log from git history",
            ) from None
        raise
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise LogError(f"{path}: is not a regular file")
        return f.read()


def _load_history(path: Path) -> list[HistoryEntry]:
    try:
        data = read_regular_big(path)
    except FileNotFoundError:
        return []
    history: list[HistoryEntry] = []
    for i, line in enumerate(data.split(b"\n")[:-1] if data else [], start=1):
        try:
            obj = strictjson.loads(line)
            size, time = obj["size"], obj["time"]
            if type(size) is not int or not isinstance(time, str) or set(obj) != {"size", "time"}:
                raise ValueError
        except (ValueError, KeyError, TypeError):
            raise LogError(f'{path}:{i}: want {{"size": N, "time": "…Z"}}') from None
        if history and size <= history[-1].size:
            raise LogError(
                f"{path}:{i}: size {size} does not grow past {history[-1].size}; "
                "checkpoints are listed in the order they were signed",
            )
        history.append(HistoryEntry(size, time))
    return history


def first_holding(history: list[HistoryEntry], index: int) -> HistoryEntry | None:
    """The first checkpoint holding leaf ``index`` (None: not yet signed), by
    binary search: the sizes only grow, and a pool may have signed thousands."""
    lo, hi = 0, len(history)
    while lo < hi:
        mid = (lo + hi) // 2
        if history[mid].size > index:
            hi = mid
        else:
            lo = mid + 1
    return history[lo] if lo < len(history) else None


def leaf_date(history: list[HistoryEntry], index: int) -> str | None:
    """The time of the first checkpoint holding leaf ``index`` (None: not yet signed)."""
    entry = first_holding(history, index)
    return entry.time if entry is not None else None


def changed(content: Path, state: LogState) -> str | None:
    """What in ``content/log`` is no longer ``state`` as it was read (None: nothing):
    the policy, history.jsonl, the number of leaf shards or the last shard, which
    every append rewrites. A writer that read ``state`` appends after its leaves and
    rewrites the history from its own; had another appended and signed meanwhile, that
    would sign a second tree of one size: a fork (builder.log.logbuild.apply)."""
    root = log_dir(content)
    policy = root / "policy"
    text = read_regular(policy).decode("utf-8") if policy.exists() else None
    if text != state.policy:
        return f"{policy} changed"
    if _load_history(root / "history.jsonl") != state.history:
        return f"{root}/history.jsonl changed"
    try:
        names = sorted(n for n in os.listdir(root / "leaves") if not n.startswith("."))
    except FileNotFoundError:
        names = []
    if len(names) != -(-len(state.leaves) // SHARD):
        return (
            f"{root}/leaves: {len(names)} shard(s), the state read had {len(state.leaves)} leaves"
        )
    if names:
        last = (len(names) - 1) * SHARD
        data = read_regular_big(root / "leaves" / names[-1])
        if data != b"".join(line + b"\n" for line in state.leaves[last:]):
            return f"{root}/leaves/{names[-1]} changed"
    return None


def check_new_leaves(new_leaves: list[bytes]) -> None:
    """A :class:`LogError` unless every leaf about to be appended is canonical
    JSON (RFC 8785), as :func:`builder.formats.leaf.encode` makes them."""
    for leaf in new_leaves:
        if not strictjson.is_canonical(leaf):
            raise LogError(
                "a new leaf is not canonical JSON (RFC 8785); nothing was written",
                hint="this is a bug in dreampool: report it with the build's output",
            )


def append(content: Path, state: LogState, new_leaves: list[bytes]) -> None:
    """Write ``new_leaves`` after the existing ones (shard files replaced
    atomically), and keep :attr:`LogState.shard_digests` those of the files
    as written. The caller checks the new leaves first (:func:`check_new_leaves`;
    :func:`builder.log.logbuild.apply` does, before it writes anything): the
    shards read were checked by :func:`load`, so every shard written is then
    canonical through, and the next build, given its digest, need not check
    its lines again."""
    root = log_dir(content) / "leaves"
    start = len(state.leaves)
    all_leaves = state.leaves + new_leaves
    first_shard = start // SHARD
    last_shard = (len(all_leaves) - 1) // SHARD if all_leaves else -1
    digests = state.shard_digests[:first_shard]
    for shard in range(first_shard, last_shard + 1):
        lines = all_leaves[shard * SHARD : (shard + 1) * SHARD]
        data = b"".join(line + b"\n" for line in lines)
        atomic_write(root / f"{shard:06d}.jsonl", data)
        digests.append(hashlib.blake2b(data, digest_size=32).digest())
    state.leaves = all_leaves
    state.shard_digests = digests


def record_checkpoint(content: Path, state: LogState, size: int, note: bytes, time: str) -> None:
    """Store a newly signed checkpoint, then list it in history.jsonl (in that order)."""
    root = log_dir(content)
    atomic_write(root / "checkpoints" / str(size), note)
    state.history.append(HistoryEntry(size, time))
    state.checkpoints[size] = note
    lines = (json.dumps({"size": e.size, "time": e.time}) + "\n" for e in state.history)
    atomic_write(root / "history.jsonl", "".join(lines).encode())


def is_size(text: str) -> bool:
    return bool(_SIZE_RE.fullmatch(text))
