"""``dreampool build``: read the pool, update the log, render, write atomically.

The pipeline's stages, each a function from values to values, with I/O only
at the two ends:

    content/ ─▶ log.logbuild.prove ─▶ content.pool.scan_dreams ─▶ log.logbuild.plan
             ─▶ log.logbuild.apply (writes and signs)
             ─▶ site.model.build_model ─▶ site.assemble.write_site ─▶ site.writer.SiteWriter
             ─▶ site/ (a symlink to a generation)

A store beside the output (:mod:`builder.buildcache`) lets the next build
skip what did not change, known by content (:mod:`builder.content.filekeys`,
so a store restored into a fresh clone still hits): verifying unchanged
dream files, commitments, unchanged dreams' pages, records, proofs and
keywords. It only saves time: a build without it gives the same bytes.

The log state under ``content/log`` is written by ``logbuild.apply`` before
the site is swapped in; see :mod:`builder.log.logstate` for why an interrupted
build leaves a state the next build accepts.
"""

from __future__ import annotations

import functools
import gc
import os
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from builder import buildcache
from builder.content import filekeys, pool, poollock
from builder.errors import InputError, KeyStoreError, Problem
from builder.formats.note import Signer, parse_private_key
from builder.log import checked, logbuild
from builder.site import assemble as site
from builder.site import derived, hosting, model, writer


class Meter(Protocol):
    """What a stage reports its progress to (the CLI draws it as a bar)."""

    def advance(self, n: int = 1) -> None: ...


# ``progress(total, label)``: a meter for ``total`` steps of ``label``, as a
# context manager. The CLI passes its progress bar; a library call gets none.
Meters = Callable[[int, str], AbstractContextManager[Meter]]


class _NoMeter:
    def advance(self, n: int = 1) -> None:
        pass


def _no_meter(total: int, label: str) -> AbstractContextManager[Meter]:
    return nullcontext(_NoMeter())


@dataclass(slots=True)
class BuildReport:
    admitted: list[str] = field(default_factory=list)
    erased: list[str] = field(default_factory=list)
    refused: list[Problem] = field(default_factory=list)
    # Refused for good by the log as it stood (a retired key's dream, the
    # losing side of a fork): named every build, each with what to remove,
    # but no cause to fail a publish that deploys everything else.
    set_aside: list[Problem] = field(default_factory=list)
    files: int = 0
    size: int = 0
    signed: bool = False
    seconds: float = 0.0
    # Dream files read and verified in full: signature, key rules, review
    # (neither known from the cache nor taken by their logged commitment).
    verified: int = 0
    # Logged dream files read by the strict parser and taken because they
    # commit to their proven leaf (docs/protocol.md §3.1).
    committed: int = 0
    rendered: int = 0  # dreams whose page, record, proof and card were rendered
    site_bytes: int = 0  # the built site's size, every file (its manifest)
    # How that stands against the 1 GB GitHub Pages publishes (site.hosting).
    pages_fit: hosting.Fit = "ok"
    notes: list[str] = field(default_factory=list)  # derived state the build discarded


def load_log_key(path: Path | None) -> Signer | None:
    """The log's signer from ``--log-key FILE`` or ``$DREAMPOOL_LOG_KEY``; None if neither."""
    if path is not None:
        try:
            text = path.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise KeyStoreError(f"{path}: cannot read the log key: {exc.strerror}") from None
    else:
        text = os.environ.get("DREAMPOOL_LOG_KEY", "").strip()
        if not text:
            return None
    return parse_private_key(text)


def normalize_base_url(url: str) -> str:
    """A base URL ends in ``/`` so relative joins stay under it."""
    if not url.startswith(("https://", "http://", "/")):
        raise InputError(
            [Problem("--base-url", "", "must be an absolute http(s) URL or a path starting with /")]
        )
    return url if url.endswith("/") else url + "/"


