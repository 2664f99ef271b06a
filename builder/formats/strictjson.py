"""Strict, bounded JSON reading and RFC 8785 canonical bytes.

Python's ``json`` module accepts far more than a signed format can afford:
duplicate keys (last wins, so two readers can see two different objects),
``NaN``/``Infinity``, lone surrogates, integers of any size and unbounded
nesting. :func:`loads` refuses each of them before any value is used:

* UTF-8 only, no byte order mark (RFC 8259 §8.1);
* at most ``max_bytes`` bytes and ``max_depth`` levels of nesting, checked on
  the raw text before the parser recurses;
* no duplicate object member names (RFC 8259 §4 "SHOULD be unique";
  RFC 8785 §3.1 requires it for canonical input);
* no ``NaN``, ``Infinity`` or number that overflows to infinity;
* integers within ±(2^53−1) (RFC 8785 §3.2.2.3: I-JSON, RFC 7493 §2.2);
* no lone surrogate in any string or name (RFC 7493 §2.1).

Errors are :class:`JSONError` with a line number where one is known, and never
contain the offending value.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any

import rfc8785

MAX_SAFE_INTEGER = 2**53 - 1
DEFAULT_MAX_BYTES = 64 * 1024
DEFAULT_MAX_DEPTH = 32

_SURROGATE = re.compile("[\ud800-\udfff]")
# A lone surrogate reaches a parsed string only through a \uD800-\uDFFF
# escape (the UTF-8 decoder refuses encoded surrogates): where the text holds
# no such escape, walking the value for one (5% of a dream's check) is skipped.
# A match ("\\ud800" too, an escaped backslash) only means the walk runs.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_INTERN_MAX = 16  # values this short (entry types, confidences) repeat across dreams


class JSONError(ValueError):
    """Input is not strict JSON; ``line`` is 1-based where known."""

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.line = line


def loads(
    data: bytes,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_depth: int = DEFAULT_MAX_DEPTH,
) -> Any:
    """Parse strict JSON from bytes; raise :class:`JSONError` on anything loose."""
    if len(data) > max_bytes:
        raise JSONError(f"file is {len(data)} bytes, the limit is {max_bytes}")
    if data.startswith(b"\xef\xbb\xbf"):
        raise JSONError("starts with a UTF-8 byte order mark (BOM); save the file without it", 1)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise JSONError(f"not valid UTF-8 at byte {exc.start}", line) from None
    _check_depth(text, max_depth)
    try:
        value = json.loads(
            text,
            object_pairs_hook=_no_duplicates,
            parse_constant=_no_constant,
            parse_int=_bounded_int,
            parse_float=_finite_float,
        )
    except JSONError as exc:
        if exc.line is None:
            exc.line = _line_of_refused_token(text)
        raise
    except json.JSONDecodeError as exc:
        raise JSONError(f"not valid JSON: {exc.msg} (column {exc.colno})", exc.lineno) from None
    except RecursionError:  # pragma: no cover - _check_depth bounds nesting first
        raise JSONError(f"nested deeper than {max_depth} levels") from None
    if _SURROGATE_ESCAPE.search(text):
        _check_surrogates(value)
    return value


def canonical(value: Any) -> bytes:
    """RFC 8785 (JCS) canonical UTF-8 bytes of a JSON value.

    Values without floats and with no key outside the BMP (every dream, leaf
    and statement) go through the C encoder, which gives the same bytes for
    them (:func:`_plain`); anything else through ``rfc8785``."""
    if _plain(value):
        try:
            text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
            return text.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate: rfc8785 refuses it below
            pass
    return rfc8785.dumps(value)


_SAFE_INT = 2**53 - 1
_ASTRAL = re.compile("[\U00010000-\U0010ffff]")


def _plain(value: Any) -> bool:
    """Whether ``json.dumps(sort_keys=True, separators=(",", ":"),
    ensure_ascii=False)`` of ``value`` is its JCS form (RFC 8785 §3.2):

    * keys sort the same: Python compares code points, JCS UTF-16 code units,
      which agree unless a key holds a character outside the BMP;
    * strings escape the same set, ``"``, ``\\`` and U+0000–U+001F, as
      \\b \\t \\n \\f \\r or lower-case \\u00xx, everything else raw;
    * integers print the same within ±(2^53 − 1), and there are no floats
      (ECMAScript number formatting is rfc8785's job).
    """
    kind = type(value)
    if kind is str or kind is bool or value is None:
        return True
    if kind is int:
        return bool(-_SAFE_INT <= value <= _SAFE_INT)
    if kind is dict:
        return all(
            type(k) is str and (k.isascii() or not _ASTRAL.search(k)) and _plain(v)
            for k, v in value.items()
        )
    if kind is list or kind is tuple:
        return all(_plain(v) for v in value)
    return False


def is_canonical(data: bytes) -> bool:
    """Whether ``data`` is exactly the JCS form of the JSON it holds."""
    try:
        return canonical(loads(data, max_bytes=max(len(data), 1))) == data
    except (JSONError, rfc8785.CanonicalizationError):
        return False


def _check_depth(text: str, max_depth: int) -> None:
    # A cheap bound first: without that many brackets the depth cannot exceed it.
    if text.count("[") + text.count("{") <= max_depth:
        return
    depth = 0
    in_string = False
    escaped = False
    line = 1
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > max_depth:
                raise JSONError(f"nested deeper than {max_depth} levels", line)
        elif ch in "]}":
            depth -= 1
        elif ch == "\n":
            line += 1


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            shown = key if len(key) <= 64 and not _SURROGATE.search(key) else f"<{len(key)} chars>"
            raise JSONError(f"duplicate member name {shown!r} in one object")
        # Interned, names and short values: a build holds every dream's body,
        # and without this each holds its own "text", "type", "fact",
        # "likely"… (a third of a body's memory).
        if type(value) is str and len(value) <= _INTERN_MAX:
            value = sys.intern(value)
        result[sys.intern(key)] = value
    return result


# A JSON token outside strings: a string (skipped), a number, or a constant
# the parser refuses (RFC 8259 §6, §7). Only read on the way to an error.
_TOKEN = re.compile(
    r'"(?:[^"\\]|\\.)*"|(-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?|NaN|-?Infinity)'
)


def _line_of_refused_token(text: str) -> int | None:
    """The line of the first number or constant outside strings that the
    parser's hooks refuse (NaN, Infinity, an integer beyond 2^53 - 1, a
    number that overflows), which the hooks cannot see: the error then names
    its line as a syntax error does (a new user's audit, 23rd session)."""
    for match in _TOKEN.finditer(text):
        token = match.group(1)
        if token is None:
            continue
        try:
            if token in ("NaN", "Infinity", "-Infinity"):
                _no_constant(token)
            elif any(c in token for c in ".eE"):
                _finite_float(token)
            else:
                _bounded_int(token)
        except JSONError:
            return text.count("\n", 0, match.start()) + 1
    return None


def _no_constant(name: str) -> Any:
    raise JSONError(f"{name} is not JSON (RFC 8259 §6 allows only finite numbers)")


def _bounded_int(digits: str) -> int:
    # 2^53-1 has 16 digits. Check the length before int(): beyond 4,300 digits
    # int() raises a bare ValueError (CPython's int_max_str_digits guard), and
    # converting a long run costs quadratic time anyway.
    if len(digits.lstrip("-")) > 16:
        raise JSONError(f"integer of {len(digits)} digits is beyond ±(2^53-1) (RFC 7493 §2.2)")
    value = int(digits)
    if abs(value) > MAX_SAFE_INTEGER:
        raise JSONError(f"integer of {len(digits)} digits is beyond ±(2^53-1) (RFC 7493 §2.2)")
    return value


def _finite_float(digits: str) -> float:
    value = float(digits)
    if value in (float("inf"), float("-inf")):
        raise JSONError("number overflows to infinity")
    return value


def _check_surrogates(value: Any) -> None:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item):
                raise JSONError("string holds a lone surrogate (\\ud800-\\udfff), not Unicode text")
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


# --- the shapes a strict decoder accepts ------------------------------------------
#
# For readers of JSON this package wrote itself (the build store's rows): each
# returns its value if it has exactly that shape, else raises TypeError.


def as_list(v: Any, n: int | None = None) -> list[Any]:
    """``v`` if it is a list (of ``n`` items, when given)."""
    if not isinstance(v, list) or (n is not None and len(v) != n):
        raise TypeError("not a list of the right length")
    return v


def as_int(v: Any) -> int:
    """``v`` if it is an int (never a bool or a float)."""
    if type(v) is not int:
        raise TypeError("not an integer")
    return v


def as_str(v: Any) -> str:
    """``v`` if it is a str."""
    if not isinstance(v, str):
        raise TypeError("not a string")
    return v
