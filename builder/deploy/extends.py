"""Whether the site's log extends the one the bucket serves (checked before any upload).

A deploy replaces ``log/checkpoint``, the object every reader and monitor
starts from. It must never publish a checkpoint that does not extend the live
one: a smaller one is a rollback, one of the same size with another root or
one of another log key is a fork, and either is what a monitor and a browser
that pinned the log report as the log rewriting its history. A site built
from an older log state (a stale checkout, an old ``site`` folder) or from
another log entirely would otherwise be deployed without a word, and the
newer dreams' files deleted as "no longer in the site".

The live checkpoint is read from the bucket and is untrusted: it counts only
once it verifies under the site's own ``log/policy`` (its log key's signature;
witness cosignatures are not needed for this). Then the site's checkpoint
must extend it: the same size and root, or a larger size with the site's
``log/consistency/<live size>`` proving it (RFC 9162 §2.1.4.2). A live
checkpoint that does not verify is refused too (it is another log's, or
damaged): the hint says to deploy elsewhere or remove it by hand.
"""

from __future__ import annotations

from builder.deploy import DeployError
from builder.deploy.local import Site
from builder.deploy.plan import CHECKPOINT
from builder.errors import DreampoolError
from builder.formats.checkpoint import Checkpoint, open_checkpoint, parse_checkpoint
from builder.formats.merkle import verify_consistency
from builder.formats.note import split_note
from builder.formats.policy import parse_policy
from builder.readers.lightclient import parse_consistency_proof

POLICY = "log/policy"


def check(site: Site, live: bytes | None, where: str) -> None:
    """Raise :class:`DeployError` unless the site's checkpoint extends ``live``
    (the bytes of the bucket's ``log/checkpoint``; None: the bucket has none)."""
    if live is None:
        return
    new = _signed(site, site.read(CHECKPOINT), f"{site.generation / CHECKPOINT}")
    try:
        old = _signed(site, live, f"{where}/{CHECKPOINT}")
    except DeployError as exc:
        raise DeployError(
            f"{exc.message}: a deploy never replaces a checkpoint it cannot prove the "
            "site's log extends",
            hint=f"deploy this pool to a new prefix; if {where}/ really is to hold it "
            f"instead of the log it serves, delete {where}/{CHECKPOINT} by hand first",
        ) from None
    if old.size > new.size:
        raise DeployError(
            f"{where}/{CHECKPOINT} has size {old.size}; the site's is smaller, "
            f"{new.size}: a deploy never rolls the log back",
            hint="build from the latest log state (pull main, run `dreampool build`), then deploy",
        )
    if old.size == 0:
        return
    if old.size == new.size:
        if old.root != new.root:
            raise DeployError(
                f"{where}/{CHECKPOINT} and the site's checkpoint both have size {new.size} "
                "but different roots: the site's log is a fork of the live one",
                hint="deploy only a site built from the log state the bucket serves",
            )
        return
    rel = f"log/consistency/{old.size}"
    try:
        if rel not in site.files:
            raise DreampoolError(f"the site has no {rel}")
        proof = parse_consistency_proof(site.read(rel))
        verify_consistency(old.size, new.size, old.root, new.root, proof)
    except DreampoolError as exc:
        raise DeployError(
            f"the site's log (size {new.size}) is not proved to extend "
            f"{where}/{CHECKPOINT} (size {old.size}): {exc.message}",
            hint="deploy only a site built from the log state the bucket serves, or later",
        ) from None


def _signed(site: Site, data: bytes, name: str) -> Checkpoint:
    """The checkpoint ``data``, verified under the site's log/policy's log keys."""
    try:
        policy = parse_policy(site.read(POLICY))
        origin = parse_checkpoint(split_note(data)[0]).origin
        problem = f"no log key of the site's {POLICY} for {origin}"
        for log in policy.logs:
            if log.verifier.name != origin:
                continue
            try:
                return open_checkpoint(data, log.verifier)[0]
            except DreampoolError as exc:
                problem = exc.message
    except DreampoolError as exc:
        problem = exc.message
    except ValueError:  # bytes that are not even text
        problem = "not a signed note"
    raise DeployError(
        f"{name}: not a checkpoint signed by the site's log key ({problem})",
        hint="run `dreampool build` again",
    )