def build(
    content: Path,
    out: Path,
    *,
    signer: Signer | None,
    base_url: str | None = None,
    progress: Meters | None = None,
    stages: Callable[[str], AbstractContextManager[object]] | None = None,
    retain: list[object] | None = None,
) -> BuildReport:
    """``progress``, if given, makes the meter a stage reports to (the CLI's
    progress bar); ``stages(name)``, if given, wraps each stage
    (benchmarks/profile_build.py times them).

    ``retain``, if given, is handed the build's large objects (log, model,
    cache, writer) instead of their being freed on return: a process that
    ends right after the build (the ``dreampool`` command, :func:`builder.cli.main.run`)
    then skips freeing them one by one, which was 0.75 s of a 19 s no-op
    build at 100k dreams.

    The cyclic garbage collector is off while a build runs (and in the
    workers it forks): a build makes millions of objects that all live to its
    end, and rendering pages makes no cycles (measured: none after 1,000 dream
    pages and 200 list pages). With it on, collections were 45% of the model
    stage at 100k dreams. Reference counting still frees everything else."""
    stage = _frozen_after(stages or (lambda name: nullcontext()))
    collecting = gc.isenabled()
    gc.disable()
    try:
        with poollock.hold(content):
            made = derived.new_folders(out)
            try:
                return _build(
                    content,
                    out,
                    signer=signer,
                    base_url=base_url,
                    progress=progress or _no_meter,
                    stage=stage,
                    retain=retain,
                )
            except BaseException:
                # A failed build leaves no folder it made (its cache was of no use yet).
                derived.forget_new(made, out)
                raise
    finally:
        gc.unfreeze()
        if collecting:
            gc.enable()


def _frozen_after(
    stages: Callable[[str], AbstractContextManager[object]],
) -> Callable[[str], AbstractContextManager[object]]:
    """Each stage, then ``gc.freeze()``: what a stage built (dreams, the tree, the
    model: millions of objects at 100k dreams) lives until the build ends, and
    without this every full collection walks it again; at 100k dreams that was
    a fifth of a no-op build. :func:`build` unfreezes at the end."""

    @contextmanager
    def stage(name: str) -> Iterator[None]:
        with stages(name):
            yield
        gc.freeze()

    return stage


def _count_dreams(content: Path) -> int:
    """How many dream files there are, for the progress bar (the scan checks them)."""
    try:
        with os.scandir(content / "dreams") as entries:
            return sum(1 for e in entries if e.name.endswith(".json"))
    except FileNotFoundError:
        return 0


def _build(
    content: Path,
    out: Path,
    *,
    signer: Signer | None,
    base_url: str | None,
    progress: Meters,
    stage: Callable[[str], AbstractContextManager[object]],
    retain: list[object] | None = None,
) -> BuildReport:
    started = time.monotonic()
    config = pool.load_config(content)
    notes = derived.secure(out)  # before anything beside the output is read
    # A build that signs tags the rows it writes with a key only the log key
    # gives, and takes no other row (THREATS.md T81: a restored cache).
    row_key = None if signer is None else buildcache.row_key(signer.seed)
    cache = buildcache.BuildCache(writer.builds_dir(out) / "cache", key=row_key)
    # A stored dream's body is read again when a page needs it: from its row,
    # or (a busy store) from its file, if that still holds the bytes verified.
    cache.dream_files = functools.partial(pool.dream_body, content)
    # The seals say which generation this pool's builds made (T81: the publish
    # workflow restores both from a cache); rows a signing build takes are tagged.
    # The one this build will write is surveyed meanwhile (writer.Opening): at
    # 100k dreams reading its manifest and checking its seal is a second, and
    # reading a restored one's files (unsealed) several.
    opening = writer.Opening(
        out, seals=cache["seals"], seals_tagged=row_key is not None, defer=True
    )
    with opening:  # the lock released on any error before the writer takes it
        return _build_with(
            content,
            out,
            config,
            notes,
            cache,
            opening,
            signer=signer,
            base_url=base_url,
            progress=progress,
            stage=stage,
            retain=retain,
            started=started,
        )


def _record_log_check(log: logbuild.Log, cache: buildcache.BuildCache) -> None:
    """What the next build may take as checked (builder.log.checked): saved
    after the scan rows, so that each line names the row as written."""
    if log.log_check is None:
        return
    digests = log.log_check.digests(cache)
    if digests is None:
        return
    row = checked.encode(checked.Checked(log.tree.size, log.tree.root(), *digests))
    if cache["logcheck"].get(checked.ROW) != row:
        cache["logcheck"][checked.ROW] = row
        cache.save("logcheck")


