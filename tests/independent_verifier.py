"""An independent verifier of a built dreampool site.

Written only from ``docs/protocol.md``, the C2SP texts (signed-note,
tlog-checkpoint, tlog-tiles v0.1.0, tlog-proof@v1, tlog-policy,
tlog-cosignature) and RFC 6962 / RFC 9162. It imports nothing from the
``builder`` package: it is a second, separate witness that a site is right,
so a bug shared by the builder and its own light client cannot hide.

    verify_site(site, vkey=None) -> Report

raises :class:`VerificationError` (an ``AssertionError``) on the first
failure, naming the file and what was wanted, and otherwise returns a
:class:`Report` counting what it checked. With ``vkey=None`` the log key is
taken from ``site/log/policy``.

The steps, numbered as in the code:

1. ``log/checkpoint`` is a signed note (c2sp.org/signed-note) holding a
   checkpoint (c2sp.org/tlog-checkpoint) signed by the log key whose name is
   the origin, with the policy's witness quorum met (c2sp.org/tlog-policy,
   c2sp.org/tlog-cosignature).
2. Every ``log/checkpoints/<size>`` verifies the same way and holds that size;
   ``log/checkpoint`` is the largest one, byte for byte.
3. The tree is recomputed from the entry bundles (c2sp.org/tlog-tiles):
   its root at every published size equals that checkpoint's root; every tile
   and bundle any published size needs is present, and every file under
   ``log/tile/`` holds exactly the hashes (or entries) recomputed here.
4. Every leaf is JCS-canonical and one of docs/protocol.md §3's kinds; each
   dream id and each keyId is logged once, each erasure names an earlier
   dream leaf, once.
5. ``log/consistency/<m>`` proves (RFC 9162 §2.1.4.2) each earlier published
   checkpoint consistent with the current one.
6. Every ``dreams/<id>/proof.tlog-proof`` (c2sp.org/tlog-proof) proves its
   leaf (RFC 9162 §2.1.3.2) under the first published checkpoint holding it,
   embedded byte for byte as ``log/checkpoints/<size>``; its record, if
   present, recomputes that leaf and carries a valid dream signature whose
   key leaf came earlier and names the dream's author, and no later key leaf
   of that author came before the dream's (it retired the key); an absent
   record has a later erasure leaf.
7. Every dream leaf has its proof file.

Run as ``python tests/independent_verifier.py SITE [VKEY]``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import sys
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import rfc8785
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

__all__ = ["Report", "VerificationError", "verify_site"]


class VerificationError(AssertionError):
    """The site does not verify; the message names the file and the rule."""


def _fail(msg: str) -> VerificationError:
    return VerificationError(msg)


def _check(cond: bool, msg: str) -> None:
    if not cond:
        raise _fail(msg)


# --------------------------------------------------------------------------
# Encodings (docs/protocol.md, "Encodings"; RFC 4648 §4 and §5)

_HEX16 = re.compile(r"[0-9a-f]{16}")
_HEX64 = re.compile(r"[0-9a-f]{64}")
_DECIMAL = re.compile(r"0|[1-9][0-9]*")
_B64 = re.compile(r"(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?")
_B64URL = re.compile(r"[A-Za-z0-9_-]*")


def b64decode_strict(s: str, where: str) -> bytes:
    """Standard base64 with padding; the canonical encoding only."""
    _check(bool(_B64.fullmatch(s)), f"{where}: not standard padded base64: {s!r}")
    raw = base64.b64decode(s, validate=True)
    _check(base64.b64encode(raw).decode() == s, f"{where}: non-canonical base64: {s!r}")
    return raw


def b64url_decode_strict(s: str, where: str) -> bytes:
    """URL-safe base64 without padding; the canonical encoding only."""
    _check(
        isinstance(s, str) and bool(_B64URL.fullmatch(s)) and len(s) % 4 != 1,
        f"{where}: not unpadded base64url: {s!r}",
    )
    raw = base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))
    _check(
        base64.urlsafe_b64encode(raw).decode().rstrip("=") == s,
        f"{where}: non-canonical base64url: {s!r}",
    )
    return raw


def b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def parse_decimal(s: str, where: str) -> int:
    """ASCII decimal with no leading zeroes (tlog-checkpoint, tlog-proof)."""
    _check(bool(_DECIMAL.fullmatch(s)), f"{where}: not a decimal without leading zeroes: {s!r}")
    return int(s)


# --------------------------------------------------------------------------
# Strict JSON and JCS (docs/protocol.md §1: duplicate keys, NaN/Infinity, lone
# surrogates rejected; RFC 8785)

_MAX_SAFE_INT = 2**53 - 1


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for k, v in pairs:
        if k in obj:
            raise ValueError(f"duplicate key {k!r}")
        obj[k] = v
    return obj


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _check_values(x: Any, where: str) -> None:
    if isinstance(x, str):
        try:
            x.encode("utf-8")
        except UnicodeEncodeError:
            raise _fail(f"{where}: string holds a lone surrogate") from None
    elif isinstance(x, bool) or x is None:
        pass
    elif isinstance(x, int):
        _check(abs(x) <= _MAX_SAFE_INT, f"{where}: integer {x} beyond 2^53-1")
    elif isinstance(x, dict):
        for k, v in x.items():
            _check_values(k, where)
            _check_values(v, where)
    elif isinstance(x, list):
        for v in x:
            _check_values(v, where)


def load_json_strict(data: bytes, where: str) -> Any:
    try:
        text = data.decode("utf-8")
        obj = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_reject_constant)
    except (UnicodeDecodeError, ValueError) as e:
        raise _fail(f"{where}: not strict JSON: {e}") from None
    _check_values(obj, where)
    return obj


def jcs(obj: Any) -> bytes:
    """JCS(x): the RFC 8785 canonical UTF-8 bytes of x."""
    return rfc8785.dumps(obj)


def sha256(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


# --------------------------------------------------------------------------
# Ed25519 (RFC 8032), with the two extra refusals of docs/protocol.md §1: a public
# key of small order, and a non-canonical S.

_P = 2**255 - 19
_D = -121665 * pow(121666, _P - 2, _P) % _P
_L = 2**252 + 27742317777372353535851937790883648493
_SQRT_M1 = pow(2, (_P - 1) // 4, _P)

_Point = tuple[int, int, int, int]  # extended coordinates (X, Y, Z, T)


def _point_add(a: _Point, b: _Point) -> _Point:
    # RFC 8032 §5.1.4, the unified addition formula (also doubles).
    aa = (a[1] - a[0]) * (b[1] - b[0]) % _P
    bb = (a[1] + a[0]) * (b[1] + b[0]) % _P
    cc = 2 * a[3] * b[3] * _D % _P
    dd = 2 * a[2] * b[2] % _P
    e, f, g, h = bb - aa, dd - cc, dd + cc, bb + aa
    return (e * f % _P, g * h % _P, f * g % _P, e * h % _P)


def _decode_point(raw: bytes) -> _Point | None:
    # RFC 8032 §5.1.3; None where decoding fails.
    y = int.from_bytes(raw, "little")
    sign = y >> 255
    y &= (1 << 255) - 1
    if y >= _P:
        return None
    x2 = (y * y - 1) * pow(_D * y * y + 1, _P - 2, _P) % _P
    if x2 == 0:
        if sign:
            return None
        return (0, y, 1, 0)
    x = pow(x2, (_P + 3) // 8, _P)
    if (x * x - x2) % _P:
        x = x * _SQRT_M1 % _P
    if (x * x - x2) % _P:
        return None
    if (x & 1) != sign:
        x = _P - x
    return (x, y, 1, x * y % _P)


def is_small_order(pub: bytes) -> bool:
    """True if the encoded point decodes and 8·A is the identity."""
    a = _decode_point(pub)
    if a is None:
        return False
    for _ in range(3):
        a = _point_add(a, a)
    return a[0] % _P == 0 and (a[1] - a[2]) % _P == 0


def ed25519_verify(pub: bytes, sig: bytes, msg: bytes, where: str) -> None:
    _check(len(pub) == 32, f"{where}: Ed25519 public key is {len(pub)} bytes, want 32")
    _check(len(sig) == 64, f"{where}: Ed25519 signature is {len(sig)} bytes, want 64")
    _check(_decode_point(pub) is not None, f"{where}: public key is not a curve point")
    _check(not is_small_order(pub), f"{where}: public key has small order")
    r_y = int.from_bytes(sig[:32], "little") & ((1 << 255) - 1)
    _check(r_y < _P, f"{where}: non-canonical R (y >= p)")
    _check(not is_small_order(sig[:32]), f"{where}: R has small order")
    _check(int.from_bytes(sig[32:], "little") < _L, f"{where}: non-canonical S (S >= L)")
    try:
        Ed25519PublicKey.from_public_bytes(pub).verify(sig, msg)
    except InvalidSignature:
        raise _fail(f"{where}: Ed25519 signature does not verify") from None


# --------------------------------------------------------------------------
# Signed notes (c2sp.org/signed-note) and vkeys

SIG_ED25519 = 0x01
SIG_COSIGNATURE_V1 = 0x04
_MAX_SIGNATURES = 100  # the spec asks for at least 16


@dataclass(frozen=True, slots=True)
class NoteKey:
    name: str
    key_id: bytes  # 4 bytes
    alg: int
    public_key: bytes


def key_id(name: str, alg: int, public_key: bytes) -> bytes:
    # key ID = SHA-256(key name || 0x0A || signature type || public key)[:4]
    # surrogateescape: tlog-policy names are opaque octets, kept as read.
    raw_name = name.encode("utf-8", "surrogateescape")
    return sha256(raw_name + b"\n" + bytes([alg]) + public_key)[:4]


def _check_key_name(name: str, where: str) -> None:
    _check(name != "", f"{where}: empty key name")
    _check(
        not any(c.isspace() or c == "+" for c in name),
        f"{where}: key name {name!r} holds a space or '+'",
    )


def parse_vkey(vkey: str, where: str = "vkey") -> NoteKey:
    """``<name>+<hex8 key id>+<base64(type || public key)>``."""
    parts = vkey.split("+", 2)
    _check(len(parts) == 3, f"{where}: {vkey!r} is not name+keyid+key")
    name, kid_hex, key_b64 = parts
    _check_key_name(name, where)
    _check(bool(re.fullmatch(r"[0-9a-f]{8}", kid_hex)), f"{where}: bad key id {kid_hex!r}")
    raw = b64decode_strict(key_b64, where)
    _check(len(raw) >= 1, f"{where}: empty key")
    alg, pub = raw[0], raw[1:]
    if alg in (SIG_ED25519, SIG_COSIGNATURE_V1):
        _check(len(pub) == 32, f"{where}: Ed25519 key is {len(pub)} bytes, want 32")
    want = key_id(name, alg, pub)
    _check(
        bytes.fromhex(kid_hex) == want,
        f"{where}: key id {kid_hex} does not match the key, want {want.hex()}",
    )
    return NoteKey(name, want, alg, pub)


@dataclass(frozen=True, slots=True)
class NoteSignature:
    name: str
    key_id: bytes
    sig: bytes  # after the key id


@dataclass(frozen=True, slots=True)
class Note:
    text: str  # up to and including the final newline before the blank line
    signatures: tuple[NoteSignature, ...]


def parse_note(data: bytes, where: str) -> Note:
    try:
        s = data.decode("utf-8")
    except UnicodeDecodeError:
        raise _fail(f"{where}: note is not UTF-8") from None
    for c in s:
        _check(c == "\n" or c >= " ", f"{where}: note holds control character {c!r}")
    # The text is separated from the signatures by the last empty line.
    i = s.rfind("\n\n")
    _check(i >= 0, f"{where}: note has no blank line before its signatures")
    text, block = s[: i + 1], s[i + 2 :]
    _check(block.endswith("\n"), f"{where}: signature block does not end in a newline")
    lines = block[:-1].split("\n")
    _check(len(lines) <= _MAX_SIGNATURES, f"{where}: more than {_MAX_SIGNATURES} signatures")
    sigs = []
    for n, line in enumerate(lines, 1):
        w = f"{where}: signature line {n}"
        _check(line.startswith("\u2014 "), f"{w}: does not start with an em dash and space")
        parts = line[2:].split(" ")
        _check(len(parts) == 2, f"{w}: want '— <name> <base64>', got {line!r}")
        name, b64 = parts
        _check_key_name(name, w)
        raw = b64decode_strict(b64, w)
        _check(len(raw) > 4, f"{w}: signature of {len(raw)} bytes is too short")
        sigs.append(NoteSignature(name, raw[:4], raw[4:]))
    return Note(text, tuple(sigs))


def verify_note_sig(key: NoteKey, sig: NoteSignature, text: str, where: str) -> None:
    if key.alg == SIG_ED25519:
        ed25519_verify(key.public_key, sig.sig, text.encode(), where)
    elif key.alg == SIG_COSIGNATURE_V1:
        # c2sp.org/tlog-cosignature: u64 timestamp || 64-byte Ed25519 signature
        # over "cosignature/v1\ntime <ts>\n" || note text.
        _check(len(sig.sig) == 72, f"{where}: cosignature is {len(sig.sig)} bytes, want 72")
        ts = int.from_bytes(sig.sig[:8], "big")
        _check(ts <= 2**63 - 1, f"{where}: cosignature timestamp exceeds 2^63-1")
        msg = f"cosignature/v1\ntime {ts}\n".encode() + text.encode()
        ed25519_verify(key.public_key, sig.sig[8:], msg, where)
    else:
        raise _fail(f"{where}: signature type 0x{key.alg:02x} is not supported here")


# --------------------------------------------------------------------------
# Policy (c2sp.org/tlog-policy)


@dataclass(frozen=True, slots=True)
class Group:
    k: int
    members: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Policy:
    logs: tuple[NoteKey, ...]
    witnesses: dict[str, NoteKey]
    groups: dict[str, Group]
    quorum: str

    def met(self, cosigned: set[str]) -> bool:
        def witnessed(name: str) -> bool:
            if name in self.witnesses:
                return name in cosigned
            g = self.groups[name]
            return sum(witnessed(m) for m in g.members) >= g.k

        return self.quorum == "none" or witnessed(self.quorum)


_WS = re.compile(r"[ \t]+")


def parse_policy(data: bytes, where: str) -> Policy:
    for b in data:
        _check(
            b in (0x09, 0x0A) or 0x20 <= b <= 0x7E or b >= 0x80,
            f"{where}: byte 0x{b:02x} is not allowed in a policy",
        )
    _check(data == b"" or data.endswith(b"\n"), f"{where}: last line has no newline")
    text = data.decode("utf-8", errors="surrogateescape")
    logs: list[NoteKey] = []
    witnesses: dict[str, NoteKey] = {}
    groups: dict[str, Group] = {}
    quorum: str | None = None
    seen_keys: set[bytes] = set()
    for n, line in enumerate(text.split("\n")[:-1] if text else [], 1):
        w = f"{where}: line {n}"
        items = [x for x in _WS.split(line) if x]
        if not items or items[0].startswith("#"):
            continue
        kw, args = items[0], items[1:]
        if kw == "log":
            _check(1 <= len(args) <= 2, f"{w}: want 'log <vkey> [<url>]'")
            k = parse_vkey(args[0], w)
            _check(k.alg == SIG_ED25519, f"{w}: log key type 0x{k.alg:02x}, want 0x01")
            _check(k.public_key not in seen_keys, f"{w}: duplicate key")
            seen_keys.add(k.public_key)
            logs.append(k)
        elif kw == "witness":
            _check(2 <= len(args) <= 3, f"{w}: want 'witness <name> <vkey> [<url>]'")
            name = args[0]
            _check(name != "none", f"{w}: 'none' is reserved")
            _check(name not in witnesses and name not in groups, f"{w}: {name!r} redefined")
            k = parse_vkey(args[1], w)
            _check(k.public_key not in seen_keys, f"{w}: duplicate key")
            seen_keys.add(k.public_key)
            witnesses[name] = k
        elif kw == "group":
            _check(len(args) >= 3, f"{w}: want 'group <name> <k> <name>...'")
            name, kstr, members = args[0], args[1], tuple(args[2:])
            _check(name != "none", f"{w}: 'none' is reserved")
            _check(name not in witnesses and name not in groups, f"{w}: {name!r} redefined")
            _check(len(set(members)) == len(members), f"{w}: a member is listed twice")
            for m in members:
                _check(m in witnesses or m in groups, f"{w}: {m!r} is not defined above")
            if kstr == "all":
                k_ = len(members)
            elif kstr == "any":
                k_ = 1
            else:
                k_ = parse_decimal(kstr, w)
                _check(1 <= k_ <= len(members), f"{w}: threshold {k_} not in 1..{len(members)}")
            groups[name] = Group(k_, members)
        elif kw == "quorum":
            _check(len(args) == 1, f"{w}: want 'quorum <name>'")
            _check(quorum is None, f"{w}: second quorum line")
            q = args[0]
            _check(q == "none" or q in witnesses or q in groups, f"{w}: {q!r} is not defined above")
            quorum = q
        else:
            raise _fail(f"{w}: unknown keyword {kw!r}")
    _check(quorum is not None, f"{where}: no quorum line")
    assert quorum is not None
    return Policy(tuple(logs), witnesses, groups, quorum)


# --------------------------------------------------------------------------
# Checkpoints (c2sp.org/tlog-checkpoint)


@dataclass(frozen=True, slots=True)
class Checkpoint:
    origin: str
    size: int
    root: bytes
    text: str  # the signed note text
    cosigners: frozenset[str]


def verify_checkpoint(data: bytes, trust: Policy, where: str) -> Checkpoint:
    """The note is signed by a policy log key named as its origin, quorum met."""
    note = parse_note(data, where)
    _check(note.text.endswith("\n"), f"{where}: note text does not end in a newline")
    lines = note.text[:-1].split("\n")
    _check(len(lines) >= 3, f"{where}: checkpoint has {len(lines)} lines, want at least 3")
    for n, line in enumerate(lines, 1):
        _check(line != "", f"{where}: checkpoint line {n} is empty")
    origin = lines[0]
    size = parse_decimal(lines[1], f"{where}: tree size")
    _check(size < 2**40, f"{where}: tree size {size} beyond 2^40")
    root = b64decode_strict(lines[2], f"{where}: root hash")
    _check(len(root) == 32, f"{where}: root hash is {len(root)} bytes, want 32")

    known = {(k.name, k.key_id): k for k in trust.logs}
    witness_by_id = {(k.name, k.key_id): name for name, k in trust.witnesses.items()}
    known.update({(k.name, k.key_id): k for k in trust.witnesses.values()})
    log_ok = False
    cosigned: set[str] = set()
    for s in note.signatures:
        k = known.get((s.name, s.key_id))
        if k is None:
            continue  # signed-note: unknown keys are ignored
        w = f"{where}: signature by {s.name}+{s.key_id.hex()}"
        verify_note_sig(k, s, note.text, w)
        if (s.name, s.key_id) in witness_by_id:
            cosigned.add(witness_by_id[(s.name, s.key_id)])
        elif k.name == origin:
            log_ok = True
    _check(
        log_ok,
        f"{where}: no valid signature by a log key named {origin!r}; "
        f"trusted log keys: {[f'{k.name}+{k.key_id.hex()}' for k in trust.logs]}",
    )
    _check(trust.met(cosigned), f"{where}: witness quorum {trust.quorum!r} not met by {cosigned}")
    return Checkpoint(origin, size, root, note.text, frozenset(cosigned))


# --------------------------------------------------------------------------
# Merkle trees (RFC 6962 §2.1, RFC 9162 §2.1)


def leaf_hash(data: bytes) -> bytes:
    return sha256(b"\x00" + data)  # RFC 6962 §2.1: MTH({d}) = SHA-256(0x00 || d)


def node_hash(left: bytes, right: bytes) -> bytes:
    return sha256(b"\x01" + left + right)  # SHA-256(0x01 || MTH(left) || MTH(right))


EMPTY_ROOT = sha256(b"")


class Tree:
    """Every complete subtree hash of a list of leaves.

    ``levels[h][k]`` is MTH of leaves [k·2^h, (k+1)·2^h).
    """

    def __init__(self, leaf_hashes: list[bytes]) -> None:
        self.size = len(leaf_hashes)
        self.levels = [leaf_hashes]
        while len(self.levels[-1]) >= 2:
            below = self.levels[-1]
            self.levels.append(
                [node_hash(below[2 * k], below[2 * k + 1]) for k in range(len(below) // 2)]
            )

    def root(self, m: int) -> bytes:
        """MTH(D[0:m]), for 0 <= m <= size.

        RFC 6962 splits at the largest power of two k < n, so the tree of size
        m is the complete subtrees of m's binary digits, left to right, folded
        from the right.
        """
        assert 0 <= m <= self.size
        if m == 0:
            return EMPTY_ROOT
        parts = []
        start = 0
        for h in range(m.bit_length() - 1, -1, -1):
            if m >> h & 1:
                parts.append(self.levels[h][start >> h])
                start += 1 << h
        r = parts[-1]
        for p in reversed(parts[:-1]):
            r = node_hash(p, r)
        return r


def verify_inclusion(index: int, size: int, leaf: bytes, proof: list[bytes], root: bytes) -> None:
    """RFC 9162 §2.1.3.2, step by step. Raises VerificationError."""
    # 1. leaf_index must be < tree_size
    _check(0 <= index < size, f"inclusion: index {index} not below tree size {size}")
    _check(len(leaf) == 32, f"inclusion: leaf hash is {len(leaf)} bytes, want 32")
    _check(len(root) == 32, f"inclusion: root is {len(root)} bytes, want 32")
    for i, p in enumerate(proof):
        _check(len(p) == 32, f"inclusion: proof hash {i} is {len(p)} bytes, want 32")
    # 2.
    fn, sn = index, size - 1
    # 3.
    r = leaf
    # 4.
    for p in proof:
        _check(sn != 0, f"inclusion: proof has {len(proof)} hashes, too many")
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            if not fn & 1:
                while not fn & 1 and fn != 0:
                    fn >>= 1
                    sn >>= 1
        else:
            r = node_hash(r, p)
        fn >>= 1
        sn >>= 1
    # 5.
    _check(sn == 0, f"inclusion: proof has {len(proof)} hashes, too few")
    _check(
        r == root,
        f"inclusion: computed root {r.hex()} != checkpoint root {root.hex()} "
        f"(index {index}, size {size})",
    )


def verify_consistency(
    first: int, second: int, proof: list[bytes], first_hash: bytes, second_hash: bytes
) -> None:
    """RFC 9162 §2.1.4.2, step by step. Raises VerificationError."""
    w = f"consistency {first}->{second}"
    _check(first > 0, f"{w}: a proof from the empty tree is meaningless")
    _check(first <= second, f"{w}: first size beyond second")
    if first == second:
        _check(proof == [], f"{w}: equal sizes need an empty proof")
        _check(first_hash == second_hash, f"{w}: equal sizes but roots differ")
        return
    # 1.
    _check(proof != [], f"{w}: empty proof")
    for i, p in enumerate(proof):
        _check(len(p) == 32, f"{w}: proof hash {i} is {len(p)} bytes, want 32")
    # 2. If first is an exact power of 2, prepend first_hash.
    if first & (first - 1) == 0:
        proof = [first_hash, *proof]
    # 3.
    fn, sn = first - 1, second - 1
    # 4.
    while fn & 1:
        fn >>= 1
        sn >>= 1
    # 5.
    fr = sr = proof[0]
    # 6.
    for c in proof[1:]:
        _check(sn != 0, f"{w}: proof has too many hashes")
        if fn & 1 or fn == sn:
            fr = node_hash(c, fr)
            sr = node_hash(c, sr)
            if not fn & 1:
                while not fn & 1 and fn != 0:
                    fn >>= 1
                    sn >>= 1
        else:
            sr = node_hash(sr, c)
        fn >>= 1
        sn >>= 1
    # 7.
    _check(sn == 0, f"{w}: proof has too few hashes")
    _check(fr == first_hash, f"{w}: computed first root {fr.hex()} != {first_hash.hex()}")
    _check(sr == second_hash, f"{w}: computed second root {sr.hex()} != {second_hash.hex()}")


# --------------------------------------------------------------------------
# Tiles (c2sp.org/tlog-tiles v0.1.0, height 8)

TILE_HEIGHT = 8
TILE_WIDTH = 1 << TILE_HEIGHT


def tile_index_path(n: int) -> str:
    """Zero-padded 3-digit elements, all but the last prefixed with 'x'."""
    assert n >= 0
    digits = str(n)
    digits = "0" * (-len(digits) % 3) + digits
    groups = [digits[i : i + 3] for i in range(0, len(digits), 3)]
    return "/".join([*("x" + g for g in groups[:-1]), groups[-1]])


def tile_path(level: int | None, n: int, width: int | None = None) -> str:
    """Relative to ``log/``: ``tile/<L>/<N>[.p/<W>]``; level None is ``entries``."""
    lv = "entries" if level is None else str(level)
    p = f"tile/{lv}/{tile_index_path(n)}"
    return p if width is None else f"{p}.p/{width}"


def parse_tile_path(rel: str) -> tuple[int | None, int, int | None]:
    """Inverse of :func:`tile_path`; raises on any non-canonical form."""
    parts = rel.split("/")
    _check(len(parts) >= 3 and parts[0] == "tile", f"log/{rel}: not a tile path")
    if parts[1] == "entries":
        level: int | None = None
    else:
        level = parse_decimal(parts[1], f"log/{rel}: level")
        _check(level <= 63, f"log/{rel}: level {level} beyond 63")
    rest = parts[2:]
    width: int | None = None
    if len(rest) >= 2 and rest[-2].endswith(".p"):
        width = parse_decimal(rest[-1], f"log/{rel}: width")
        _check(1 <= width <= 255, f"log/{rel}: width {width} not in 1..255")
        rest = [*rest[:-2], rest[-2][:-2]]
    ok = all(re.fullmatch(r"x[0-9]{3}", e) for e in rest[:-1]) and bool(
        re.fullmatch(r"[0-9]{3}", rest[-1])
    )
    _check(ok, f"log/{rel}: index is not in x001/x234/067 form")
    n = int("".join(e.lstrip("x") for e in rest))
    _check(tile_path(level, n, width) == rel, f"log/{rel}: non-canonical tile path")
    return level, n, width


def tiles_for_size(size: int) -> set[str]:
    """Every tile and entry bundle a tree of this size is served as."""
    out: set[str] = set()
    level = 0
    while size >> (TILE_HEIGHT * level) >= 1:
        hashes = size >> (TILE_HEIGHT * level)  # hashes at this level
        full, partial = hashes // TILE_WIDTH, hashes % TILE_WIDTH
        for n in range(full):
            out.add(tile_path(level, n))
            if level == 0:
                out.add(tile_path(None, n))
        if partial:
            out.add(tile_path(level, full, partial))
            if level == 0:
                out.add(tile_path(None, full, partial))
        level += 1
    return out


def decode_bundle(data: bytes, want: int, where: str) -> list[bytes]:
    """Big-endian uint16 length-prefixed entries, exactly ``want`` of them."""
    out: list[bytes] = []
    i = 0
    while i < len(data):
        _check(i + 2 <= len(data), f"{where}: truncated length prefix at byte {i}")
        n = int.from_bytes(data[i : i + 2], "big")
        _check(i + 2 + n <= len(data), f"{where}: entry {len(out)} runs past the end")
        out.append(data[i + 2 : i + 2 + n])
        i += 2 + n
    _check(len(out) == want, f"{where}: {len(out)} entries, want {want}")
    return out


def encode_bundle(entries: Iterable[bytes]) -> bytes:
    return b"".join(len(e).to_bytes(2, "big") + e for e in entries)


# --------------------------------------------------------------------------
# Leaves and dreams (docs/protocol.md §1–§3)

ENTRY_TYPES = {"fact", "decision", "preference", "lesson", "rule", "warning", "theory", "plan"}
CONFIDENCES = {"confirmed", "unconfirmed", "theory"}
REASONS = {"author-request", "legal", "abuse"}
SIGNED_FIELDS = ("author", "title", "summary", "entries", "tags", "lineage", "consent")


def _keys(obj: Any, required: set[str], optional: set[str], where: str) -> None:
    _check(isinstance(obj, dict), f"{where}: not an object")
    have = set(obj)
    _check(required <= have, f"{where}: missing {sorted(required - have)}")
    _check(
        have <= required | optional, f"{where}: unknown fields {sorted(have - required - optional)}"
    )


def _string(x: Any, lo: int, hi: int, where: str) -> None:
    _check(isinstance(x, str), f"{where}: not a string")
    _check(lo <= len(x) <= hi, f"{where}: {len(x)} chars, want {lo}..{hi}")


# docs/protocol.md §1.1, written from its table: Default_Ignorable_Code_Point as
# listed there (Unicode 15.0.0), and the refused general categories, here from
# the running Python's unicodedata (so, on a Python whose Unicode version is not
# 15.0.0, the few code points assigned in one version and not the other are
# judged by that version: a witness, not a second copy of the tables).
_DEFAULT_IGNORABLE = (
    (0x00AD, 0x00AD), (0x034F, 0x034F), (0x061C, 0x061C), (0x115F, 0x1160),
    (0x17B4, 0x17B5), (0x180B, 0x180F), (0x200B, 0x200F), (0x202A, 0x202E),
    (0x2060, 0x206F), (0x3164, 0x3164), (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8), (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A),
    (0xE0000, 0xE0FFF),
)  # fmt: skip
_REFUSED_CATEGORIES = {"Cc", "Cf", "Co", "Cs", "Cn", "Zl", "Zp"}


def _refused(cp: int) -> bool:
    return any(lo <= cp <= hi for lo, hi in _DEFAULT_IGNORABLE) or (
        unicodedata.category(chr(cp)) in _REFUSED_CATEGORIES
    )


def _excepted(cps: list[int], i: int, newline: bool) -> bool:
    """§1.1's exceptions, read loosely where the table names emoji or joining data
    this witness does not carry: a selector after a symbol, punctuation or digit
    (every emoji-variation base is one, but for U+2139, named); ZWJ between
    symbols (Extended_Pictographic ones are So; modifiers Sk), or after a virama;
    ZWNJ after a virama or between two right-to-left letters (the joining scripts
    are Arabic, Syriac, N'Ko, Mandaic …)."""
    cp, before = cps[i], cps[i - 1] if i else -1
    after = cps[i + 1] if i + 1 < len(cps) else -1
    cat = unicodedata.category(chr(before))[:2] if before >= 0 else ""
    if cp == 0x0A:
        return newline
    if cp in (0xFE0E, 0xFE0F):
        return before in (0x23, 0x2A, 0x2139) or cat in {"So", "Sm", "Po", "Pd", "Nd"}
    virama = before >= 0 and unicodedata.combining(chr(before)) == 9
    if cp == 0x200D:
        emoji_before = cat in {"So", "Sk"} or (before == 0xFE0F and _excepted(cps, i - 1, newline))
        return virama or (emoji_before and after >= 0 and unicodedata.category(chr(after)) == "So")
    if cp == 0x200C:
        return virama or (
            before >= 0
            and after >= 0
            and {unicodedata.bidirectional(chr(before)), unicodedata.bidirectional(chr(after))}
            <= {"AL", "R"}
        )
    return False


def _text(x: Any, lo: int, hi: int, where: str, *, newline: bool = False) -> None:
    """§1's bounds and §1.1's Unicode policy for one text field."""
    _string(x, lo, hi, where)
    cps = [ord(c) for c in x]
    for i, cp in enumerate(cps):
        _check(
            not _refused(cp) or _excepted(cps, i, newline),
            f"{where}: holds U+{cp:04X} at character {i} (docs/protocol.md §1.1)",
        )


def _is_one_of(x: Any, allowed: set[str]) -> bool:
    return isinstance(x, str) and x in allowed


def key_id_of(pub: bytes) -> str:
    return "sha256:" + hashlib.sha256(pub).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class Leaf:
    index: int
    kind: str
    obj: dict[str, Any]


def parse_leaf(index: int, data: bytes) -> Leaf:
    where = f"leaf {index}"
    obj = load_json_strict(data, where)
    try:
        canon = jcs(obj)
    except Exception as e:  # rfc8785 raises its own error family
        raise _fail(f"{where}: cannot be canonicalized: {e}") from None
    _check(canon == data, f"{where}: not JCS-canonical: {data!r}, want {canon!r}")
    _check(isinstance(obj, dict), f"{where}: not an object")
    v = obj.get("v")
    _check(type(v) is int and v == 1, f"{where}: 'v' is {v!r}, want 1")
    kind = obj.get("kind")
    if kind == "dream":
        _keys(obj, {"v", "kind", "id", "commitment"}, set(), where)
        _check(isinstance(obj["id"], str) and bool(_HEX16.fullmatch(obj["id"])), f"{where}: id")
        c = obj["commitment"]
        _check(isinstance(c, str) and bool(_HEX64.fullmatch(c)), f"{where}: commitment")
    elif kind == "key":
        _keys(obj, {"v", "kind", "keyId", "publicKey", "author"}, set(), where)
        pub = b64url_decode_strict(obj["publicKey"], f"{where}: publicKey")
        _check(len(pub) == 32, f"{where}: publicKey is {len(pub)} bytes, want 32")
        _check(_decode_point(pub) is not None, f"{where}: publicKey is not a curve point")
        _check(not is_small_order(pub), f"{where}: publicKey has small order")
        _check(
            obj["keyId"] == key_id_of(pub),
            f"{where}: keyId {obj['keyId']!r}, want {key_id_of(pub)!r}",
        )
        _text(obj["author"], 1, 64, f"{where}: author")
    elif kind == "erasure":
        _keys(obj, {"v", "kind", "id", "reason"}, set(), where)
        _check(isinstance(obj["id"], str) and bool(_HEX16.fullmatch(obj["id"])), f"{where}: id")
        _check(_is_one_of(obj["reason"], REASONS), f"{where}: reason {obj['reason']!r}")
    else:
        raise _fail(f"{where}: kind {kind!r}, want dream, key or erasure")
    return Leaf(index, kind, obj)


def check_dream(d: Any, where: str) -> None:
    """The field rules of docs/protocol.md §1 (types and bounds) and §1.1 (Unicode)."""
    _keys(
        d, {"author", "title", "entries", "consent", "sig"}, {"summary", "tags", "lineage"}, where
    )
    _text(d["author"], 1, 64, f"{where}.author")
    _text(d["title"], 1, 120, f"{where}.title")
    if "summary" in d:
        _text(d["summary"], 0, 800, f"{where}.summary", newline=True)
    entries = d["entries"]
    _check(isinstance(entries, list) and 1 <= len(entries) <= 50, f"{where}.entries: 1..50")
    for i, e in enumerate(entries):
        w = f"{where}.entries[{i}]"
        _keys(e, {"text", "type", "confidence"}, {"source"}, w)
        _text(e["text"], 1, 300, f"{w}.text", newline=True)
        _check(_is_one_of(e["type"], ENTRY_TYPES), f"{w}.type {e['type']!r}")
        _check(_is_one_of(e["confidence"], CONFIDENCES), f"{w}.confidence {e['confidence']!r}")
        if "source" in e:
            _text(e["source"], 0, 300, f"{w}.source")
    if "tags" in d:
        tags = d["tags"]
        _check(isinstance(tags, list) and len(tags) <= 8, f"{where}.tags: 0..8")
        for i, t in enumerate(tags):
            _text(t, 1, 32, f"{where}.tags[{i}]")
    if "lineage" in d:
        lin = d["lineage"]
        _keys(lin, {"generation"}, {"parent"}, f"{where}.lineage")
        g = lin["generation"]
        _check(type(g) is int and 0 <= g <= 1000, f"{where}.lineage.generation {g!r}")
        if "parent" in lin:
            _text(lin["parent"], 1, 64, f"{where}.lineage.parent")
    consent = d["consent"]
    _keys(consent, {"share", "anonymize"}, {"derivatives"}, f"{where}.consent")
    _check(consent["share"] is True, f"{where}.consent.share must be true")
    _check(isinstance(consent["anonymize"], bool), f"{where}.consent.anonymize: not a bool")
    if "derivatives" in consent:
        _check(isinstance(consent["derivatives"], bool), f"{where}.consent.derivatives")
    _keys(d["sig"], {"alg", "keyId", "publicKey", "value"}, set(), f"{where}.sig")
    _check(len(jcs(d)) <= 64 * 1024, f"{where}: beyond 64 KiB")


def verify_dream_signature(d: dict[str, Any], where: str) -> tuple[str, bytes]:
    """Returns (dream id, public key)."""
    sig = d["sig"]
    _check(sig["alg"] == "ed25519", f"{where}.sig.alg {sig['alg']!r}, want 'ed25519'")
    pub = b64url_decode_strict(sig["publicKey"], f"{where}.sig.publicKey")
    value = b64url_decode_strict(sig["value"], f"{where}.sig.value")
    _check(
        sig["keyId"] == key_id_of(pub),
        f"{where}.sig.keyId {sig['keyId']!r}, want {key_id_of(pub)!r}",
    )
    signed = jcs({k: d[k] for k in SIGNED_FIELDS if k in d})
    ed25519_verify(pub, value, signed, f"{where}.sig")
    return hashlib.sha256(value).hexdigest()[:16], pub


def parse_tlog_proof(data: bytes, where: str) -> tuple[bytes | None, int, list[bytes], bytes]:
    """c2sp.org/tlog-proof@v1 -> (extra, index, hashes, checkpoint bytes)."""
    pos = 0

    def line() -> str:
        nonlocal pos
        j = data.find(b"\n", pos)
        _check(j >= 0, f"{where}: truncated at byte {pos}")
        try:
            s = data[pos:j].decode("ascii")
        except UnicodeDecodeError:
            raise _fail(f"{where}: non-ASCII header line at byte {pos}") from None
        pos = j + 1
        return s

    _check(line() == "c2sp.org/tlog-proof@v1", f"{where}: first line is not c2sp.org/tlog-proof@v1")
    s = line()
    extra = None
    if s.startswith("extra "):
        extra = b64decode_strict(s[len("extra ") :], f"{where}: extra")
        s = line()
    _check(s.startswith("index "), f"{where}: want 'index <n>', got {s!r}")
    index = parse_decimal(s[len("index ") :], f"{where}: index")
    hashes: list[bytes] = []
    while (s := line()) != "":
        h = b64decode_strict(s, f"{where}: proof hash {len(hashes)}")
        _check(len(h) == 32, f"{where}: proof hash {len(hashes)} is {len(h)} bytes, want 32")
        hashes.append(h)
    _check(len(hashes) <= 64, f"{where}: {len(hashes)} proof hashes")
    return extra, index, hashes, data[pos:]


# --------------------------------------------------------------------------
# The site


@dataclass
class Report:
    origin: str = ""
    size: int = 0
    root: str = ""  # hex
    published_sizes: list[int] = field(default_factory=list)
    checkpoints: int = 0  # signed notes verified (current, checkpoints/, in proofs)
    cosignatures: int = 0
    tiles: int = 0  # hash tile files checked
    entry_bundles: int = 0  # entry bundle files checked
    leaves: int = 0
    dream_leaves: int = 0
    key_leaves: int = 0
    erasure_leaves: int = 0
    proofs: int = 0  # dreams/<id>/proof.tlog-proof
    consistency_proofs: int = 0
    records: int = 0  # dreams/<id>/record.json
    erased: int = 0  # proofs whose record is gone and whose erasure is logged
    ignored: list[str] = field(default_factory=list)  # files under log/ not checked

    def __str__(self) -> str:
        lines = [
            f"origin {self.origin}",
            f"size {self.size}, root {self.root}",
            f"published sizes {self.published_sizes}",
            f"{self.checkpoints} checkpoints ({self.cosignatures} cosignatures)",
            f"{self.tiles} hash tiles, {self.entry_bundles} entry bundles",
            f"{self.leaves} leaves: {self.dream_leaves} dream, {self.key_leaves} key, "
            f"{self.erasure_leaves} erasure",
            f"{self.proofs} inclusion proofs, {self.consistency_proofs} consistency proofs",
            f"{self.records} records, {self.erased} erased dreams",
        ]
        if self.ignored:
            lines.append(f"not checked: {self.ignored}")
        return "\n".join(lines)


def _read(path: Path, site: Path) -> bytes:
    _check(path.is_file(), f"{path.relative_to(site)}: missing")
    return path.read_bytes()


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file()) if root.is_dir() else []


