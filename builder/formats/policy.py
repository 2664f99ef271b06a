"""Trust policies, according to c2sp.org/tlog-policy.

A policy says which checkpoints a verifier accepts: one signed by any of the
listed logs and cosigned by witnesses according to the quorum rule.

Format
------

A line-based file; every line ends in a newline. Items are separated by runs
of ASCII spaces and tabs; leading and trailing whitespace is allowed. Empty
lines and lines whose first non-blank character is ``#`` are ignored. The
only octets allowed are tab, newline, 0x20-0x7E and 0x80-0xFF. Directives::

    log <vkey> [<url>]                  a log; its key name is its origin
    witness <name> <vkey> [<url>]       a witness, named for this file only
    group <name> all|any|<k> <name>...  k of the n members (all: k = n, any: k = 1)
    quorum <name>|none                  exactly once: the witness or group required

A group or the quorum may only name witnesses and groups defined on earlier
lines, so groups cannot be circular; each member appears at most once in a
group; ``none`` is predefined for the quorum and is no valid member. Witnesses
and groups share one namespace. No two logs, and no two witnesses, may wrap
the same public key. Log keys are Ed25519 note keys (type 0x01, docs/protocol.md
§4); witness keys are Ed25519 cosignature keys (type 0x04, tlog-cosignature).

A pool's ``log/policy`` (docs/protocol.md §4), with keys shortened::

    log example.org/dreams+1f2e3d4c+AQ... https://example.org/log/
    witness w1 witness.example.com/w1+8d66cf3f+BJ...
    witness w2 witness2.example/w+0a1b2c3d+BO...
    group both all w1 w2
    quorum both

or, with no witnesses, ``quorum none`` after the log line.

Choices this module makes where the spec leaves room (each is stricter):

* the file is UTF-8 (the spec allows any octets 0x80-0xFF) and must end in a
  newline; a group's numeric k is written without a leading zero;
* two witnesses may not share a key *name*: :func:`check_quorum` counts the
  witnesses by the key names :func:`builder.formats.checkpoint.open_checkpoint`
  returns, and a shared name would make one cosignature count twice;
* at most :data:`MAX_ENTRIES` logs, witnesses and groups each (the spec asks
  for at least 32) and :data:`MAX_POLICY_SIZE` bytes.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal, TypeVar

from builder.errors import DreampoolError, VerificationError
from builder.formats.checkpoint import (
    Checkpoint,
    CosignatureVerifier,
    open_checkpoint,
    parse_checkpoint,
    parse_cosigner_key,
)
from builder.formats.note import Verifier, parse_verifier_key, split_note

_K = TypeVar("_K")

MAX_POLICY_SIZE = 64 * 1024
MAX_ENTRIES = 256
NONE = "none"

# tlog-policy §Character set: tab, newline, 0x20-0x7E and 0x80-0xFF only.
_BAD_OCTET = re.compile(rb"[\x00-\x08\x0a-\x1f\x7f]")
# tlog-policy §Structure: whitespace is ASCII space and tab only.
_WHITESPACE = re.compile(r"[ \t]+")
_BAD_TOKEN = re.compile(r"[\x00-\x20\x7f]")
_DECIMAL = re.compile(r"[1-9][0-9]{0,8}")


class PolicyError(DreampoolError):
    """A policy file is malformed or breaks a tlog-policy rule."""


@dataclass(frozen=True, slots=True)
class PolicyLog:
    """``log <vkey> [<url>]``."""

    verifier: Verifier
    url: str | None = None


@dataclass(frozen=True, slots=True)
class PolicyWitness:
    """``witness <name> <vkey> [<url>]``."""

    name: str
    verifier: CosignatureVerifier
    url: str | None = None


@dataclass(frozen=True, slots=True)
class PolicyGroup:
    """``group <name> all|any|<k> <member>...``; threshold keeps the form written."""

    name: str
    threshold: int | Literal["all", "any"]
    members: tuple[str, ...]

    @property
    def required(self) -> int:
        """k: how many members must have witnessed for the group to have."""
        if self.threshold == "all":
            return len(self.members)
        if self.threshold == "any":
            return 1
        return self.threshold


@dataclass(frozen=True, slots=True)
class Policy:
    """A parsed policy. Construction checks every tlog-policy rule, so a Policy always formats."""

    logs: tuple[PolicyLog, ...]
    witnesses: tuple[PolicyWitness, ...]
    groups: tuple[PolicyGroup, ...]
    quorum: str

    def __post_init__(self) -> None:
        checker = _Checker()
        for log in self.logs:
            checker.add_log(log)
        for witness in self.witnesses:
            checker.add_witness(witness)
        for group in self.groups:
            checker.add_group(group)
        checker.set_quorum(self.quorum)
        checker.finish()

    @property
    def log_verifiers(self) -> tuple[Verifier, ...]:
        """The keys of every accepted log."""
        return tuple(log.verifier for log in self.logs)

    @property
    def witness_verifiers(self) -> tuple[CosignatureVerifier, ...]:
        """The keys of every known witness."""
        return tuple(w.verifier for w in self.witnesses)


def parse_policy(data: bytes | str) -> Policy:
    """Parse a policy file strictly; every refusal names its line."""
    raw = data.encode("utf-8", errors="surrogatepass") if isinstance(data, str) else data
    if len(raw) > MAX_POLICY_SIZE:
        raise PolicyError(f"policy is {len(raw)} bytes, want at most {MAX_POLICY_SIZE}")
    if raw and not raw.endswith(b"\n"):
        raise PolicyError(
            "policy: the last line has no newline (tlog-policy §Structure)",
            hint="end the file with a newline",
        )
    lines = raw.split(b"\n")[:-1]
    checker = _Checker()
    logs: list[PolicyLog] = []
    witnesses: list[PolicyWitness] = []
    groups: list[PolicyGroup] = []
    quorum: str | None = None
    for number, line_bytes in enumerate(lines, 1):
        try:
            bad = _BAD_OCTET.search(line_bytes)
            if bad:
                raise PolicyError(
                    f"octet 0x{line_bytes[bad.start()]:02x} is not allowed "
                    "(only tab, newline, 0x20-0x7e and 0x80-0xff)"
                )
            try:
                line = line_bytes.decode("utf-8")
            except UnicodeDecodeError:
                raise PolicyError("line is not valid UTF-8") from None
            items = [item for item in _WHITESPACE.split(line) if item]
            if not items or items[0].startswith("#"):
                continue
            directive, args = items[0], items[1:]
            if directive == "log":
                log = _parse_log(args)
                checker.add_log(log)
                logs.append(log)
            elif directive == "witness":
                witness = _parse_witness(args)
                checker.add_witness(witness)
                witnesses.append(witness)
            elif directive == "group":
                group = _parse_group(args)
                checker.add_group(group)
                groups.append(group)
            elif directive == "quorum":
                if len(args) != 1:
                    raise PolicyError("want quorum <name>")
                checker.set_quorum(args[0])
                quorum = args[0]
            else:
                raise PolicyError(
                    "unknown directive, want log, witness, group or quorum",
                    hint="comments start with #",
                )
        except PolicyError as e:
            raise PolicyError(f"policy line {number}: {e.message}", hint=e.hint) from None
    try:
        checker.finish()
    except PolicyError as e:
        raise PolicyError(f"policy: {e.message}", hint=e.hint) from None
    assert quorum is not None  # finish() refuses a policy without one
    return Policy(tuple(logs), tuple(witnesses), tuple(groups), quorum)


def format_policy(policy: Policy) -> str:
    """The policy file text: logs, witnesses, groups, then the quorum."""
    lines = []
    for log in policy.logs:
        lines.append(_join("log", log.verifier.vkey, log.url))
    for w in policy.witnesses:
        lines.append(_join("witness", w.name, w.verifier.vkey, w.url))
    for g in policy.groups:
        lines.append(_join("group", g.name, str(g.threshold), *g.members))
    lines.append(_join("quorum", policy.quorum))
    return "".join(line + "\n" for line in lines)


def check_quorum(policy: Policy, verified_witness_names: Iterable[str]) -> None:
    """Raise :class:`VerificationError` unless the witnesses that cosigned meet the quorum.

    verified_witness_names are the *key names* of verified cosignatures, as
    :func:`builder.formats.checkpoint.open_checkpoint` returns them: a policy witness
    has witnessed when its key's name is among them. Requires the names to
    come from cosignatures verified with this policy's witness keys.
    """
    if policy.quorum == NONE:
        return
    cosigned = set(verified_witness_names)
    witnessed: dict[str, bool] = {}
    for w in policy.witnesses:
        witnessed[w.name] = w.verifier.name in cosigned
    # Groups only name earlier definitions, so one pass in file order suffices.
    for g in policy.groups:
        witnessed[g.name] = sum(witnessed[m] for m in g.members) >= g.required
    if not witnessed[policy.quorum]:
        count = sum(witnessed[w.name] for w in policy.witnesses)
        raise VerificationError(
            f"witness quorum {policy.quorum} is not met: {count} of "
            f"{len(policy.witnesses)} policy witnesses cosigned the checkpoint",
            step=1,
            hint="fetch a checkpoint with more cosignatures, or wait for the witnesses",
        )


def verify_checkpoint(policy: Policy, data: bytes) -> tuple[Checkpoint, tuple[str, ...]]:
    """docs/protocol.md §5 step 1: a checkpoint signed by a policy log with its origin, quorum met.

    Returns the checkpoint and the key names of the witnesses that cosigned.
    """
    # The unverified origin only selects which log keys to try.
    text, sigs = split_note(data)
    origin = parse_checkpoint(text).origin
    signed = {(s.name, s.key_id) for s in sigs}
    candidates = [
        log.verifier
        for log in policy.logs
        if log.verifier.name == origin and (log.verifier.name, log.verifier.key_id) in signed
    ]
    if not candidates:
        raise VerificationError(
            "checkpoint carries no signature by a log of the policy with its origin",
            step=1,
            hint="the checkpoint comes from a log this policy does not trust",
        )
    cp, names = open_checkpoint(data, candidates[0], policy.witness_verifiers)
    check_quorum(policy, names)
    return cp, names


def _parse_log(args: list[str]) -> PolicyLog:
    if len(args) not in (1, 2):
        raise PolicyError("want log <vkey> [<url>]")
    return PolicyLog(_key(parse_verifier_key, args[0]), args[1] if len(args) == 2 else None)


def _parse_witness(args: list[str]) -> PolicyWitness:
    if len(args) not in (2, 3):
        raise PolicyError("want witness <name> <vkey> [<url>]")
    verifier = _key(parse_cosigner_key, args[1])
    return PolicyWitness(args[0], verifier, args[2] if len(args) == 3 else None)


def _parse_group(args: list[str]) -> PolicyGroup:
    if len(args) < 3:
        raise PolicyError("want group <name> all|any|<k> <name>... with at least one member")
    name, k, members = args[0], args[1], tuple(args[2:])
    threshold: int | Literal["all", "any"]
    if k in ("all", "any"):
        threshold = "all" if k == "all" else "any"
    elif _DECIMAL.fullmatch(k):
        threshold = int(k)
    else:
        raise PolicyError("group threshold must be all, any or a decimal k >= 1")
    return PolicyGroup(name, threshold, members)


def _key(parse: Callable[[str], _K], vkey: str) -> _K:
    try:
        return parse(vkey)
    except DreampoolError as e:
        raise PolicyError(e.message, hint=e.hint) from None


class _Checker:
    """The tlog-policy rules, applied definition by definition in file order."""

    def __init__(self) -> None:
        self.names: set[str] = set()  # witnesses and groups share one namespace
        self.log_keys: set[bytes] = set()
        self.witness_keys: set[bytes] = set()
        self.witness_key_names: set[str] = set()
        self.counts = {"log": 0, "witness": 0, "group": 0}
        self.quorum: str | None = None

    def _count(self, kind: str) -> None:
        self.counts[kind] += 1
        if self.counts[kind] > MAX_ENTRIES:
            raise PolicyError(f"more than {MAX_ENTRIES} {kind} lines")

    def _define(self, name: str) -> None:
        _check_token(name, "name")
        if name == NONE:
            raise PolicyError("the name none is predefined")
        if name in self.names:
            raise PolicyError("name is already defined (witnesses and groups share names)")
        self.names.add(name)

    def add_log(self, log: PolicyLog) -> None:
        self._count("log")
        if log.url is not None:
            _check_token(log.url, "url")
        # tlog-policy §Defining a log: "Duplicate logs ... are not allowed".
        if log.verifier.public_key in self.log_keys:
            raise PolicyError("duplicate log: another log line has the same public key")
        self.log_keys.add(log.verifier.public_key)

    def add_witness(self, w: PolicyWitness) -> None:
        self._count("witness")
        if w.url is not None:
            _check_token(w.url, "url")
        # tlog-policy §Defining a witness: "Duplicate witnesses ... are not allowed".
        if w.verifier.public_key in self.witness_keys:
            raise PolicyError("duplicate witness: another witness line has the same public key")
        if w.verifier.name in self.witness_key_names:
            raise PolicyError(
                "two witness keys share a key name, so their cosignatures cannot be told apart"
            )
        self._define(w.name)
        self.witness_keys.add(w.verifier.public_key)
        self.witness_key_names.add(w.verifier.name)

    def add_group(self, g: PolicyGroup) -> None:
        self._count("group")
        if not g.members:
            raise PolicyError("a group needs at least one member")
        if len(set(g.members)) != len(g.members):
            raise PolicyError("a group lists a member twice")
        for m in g.members:
            if m == NONE:
                raise PolicyError("none is not a valid group member")
            if m not in self.names:
                raise PolicyError(
                    "group member is not a witness or group defined on an earlier line"
                )
        if isinstance(g.threshold, int) and not (1 <= g.threshold <= len(g.members)):
            raise PolicyError(
                f"group threshold {g.threshold} must be between 1 and {len(g.members)}, its members"
            )
        if not isinstance(g.threshold, int) and g.threshold not in ("all", "any"):
            raise PolicyError("group threshold must be all, any or a number")
        self._define(g.name)

    def set_quorum(self, name: str) -> None:
        if self.quorum is not None:
            raise PolicyError("a policy has exactly one quorum line")
        if name != NONE and name not in self.names:
            raise PolicyError(
                "quorum names no witness or group defined on an earlier line",
                hint="use quorum none to require no cosignature",
            )
        self.quorum = name

    def finish(self) -> None:
        if self.quorum is None:
            raise PolicyError(
                "no quorum line (a policy must have exactly one)",
                hint="add quorum none when no witness is required",
            )


def _check_token(value: str, what: str) -> None:
    if not value or _BAD_TOKEN.search(value) or value.startswith("#"):
        raise PolicyError(f"{what} must be non-empty, hold no whitespace and not start with #")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise PolicyError(f"{what} is not valid UTF-8") from None


def _join(*items: str | None) -> str:
    return " ".join(item for item in items if item is not None)
