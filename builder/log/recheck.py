"""``dreampool recheck``: today's admission rules over every logged dream.

A build takes a dream the signed log already commits to by its commitment
(docs/protocol.md §3.1): its signature and the
redaction review ran when it was admitted, under the rules of that day. A
rule added since (a new redaction kind, a new Unicode policy, a tighter key
rule) is therefore never applied to it by a build. This module applies them:
for every logged dream that is not erased it runs the whole admission review
again, as for a new dream (the strict parse with the Unicode policy, the
signature, the key rules, the anonymity rules of docs/protocol.md §1.2 over
all logged dreams as one batch, the redaction review of the text and of what
a reader sees), and returns each dream today's rules would refuse, as a
candidate for erasure (`dreampool erase`, :mod:`builder.log.erase`). A logged
dream stays in the log whatever this finds: only an erasure takes its text
off the site.

Read-only, and nothing printed here (:mod:`builder.cli` prints). Each finding
names the file, the JSON pointer and the kind of what was found, never the
text that matched. The log is proven against its signed checkpoints first
(:func:`builder.log.logbuild.prove`), so only dreams it really logged are judged.
A key fork the build settles by the log's order is settled here the same way.
A pool the build would refuse as it stands (a logged dream's file missing
with no erasure recorded, a lost salt, a file that no longer commits to its
leaf) is bad input: :class:`InputError`, as for any other broken file.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from builder import parallel
from builder.content import anonymity, pool
from builder.errors import InputError, Problem, SignatureError
from builder.formats import dream as dreamfmt
from builder.log import logbuild
from builder.text import readerview, redact

ERASE_DOC = "docs/operators.md#erase-a-dream"


@dataclass(frozen=True, slots=True)
class Candidate:
    """A logged dream today's rules refuse: its id, its leaf's index, its
    file, and every finding (file, pointer, kind; never the matched text)."""

    dream_id: str
    index: int
    file: str
    findings: tuple[Problem, ...]


@dataclass(frozen=True, slots=True)
class Report:
    checked: int  # logged dreams, not erased, whose files were reviewed
    candidates: list[Candidate]


# What a worker hands back for one dream: "ok" or "found" with the findings
# (and the dream, once its signature verified, for the key rules), "erasing"
# for a dream whose erasure is recorded, or "broken" with the problem that
# makes the pool bad input.
_Outcome = tuple[str, tuple[Problem, ...], dreamfmt.Dream | None]


def recheck(content: Path) -> Report:
    """Review every logged, not erased dream of the pool at ``content`` by
    today's admission rules; see the module docstring. Raises
    :class:`~builder.errors.DreampoolError` for a pool that is bad input."""
    config = pool.load_config(content)
    directory, key_problems = pool.load_keys(content)
    if key_problems:  # a fork a stale check let in: the log's order settles it, as in a build
        order = logbuild.logged_keys(content)
        key_problems, _ = pool.settle_forks(content, directory, key_problems, order)
    if key_problems:
        raise InputError(
            key_problems, hint="fix the key directory (content/keys) first; see `dreampool check`"
        )
    proven = logbuild.prove(content, origin=config.origin)
    logged = proven.dreams()
    folder = content / "dreams"
    jobs = [(str(folder / f"{i}.json"), commit) for i, _, commit in logged]
    outcomes = parallel.map_ordered(_review, jobs)
    broken: list[Problem] = []
    reviewed: list[tuple[str, int, str, list[Problem], dreamfmt.Dream | None]] = []
    for (dream_id, index, _), (file, _), (status, found, d) in zip(
        logged, jobs, outcomes, strict=True
    ):
        if status == "erasing":
            continue
        if status == "broken":
            broken.extend(found)
            continue
        findings = list(found)
        if d is not None:
            findings += _key_findings(d, file, directory)
        reviewed.append((dream_id, index, file, findings, d))
    # The anonymity rules (docs/protocol.md §1.2), as admission applies them to
    # a batch: here the batch is every logged dream, so a one-time key that
    # signed two of them marks both.
    anonymous = [d for *_, d in reviewed if d is not None]
    refused = anonymity.refusals(anonymous, ())
    candidates: list[Candidate] = []
    for dream_id, index, file, findings, d in reviewed:
        if d is not None and d.id in refused:
            pointer, rule = refused[d.id]
            findings.append(Problem(file, pointer, rule))
        if findings:
            candidates.append(Candidate(dream_id, index, file, tuple(findings)))
    checked = len(reviewed)
    if broken:
        raise InputError(
            broken,
            hint="the build refuses the pool as it is: restore these files from git history "
            "(`dreampool check` lists every problem), then run recheck again",
        )
    return Report(checked, candidates)


def _review(job: tuple[str, str]) -> _Outcome:
    """One logged dream's file by today's rules (on a worker: plain values)."""
    file, commit = job
    path = Path(file)
    try:
        data = pool.read_regular(path)
    except FileNotFoundError:
        erasure = path.parent.parent / "erasures" / path.name
        if erasure.is_file():
            return "erasing", (), None  # erased, and the next build logs it
        return "broken", (Problem(file, "", _MISSING),), None
    except InputError as exc:
        return "broken", tuple(exc.problems), None
    except OSError as exc:
        return "broken", (Problem(file, "", f"cannot be read: {exc.strerror or exc}"),), None
    salt = pool.salt_beside(path)
    if salt is None:
        return "broken", (Problem(file, "", _NO_SALT),), None
    # Is this the logged dream? Its commitment, over the strict reader's value
    # alone: today's field rules may refuse what was logged, and that is a finding.
    try:
        obj = dreamfmt.load_json(data, file)
    except InputError as exc:
        return "found", tuple(exc.problems), None
    if dreamfmt.commitment(obj, salt) != commit:
        rule = f"changed after it was logged: its leaf commits to {commit}, the file does not"
        return "broken", (Problem(file, "", rule),), None
    try:
        d = dreamfmt.parse(data, file)
    except (InputError, SignatureError) as exc:
        return "found", tuple(pool.problems_of(exc, file)), None
    found = [
        Problem(file, c.pointer, f"holds personal data ({c.kind}) that redaction now replaces")
        for c in redact.changes(d.body)  # what redact_dream would change, without the copy
    ]
    found += [
        Problem(file, f.pointer, f"shows personal data ({f.kind}) once rendered")
        for f in readerview.findings(d.body)
    ]
    return ("found" if found else "ok"), tuple(found), d


_MISSING = "is logged but missing, and no erasure is recorded (content/erasures)"
_NO_SALT = "has lost its salt (the .salt file beside it), so it cannot be matched to its leaf"


def _key_findings(d: dreamfmt.Dream, file: str, directory: pool.KeyDirectory) -> list[Problem]:
    """The key rules for a dream whose signature verified: its key is in the
    key directory, registered to its author. (A key retired after the dream
    was logged does not count against it: docs/protocol.md §3.)"""
    if d.key_id not in directory.keys:
        return [Problem(file, "/sig/keyId", f"key {d.key_id} is not in the key directory")]
    rule = pool.check_key_rules(d, file, directory)
    return [Problem(file, "/author", rule)] if rule else []