def verify_site(site: Path | str, vkey: str | None = None) -> Report:
    site = Path(site)
    log = site / "log"
    report = Report()

    # 0. Trust: a pinned vkey, or the site's own policy.
    policy_path = log / "policy"
    policy = parse_policy(policy_path.read_bytes(), "log/policy") if policy_path.is_file() else None
    if vkey is None:
        _check(policy is not None, "log/policy: missing, and no vkey was given")
        assert policy is not None
        _check(len(policy.logs) >= 1, "log/policy: no log line")
        trust = policy
    else:
        pinned = parse_vkey(vkey.strip(), "pinned vkey")
        _check(pinned.alg == SIG_ED25519, "pinned vkey: not an Ed25519 (0x01) note key")
        if policy is not None:
            _check(
                pinned in policy.logs,
                f"log/policy: does not list the pinned log key {pinned.name}+{pinned.key_id.hex()}",
            )
            trust = Policy((pinned,), policy.witnesses, policy.groups, policy.quorum)
        else:
            trust = Policy((pinned,), {}, {}, "none")

    def checkpoint(data: bytes, where: str) -> Checkpoint:
        cp = verify_checkpoint(data, trust, where)
        report.checkpoints += 1
        report.cosignatures += len(cp.cosigners)
        return cp

    # 1. The current checkpoint.
    current_bytes = _read(log / "checkpoint", site)
    current = checkpoint(current_bytes, "log/checkpoint")
    n = current.size
    report.origin, report.size, report.root = current.origin, n, current.root.hex()

    # 2. Every published checkpoint.
    published: dict[int, Checkpoint] = {}
    for p in _files(log / "checkpoints"):
        rel = p.relative_to(site).as_posix()
        _check(p.parent == log / "checkpoints", f"{rel}: unexpected nesting")
        size = parse_decimal(p.name, f"{rel}: file name")
        cp = checkpoint(p.read_bytes(), rel)
        _check(cp.size == size, f"{rel}: holds size {cp.size}, want {size}")
        _check(cp.origin == current.origin, f"{rel}: origin {cp.origin!r} != {current.origin!r}")
        published[size] = cp
    _check(bool(published), "log/checkpoints/: no checkpoints published")
    sizes = sorted(published)
    report.published_sizes = sizes
    _check(
        sizes[-1] == n,
        f"log/checkpoint: size {n}, but the largest published checkpoint is {sizes[-1]}",
    )
    _check(
        (log / "checkpoints" / str(n)).read_bytes() == current_bytes,
        f"log/checkpoint differs from log/checkpoints/{n}",
    )

    # 3. Entry bundles -> leaves -> tree; every tile file against it.
    leaves: list[bytes] = []
    for k in range(n // TILE_WIDTH + 1):
        width = min(TILE_WIDTH, n - k * TILE_WIDTH)
        if width == 0:
            break
        rel = tile_path(None, k, None if width == TILE_WIDTH else width)
        leaves += decode_bundle(_read(log / rel, site), width, f"log/{rel}")
    assert len(leaves) == n
    tree = Tree([leaf_hash(d) for d in leaves])
    for m in sizes:
        got = tree.root(m)
        _check(
            got == published[m].root,
            f"log/checkpoints/{m}: root {published[m].root.hex()}, but the entry "
            f"bundles give {got.hex()}",
        )

    required: set[str] = set()
    for m in sizes:
        required |= tiles_for_size(m)
    present: set[str] = set()
    for p in _files(log / "tile"):
        rel = p.relative_to(log).as_posix()
        present.add(rel)
        level, k, partial = parse_tile_path(rel)
        count = partial or TILE_WIDTH
        data = p.read_bytes()
        if level is None:
            _check(
                (k * TILE_WIDTH + count) <= n,
                f"log/{rel}: entries beyond the current tree size {n}",
            )
            want = encode_bundle(leaves[k * TILE_WIDTH : k * TILE_WIDTH + count])
            decode_bundle(data, count, f"log/{rel}")
            _check(data == want, f"log/{rel}: entries differ from the log's leaves")
            report.entry_bundles += 1
        else:
            height = TILE_HEIGHT * level
            have = tree.levels[height] if height < len(tree.levels) else []
            _check(
                k * TILE_WIDTH + count <= len(have),
                f"log/{rel}: hashes beyond the current tree size {n}",
            )
            _check(len(data) == 32 * count, f"log/{rel}: {len(data)} bytes, want {32 * count}")
            for i in range(count):
                got, want_h = data[32 * i : 32 * i + 32], have[k * TILE_WIDTH + i]
                _check(
                    got == want_h,
                    f"log/{rel}: hash {i} is {got.hex()}, recomputed {want_h.hex()}",
                )
            report.tiles += 1
    missing = sorted(required - present)
    _check(not missing, f"log/: missing tiles needed by a published size: {missing[:10]}")

    # 4. Leaves.
    parsed = [parse_leaf(i, d) for i, d in enumerate(leaves)]
    report.leaves = len(parsed)
    dream_at: dict[str, int] = {}
    key_at: dict[str, Leaf] = {}
    erased_at: dict[str, int] = {}
    # docs/protocol.md §3: a key leaf retires every earlier key of its author
    # from its own index on. keyId -> the index of the key leaf that retired it.
    retired_at: dict[str, int] = {}
    latest_key: dict[str, str] = {}  # author -> keyId of their latest key leaf
    for leaf in parsed:
        o = leaf.obj
        if leaf.kind == "dream":
            report.dream_leaves += 1
            _check(o["id"] not in dream_at, f"leaf {leaf.index}: dream {o['id']} logged twice")
            dream_at[o["id"]] = leaf.index
        elif leaf.kind == "key":
            report.key_leaves += 1
            prev = key_at.get(o["keyId"])
            _check(
                prev is None,
                f"leaf {leaf.index}: keyId {o['keyId']} already logged at leaf "
                f"{prev.index if prev else ''} (docs/protocol.md §3: each keyId once)",
            )
            key_at[o["keyId"]] = leaf
            # §3: a later key leaf of an author retires the earlier ones, except
            # under the reserved name `anonymous` (§1.2: one-time keys).
            before = latest_key.get(o["author"])
            if before is not None and o["author"] != "anonymous":
                retired_at[before] = leaf.index
            latest_key[o["author"]] = o["keyId"]
        else:
            report.erasure_leaves += 1
            _check(
                o["id"] in dream_at,
                f"leaf {leaf.index}: erasure of {o['id']}, which no earlier dream leaf holds",
            )
            _check(o["id"] not in erased_at, f"leaf {leaf.index}: {o['id']} erased twice")
            erased_at[o["id"]] = leaf.index

    # 5. Consistency of every earlier published checkpoint with the current one.
    for p in _files(log / "consistency"):
        rel = p.relative_to(site).as_posix()
        _check(p.parent == log / "consistency", f"{rel}: unexpected nesting")
        m = parse_decimal(p.name, f"{rel}: file name")
        _check(m in published and m < n, f"{rel}: {m} is not an earlier published size")
    for m in sizes:
        if m == n or m == 0:
            continue  # RFC 9162: a proof from the empty tree is meaningless
        rel = f"log/consistency/{m}"
        text = _read(site / rel, site).decode("ascii", errors="replace")
        _check(text == "" or text.endswith("\n"), f"{rel}: last line has no newline")
        proof = [
            b64decode_strict(s, f"{rel}: line {i}") for i, s in enumerate(text.split("\n")[:-1], 1)
        ]
        for i, h in enumerate(proof, 1):
            _check(len(h) == 32, f"{rel}: line {i} is {len(h)} bytes, want 32")
        try:
            verify_consistency(m, n, proof, published[m].root, current.root)
        except VerificationError as e:
            raise _fail(f"{rel}: {e}") from None
        report.consistency_proofs += 1

    # 6. Proofs and records.
    proved: set[str] = set()
    dreams = site / "dreams"
    for d in sorted(dreams.iterdir()) if dreams.is_dir() else []:
        proof_p, record_p = d / "proof.tlog-proof", d / "record.json"
        if not d.is_dir() or not (proof_p.exists() or record_p.exists()):
            continue
        did = d.name
        rel = f"dreams/{did}"
        _check(bool(_HEX16.fullmatch(did)), f"{rel}: directory name is not a dream id")
        extra, index, hashes, cp_bytes = parse_tlog_proof(
            _read(proof_p, site), f"{rel}/proof.tlog-proof"
        )
        w = f"{rel}/proof.tlog-proof"
        cp = checkpoint(cp_bytes, f"{w} (checkpoint)")
        _check(cp.origin == current.origin, f"{w}: origin {cp.origin!r}")
        _check(
            cp.size in published and cp.text == published[cp.size].text,
            f"{w}: its checkpoint (size {cp.size}) is not a published one",
        )
        _check(
            cp_bytes == (log / "checkpoints" / str(cp.size)).read_bytes(),
            f"{w}: its checkpoint is not byte for byte log/checkpoints/{cp.size} "
            "(docs/protocol.md §5)",
        )
        _check(index < cp.size, f"{w}: index {index} not below size {cp.size}")
        admitted = min(s for s in sizes if s > index)
        _check(
            cp.size == admitted,
            f"{w}: checkpoint size {cp.size}, want {admitted} (the first published "
            f"checkpoint holding index {index})",
        )
        _check(extra is not None, f"{w}: no extra line (the leaf data)")
        assert extra is not None
        _check(extra == leaves[index], f"{w}: extra differs from leaf {index} in the log")
        try:
            verify_inclusion(index, cp.size, leaf_hash(extra), hashes, cp.root)
        except VerificationError as e:
            raise _fail(f"{w}: {e}") from None
        leaf = parsed[index]
        _check(
            leaf.kind == "dream" and leaf.obj["id"] == did,
            f"{w}: leaf {index} is not the dream leaf of {did}",
        )
        proved.add(did)
        report.proofs += 1

        if record_p.exists():
            w = f"{rel}/record.json"
            _check(did not in erased_at, f"{w}: present, but leaf {erased_at.get(did)} erased it")
            rec = load_json_strict(_read(record_p, site), w)
            _keys(rec, {"format", "id", "index", "salt", "dream"}, set(), w)
            _check(rec["format"] == "dreampool-record/v1", f"{w}: format {rec['format']!r}")
            _check(rec["id"] == did, f"{w}: id {rec['id']!r}, want {did!r}")
            _check(
                type(rec["index"]) is int and rec["index"] == index,
                f"{w}: index {rec['index']!r}, the proof says {index}",
            )
            salt = b64url_decode_strict(rec["salt"], f"{w}: salt")
            _check(len(salt) == 32, f"{w}: salt is {len(salt)} bytes, want 32")
            dream = rec["dream"]
            check_dream(dream, f"{w}: dream")
            commitment = hashlib.sha256(jcs({"dream": dream, "salt": rec["salt"]})).hexdigest()
            want_leaf = jcs({"v": 1, "kind": "dream", "id": did, "commitment": commitment})
            _check(
                want_leaf == extra,
                f"{w}: recomputed leaf {want_leaf!r} differs from the logged {extra!r}",
            )
            got_id, pub = verify_dream_signature(dream, f"{w}: dream")
            _check(got_id == did, f"{w}: signature gives id {got_id}, want {did}")
            kid = dream["sig"]["keyId"]
            key = key_at.get(kid)
            _check(
                key is not None and key.index < index,
                f"{w}: no key leaf for {kid} before leaf {index}",
            )
            assert key is not None
            _check(
                key.obj["publicKey"] == b64url(pub),
                f"{w}: key leaf {key.index} holds another public key for {kid}",
            )
            _check(
                dream["author"] == key.obj["author"],
                f"{w}: author {dream['author']!r}, but key leaf {key.index} of {kid} is "
                f"author {key.obj['author']!r} (docs/protocol.md §3: one key, one author)",
            )
            retired = retired_at.get(kid)
            _check(
                retired is None or index < retired,
                f"{w}: dream signed by key {kid}, which key leaf {retired} (a later key of "
                f"{dream['author']!r}) retired before leaf {index} (docs/protocol.md §3)",
            )
            report.records += 1
        else:
            _check(
                did in erased_at and erased_at[did] > index,
                f"{rel}: record.json missing, and no later erasure leaf for {did}",
            )
            report.erased += 1

    # 7. Every dream leaf has its proof.
    unproved = sorted(set(dream_at) - proved)
    _check(not unproved, f"dreams/: no proof.tlog-proof for dream leaves {unproved[:10]}")

    known = {"checkpoint", "policy"}
    for p in _files(log):
        top = p.relative_to(log).parts[0]
        if top not in known | {"checkpoints", "consistency", "tile"}:
            report.ignored.append(p.relative_to(site).as_posix())
    return report


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 3):
        print("usage: independent_verifier.py SITE [VKEY]", file=sys.stderr)
        return 2
    try:
        report = verify_site(Path(argv[1]), argv[2] if len(argv) == 3 else None)
    except VerificationError as e:
        print(f"independent-verifier: error: {e}", file=sys.stderr)
        return 1
    print(report)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
