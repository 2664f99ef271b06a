"""Carry out a deploy: read the remote manifest, plan, upload, publish, delete.

The order and why it is safe are :mod:`builder.deploy.plan`'s docstring; this
module keeps the promise that the remote manifest lists only objects whose
upload finished: a path enters :attr:`Deploy.state` when its PUT returned,
and the manifest is written from that state after every batch of uploads
(:data:`FLUSH_EVERY`, or an eighth of what it lists if that is more, so its
writes add up to a few times its final size, not to n / FLUSH_EVERY times
it), after phase 1, after phase 2 (phase 3 of the plan) and after the
deletions. Nothing is written on the way out of an error: a deploy that
fails is treated exactly like one that was killed, and the next run
completes it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Protocol

from builder.deploy import extends, headers, remote
from builder.deploy.local import Site
from builder.deploy.plan import CHECKPOINT, Plan, make_plan

UNKNOWN_DIGEST = "0" * 32  # a listed object's: no file's BLAKE2b digest, so never kept as is
FLUSH_EVERY = 4096  # uploads between two writes of the remote manifest, at least
FLUSH_FRACTION = 8  # and at least 1/8 of the entries it lists (module doc)
WORKERS = 8  # uploads in flight (object stores answer in tens of milliseconds)


class Store(Protocol):
    """A bucket prefix (:class:`builder.deploy.s3.S3Store` in production)."""

    url: str  # s3://BUCKET/PREFIX, without the last "/"

    def get_manifest(self) -> bytes | None: ...
    def get_checkpoint(self) -> bytes | None: ...  # the live log/checkpoint, None if none
    def put_manifest(self, data: bytes) -> None: ...
    def put(self, rel: str, data: bytes, content_type: str, cache_control: str) -> None: ...
    def delete(self, rel: str) -> None: ...
    def listing(self) -> dict[str, tuple[int, str]]: ...  # path → (size, ETag), no manifest


@dataclass
class Report:
    plan: Plan
    manifest_note: str = ""  # why the remote manifest was not used ("" if it was, or none)
    uploaded: int = 0
    uploaded_bytes: int = 0
    deleted: int = 0
    manifest_writes: int = 0
    manifest_bytes: int = 0
    purge: list[str] = field(default_factory=list)  # deleted, long-lived in caches
    missing: list[str] = field(default_factory=list)  # --verify: listed in the manifest, absent
    unknown: list[str] = field(default_factory=list)  # --verify: in the bucket, not ours


def deploy(site: Site, store: Store, *, dry_run: bool = False, verify: bool = False) -> Report:
    # Before anything else: never publish a checkpoint that does not extend the live one.
    extends.check(site, store.get_checkpoint(), store.url)
    raw = store.get_manifest()
    had, why = (None, "") if raw is None else remote.parse(raw)
    note = f"the remote manifest {remote.NAME} was not used: {why}" if why else ""
    missing: list[str] = []
    unknown: list[str] = []
    if had is None:
        # No usable manifest (a first deploy, or it was lost or is not ours): the
        # bucket holds what nobody recorded, so it is listed, once.
        had, unknown = _leftovers(site, store.listing())
    elif verify:
        had, missing, unknown = _verify(site, store.listing(), had)
    root = site.root_hash()
    plan = make_plan(site.files, had, lambda rel: root in site.read(rel))
    report = Report(plan, note, missing=missing, unknown=unknown)
    report.purge = [p for p in plan.delete if headers.long_lived(p)]
    if dry_run:
        return report
    Deploy(site, store, dict(had or {}), report).run()
    return report


def _leftovers(
    site: Site, listed: dict[str, tuple[int, str]]
) -> tuple[dict[str, remote.RemoteEntry], list[str]]:
    """With the manifest lost or not ours: the listed objects under ``dreams/``
    that the site does not hold, as entries the plan deletes after the checkpoint
    (an erased dream's record, text and salt must not outlive the manifest that
    named them: docs/protocol.md §2), and every other listed object the site
    does not hold, reported, never deleted (it may be someone else's). Their
    digests are unknown, so nothing listed is taken as already uploaded."""
    had: dict[str, remote.RemoteEntry] = {}
    unknown = []
    for rel, (size, _) in sorted(listed.items()):
        if rel in site.files:
            continue
        if rel.startswith("dreams/") and remote.plain_path(rel):
            had[rel] = (UNKNOWN_DIGEST, size, 0)
        else:
            unknown.append(rel)
    return had, unknown


def _verify(
    site: Site, listed: dict[str, tuple[int, str]], had: dict[str, remote.RemoteEntry]
) -> tuple[dict[str, remote.RemoteEntry], list[str], list[str]]:
    """The manifest's entries the listing confirms (present, same size, and
    for a site file an ETag that is the MD5 of its bytes, as S3 gives for a
    single PUT); the entries it does not (to upload again); the objects
    neither the manifest nor the site names."""
    confirmed: dict[str, remote.RemoteEntry] = {}
    missing = []
    for rel, entry in had.items():
        size_etag = listed.get(rel)
        if size_etag is None or size_etag[0] != entry[1] or not _same_bytes(site, rel, size_etag):
            missing.append(rel)
        else:
            confirmed[rel] = entry
    unknown = sorted(rel for rel in listed if rel not in had and rel not in site.files)
    return confirmed, sorted(missing), unknown


def _same_bytes(site: Site, rel: str, size_etag: tuple[int, str]) -> bool:
    etag = size_etag[1]
    if rel not in site.files or not _is_md5(etag):
        return True  # nothing to compare with (a multipart or encrypted object's ETag)
    return hashlib.md5(site.read(rel), usedforsecurity=False).hexdigest() == etag


def _is_md5(etag: str) -> bool:
    return len(etag) == 32 and all(c in "0123456789abcdef" for c in etag)


class Deploy:
    def __init__(
        self, site: Site, store: Store, state: dict[str, remote.RemoteEntry], report: Report
    ) -> None:
        self.site = site
        self.store = store
        self.state = state  # what the bucket surely holds
        self.report = report

    def run(self) -> None:
        plan = self.report.plan
        # Phase 1: everything the new checkpoint needs, and pages that do not name it.
        self._upload(plan.first)
        if plan.first:
            self._flush()
        # Phase 2: the checkpoint, then what names it; phase 3: the manifest.
        if plan.second[:1] == [CHECKPOINT]:
            # Again, just before it: another deploy may have put a newer one during
            # phase 1 (the race left is the time between this GET and the PUT).
            extends.check(self.site, self.store.get_checkpoint(), self.store.url)
        self._upload(plan.second[:1])
        self._upload(plan.second[1:])
        if plan.second:
            self._flush()
        # Phase 4: what the live checkpoint no longer needs.
        for rel in plan.delete:
            self.store.delete(rel)
            del self.state[rel]
            self.report.deleted += 1
        if plan.delete:
            self._flush()

    def _flush(self) -> None:
        data = remote.dumps(self.state)
        self.store.put_manifest(data)
        self.report.manifest_writes += 1
        self.report.manifest_bytes += len(data)

    def _upload(self, paths: Sequence[str]) -> None:
        if not paths:
            return
        with ThreadPoolExecutor(WORKERS) as pool:
            start = 0
            while start < len(paths):
                # A batch of FLUSH_EVERY, or an eighth of what the manifest lists,
                # whichever is more: the manifest's writes then sum to a few times
                # its final size, not n / FLUSH_EVERY times it (100k: 376 MB of
                # manifest writes for a 2.1 GB site), and a killed deploy sends
                # again at most an eighth of what it had sent.
                size = max(FLUSH_EVERY, len(self.state) // FLUSH_FRACTION)
                batch = paths[start : start + size]
                start += size
                futures = {pool.submit(self._put, rel): rel for rel in batch}
                done, _ = wait(futures, return_when=FIRST_EXCEPTION)
                for f in done:
                    if f.exception() is None:
                        self._record(futures[f])
                failed = [f for f in done if f.exception() is not None]
                if failed:
                    for f in futures:
                        f.cancel()
                    failed[0].result()  # raises; nothing is written on the way out
                if start < len(paths):
                    self._flush()

    def _put(self, rel: str) -> None:
        data = self.site.read(rel)
        content_type, cache = headers.headers(rel)
        self.store.put(rel, data, content_type, cache)

    def _record(self, rel: str) -> None:
        digest, size = self.site.files[rel]
        self.state[rel] = (digest, size, headers.RULES_VERSION)
        self.report.uploaded += 1
        self.report.uploaded_bytes += size
