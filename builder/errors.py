"""The one error family.

Pure code raises a subclass of :class:`DreampoolError`; only the CLI catches
it, prints ``dreampool: error: …`` and ``dreampool: hint: …`` and exits
non-zero. Any other exception is a bug and shows its traceback.

Messages are lowercase, name the file (and JSON pointer, and line where one
exists), say what was wanted, and never echo the offending value: a value can
be a secret, so errors give its size instead.

What a message does carry (a file name, a key name from a hostile file) can
hold any character, so everything printed passes :func:`printable` on its way
out: a :class:`Problem` as text, the CLI's lines, GitHub annotations and the job
summary (:mod:`builder.cli.summary`). No terminal escape, bidi override or
invisible character reaches a terminal, a CI log or a reviewer.
"""

from __future__ import annotations

from dataclasses import dataclass

from builder.formats import unicodepolicy

_SHORT = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def printable(text: str) -> str:
    """``text`` with every character that is not plainly visible spelled as an escape.

    Escaped: C0 and C1 controls, DEL (so no terminal escape sequence, and no new
    line that could pass for a line of output), format characters (bidi controls,
    zero-width and tag characters, the soft hyphen), line and paragraph
    separators, spaces other than U+0020, lone surrogates, private-use and
    unassigned code points (all of which :meth:`str.isprintable` calls
    unprintable), and every other code point docs/protocol.md §1.1 refuses out of
    context (:func:`builder.formats.unicodepolicy.is_hidden`: default-ignorable letters and
    marks such as variation selectors and Hangul fillers, code points unassigned
    in the policy's Unicode version), emoji selectors and joiners included.
    They read as ``\\t``, ``\\n``, ``\\r``, ``\\x1b``, ``\\u202e``, ``\\U000e0041``.
    Everything else, non-ASCII letters included, is kept. Backslashes are kept
    too, so text escaped once is not escaped again."""
    if text.isascii() and text.isprintable():
        return text
    return "".join(
        ch if ch.isprintable() and not unicodepolicy.is_hidden(ch) else _escape(ch) for ch in text
    )


def _escape(ch: str) -> str:
    if ch in _SHORT:
        return _SHORT[ch]
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


class DreampoolError(Exception):
    """Base of every error the CLI reports to the user."""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True, slots=True)
class Problem:
    """One rule a file breaks: where (file, JSON pointer, line) and what."""

    file: str
    pointer: str
    rule: str
    line: int | None = None

    def __str__(self) -> str:
        """``file:line: /pointer: rule``, through :func:`printable`."""
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        if self.pointer:
            return printable(f"{where}: {self.pointer}: {self.rule}")
        return printable(f"{where}: {self.rule}")


class InputError(DreampoolError):
    """A file is malformed, oversized or breaks the dream schema.

    Holds every :class:`Problem` found, so ``check`` can list them all.
    """

    def __init__(self, problems: list[Problem], *, hint: str | None = None) -> None:
        if not problems:
            raise ValueError("InputError needs at least one problem")
        self.problems = list(problems)
        message = str(problems[0])
        if len(problems) > 1:
            message += f" (and {len(problems) - 1} more problem(s))"
        super().__init__(message, hint=hint)


class SignatureError(DreampoolError):
    """A signature, public key or key id does not verify."""


class KeyStoreError(DreampoolError):
    """A private key is missing, unreadable or in the wrong place."""


class PoolError(DreampoolError):
    """The pool's configuration or key directory refuses an operation."""


class LogError(DreampoolError):
    """The log state is inconsistent; carries the evidence in the message."""


class VerificationError(DreampoolError):
    """A light-client check failed; ``step`` is the docs/protocol.md §5 step number."""

    def __init__(self, message: str, *, step: int | None = None, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.step = step