def _build_with(
    content: Path,
    out: Path,
    config: pool.PoolConfig,
    notes: list[str],
    cache: buildcache.BuildCache,
    opening: writer.Opening,
    *,
    signer: Signer | None,
    base_url: str | None,
    progress: Meters,
    stage: Callable[[str], AbstractContextManager[object]],
    retain: list[object] | None,
    started: float,
) -> BuildReport:
    # What git vouches for under content/: the store's keys for unchanged files;
    # asked for while the store's dreams are read (filekeys.load_beside).
    # Half the store's scan rows are read by a process forked first (before
    # load_beside's thread): buildcache.BuildCache.splitting_scan.
    with cache.splitting_scan(writer.drop_locks):
        keys, scan = filekeys.load_beside(content, lambda: cache["scan"])
    opening.begin()
    if keys.note is not None:
        notes.append(keys.note)
    directory, key_problems = pool.load_keys(content, cache=cache["keys"], keys=keys)
    set_aside: dict[str, Problem] = {}
    if key_problems:  # a fork stale checks let in: the log's order decides (§7)
        order = logbuild.logged_keys(content)
        key_problems, set_aside = pool.settle_forks(content, directory, key_problems, order)
    if key_problems:
        raise InputError(key_problems, hint="fix the key directory (content/keys) first")
    shards = set(cache["shards"])
    # The log is proven against its signed checkpoints before the scan reads
    # a dream: only a ProvenLog tells the scan what a logged dream commits to.
    with stage("prove"):
        proven = logbuild.prove(
            content,
            origin=config.origin,
            signer=signer,
            canonical_shards=shards,
            opened=cache["notes"],
            prefixes=cache["logprefix"],
        )
    # Counted for a bar only: at 100k dreams listing the folder took 0.1 s.
    total = 0 if progress is _no_meter else _count_dreams(content)
    # The commitments the scan computes (logged dreams it verified again);
    # the log stage reads the store's only if it checks dream by dream.
    commitments: dict[tuple[str, str], str] = {}
    with stage("scan"), progress(total, "verifying dreams") as bar:
        aside = list(set_aside.values())
        scanned, refused = pool.scan_dreams(
            content,
            directory,
            bar.advance,
            cache=scan,
            commitments=commitments,
            set_aside=set_aside,
            aside=aside,
            proven=proven,
            keys=keys,
            keep=cache.kept_scan,
        )
    url = normalize_base_url(base_url or config.base_url)
    # Only an https address goes into the policy readers pin: never a preview's
    # http://127.0.0.1:8000/, which no later build would replace.
    log_url = url + "log/" if url.startswith("https://") else None
    with stage("log"):
        # What to append is decided first, reading only; then it is written and signed.
        planned = logbuild.plan(
            content,
            scanned,
            origin=config.origin,
            signer=signer,
            log_url=log_url,
            commitments=commitments,
            store=cache.__getitem__,
            scan_rows=cache,
            proven=proven,
            keys=keys,
        )
        log = logbuild.apply(content, planned, signer=signer)
    # The shards as this build leaves them are canonical too (logstate.append):
    # the next build need not check the lines of the last one again.
    shards.update(log.state.shard_digests)
    cache.sections["shards"] = dict.fromkeys(shards, True)
    if log.attested:
        # What this key stands behind, for `dreampool mcp --content` (T117). A key
        # that signed nothing yet (0) leaves an older row alone: still true.
        attested = (log.attested, log.tree.root(log.attested))
        if cache["attested"].get("log") != attested:
            cache["attested"]["log"] = attested
    with stage("model"):
        view = model.build_model(log, directory, config, base_url=url)
    committed = sum(1 for s in scanned if s.committed)
    verified = sum(1 for s in scanned if not s.cached and not s.committed)
    with stage("site"), writer.SiteWriter(out, erasures=len(log.erased), opening=opening) as w:
        rendered = site.write_site(log, view, w, cache)
    # The generation that was live until now may still show an erased dream:
    # no file under the checkout may keep its text (T48).
    w.retire_stale()
    cache.save()
    _record_log_check(log, cache)
    if retain is not None:
        retain.extend((cache, directory, scanned, log, view, w))
    return BuildReport(
        admitted=log.admitted_now,
        erased=log.erased_now,
        refused=refused + log.refused,
        set_aside=aside + log.set_aside,
        files=len(w.written),
        size=log.tree.size,
        signed=log.signed_now,
        seconds=time.monotonic() - started,
        verified=verified,
        committed=committed,
        rendered=rendered,
        site_bytes=w.total_bytes,
        pages_fit=hosting.pages_fit(w.total_bytes),
        notes=buildcache.merged_notes(notes + cache.notes + log.notes),
    )
