"""``dreampool erase``: take a dream out of the pool, leaving no text behind.

docs/protocol.md §3: the log is append-only, so erasure appends an erasure leaf
(at the next build) and deletes the record. Here the dream file and its salt
are deleted from ``content/``: without the salt, the commitment left in the
log can no longer be linked to any text (§2). What stays is
``content/erasures/<id>.json``: the id and the reason, or the author's signed
request, which names only the id.

Before deleting, every other file under ``content/`` (but the other dreams,
which are their own authors' signed text) is searched for the dream's text
(title, summary, entry text and source of 12 characters or more, and the
signature), and erasure is refused while residue remains elsewhere.
Removing the dream from git history is the operator's step (docs/operators.md).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from builder.content import poollock
from builder.content.pool import (
    atomic_write,
    check_layout,
    current_key,
    load_keys,
    read_regular,
    retired_keys,
)
from builder.errors import InputError, PoolError, Problem
from builder.formats import dream as dreamfmt
from builder.formats import statement
from builder.formats.leaf import REASONS

MIN_FRAGMENT = 12


def fragments(body: Any) -> list[str]:
    """The dream's text worth searching for: long enough not to match by chance."""
    texts = [body.get("title", ""), body.get("summary", "")]
    for entry in body.get("entries", []):
        texts += [entry.get("text", ""), entry.get("source", "")]
    texts.append(body["sig"]["value"])
    found: list[str] = []
    for text in texts:
        for line in str(text).split("\n"):
            if len(line.strip()) >= MIN_FRAGMENT:
                found.append(line.strip())
    return found


def residue(root: Path, needles: list[str], skip: set[Path]) -> list[Path]:
    """Files under ``root`` (but ``skip``) that hold any of ``needles``."""
    encoded = [n.encode("utf-8") for n in needles]
    json_encoded = [json.dumps(n)[1:-1].encode("ascii") for n in needles]
    hits: list[Path] = []
    for dirpath, _, names in os.walk(root):
        for name in names:
            path = Path(dirpath) / name
            # Only regular files: a FIFO would block the read for ever.
            if path in skip or path.is_symlink() or not path.is_file():
                continue
            data = path.read_bytes()
            if any(n in data for n in encoded) or any(n in data for n in json_encoded):
                hits.append(path)
    return sorted(hits)


def erase(content: Path, dream_id: str, reason: str, request: Path | None = None) -> Path:
    """Delete the dream and its salt; record why. Returns the erasure record's path."""
    with poollock.hold(content, "erase"):
        return _erase(content, dream_id, reason, request)


def _erase(content: Path, dream_id: str, reason: str, request: Path | None) -> Path:
    if not dreamfmt.is_dream_id(dream_id):
        raise PoolError(f"{dream_id!r} is not a dream id (16 lowercase hex characters)")
    if reason not in REASONS:  # docs/protocol.md §3: an erasure leaf's reasons
        raise PoolError(f"reason must be one of {', '.join(REASONS)}")
    layout = check_layout(content)
    if layout:  # a symlinked folder would lead the deletion and the record elsewhere
        raise InputError(layout, hint="replace each symlink by the folder it stands for")
    path = content / "dreams" / f"{dream_id}.json"
    record_path = content / "erasures" / f"{dream_id}.json"
    if record_path.exists():
        raise PoolError(f"dream {dream_id} is already erased ({record_path})")
    try:
        # Format and signature only, not the redaction rule: personal data a
        # dream was logged with (before the policy caught it) is a reason to
        # erase it, and must not stop the erasure.
        d = dreamfmt.parse(read_regular(path), str(path))
    except FileNotFoundError:
        raise PoolError(
            f"no dream {dream_id} in {content / 'dreams'}",
            hint="check the id on the dream's page or in the site's JSON API (api/dreams/<k>.json)",
        ) from None
    record: bytes
    if request is not None:
        try:
            request_bytes = read_regular(request)
        except OSError as exc:
            raise PoolError(f"{request}: cannot read: {exc.strerror or exc}") from None
        obj = dreamfmt.load_json(request_bytes, str(request))
        signer = statement.verify(obj, str(request), statement.ERASE)
        # docs/protocol.md §7: a rotation retires the dream's key at once; what
        # it signs from then on may be a thief's, so the author's current key
        # signs the request instead.
        directory, _ = load_keys(content)
        retired = retired_keys(directory)
        current = current_key(d.key_id, retired)
        if signer != current:
            if signer == d.key_id:
                successor = retired[d.key_id]
                rule = (
                    f"is signed by key {d.key_id}, which is retired since {successor.author!r} "
                    f"rotated from it to key {successor.key_id} (content/rotations/"
                    f"{successor.key_id[7:]}.json): it may have leaked and signs nothing "
                    f"new; the author's current key {current} must sign the request"
                )
            else:
                rule = f"is not signed by the dream's key {current}"
            raise InputError([Problem(str(request), "/sig", rule)])
        if obj["id"] != dream_id or obj["reason"] != reason:
            raise InputError(
                [Problem(str(request), "/id", "does not name this dream id and reason")]
            )
        record = request_bytes
    else:
        record = (json.dumps({"id": dream_id, "reason": reason}) + "\n").encode()
    salt = content / "dreams" / f"{dream_id}.salt"
    # Other dreams are their authors' own signed text: a sentence they share
    # with this one is theirs, not residue.
    others = {p for p in (content / "dreams").glob("*.json")}
    hits = residue(content, fragments(d.body), others | {path, salt})
    if hits:
        raise PoolError(
            f"text of dream {dream_id} also appears in: {', '.join(map(str, hits))}",
            hint="remove it from those files first (they would keep the erased text public)",
        )
    atomic_write(record_path, record)
    path.unlink()
    salt.unlink(missing_ok=True)
    return record_path
