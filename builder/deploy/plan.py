"""What a deploy uploads and deletes, and in which order (pure).

A plan compares the site the build made (the live generation's manifest:
path → digest, size) with the remote manifest (:mod:`builder.deploy.remote`:
what the bucket holds) and splits the work into four phases, run one after
the other:

1. **new and changed objects the new checkpoint needs**
   (:func:`_needed_first`) and that do not name it: the log (tiles, entry
   bundles) first, then the dreams' records, then ``static/``;
2. **the checkpoint**, ``log/checkpoint``, then the consistency proofs
   ``log/consistency/<m>`` (each proves m to the current size, so it is right
   only beside the new checkpoint: :func:`_proves_to_now`; between the
   checkpoint's PUT and theirs a reader's step 5 still fails, a window the
   protocol's mutable path leaves), then the rest of ``log/`` (what names
   the new root: ``log/checkpoints/<size>``, ``log/``), the dreams' proofs,
   their pages, and every other page (the home page, the archive, tags,
   feeds, the API, ``llms.txt``, the agents' digests): a page goes up only
   once what it links and names is live;
3. **the remote manifest**, listing everything now in the bucket;
4. **deletions** of what the site no longer has, then the manifest again.

Why readers never see a broken state: a verifier starts from
``log/checkpoint`` and fetches only what that checkpoint needs. Everything
the new checkpoint needs (tiles, bundles, records) is uploaded in phase 1,
before it is published in phase 2; the proofs and pages are uploaded after
the checkpoint, each after what it links, so a reader who follows one finds
the checkpoint it names live, and a page linked from another is there.
Deletions come last, after the checkpoint that no longer needs the object is
live, so an erased dream's record disappears only once the checkpoint
recording its erasure is published. Nothing a published
checkpoint needs is deleted at all (:func:`needed_by_the_log`): full tiles
and bundles, ``log/checkpoints/N`` and ``log/consistency/M`` stay even if a
site lost them, and a partial tile goes only once its full tile is in the
site (C2SP tlog-tiles, "Partial Tiles": a log MAY delete a partial tile
"once the corresponding full tile is either available").

Why a deploy killed at any point and run again ends complete: the remote
manifest only ever lists objects whose upload finished (:mod:`builder.deploy.push`
adds a path after its PUT succeeded and writes the manifest every
:data:`builder.deploy.push.FLUSH_EVERY` uploads and at every phase's end),
and a deleted path leaves the manifest only after its DELETE. Run again, the
plan compares the site with that manifest: what was uploaded is not sent
again, what was in flight is (a PUT of the same bytes to the same key is
harmless), deletions not yet done are done (a DELETE of a missing key
succeeds). A manifest that cannot be read means "the bucket holds nothing
known": everything is uploaded; :func:`builder.deploy.push.deploy` lists the
bucket and gives the plan only the listed objects under ``dreams/`` that the
site lacks (an erased dream's files), so those are deleted in phase 4 and
nothing else unknown is.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from builder.deploy import remote
from builder.deploy.headers import RULES_VERSION

CHECKPOINT = "log/checkpoint"
Local = Mapping[str, tuple[str, int]]  # path → (hex digest, size)


@dataclass(frozen=True)
class Plan:
    first: list[str]  # phase 1, in upload order
    second: list[str]  # phase 2: the checkpoint, then the files naming it
    delete: list[str]  # phase 4
    kept: list[str]  # gone from the site, kept in the bucket (needed_by_the_log)
    sizes: dict[str, int] = field(default_factory=dict)  # of every upload and deletion

    @property
    def uploads(self) -> list[str]:
        return self.first + self.second

    def upload_bytes(self) -> int:
        return sum(self.sizes[p] for p in self.uploads)

    def delete_bytes(self) -> int:
        return sum(self.sizes[p] for p in self.delete)


def make_plan(
    local: Local,
    had: Mapping[str, remote.RemoteEntry] | None,
    names_checkpoint: Callable[[str], bool],
) -> Plan:
    """The plan from ``local`` to a bucket holding ``had`` (None: unknown).

    ``names_checkpoint(path)`` is asked only about changed paths that would
    otherwise go before the checkpoint (:func:`_needed_first`): whether the
    file holds the new checkpoint's root hash (so it waits for phase 2)."""
    had = had or {}
    changed = [p for p, (d, size) in local.items() if had.get(p) != (d, size, RULES_VERSION)]
    sizes = {p: local[p][1] for p in changed}
    first = [p for p in changed if _needed_first(p) and not names_checkpoint(p)]
    before = set(first)  # once: a set per path made the plan quadratic (100k: hours)
    second = [p for p in changed if p != CHECKPOINT and p not in before]
    first.sort(key=_phase_one_order)
    second.sort(key=_phase_two_order)
    if CHECKPOINT in sizes:
        second.insert(0, CHECKPOINT)
    delete, kept = [], []
    for p in sorted(set(had) - set(local)):
        if needed_by_the_log(p, local):
            kept.append(p)
        else:
            delete.append(p)
            sizes[p] = had[p][1]
    return Plan(first, second, delete, kept, sizes)


def _proves_to_now(path: str) -> bool:
    """``log/consistency/<m>``: a proof from m to *the current* size, rewritten by
    every build under the same path. It holds no root hash, but it belongs to the
    new checkpoint as the pages naming it do: put while the old checkpoint is
    live, it proves m to a size that is not live, and every reader verifying a
    proof of size m against ``log/checkpoint`` (a dream page's step 5) fails.
    So it goes right after the checkpoint, before anything else of phase 2."""
    return path.startswith("log/consistency/")


def _needed_first(path: str) -> bool:
    """Whether ``path`` goes before the checkpoint: what a reader of the new
    checkpoint fetches from it (the log's tiles and bundles, the dreams'
    records, which a monitor reads for every leaf) and the scripts and styles
    pages load. Nothing else: a page or a dream's proof put before the
    checkpoint would link or name what is not live yet (a new dream's page
    linked from the archive before its proof exists)."""
    if path == CHECKPOINT or _proves_to_now(path) or path.endswith(".html"):
        return False  # log/index.html is a page like any other
    if path.startswith(("log/", "static/")):
        return True
    return path.startswith("dreams/") and posixpath.basename(path) == "record.json"


def _phase_one_order(path: str) -> tuple[int, str]:
    """The log before the dreams' records, those before the scripts and styles."""
    if path.startswith("log/"):
        return 0, path
    if path.startswith("dreams/"):
        return 1, path
    return 2, path


def _phase_two_order(path: str) -> tuple[int, str]:
    """After the checkpoint: the consistency proofs at once, the rest of the log,
    the dreams' proofs, then their pages, then the pages that link them."""
    if _proves_to_now(path):
        return 0, path
    if path.startswith("log/"):
        return 1, path
    if path.startswith("dreams/"):
        return (2 if path.endswith(".tlog-proof") else 3), path
    return 4, path


def needed_by_the_log(path: str, local: Local) -> bool:
    """Whether a checkpoint once published may still need ``path``: full
    tiles and entry bundles, signed checkpoints, consistency proofs, and a
    partial tile whose full tile the site does not hold."""
    if path.startswith(("log/checkpoints/", "log/consistency/")):
        return True
    if not path.startswith("log/tile/"):
        return False
    full, dot_p, _width = path.partition(".p/")
    return not dot_p or full not in local
