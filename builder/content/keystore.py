"""The user's private key store: ``$DREAMPOOL_HOME/keys`` (default
``~/.config/dreampool/keys``).

Layout (one file per key, mode 0600, in a directory of mode 0700)::

    keys/<16 hex>.key       an author key: JSON {"type": "dreampool.author-key/v1",
                            "author", "keyId", "publicKey", "privateKey"} (b64url seed)
    keys/log-<name>.key     a log key: the note private key string
                            ``PRIVATE+KEY+<origin>+<hash>+<base64>`` (Go's note format)

Private keys never go inside a git work tree: a key committed by accident is
published for ever, so :func:`key_dir` refuses such a location outright.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from builder.errors import KeyStoreError
from builder.formats import ed25519
from builder.formats.b64 import b64url_decode, b64url_encode
from builder.formats.dream import key_id

_KEY_REF_RE = re.compile(r"(?:sha256:)?([0-9a-f]{16})")


@dataclass(frozen=True, slots=True)
class AuthorKey:
    author: str
    seed: bytes
    public_key: bytes

    @property
    def key_id(self) -> str:
        return key_id(self.public_key)


def home() -> Path:
    env = os.environ.get("DREAMPOOL_HOME")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".config" / "dreampool"


def where() -> str:
    """Where the key store is and why, for messages: the path and, when
    ``DREAMPOOL_HOME`` chose it, that it did (a hint naming the default
    folder would send the user to the wrong place)."""
    keys = home() / "keys"
    if os.environ.get("DREAMPOOL_HOME"):
        return f"{keys} (from DREAMPOOL_HOME)"
    return f"{keys} (the default; set DREAMPOOL_HOME to move it)"


def key_dir(*, create: bool) -> Path:
    """The key directory, refused if it lies inside a git work tree."""
    path = home() / "keys"
    tree = enclosing_git_tree(path)
    if tree is not None:
        raise KeyStoreError(
            f"the key store {path} is inside the git work tree {tree}; "
            "a private key there could be committed and published",
            hint="set DREAMPOOL_HOME to a directory outside any repository "
            f"(it is {os.environ['DREAMPOOL_HOME']!r} now)"
            if os.environ.get("DREAMPOOL_HOME")
            else "set DREAMPOOL_HOME to a directory outside any repository "
            "(the default is ~/.config/dreampool)",
        )
    if create:
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
        path.chmod(0o700)
    return path


def enclosing_git_tree(path: Path) -> Path | None:
    """The nearest ancestor of ``path`` (or itself) holding a ``.git`` entry."""
    path = path.expanduser().absolute()
    for candidate in (path, *path.parents):
        if (candidate / ".git").exists():
            return candidate
    return None


def write_private(path: Path, data: bytes) -> None:
    """Create ``path`` with mode 0600 from the start; never overwrite a key."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise KeyStoreError(f"{path} already exists; refusing to overwrite a private key") from None
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def create_author_key(author: str) -> AuthorKey:
    seed = ed25519.generate_seed()
    key = AuthorKey(author=author, seed=seed, public_key=ed25519.public_key_of(seed))
    record = {
        "type": "dreampool.author-key/v1",
        "author": author,
        "keyId": key.key_id,
        "publicKey": b64url_encode(key.public_key),
        "privateKey": b64url_encode(seed),
    }
    path = key_dir(create=True) / f"{key.key_id.removeprefix('sha256:')}.key"
    write_private(path, (json.dumps(record, ensure_ascii=False, indent=2) + "\n").encode())
    return key


def load_author_key(ref: str) -> AuthorKey:
    """Load an author key by keyId (``sha256:…`` or the 16 hex) or by file path."""
    match = _KEY_REF_RE.fullmatch(ref)
    path = key_dir(create=False) / f"{match.group(1)}.key" if match else Path(ref)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise KeyStoreError(
            f"no key {ref} in your key store {path.parent}"
            if match
            else f"no key file {ref} (not a keyId: sha256: and 16 hex digits)",
            hint=f"your key store is {where()}; make a key with `dreampool keygen --author NAME`"
            if match
            else "give a keyId (sha256:…) from your key store or the path of a key file",
        ) from None
    try:
        record = json.loads(data)
        seed = b64url_decode(record["privateKey"])
        author = record["author"]
        public_key = ed25519.public_key_of(seed)
        stored = b64url_decode(record["publicKey"])
    except (ValueError, KeyError, TypeError):
        raise KeyStoreError(f"{path}: not a dreampool author key file") from None
    if stored != public_key or not isinstance(author, str):
        raise KeyStoreError(f"{path}: the stored public key does not match the private key")
    return AuthorKey(author=author, seed=seed, public_key=public_key)
