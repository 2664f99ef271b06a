"""The pool's data: the ``content/`` directory.

Layout::

    content/pool.yaml             title, origin, base_url, k (unknown keys refused)
    content/keys/<16 hex>.yaml    the key directory: one file per key
                                  {author, publicKey, tier, added[, rotatedFrom]}
    content/rotations/<16 hex>.json   rotation statements, named by the new key
    content/dreams/<id>.json      signed dreams, named by their id alone
    content/log/                  the log state (see builder.log.logstate)

Trust tiers (``maintainer`` > ``member`` > ``guest``) are set only by these
files, by people with commit access; a submission never chooses its tier. A
key seen for the first time is registered as ``guest`` (trust on first use).
One key belongs to one author, and one author name to one key at a time: a
new key for a name already held needs a rotation statement signed by the
key that holds it, and that rotation retires the old key at once: it signs
nothing new, dream or rotation (:func:`retired_rule`; what it signed that is
logged stays, which only the log stage knows). Names that differ only by case, width or Unicode
normalization, or by look-alike letters of other scripts (:func:`name_skeleton`,
Unicode TR39 confusables) count as one name. The reserved name
``anonymous`` is the exception: many one-time keys hold it, each a guest,
never rotated, and no other name may look like it (docs/protocol.md §1.2,
:mod:`builder.content.anonymity`).

Only plain files whose names are derived from ids are read: a symlink, a
directory, or any other name in ``keys/`` or ``dreams/`` is a problem that
``check`` reports, never something the builder follows.

Key files and pool.yaml come from pull requests like dreams do, and are read
as strictly (:func:`read_yaml`): a small YAML subset in which every value is
text (:mod:`builder.formats.safeyaml`), then each field converted and checked here. A
key file's ``added`` is a date and its ``author`` follows a dream's author
rules; pool.yaml's text settings follow a dream's text rules and ``k`` is a
number. ``build`` reads both before it appends or signs anything.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import dataclasses
import datetime as dt
import errno
import json
import os
import re
import stat
import tempfile
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from builder import parallel
from builder.content import anonymity, filekeys
from builder.errors import DreampoolError, InputError, PoolError, Problem, SignatureError
from builder.formats import dream as dreamfmt
from builder.formats import safeyaml, statement, unicodepolicy
from builder.formats.b64 import b64url_decode, b64url_encode
from builder.text import readerview, redact


class LoggedCommitments(Protocol):
    """What the scan asks of a proven log (:class:`builder.log.logbuild.ProvenLog`,
    which only :func:`builder.log.logbuild.prove` makes, after every stored
    checkpoint verified): the commitment of a dream leaf inside the last signed
    checkpoint and not erased, or None. Typed here, not imported, because the
    log layer sits above this one (tests/test_layers.py)."""

    def commitment_of(self, dream_id: str) -> str | None: ...


TIERS = ("maintainer", "member", "guest")
CONFIG_KEYS = ("title", "origin", "base_url", "k")
KEY_FIELDS = ("author", "publicKey", "tier", "added", "rotatedFrom")
MAX_TITLE = 120  # as a dream's title
MAX_ORIGIN = 255
MAX_BASE_URL = 2048
_ID_FILE_RE = re.compile(r"([0-9a-f]{16})\.(json|salt)")
_KEY_FILE_RE = re.compile(r"([0-9a-f]{16})\.yaml")
# tlog-checkpoint: a schema-less URL, no spaces, no "+"; so no scheme:// either
# (example.org:8080/x keeps its port).
_ORIGIN_RE = re.compile(r"(?![A-Za-z][A-Za-z0-9.-]*://)[^\s+/][^\s+]*")
_BASE_URL_RE = re.compile(r"(?:https?://|/)\S*")
_NUMBER_RE = re.compile(r"0|[1-9][0-9]*")
_DATE_RE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_KEY_ID_RE = re.compile(r"sha256:[0-9a-f]{16}")


ORIGIN_HINT = (
    "an origin names the log for good: a scheme-less URL prefix such as "
    "example.org/dreams (no spaces, no +)"
)
ORIGIN_RULE = "must be a scheme-less URL prefix such as example.org/dreams (no spaces, no +)"


def origin_problems(origin: object, file: str, pointer: str) -> list[Problem]:
    """What is wrong with a log origin (pool.yaml's, or one given to ``init`` or
    ``log-keygen``): it names the log in every checkpoint, for good."""
    found = dreamfmt.validate_text(origin, file, pointer, 1, MAX_ORIGIN)
    if not found and not _ORIGIN_RE.fullmatch(str(origin)):
        found.append(Problem(file, pointer, ORIGIN_RULE))
    return found


@dataclass(frozen=True, slots=True)
class PoolConfig:
    title: str
    origin: str
    base_url: str = "/"
    k: int = 3


@dataclass(frozen=True, slots=True)
class KeyEntry:
    key_id: str
    author: str
    public_key: bytes
    tier: str
    added: str
    rotated_from: str | None = None


@dataclass(slots=True)
class KeyDirectory:
    keys: dict[str, KeyEntry] = field(default_factory=dict)
    # An index by author, rebuilt when keys are added (entries are never replaced).
    _authors: dict[str, list[KeyEntry]] = field(default_factory=dict, repr=False, compare=False)
    _indexed: int = field(default=-1, repr=False, compare=False)

    def by_author(self, author: str) -> list[KeyEntry]:
        if self._indexed != len(self.keys):
            index: dict[str, list[KeyEntry]] = {}
            for k in self.keys.values():
                index.setdefault(k.author, []).append(k)
            self._authors, self._indexed = index, len(self.keys)
        return list(self._authors.get(author, ()))


# --- reading ---------------------------------------------------------------


def read_regular(path: Path, *, max_bytes: int = dreamfmt.MAX_BYTES) -> bytes:
    """Read a plain file, refusing symlinks and anything that is not a regular file.

    Raises FileNotFoundError when there is no file, and :class:`InputError` for
    a symlink (never followed: it could lead out of the pool), a special file,
    or a file over ``max_bytes`` (a signed dream's limit unless said otherwise).
    """
    try:
        # O_NONBLOCK: opening a FIFO would otherwise wait for a writer for ever.
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise InputError([Problem(str(path), "", _SYMLINK)]) from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise InputError([Problem(str(path), "", "is not a regular file")])
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(max_bytes + 1)
        if len(data) > max_bytes:  # say its real size, not what was read
            if max_bytes != dreamfmt.MAX_BYTES:
                raise InputError(
                    [
                        Problem(
                            str(path),
                            "",
                            f"file is {max(st.st_size, len(data))} bytes, the limit is {max_bytes}",
                        )
                    ]
                )
            raise dreamfmt.too_big(str(path), max(st.st_size, len(data)))
        return data
    finally:
        os.close(fd)


def dream_body(content: Path, dream_id: str, digest: str) -> Any | None:
    """The object in ``content/dreams/<dream_id>.json`` if its bytes have the
    SHA-256 ``digest`` (hex), else None (no such file, or other bytes).

    What the build store's scan rows were made from (builder.buildcache): a
    row's dream was verified in bytes of that digest, so their object is its
    body, found here when the row cannot be read again (a busy store)."""
    if not _DREAM_ID.fullmatch(dream_id):
        return None
    path = content / "dreams" / f"{dream_id}.json"
    try:
        data = read_regular(path)
        if filekeys.of_bytes(data)[1] != digest:
            return None
        return dreamfmt.load_json(data, str(path))
    except (OSError, DreampoolError):
        return None


_DREAM_ID = re.compile(r"[0-9a-f]{16}")
_SYMLINK = "is a symlink; the pool holds plain files and folders only"
# Every folder the pool reads or writes below content/ (see the module doc and
# builder.log.logstate): none may be a symlink, which could lead reads and writes
# out of the pool.
LAYOUT = (
    "keys",
    "dreams",
    "rotations",
    "erasures",
    "log",
    "log/leaves",
    "log/checkpoints",
)


def check_layout(content: Path) -> list[Problem]:
    """A problem for each of the pool's folders (:data:`LAYOUT`) that is a symlink."""
    return [
        Problem(str(content / name), "", _SYMLINK)
        for name in LAYOUT
        if (content / name).is_symlink()
    ]


KEY_FILE_MAX_BYTES = 4 * 1024
"""A key file is four or five short lines."""
CONFIG_MAX_BYTES = 8 * 1024
"""pool.yaml is four settings and their comments."""


def read_yaml(data: bytes, file: str, *, max_bytes: int) -> dict[str, str]:
    """A key file or pool.yaml through the strict reader (:mod:`builder.formats.safeyaml`):
    a flat mapping of text to text, or :class:`InputError` naming the file."""
    try:
        return safeyaml.load_mapping(data, max_bytes=max_bytes)
    except safeyaml.YAMLError as exc:
        raise InputError([Problem(file, exc.pointer, exc.message, exc.line)]) from None


def load_config(content: Path) -> PoolConfig:
    """pool.yaml, every field checked (see :func:`check_config`); raises
    :class:`InputError` listing every problem, or :class:`PoolError` if there is
    no pool. A build reads it first, before anything is appended or signed."""
    file = str(content / "pool.yaml")
    try:
        data = read_regular(content / "pool.yaml")
    except (FileNotFoundError, NotADirectoryError):
        # A pool's repository holds its pool in content/: say so where it is.
        inside = content / "content" / "pool.yaml"
        raise PoolError(
            f"{file} not found: {content} is not a pool"
            + (" (it is not a folder)" if content.exists() and not content.is_dir() else ""),
            hint=f"pass --content {content / 'content'}: the pool is there"
            if inside.is_file()
            else "pass --content DIR pointing at a pool, or start one with `dreampool init`",
        ) from None
    layout = check_layout(content)
    if layout:
        raise InputError(layout, hint="replace each symlink by the folder it stands for")
    obj = read_yaml(data, file, max_bytes=CONFIG_MAX_BYTES)
    config, problems = check_config(obj, file)
    if config is None:
        raise InputError(problems, hint=f"fix {file}")
    return config


def check_config(obj: Mapping[str, Any], file: str) -> tuple[PoolConfig | None, list[Problem]]:
    """The settings in ``obj`` (pool.yaml as read by :func:`read_yaml`), or every
    problem with them. Text fields follow the rules of a dream's text fields
    (:func:`builder.formats.dream.validate_text`): docs/protocol.md §1.1's Unicode
    policy, one line, bounded; ``k`` is a whole number
    written in decimal digits."""
    problems = [
        Problem(file, safeyaml.pointer_to(k), f"unknown key (allowed: {', '.join(CONFIG_KEYS)})")
        for k in obj
        if k not in CONFIG_KEYS
    ]
    for name in ("title", "origin"):
        if name not in obj:
            problems.append(Problem(file, f"/{name}", "is required but missing"))
    if "title" in obj:
        problems += dreamfmt.validate_text(obj["title"], file, "/title", 1, MAX_TITLE)
    if "origin" in obj:
        problems += origin_problems(obj["origin"], file, "/origin")
    if "base_url" in obj:
        found = dreamfmt.validate_text(obj["base_url"], file, "/base_url", 1, MAX_BASE_URL)
        if not found and not _BASE_URL_RE.fullmatch(obj["base_url"]):
            found.append(
                Problem(
                    file,
                    "/base_url",
                    "must be an absolute http(s) URL or a path starting with /, with no spaces",
                )
            )
        problems += found
    k = 3
    if "k" in obj:
        number = _whole_number(obj["k"], 1, 1000)
        if number is None:
            held = obj["k"] if isinstance(obj["k"], str) else "not a plain value"
            shown = held if len(held) <= 20 else held[:20] + "…"
            problems.append(
                Problem(file, "/k", f"must be a whole number between 1 and 1000, is {shown!r}")
            )
        else:
            k = number
    if problems:
        return None, problems
    return PoolConfig(obj["title"], obj["origin"], obj.get("base_url", "/"), k), []


def _whole_number(text: Any, lo: int, hi: int) -> int | None:
    """``text`` as an int if it is decimal digits (no sign, no leading zero) for a
    number in [lo, hi]; the length is checked before int() reads it."""
    if not isinstance(text, str) or not _NUMBER_RE.fullmatch(text) or len(text) > len(str(hi)):
        return None
    number = int(text)
    return number if lo <= number <= hi else None


def load_keys(
    content: Path,
    *,
    cache: dict[Any, Any] | None = None,
    keys: filekeys.FileKeys | None = None,
) -> tuple[KeyDirectory, list[Problem]]:
    """The key directory, and every problem found in it. ``cache`` (from
    :mod:`builder.buildcache`) maps the content of a key file
    (:mod:`builder.content.filekeys`: git's word from ``keys``, else the bytes read)
    to its parsed mapping (a dict of str to str, plain JSON data), so
    unchanged files are not parsed again; it is left holding this
    read's. What comes from the cache is checked again like what was just
    parsed (:func:`_key_entry`)."""
    directory = KeyDirectory()
    problems: list[Problem] = []
    known = dict(cache or {})
    if cache is not None:
        cache.clear()
    blobs = keys.folder("keys") if keys is not None else {}
    for path, match in _scan(
        content / "keys", _KEY_FILE_RE, "<16 hex of the keyId>.yaml", problems
    ):
        file = path
        blob = blobs.get(match.group(0))
        try:
            stored = filekeys.find(known, blob, None)
            if stored is None:  # git does not vouch for it, or it is new to the store
                data = read_regular(Path(path))
                blob, digest = filekeys.of_bytes(data)
                stored = filekeys.find(known, None, (blob, digest)) or (
                    digest,
                    read_yaml(data, file, max_bytes=KEY_FILE_MAX_BYTES),
                )
        except InputError as exc:
            problems.extend(exc.problems)
            continue
        assert blob is not None
        if cache is not None:
            cache[blob] = stored
        obj = stored[1]
        entry, found = _key_entry(obj, file, match.group(1))
        problems.extend(found)
        if entry is not None:
            directory.keys[entry.key_id] = entry
    problems.extend(directory_problems(content, directory))
    return directory, problems


def directory_problems(content: Path, directory: KeyDirectory) -> list[Problem]:
    """What breaks the key rules between the entries of ``directory`` (names,
    rotations, forks, one-time keys), not within one key file."""
    return _check_authors(content, directory) + _check_anonymous_keys(content, directory)


def read_key_file(data: bytes, file: str, hex_id: str) -> tuple[KeyEntry | None, list[Problem]]:
    """One key file's bytes (named ``<hex_id>.yaml``): its entry, or every problem."""
    try:
        obj = read_yaml(data, file, max_bytes=KEY_FILE_MAX_BYTES)
    except InputError as exc:
        return None, exc.problems
    return _key_entry(obj, file, hex_id)


def _key_entry(obj: Any, file: str, hex_id: str) -> tuple[KeyEntry | None, list[Problem]]:
    """A key file's mapping checked field by field: an entry, or every problem.

    Every value is text (:mod:`builder.formats.safeyaml` types nothing), converted here
    where it is not: ``author`` follows a dream's author rules, ``publicKey`` is
    unpadded base64url of 32 bytes, ``tier`` one of :data:`TIERS`, ``added`` a
    date ``YYYY-MM-DD`` that exists, ``rotatedFrom`` a keyId. A key file carries
    no free text beyond the author's name."""
    if not isinstance(obj, dict) or not all(
        type(k) is str and type(v) is str for k, v in obj.items()
    ):
        return None, [Problem(file, "", "must be a mapping of " + ", ".join(KEY_FIELDS))]
    problems = [
        Problem(file, safeyaml.pointer_to(k), f"unknown key (allowed: {', '.join(KEY_FIELDS)})")
        for k in obj
        if k not in KEY_FIELDS
    ]
    problems += [
        Problem(file, f"/{k}", "is required but missing") for k in KEY_FIELDS[:4] if k not in obj
    ]
    if problems:
        return None, problems
    author, tier, added = obj["author"], obj["tier"], obj["added"]
    rotated = obj.get("rotatedFrom")
    problems += dreamfmt.validate_author(author, file, "/author")
    if tier not in TIERS:
        problems.append(Problem(file, "/tier", f"must be one of {', '.join(TIERS)}"))
    if not _is_date(added):
        problems.append(
            Problem(
                file,
                "/added",
                "must be the date the key was added, as YYYY-MM-DD (a date that exists, "
                "such as 2026-01-31)",
            )
        )
    if rotated is not None and not _KEY_ID_RE.fullmatch(rotated):
        problems.append(
            Problem(
                file,
                "/rotatedFrom",
                'must be the keyId of the key this one replaces: "sha256:" and 16 '
                "lowercase hex characters",
            )
        )
    try:
        public_key = b64url_decode(obj["publicKey"])
        if len(public_key) != 32:
            raise ValueError(f"decodes to {len(public_key)} bytes")
    except ValueError as exc:
        return None, [
            *problems,
            Problem(file, "/publicKey", f"must be unpadded base64url of 32 bytes: {exc}"),
        ]
    key_id = dreamfmt.key_id(public_key)
    if key_id != f"sha256:{hex_id}":
        problems.append(
            Problem(file, "", f"file name does not match the key (want {key_id[7:]}.yaml)")
        )
    if problems:
        return None, problems
    return KeyEntry(key_id, author, public_key, tier, added, rotated), []


def _is_date(text: str) -> bool:
    """``YYYY-MM-DD`` in ASCII digits naming a day that exists (fromisoformat alone
    also takes ``20260131`` and week dates)."""
    if not _DATE_RE.fullmatch(text):
        return False
    try:
        dt.date.fromisoformat(text)
    except ValueError:
        return False
    return True


def name_skeleton(name: str) -> str:
    """What a name looks like (docs/protocol.md §1.1,
    :func:`builder.formats.unicodepolicy.skeleton`): NFKC_Casefold, the Unicode
    TR39 confusable skeleton, NFKC_Casefold. ``Ada``, ``ａｄａ``, ``ada``, a
    Cyrillic ``аda`` and a Cherokee ``ᎪDA`` share one; so do the composed and
    decomposed spellings of ``José``."""
    return unicodepolicy.skeleton(name)


def _look_alikes(directory: KeyDirectory, author: str) -> list[KeyEntry]:
    """Keys of other names that look like ``author``."""
    skeleton = name_skeleton(author)
    return sorted(
        (
            k
            for k in directory.keys.values()
            if k.author != author and name_skeleton(k.author) == skeleton
        ),
        key=lambda k: k.key_id,
    )


def _check_authors(content: Path, directory: KeyDirectory) -> list[Problem]:
    """One author name, one key at a time, unless a rotation statement links them;
    and no two names that look alike (:func:`name_skeleton`)."""
    problems = []
    # Keys under the reserved name: _check_anonymous_keys (docs/protocol.md §1.2).
    named = [k for k in directory.keys.values() if k.author != anonymity.NAME]
    by_skeleton: dict[str, list[KeyEntry]] = {}
    for entry in sorted(named, key=lambda k: k.key_id):
        by_skeleton.setdefault(name_skeleton(entry.author), []).append(entry)
    for entry in named:
        alike = [
            k
            for k in by_skeleton[name_skeleton(entry.author)]
            if k.author != entry.author and k.key_id < entry.key_id
        ]
        if alike:
            problems.append(
                Problem(
                    str(content / "keys" / f"{entry.key_id[7:]}.yaml"),
                    "/author",
                    f"author name looks like {alike[0].author!r}, the name of key "
                    f"{alike[0].key_id}; two authors may not be told apart only by case, "
                    "width, Unicode normalization or look-alike letters (docs/protocol.md §1.1)",
                )
            )
        if entry.rotated_from is None:
            others = [
                k
                for k in directory.by_author(entry.author)
                if k.key_id != entry.key_id and k.rotated_from is None
            ]
            if others and entry.key_id > min(o.key_id for o in others):
                problems.append(
                    Problem(
                        str(content / "keys" / f"{entry.key_id[7:]}.yaml"),
                        "/author",
                        f"author name is also held by key {min(o.key_id for o in others)} "
                        "and no rotation links them",
                    )
                )
            continue
        path = content / "rotations" / f"{entry.key_id[7:]}.json"
        try:
            _verify_rotation(read_regular(path), str(path), directory, entry)
        except FileNotFoundError:
            problems.append(
                Problem(
                    str(path),
                    "",
                    f"missing: key {entry.key_id} claims rotatedFrom "
                    f"{entry.rotated_from} but no rotation statement is stored",
                )
            )
        except (InputError, SignatureError) as exc:
            problems.extend(_problems_of(exc, str(path)))
    return problems + _check_chains(content, directory)


def _check_chains(content: Path, directory: KeyDirectory) -> list[Problem]:
    """docs/protocol.md §7: the keys of a name form one line. A rotation retires
    its old key (:func:`retired_keys`), so only the current key may rotate the
    name again: a second rotation from one key (a fork) is signed by a retired
    key, and a chain that loops has no first key."""
    problems = []
    retired = retired_keys(directory)
    for entry in sorted(directory.keys.values(), key=lambda k: k.key_id):
        if entry.rotated_from is None:
            continue
        file = str(content / "keys" / f"{entry.key_id[7:]}.yaml")
        first = retired[entry.rotated_from]
        if first is not entry:
            problems.append(
                Problem(
                    file,
                    "/rotatedFrom",
                    f"key {entry.rotated_from} was also rotated to key {first.key_id}, which "
                    "retired it: a retired key cannot move the name again (the keys of a "
                    "name form one line, and only the current key may rotate it); keep the "
                    "rotation whose new key the log holds and remove the other",
                )
            )
        seen = {entry.key_id}
        key: str | None = entry.rotated_from
        while key is not None and key in directory.keys and key not in seen:
            seen.add(key)
            key = directory.keys[key].rotated_from
        if key is not None and key in seen:
            problems.append(
                Problem(
                    file,
                    "/rotatedFrom",
                    f"the rotations from key {entry.key_id} loop back to key {key}: a name's "
                    "keys form one line from its first key; remove the rotation that loops",
                )
            )
    return problems


def _reserved_look_alike(author: str) -> str | None:
    """Why ``author`` may not be used: it looks like the reserved name without being it."""
    if author == anonymity.NAME or name_skeleton(author) != name_skeleton(anonymity.NAME):
        return None
    return (
        f"author name {author!r} looks like {anonymity.NAME!r}, the name reserved for "
        "anonymized dreams' one-time keys (docs/protocol.md §1.2); choose another pseudonym"
    )


def _check_anonymous_keys(content: Path, directory: KeyDirectory) -> list[Problem]:
    """docs/protocol.md §1.2: a key under the reserved name is a one-time key,
    always ``guest`` and never rotated (many such keys share the name); no other
    name may look like it."""
    problems = []
    for entry in sorted(directory.keys.values(), key=lambda k: k.key_id):
        file = str(content / "keys" / f"{entry.key_id[7:]}.yaml")
        if entry.author != anonymity.NAME:
            reserved = _reserved_look_alike(entry.author)
            if reserved:
                problems.append(Problem(file, "/author", reserved))
            continue
        if entry.tier != "guest":
            problems.append(
                Problem(
                    file,
                    "/tier",
                    f"a key under {anonymity.NAME!r} is a one-time key and always a guest "
                    "(docs/protocol.md §1.2): set tier: guest",
                )
            )
        if entry.rotated_from is not None:
            problems.append(
                Problem(
                    file,
                    "/rotatedFrom",
                    f"a key under {anonymity.NAME!r} is a one-time key and is never rotated "
                    "(docs/protocol.md §1.2): remove rotatedFrom",
                )
            )
    return problems


def _verify_rotation(data: bytes, file: str, directory: KeyDirectory, entry: KeyEntry) -> None:
    obj = dreamfmt.load_json(data, file)
    signer = statement.verify(obj, file, statement.ROTATE)
    old = directory.keys.get(signer)
    if signer != entry.rotated_from or old is None:
        raise InputError([Problem(file, "/sig", "is not signed by the key named in rotatedFrom")])
    if obj["newKeyId"] != entry.key_id or obj["oldKeyId"] != signer:
        raise InputError([Problem(file, "/newKeyId", "does not name the rotated key")])
    if obj["author"] != entry.author or old.author != entry.author:
        raise InputError([Problem(file, "/author", "does not match the key directory")])


# --- rotation retires the old key (docs/protocol.md §7) ------------------------


def settle_forks(
    content: Path,
    directory: KeyDirectory,
    problems: list[Problem],
    log_order: Mapping[str, int],
) -> tuple[list[Problem], dict[str, Problem]]:
    """What the build does with a fork (two rotations from one key, let onto
    main by stale green checks): the log's order decides. The rotation whose
    new key the log holds first is kept; each other one, and any key rotated
    from it, is taken out of ``directory`` (its dreams are then set aside
    too). Returns ``problems`` as they stand without those keys, and the
    problem of each key taken out (by keyId). A fork none of whose new keys
    the log holds is left as it was: nothing says which is the author's."""
    by_old: dict[str, list[KeyEntry]] = {}
    for entry in directory.keys.values():
        if entry.rotated_from is not None:
            by_old.setdefault(entry.rotated_from, []).append(entry)
    out: dict[str, Problem] = {}
    for old, branches in sorted(by_old.items()):
        logged = sorted((log_order[e.key_id], e.key_id) for e in branches if e.key_id in log_order)
        if len(branches) < 2 or not logged:
            continue
        index, kept = logged[0]
        for entry in branches:
            if entry.key_id == kept:
                continue
            out[entry.key_id] = Problem(
                str(content / "keys" / f"{entry.key_id[7:]}.yaml"),
                "/rotatedFrom",
                f"key {old} was rotated first to key {kept}, which leaf {index} of the log "
                "holds, and that retired it: a retired key cannot move the name again. This "
                f"key and what it signed are set aside: remove content/keys/"
                f"{entry.key_id[7:]}.yaml and content/rotations/{entry.key_id[7:]}.json",
            )
    if not out:
        return problems, out
    changed = True
    while changed:  # keys rotated from a key taken out go with it
        changed = False
        for entry in directory.keys.values():
            if entry.rotated_from in out and entry.key_id not in out:
                out[entry.key_id] = dataclasses.replace(
                    out[entry.rotated_from], file=str(content / "keys" / f"{entry.key_id[7:]}.yaml")
                )
                changed = True
    between = directory_problems(content, directory)
    for key_id in out:
        del directory.keys[key_id]
    directory._indexed = -1
    gone = {
        str(content / d / f"{k[7:]}.{x}")
        for k in out
        for d, x in (("keys", "yaml"), ("rotations", "json"))
    }
    kept_problems = [p for p in problems if p not in between and p.file not in gone]
    return kept_problems + directory_problems(content, directory), out


def unknown_key_rule(
    content: Path, key_id: str, *, logged: bool = False, base_broken: bool = False
) -> str:
    """Why a dream's key is not in the key directory, and what to do: its key
    file was refused (named with its own problem; ``base_broken``: already
    on a pull request's base branch, which only a maintainer may change),
    or there is none (for a ``logged`` dream, one that was there: restore it;
    `submit` would register the key anew, as a guest, losing its tier)."""
    key_file = content / "keys" / f"{key_id.removeprefix('sha256:')}.yaml"
    if base_broken:
        return (
            f"key {key_id} is not in the key directory: its file {key_file} is refused on the "
            "base branch already; a maintainer must fix it there before this dream can pass"
        )
    if os.path.lexists(key_file):
        return (
            f"key {key_id} is not in the key directory: its file {key_file} was refused "
            "(its problem is named with it); fix that file"
        )
    if logged:
        return (
            f"key {key_id} is not in the key directory: its file {key_file}, which this "
            "logged dream needs, is gone; restore it from git history"
        )
    return (
        f"key {key_id} is not in the key directory (content/keys): submit the dream with "
        "`dreampool submit`, which adds its author's key file beside it"
    )


def retired_keys(directory: KeyDirectory) -> dict[str, KeyEntry]:
    """docs/protocol.md §7: a rotation retires its old key at once. Each key
    another key was rotated from (its ``rotatedFrom``), mapped to the key that
    replaced it (the first by keyId if two did: a fork, which
    :func:`_check_authors` reports)."""
    retired: dict[str, KeyEntry] = {}
    for entry in sorted(directory.keys.values(), key=lambda k: k.key_id):
        if entry.rotated_from is not None:
            retired.setdefault(entry.rotated_from, entry)
    return retired


def current_key(key_id: str, retired: Mapping[str, KeyEntry]) -> str:
    """The key at the end of ``key_id``'s chain of rotations: the one its author
    signs with now (a loop, which :func:`_check_authors` reports, stops)."""
    seen = {key_id}
    while key_id in retired:
        key_id = retired[key_id].key_id
        if key_id in seen:
            break
        seen.add(key_id)
    return key_id


def retired_rule(key_id: str, retired: Mapping[str, KeyEntry]) -> str | None:
    """Why ``key_id`` may sign nothing new (a dream or a rotation not yet in the
    log), or None if no rotation retired it. The rotation may be logged or only
    just submitted: it says the key may have leaked, so whatever the key signs
    next, whatever it claims about when, could be the thief's."""
    successor = retired.get(key_id)
    if successor is None:
        return None
    current = current_key(key_id, retired)
    return (
        f"key {key_id} is retired: {successor.author!r} rotated from it to key "
        f"{successor.key_id} (content/rotations/{successor.key_id[7:]}.json), so it may "
        f"have leaked and signs nothing new; remove this file, sign the dream again with "
        f"the current key {current} (`dreampool sign --key {current}`) and submit that"
    )


def problems_of(exc: DreampoolError, file: str) -> list[Problem]:
    """The rows of a refused dream file: an :class:`InputError`'s problems, or
    a :class:`SignatureError` as one row (its pointer taken from its message),
    with no hint: what to do with a logged dream is the caller's to say."""
    return _problems_of(exc, file, new=False)


# A new dream's fix, in the rows that name what the redaction finds
# (check_dream; readerview.RESIGN for what a page shows); never said of a
# logged dream (_problems_of, reviews r98, r99).
_RESIGN = "; redact and sign the draft again with `dreampool sign`"
# What to do with a logged dream whose own bytes today's rules refuse (`check`).
_LOGGED_HINT = (
    "this dream is logged: if the file was edited, restore it from git history; if it "
    "is as it was logged, a rule added since refuses it: `dreampool recheck` lists such "
    "dreams and `dreampool erase` removes one"
)


def _problems_of(
    exc: DreampoolError, file: str, *, new: bool = True, logged: bool = False
) -> list[Problem]:
    if isinstance(exc, InputError):
        if not logged or not exc.problems:
            return exc.problems
        # A rule added since (a redaction kind, the Unicode policy) refuses a
        # logged dream's own bytes: its fix, once, after the rows that name
        # them (review r97).
        rows = [
            dataclasses.replace(
                p, rule=p.rule.removesuffix(_RESIGN).removesuffix(readerview.RESIGN)
            )
            for p in exc.problems
        ]
        *rest, last = rows
        return [*rest, dataclasses.replace(last, rule=f"{last.rule} (hint: {_LOGGED_HINT})")]
    text = exc.message.removeprefix(f"{file}: ")
    pointer, _, rule = text.partition(": ") if text.startswith("/") else ("", "", text)
    # A signature error's fix goes with it, as `check` prints a log error's (a
    # contributor saw "signature does not verify" and no fix: a new user's
    # audit, 23rd session); never a new dream's fix for a logged dream, which
    # gets its own in `check` (review r95) and none in recheck (its commitment
    # holds there, and the fix is not to sign it again).
    hint = exc.hint if new else _LOGGED_HINT if logged else None
    suffix = f" (hint: {hint})" if hint else ""
    return [Problem(file, pointer, rule + suffix)]


def _scan(
    folder: Path, pattern: re.Pattern[str], wanted: str, problems: list[Problem]
) -> Iterator[tuple[str, re.Match[str]]]:
    """Plain files of ``folder`` whose names match ``pattern``, in name order,
    as paths in a str (a Path each costs more than its stat at 100k files).

    Anything else (symlinks, folders, other names) is reported, never read.
    """
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except FileNotFoundError:
        return
    for entry in entries:
        if entry.is_symlink():
            problems.append(
                Problem(
                    _shown(folder, entry),
                    "",
                    "is a symlink; the pool holds plain files only: replace it by the file itself",
                )
            )
            continue
        match = pattern.fullmatch(entry.name)
        if match is None or not entry.is_file(follow_symlinks=False):
            if entry.name.startswith("."):
                continue
            problems.append(
                Problem(
                    _shown(folder, entry), "", f"unexpected entry; files here are named {wanted}"
                )
            )
            continue
        yield entry.path, match


def _shown(folder: Path, entry: os.DirEntry[str]) -> str:
    """An entry's path as a problem names it: its name with any control
    character escaped, so the message shows what is there."""
    return str(folder / entry.name.encode("unicode_escape").decode("ascii"))


# --- dreams ----------------------------------------------------------------


def check_dream(data: bytes, file: str) -> dreamfmt.Dream:
    """Format, signature, and the redaction rule: the policy must change nothing,
    in the signed text or in what a reader sees of it (builder.text.readerview)."""
    d = dreamfmt.parse(data, file)
    changes = redact.changes(d.body)  # what redact_dream would change, without the copy
    if changes:
        raise InputError(
            [
                Problem(
                    file,
                    c.pointer,
                    f"still holds personal data ({c.kind}){_RESIGN}",
                )
                for c in changes
            ],
            hint="the pool never rewrites signed text: run `dreampool sign` on your draft "
            "again (it redacts before signing) and submit the new file",
        )
    # docs/protocol.md §1: redaction judges what a reader sees, rendered.
    rendered = readerview.problems(d.body, file)
    if rendered:
        raise InputError(rendered, hint=readerview.HINT_POOL)
    return d


def check_key_rules(
    d: dreamfmt.Dream, file: str, directory: KeyDirectory, rotations: Iterable[str] = ()
) -> str | None:
    """Trust on first use; return a problem, or None if the key may sign this dream."""
    entry = directory.keys.get(d.key_id)
    if entry is not None:
        if entry.author != d.author:
            return (
                f"key {d.key_id} is registered to author {entry.author!r}, not {d.author!r}; "
                "one key signs for one author"
            )
        return None
    if d.author == anonymity.NAME:
        return None  # many one-time keys share the reserved name (docs/protocol.md §1.2)
    reserved = _reserved_look_alike(d.author)
    if reserved:
        return reserved
    alike = _look_alikes(directory, d.author)
    if alike:
        return (
            f"author name {d.author!r} looks like {alike[0].author!r}, held by key "
            f"{alike[0].key_id}; choose a pseudonym that differs by more than case, width, "
            "Unicode normalization or look-alike letters (docs/protocol.md §1.1)"
        )
    holders = [k for k in directory.by_author(d.author) if k.key_id != d.key_id]
    if holders and d.key_id not in rotations:
        return (
            f"author name {d.author!r} is held by key {holders[0].key_id}; a new key for it "
            "needs a rotation statement signed by that key (`dreampool rotate`)"
        )
    return None


@dataclass(frozen=True, slots=True)
class ScannedDream:
    path: str
    dream: dreamfmt.Dream
    digest: str | None = None  # SHA-256 (hex) of the bytes it came from (builder.content.filekeys)
    cached: bool = False  # taken from the build cache, not read from the file this scan
    # Why its key may sign nothing new (retired_rule), or None. Only the log
    # knows whether the dream was logged before its key was retired (then it
    # stays), so the log stage refuses it if not (builder.log.logbuild).
    retired: str | None = None
    # Read this scan and taken as the dream a proven leaf commits to
    # (builder.formats.dream.parse_committed): its signature and review were not run.
    committed: bool = False
    # git's blob id of the bytes it came from (builder.content.filekeys), beside
    # ``digest``: what builder.log.checked records as the file a leaf was checked against.
    blob: str | None = None


def scan_dreams(
    content: Path,
    directory: KeyDirectory,
    on_dream: Callable[[int], None] | None = None,
    *,
    cache: dict[Any, Any] | None = None,
    commitments: dict[Any, Any] | None = None,
    set_aside: Mapping[str, Problem] | None = None,
    aside: list[Problem] | None = None,
    proven: LoggedCommitments | None = None,
    keys: filekeys.FileKeys | None = None,
    keep: Callable[[str, tuple[str, dreamfmt.Dream]], tuple[str, dreamfmt.Dream]] | None = None,
) -> tuple[list[ScannedDream], list[Problem]]:
    """Every valid dream in ``content/dreams`` (name order), and every problem.

    A file named for a dream that ``proven`` (:func:`builder.log.logbuild.prove`)
    holds in a signed checkpoint, not erased, is read by the strict parser
    alone and, if it commits with its salt to that leaf's value, taken as it
    is: its signature and the redaction review ran when it was admitted, and
    the commitment binds those exact fields (docs/protocol.md §3.1; today's
    rules over logged dreams: :mod:`builder.log.recheck`).
    Any other file, and a logged one that does not match or lacks its salt,
    is checked in full (:func:`check_dream`), as before.

    A dream signed by a key of ``set_aside`` (:func:`settle_forks`) goes to
    ``aside`` instead, naming why.

    Reading and verifying runs on every core (:mod:`builder.parallel`);
    ``on_dream(n)`` reports progress as files are done. ``cache`` (from
    :mod:`builder.buildcache`) maps a file's content
    (:mod:`builder.content.filekeys`) to the dream an earlier build verified in those
    bytes: a file git vouches for (its blob id in ``keys``) is not read at all,
    any other is read and digested, and only a miss is verified. It is left
    holding this scan's dreams. ``keep(blob, entry)``, if given, is handed each
    logged dream the workers took by its commitment as it comes, and gives
    back the entry to hold instead (:meth:`builder.buildcache.BuildCache.kept_scan`:
    the row written, the dream's text left in the store), so a cold build
    does not hold every dream's text at once. A dream verified in full (one
    to log) is held as verified.
    A verified file whose salt is beside it also gets its commitment computed
    on the worker, into ``commitments`` (what :func:`builder.log.logbuild.update`
    reads as its cache), so the log stage need not canonicalize every dream.
    """
    problems: list[Problem] = []
    candidates: list[tuple[str, str]] = []
    for path, match in _scan(content / "dreams", _ID_FILE_RE, "<dream id>.json", problems):
        if match.group(2) != "salt":  # a salt sits beside its dream (builder.log.logstate)
            candidates.append((path, match.group(1)))
    known = dict(cache or {})
    blobs = keys.folder("dreams") if keys is not None else {}
    # Per candidate: (git blob id, SHA-256) of its bytes, its entry if the
    # store has it (builder.content.filekeys.find), and else a job for the workers:
    # the file and, for a dream the proven log holds, its leaf's commitment.
    found_keys: list[filekeys.Key | None] = []
    entries: list[tuple[str, Any] | None] = []
    todo: list[tuple[Path, str | None]] = []
    for path, name_id in candidates:
        key: filekeys.Key | None = None
        entry = None
        if cache is not None:
            blob = blobs.get(f"{name_id}.json")
            entry = filekeys.find(known, blob, None)
            if entry is not None:
                assert blob is not None
                key = (blob, entry[0])
            elif blob is None:  # not vouched for by git: only its bytes say whether it changed
                key = _key_of(path)
                entry = filekeys.find(known, None, key)
            # (A file git vouches for that the store lacks is read by its worker
            # alone: its bytes have that blob id, which no entry matches, unless
            # the file changed after git listed it; the worker then verifies it
            # again, under the key of the bytes it read. In a cold build,
            # reading each file here first was a tenth of the scan.)
        found_keys.append(key)
        entries.append(entry)
        if entry is None:
            logged = proven.commitment_of(name_id) if proven is not None else None
            todo.append((Path(path), logged))
    # On a miss the worker reads the file once, and its result is stored
    # under the digests of exactly the bytes it checked.
    # Consumed as the workers yield them: with ``keep``, no more than a few
    # chunks of dreams' texts are in memory at once.
    fresh = contextlib.closing(parallel.imap_ordered(_check_and_commit, todo))
    checked: list[dreamfmt.Dream | list[Problem]] = []
    kept: dict[int, tuple[str, dreamfmt.Dream]] = {}
    by_commitment: set[str] = set()
    with fresh as results:
        for i, ((path, _), entry) in enumerate(zip(candidates, entries, strict=True)):
            if entry is not None:
                checked.append(entry[1])
                continue
            key, result, committed, taken = next(results)
            found_keys[i] = key
            # Only a dream taken by its proven leaf's commitment: one about to
            # be logged keeps the text it was verified in, which its leaf will
            # commit to (not the store's copy of it, read back later).
            if keep is not None and taken and key is not None and not isinstance(result, list):
                kept[i] = keep(key[0], (key[1], result))
                result = kept[i][1]
            checked.append(result)
            if taken:
                by_commitment.add(path)
            if committed is not None and commitments is not None and key is not None:
                commitments[(key[1], committed[0])] = committed[1]
    if cache is not None:
        cache.clear()
        for i, (key, result, entry) in enumerate(zip(found_keys, checked, entries, strict=True)):
            if key is None or isinstance(result, list):
                continue
            # An entry the store held goes back as the same object: the store
            # writes only entries that are not (buildcache.BuildCache.save), and
            # a no-op build of 10k dreams rewrote all 10k rows.
            if entry is None:
                entry = kept.get(i) or (key[1], result)
            cache[key[0]] = entry
    if on_dream is not None:
        on_dream(len(candidates))
    retired = retired_keys(directory)
    found: list[ScannedDream] = []
    for (path, name_id), result, key, entry in zip(
        candidates, checked, found_keys, entries, strict=True
    ):
        file = path
        if isinstance(result, list):
            problems.extend(result)
            continue
        d = result
        if d.id != name_id:
            problems.append(
                Problem(file, "", f"file name does not match the dream id (want {d.id}.json)")
            )
            continue
        if set_aside is not None and aside is not None and d.key_id in set_aside:
            why = set_aside[d.key_id]
            aside.append(
                Problem(
                    file,
                    "/sig/keyId",
                    f"key {d.key_id} is set aside ({why.file}: {why.rule}); remove this file",
                )
            )
            continue
        if d.key_id not in directory.keys:
            salted = os.path.lexists(path[: -len(".json")] + ".salt")  # logged
            problems.append(
                Problem(file, "/sig/keyId", unknown_key_rule(content, d.key_id, logged=salted))
            )
            continue
        rule = check_key_rules(d, file, directory)
        if rule:
            problems.append(Problem(file, "/author", rule))
            continue
        digest, blob = (key[1], key[0]) if key is not None else (None, None)
        cached = entry is not None
        found.append(
            ScannedDream(
                path,
                d,
                digest,
                cached,
                retired_rule(d.key_id, retired),
                path in by_commitment,
                blob,
            )
        )
    return found, problems


def _key_of(path: str) -> filekeys.Key | None:
    """The content key of a dream file git does not vouch for, or None if it
    cannot be read (the worker then reports why)."""
    try:
        return filekeys.of_bytes(read_regular(Path(path)))
    except (OSError, InputError):
        return None


def _check_and_commit(
    job: tuple[Path, str | None],
) -> tuple[filekeys.Key | None, dreamfmt.Dream | list[Problem], tuple[str, str] | None, bool]:
    """One dream file on a scan worker: the content key of the bytes checked,
    the dream (or its problems), its salt and commitment if a salt is beside
    it, and whether it was taken by its commitment. ``job`` is the file and,
    for a dream a proven log holds, the commitment of its leaf (see
    :func:`scan_dreams`)."""
    path, logged = job
    salt = salt_beside(path)
    if logged is not None and salt is not None:
        try:
            data = read_regular(path)
        except (OSError, InputError):
            data = None  # check_read names the problem
        if data is not None:
            # docs/protocol.md §3.1: the strict parse, then the leaf's commitment.
            d = dreamfmt.parse_committed(
                data, str(path), lambda obj: dreamfmt.commitment(obj, salt) == logged
            )
            if d is not None:
                return filekeys.of_bytes(data), d, (salt, logged), True
    # A salt beside it: the dream was logged (the build writes the salt as it logs).
    key, result = check_read(path, logged=salt is not None)
    if isinstance(result, list) or salt is None:
        return key, result, None, False
    return key, result, (salt, dreamfmt.commitment(result.body, salt)), False


def salt_beside(path: Path) -> str | None:
    """The text of the salt file beside a dream file, if there is a readable
    one that is b64url of 32 bytes (the log stage reports any other)."""
    try:
        # read_regular: a salt that is a symlink (to /dev/zero, a FIFO) is
        # never followed, and no more than a dream's size is read.
        salt = read_regular(path.with_suffix(".salt")).decode("ascii").strip()
        if len(b64url_decode(salt)) != 32:  # builder.log.logbuild.SALT_SIZE
            return None
    except (OSError, UnicodeDecodeError, InputError, ValueError):
        return None  # no salt yet (a new dream), or the log stage reports it
    return salt


def check_file(path: Path) -> dreamfmt.Dream | list[Problem]:
    """One dream file checked, or its problems (plain values: they cross processes)."""
    return check_read(path)[1]


def check_read(
    path: Path, *, logged: bool = False
) -> tuple[filekeys.Key | None, dreamfmt.Dream | list[Problem]]:
    """:func:`check_file`, and the content key (:func:`builder.content.filekeys.of_bytes`)
    of the very bytes it checked; None if nothing could be read. A ``logged``
    dream's problems carry a logged dream's fix (recheck and erase, or
    restore), not a new one's (sign it again: reviews r95, r97)."""
    file = str(path)
    key = None
    try:
        data = read_regular(path)
        key = filekeys.of_bytes(data)
        return key, check_dream(data, file)
    except (InputError, SignatureError) as exc:
        return key, _problems_of(exc, file, new=not logged, logged=logged)
    except OSError as exc:
        return key, [Problem(file, "", f"cannot be read: {exc.strerror or exc}")]


def check(content: Path) -> tuple[list[Problem], list[ScannedDream]]:
    """Every problem in the pool's files, and the dreams that passed; nothing is written."""
    problems: list[Problem] = []
    try:
        load_config(content)
    except InputError as exc:
        problems.extend(exc.problems)
    directory, key_problems = load_keys(content)
    problems.extend(key_problems)
    scanned, dream_problems = scan_dreams(content, directory)
    problems.extend(dream_problems)
    return problems, scanned


# --- submitting ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SubmitResult:
    added: list[str]
    already: list[str]
    new_keys: list[str]


def submit(
    content: Path,
    files: list[Path],
    *,
    today: dt.date | None = None,
    key_cache: dict[Any, Any] | None = None,
) -> SubmitResult:
    """Validate every file, apply the key rules, then write: all or nothing.

    A refused file raises before anything is written, so a failed submission
    leaves ``content/`` exactly as it was. ``key_cache`` is :func:`load_keys`'
    ``cache`` (key files known by their content, not parsed again).
    """
    load_config(content)
    directory, key_problems = load_keys(content, cache=key_cache)
    if key_problems:
        raise InputError(
            key_problems, hint="the pool's key directory is broken; run `dreampool check`"
        )
    date = (today or dt.datetime.now(dt.UTC).date()).isoformat()
    # docs/protocol.md §7: a rotation retires its old key at once, in this
    # submission too: the old key's dreams that come with it are refused.
    retiring = retired_keys(directory)
    rotations: dict[str, tuple[bytes, Any]] = {}
    rotation_files: dict[str, str] = {}
    parsed: list[tuple[Path, bytes, dreamfmt.Dream]] = []
    problems: list[Problem] = []
    for path in files:
        file = str(path)
        try:
            data = read_regular(path)
        except OSError as exc:
            raise PoolError(f"{file}: cannot read: {exc.strerror or exc}") from None
        try:
            obj = dreamfmt.load_json(data, file)
            if isinstance(obj, dict) and obj.get("type") == statement.ROTATE:
                new_id = _rotation_target(obj, file, directory, retiring)
                if new_id is None:
                    continue  # this very rotation is stored already
                old = obj["oldKeyId"]
                if old in retiring:  # only another rotation of this submission retired it
                    raise InputError(
                        [
                            Problem(
                                file,
                                "/oldKeyId",
                                f"key {old} is rotated twice in this submission (to "
                                f"{retiring[old].key_id} and to {new_id}); a key is "
                                "rotated once: submit one rotation",
                            )
                        ]
                    )
                new_public = b64url_decode(obj["newPublicKey"])
                retiring[old] = KeyEntry(new_id, obj["author"], new_public, "guest", date, old)
                rotations[new_id] = (data, obj)
                rotation_files[new_id] = file
            else:
                parsed.append((path, data, check_dream(data, file)))
        except (InputError, SignatureError) as exc:
            problems.extend(_problems_of(exc, file))
    new_keys: dict[str, KeyEntry] = {}
    writes: dict[Path, bytes] = {}
    added: list[str] = []
    already: list[str] = []
    # docs/protocol.md §1.2, for what this submission adds: a key already in the
    # directory has signed a dream, so a one-time key there signs no other.
    fresh = {d.id: d for _, _, d in parsed if not (content / "dreams" / f"{d.id}.json").exists()}
    refused = anonymity.refusals(fresh.values(), directory.keys)
    for path, data, d in parsed:
        if d.id in refused:
            problems.append(Problem(str(path), *refused[d.id]))
            continue
        if d.author == anonymity.NAME and d.key_id in rotations:
            problems.append(
                Problem(
                    str(path), "/author", "a one-time key is never rotated; " + anonymity.RESIGN
                )
            )
            continue
        rotating = rotations.get(d.key_id)
        if rotating is not None and d.author != rotating[1]["author"]:
            # check_key_rules waves a rotation's new key through; it may only
            # sign as the name the rotation moves (else OLD's retirement is
            # filed under another author's name).
            problems.append(
                Problem(
                    str(path),
                    "/author",
                    f"key {d.key_id} is the new key of {rotating[1]['author']!r}'s rotation "
                    f"({rotation_files[d.key_id]}), so it signs as {rotating[1]['author']!r}, "
                    f"not {d.author!r}: one key signs for one author",
                )
            )
            continue
        view = KeyDirectory({**directory.keys, **new_keys})
        rule = check_key_rules(d, str(path), view, rotations)
        if rule:
            problems.append(Problem(str(path), "/author", rule))
            continue
        retired = retired_rule(d.key_id, retiring)
        if retired and not (content / "dreams" / f"{d.id}.json").exists():
            problems.append(Problem(str(path), "/sig/keyId", retired))
            continue
        if d.key_id not in view.keys:
            rotated = rotations.get(d.key_id)
            new_keys[d.key_id] = KeyEntry(
                d.key_id,
                d.author,
                d.public_key,
                "guest",
                date,
                rotated[1]["oldKeyId"] if rotated else None,
            )
        target = content / "dreams" / f"{d.id}.json"
        if target.exists() or target in writes:
            already.append(d.id)
            continue
        writes[target] = data
        added.append(d.id)
    problems += [
        Problem(
            rotation_files[key_id],
            "/newKeyId",
            f"a rotation is stored with the first dream signed by its new key {key_id}; "
            "submit it together with a dream signed by the new key "
            f"(`dreampool sign --key {key_id}`)",
        )
        for key_id in rotations
        if key_id not in new_keys
    ]
    if problems:
        raise InputError(
            problems, hint="nothing was written; fix the files listed and submit again"
        )
    for entry in new_keys.values():
        writes[content / "keys" / f"{entry.key_id[7:]}.yaml"] = format_key_entry(entry)
        if entry.rotated_from:
            writes[content / "rotations" / f"{entry.key_id[7:]}.json"] = rotations[entry.key_id][0]
    for target, data in writes.items():
        atomic_write(target, data)
    return SubmitResult(added, already, sorted(new_keys))


def _rotation_target(
    obj: Any, file: str, directory: KeyDirectory, retired: Mapping[str, KeyEntry]
) -> str | None:
    """The new keyId a rotation statement moves its author to, or None if the
    directory holds this very rotation already; :class:`InputError` unless it
    is signed by the author's current key (docs/protocol.md §7: a rotation
    retires its old key, so a retired key cannot rotate the name again) and
    names a key the pool has not seen."""
    signer = statement.verify(obj, file, statement.ROTATE)
    old = directory.keys.get(signer)
    if old is None or obj["oldKeyId"] != signer or old.author != obj["author"]:
        raise InputError(
            [
                Problem(
                    file, "/sig", "must be signed by the author's registered key named in oldKeyId"
                )
            ]
        )
    try:
        new_public = b64url_decode(obj["newPublicKey"])
    except ValueError as exc:
        raise InputError([Problem(file, "/newPublicKey", str(exc))]) from None
    new_id = str(obj["newKeyId"])
    if dreamfmt.key_id(new_public) != new_id:
        raise InputError([Problem(file, "/newKeyId", "does not match newPublicKey")])
    known = directory.keys.get(new_id)
    if known is not None and known.rotated_from == signer and known.author == old.author:
        return None
    if signer in retired:
        current = current_key(signer, retired)
        raise InputError(
            [
                Problem(
                    file,
                    "/sig",
                    f"is signed by key {signer}, which is retired: {old.author!r} rotated "
                    f"from it to key {retired[signer].key_id} (content/rotations/"
                    f"{retired[signer].key_id[7:]}.json); a retired key cannot move the name "
                    f"again: only the current key {current} may sign a rotation",
                )
            ]
        )
    if known is not None:
        state = "a retired key" if new_id in retired else "a key"
        raise InputError(
            [
                Problem(
                    file,
                    "/newKeyId",
                    f"key {new_id} is already in the pool, {state} of {known.author!r}: a "
                    "rotation moves a name to a key the pool has not seen; make one with "
                    "`dreampool keygen`",
                )
            ]
        )
    return new_id


def format_key_entry(entry: KeyEntry) -> bytes:
    lines = [
        f"author: {_yaml_str(entry.author)}",
        f"publicKey: {b64url_encode(entry.public_key)}",
        f"tier: {entry.tier}",
        f"added: '{entry.added}'",
    ]
    if entry.rotated_from:
        lines.append(f"rotatedFrom: '{entry.rotated_from}'")
    return ("\n".join(lines) + "\n").encode("utf-8")


def _yaml_str(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)  # a JSON string is a YAML flow scalar


def sync_filesystem(path: Path) -> None:
    """Flush everything written to the filesystem holding ``path`` (syncfs(2);
    os.sync() where libc has none)."""
    libc_name = ctypes.util.find_library("c")
    syncfs = getattr(ctypes.CDLL(libc_name), "syncfs", None) if libc_name else None
    if syncfs is None:
        os.sync()
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        if syncfs(fd) != 0:
            os.sync()
    finally:
        os.close(fd)


# Up to this many files are made durable one by one (an fsync of each, then one
# of their folder); more with a single syncfs(2). An fsync is ≈0.5 ms here (100
# salts: 60 ms, measured), so one each made admitting 1M dreams take hours; but
# syncfs flushes all that waits to be written on the file system, whoever wrote
# it (a build store just restored into a CI runner's checkout: 86 MB at 10k
# dreams), which was 0.55 s of a build adding one dream. At this bound the
# fsyncs cost about as much as that syncfs.
DURABLE_ONE_BY_ONE = 1024


def make_durable(folder: Path, names: Collection[str], *, also: Iterable[Path] = ()) -> None:
    """Make the files ``names`` of ``folder``, just written with
    ``atomic_write(..., sync=False)``, durable: their bytes and their names
    (the renames are entries of the folder); and the entries of the folders
    ``also`` (say one an ``atomic_write`` renamed a file into, or created),
    which the syncfs flushed with the rest."""
    if len(names) > DURABLE_ONE_BY_ONE:
        sync_filesystem(folder)
        return
    for path in [*(folder / name for name in names), folder, *also]:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def atomic_write(path: Path, data: bytes, *, sync: bool = True) -> None:
    """Write via a temporary file in the same folder and rename over the target.

    ``sync=False`` skips the fsync, for many small files written together and
    then made durable together with :func:`make_durable` (the salts of a
    first build: one fsync each made admitting 1M dreams take hours)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        os.fchmod(fd, 0o644)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            if sync:
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
