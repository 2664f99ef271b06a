"""Strict base64 codecs (RFC 4648).

Lenient decoders accept padding where none belongs, ignore stray characters
and let several strings decode to the same bytes. In a signed format that is
malleability, so each decoder here accepts exactly one spelling of a value:
it re-encodes what it decoded and refuses anything that differs.
"""

from __future__ import annotations

import base64
import binascii
import re

_B64URL = re.compile(r"[A-Za-z0-9_-]*")
_B64 = re.compile(r"(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?")


def b64url_encode(data: bytes) -> str:
    """URL-safe base64 without padding (RFC 4648 §5)."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def b64url_decode(text: str) -> bytes:
    """Decode canonical unpadded URL-safe base64; ``ValueError`` otherwise."""
    if not _B64URL.fullmatch(text) or len(text) % 4 == 1:
        raise ValueError("not unpadded URL-safe base64 (RFC 4648 §5)")
    data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if b64url_encode(data) != text:
        raise ValueError("non-canonical base64url (unused bits set)")
    return data


def b64_encode(data: bytes) -> str:
    """Standard base64 with padding (RFC 4648 §4)."""
    return base64.b64encode(data).decode("ascii")


def b64_decode(text: str) -> bytes:
    """Decode canonical padded standard base64; ``ValueError`` otherwise."""
    if not _B64.fullmatch(text):
        raise ValueError("not padded standard base64 (RFC 4648 §4)")
    try:
        data = base64.b64decode(text, validate=True)
    except binascii.Error:
        raise ValueError("not padded standard base64 (RFC 4648 §4)") from None
    if b64_encode(data) != text:
        raise ValueError("non-canonical base64 (unused bits set)")
    return data
