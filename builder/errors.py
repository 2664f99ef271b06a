"""The one error family.

Pure code raises a subclass of :class:`DreampoolError`; only the CLI catches
it, prints ``dreampool: error: …`` and ``dreampool: hint: …`` and exits
non-zero. Any other exception is a bug and shows its traceback.

Messages are lowercase, name the file (and JSON pointer, and line where one
exists), say what was wanted, and never echo the offending value: a value can
be a secret, so errors give its size instead.
"""

from __future__ import annotations

from dataclasses import dataclass


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
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        if self.pointer:
            return f"{where}: {self.pointer}: {self.rule}"
        return f"{where}: {self.rule}"


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
    """A light-client check failed; ``step`` is the PROTOCOL.md §5 step number."""

    def __init__(self, message: str, *, step: int | None = None, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.step = step
