"""Red-team review of ``dreampool deploy s3://`` (issue 23).

Each test states a promise of the deploy and a way it was broken. They run
against moto's S3 server on 127.0.0.1 through tests/test_deploy.py's fixtures.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from builder import build as buildmod
from builder.deploy import DeployError, local, push, remote
from builder.deploy.plan import CHECKPOINT
from builder.formats.note import parse_private_key
from tests import test_deploy
from tests.test_deploy import (
    Killed,
    Recording,
    built_pool,
    erase,
    http_get,
    rebuild,
    store_for,
)

# tests/test_deploy.py's fixtures: moto's S3 server on 127.0.0.1, a fresh public bucket.
endpoint = test_deploy.endpoint
bucket = test_deploy.bucket


def _size(checkpoint: bytes) -> int:
    return int(checkpoint.split(b"\n")[1])


def _verify_from_bucket(
    tmp_path: Path, run: Callable[..., Any], base: str, dream: str, m: int, policy: Path
) -> Any:
    """verify-proof of ``dream`` as its page runs it (templates/static/verify.js):
    its proof and record, the live log/checkpoint and log/consistency/<m> (m the
    size of the proof's checkpoint), every file read from the bucket."""
    files = {
        "proof": f"dreams/{dream}/proof.tlog-proof",
        "record": f"dreams/{dream}/record.json",
        "newer": CHECKPOINT,
        "consistency": f"log/consistency/{m}",
    }
    where = {}
    for name, rel in files.items():
        where[name] = tmp_path / f"got-{name}"
        where[name].write_bytes(http_get(base + rel))
    return run(
        "verify-proof",
        where["proof"],
        "--record",
        where["record"],
        "--policy",
        policy,
        "--newer",
        where["newer"],
        "--consistency",
        where["consistency"],
    )


def _three_sizes(
    tmp_path: Path, endpoint: str, bucket: str, die: Callable[[str, str], bool]
) -> tuple[Any, Path, str, int]:
    """A dream logged at size m; a deploy of size n > m completes; the deploy of
    size p > n dies where ``die`` says. Returns the pool, the site, the dream, m."""
    tp, site, ids = built_pool(tmp_path, dreams=2)
    m = _size((site / CHECKPOINT).read_bytes())
    push.deploy(local.load(site), store_for(endpoint, bucket))
    tp.add("bob", 1)
    rebuild(tp, site)
    push.deploy(local.load(site), store_for(endpoint, bucket))
    tp.add("bob", 1)
    rebuild(tp, site)
    killer = Recording(store_for(endpoint, bucket), die)
    with pytest.raises(Killed):
        push.deploy(local.load(site), killer)
    return tp, site, ids[0], m


def test_a_deploy_stopped_before_its_checkpoint_leaves_every_older_proof_verifiable(
    tmp_path: Path, endpoint: str, bucket: str, run: Callable[..., Any]
) -> None:
    """T96: Promise: readers never see a broken state; a deploy killed at any point
    leaves the bucket consistent (plan.py: everything the new checkpoint needs
    goes first, the checkpoint after it).

    Broken: log/consistency/<m> is not something the new checkpoint needs, it
    is a proof from m to *the current size*, rewritten by every build under the
    same path. Phase 1 uploaded it, so from then until log/checkpoint is put
    (the whole of phase 1, and for ever when the deploy dies there) the bucket
    serves the old checkpoint n beside a consistency proof m -> p. Every dream
    page whose proof is at an earlier size fetches exactly these two files
    (verify.js) and shows "Not verified: step 5 failed"."""
    tp, site, dream, m = _three_sizes(
        tmp_path, endpoint, bucket, lambda kind, rel: kind == "put" and rel == CHECKPOINT
    )
    base = f"{endpoint}/{bucket}/www/"
    assert _size(http_get(base + CHECKPOINT)) < _size((site / CHECKPOINT).read_bytes())
    result = _verify_from_bucket(tmp_path, run, base, dream, m, tp.content / "log" / "policy")
    assert result.code == 0, result.out + result.err


@pytest.mark.xfail(
    strict=True,
    reason="log/consistency/<m> is mutable and depends on log/checkpoint: no PUT order is atomic",
)
def test_a_deploy_stopped_right_after_its_checkpoint_leaves_every_older_proof_verifiable(
    tmp_path: Path, endpoint: str, bucket: str, run: Callable[..., Any]
) -> None:
    """T96: The same promise, the window that remains once the consistency proofs go
    right after log/checkpoint: between the checkpoint's PUT and theirs the
    bucket serves checkpoint p beside proofs m -> n. No order of PUTs closes it:
    log/consistency/<m> is one mutable path whose right bytes depend on another
    object (a protocol matter: an immutable log/consistency/<m>/<n>, or
    verify.js computing the proof from the tiles as the monitor does)."""
    tp, site, dream, m = _three_sizes(
        tmp_path,
        endpoint,
        bucket,
        lambda kind, rel: kind == "put" and rel.startswith("log/consistency/"),
    )
    base = f"{endpoint}/{bucket}/www/"
    assert http_get(base + CHECKPOINT) == (site / CHECKPOINT).read_bytes()
    result = _verify_from_bucket(tmp_path, run, base, dream, m, tp.content / "log" / "policy")
    assert result.code == 0, result.out + result.err


# --- a checkpoint is never replaced by one that does not extend it ----------------------


def test_an_older_site_is_refused_not_deployed_over_a_newer_log(
    tmp_path: Path, endpoint: str, bucket: str
) -> None:
    """T98: Promise: readers never see a broken state; THREATS: the log only grows.

    Broken: the deploy never reads the live log/checkpoint. A site built from
    an older log state (an operator's stale checkout, an old `site` folder, a
    cache restored from an earlier run) is deployed over a newer one: the
    bucket's checkpoint goes back from size n to m (a rollback every monitor
    and every pinned browser reports), and the newer dreams' pages and records
    are deleted as "no longer in the site"."""
    tp, site, _ = built_pool(tmp_path)
    old_content = tmp_path / "old-content"
    shutil.copytree(tp.content, old_content)
    new_ids = tp.add("bob", 1)
    rebuild(tp, site)
    push.deploy(local.load(site), store_for(endpoint, bucket))
    base = f"{endpoint}/{bucket}/www/"
    live = http_get(base + CHECKPOINT)
    old_site = tmp_path / "old-site"
    buildmod.build(old_content, old_site, signer=parse_private_key(tp.log_key))
    assert _size((old_site / CHECKPOINT).read_bytes()) < _size(live)
    with pytest.raises(DeployError, match="smaller"):
        push.deploy(local.load(old_site), store_for(endpoint, bucket))
    assert http_get(base + CHECKPOINT) == live
    assert http_get(f"{base}dreams/{new_ids[0]}/record.json")


def test_another_log_is_refused_not_deployed_over_the_live_one(
    tmp_path: Path, endpoint: str, bucket: str
) -> None:
    """T98: The same, for a site of another log under the same origin (a pool rebuilt
    from scratch with a new log key, or a fork): deployed over the live log, it
    replaces a checkpoint readers have pinned with one no proof connects to it."""
    _, site, _ = built_pool(tmp_path / "one")
    push.deploy(local.load(site), store_for(endpoint, bucket))
    base = f"{endpoint}/{bucket}/www/"
    live = http_get(base + CHECKPOINT)
    _, other, _ = built_pool(tmp_path / "two", dreams=5)
    with pytest.raises(DeployError, match="log key"):
        push.deploy(local.load(other), store_for(endpoint, bucket))
    assert http_get(base + CHECKPOINT) == live


@pytest.mark.parametrize("live", [b"\xff\xfe not text", b"test.example/pool\n9\nAAAA\n"])
def test_a_live_checkpoint_that_does_not_verify_is_refused_in_one_line(
    tmp_path: Path, endpoint: str, bucket: str, run: Callable[..., Any], live: bytes
) -> None:
    """T98: The live checkpoint is untrusted bytes: garbage or an unsigned note stops
    the deploy with a one-line error naming what to do, never a traceback, and
    nothing is uploaded over it."""
    _, site, _ = built_pool(tmp_path)
    store = store_for(endpoint, bucket)
    store.client.put_object(Bucket=bucket, Key=f"www/{CHECKPOINT}", Body=live)
    result = run("deploy", f"s3://{bucket}/www", "--out", site, "--endpoint-url", endpoint)
    assert result.code != 0
    assert "Traceback" not in result.err
    assert "not a checkpoint signed by the site's log key" in result.err
    assert f"delete s3://{bucket}/www/{CHECKPOINT} by hand" in result.err
    assert store.get_manifest() is None


# --- a page is not live before what it links ------------------------------------------------


def test_a_deploy_stopped_before_its_checkpoint_links_no_dream_page_without_its_proof(
    tmp_path: Path, endpoint: str, bucket: str
) -> None:
    """T96: Promise: readers never see a broken state, and a deploy killed at any point
    leaves none.

    Broken: a new dream's proof.tlog-proof names the new root, so it waits for
    phase 2, but its page, and the archive, tag, author pages, feeds and sitemaps
    linking that page, go up in phase 1. From then until phase 2 (for ever if
    the deploy dies there) the archive links a dream page whose verification
    panel finds no proof ("incomplete") and whose "proof" link is a 404."""
    tp, site, _ = built_pool(tmp_path)
    push.deploy(local.load(site), store_for(endpoint, bucket))
    new = tp.add("bob", 1)[0]
    rebuild(tp, site)
    killer = Recording(
        store_for(endpoint, bucket), lambda kind, rel: kind == "put" and rel == CHECKPOINT
    )
    with pytest.raises(Killed):
        push.deploy(local.load(site), killer)
    listed = store_for(endpoint, bucket).listing()
    put = [rel for kind, rel in killer.ops if kind == "put"]
    linked = [
        rel for rel in put if rel.endswith(".html") and f"/{new}/" in (site / rel).read_text()
    ]
    if f"dreams/{new}/index.html" in listed:
        assert f"dreams/{new}/proof.tlog-proof" in listed, f"linked from {linked}"


# --- erasure when the bucket's manifest is lost ----------------------------------------------


def test_an_erased_record_is_deleted_even_when_the_manifest_was_lost(
    tmp_path: Path, endpoint: str, bucket: str, run: Callable[..., Any]
) -> None:
    """T97: Promise: erased dreams' objects are deleted once the checkpoint recording
    the erasure is live (docs/protocol.md §2: erasing deletes the record and its
    salt, so the commitment in the log "can no longer be linked to any text").

    Broken: the manifest is untrusted and may be lost (damaged, deleted by a
    lifecycle rule or by hand, a bucket first filled by `aws s3 sync`). Then
    the deploy uploads everything, deletes nothing, and writes a fresh manifest
    from what it uploaded: the erased dream's record.json, text and salt, stays
    public in the bucket (served `immutable`), and no later deploy knows to
    delete it; `--verify` only reports it as "in the bucket but neither the
    site nor the manifest names it"."""
    tp, site, ids = built_pool(tmp_path)
    store = store_for(endpoint, bucket)
    push.deploy(local.load(site), store)
    erase(tp, ids[1], run)
    rebuild(tp, site)
    store.client.delete_object(Bucket=bucket, Key=f"www/{remote.NAME}")
    push.deploy(local.load(site), store)
    push.deploy(local.load(site), store, verify=True)
    assert f"dreams/{ids[1]}/record.json" not in store.listing()


def test_a_newer_checkpoint_put_by_another_deploy_during_phase_one_is_not_rolled_back(
    tmp_path: Path, endpoint: str, bucket: str
) -> None:
    """T98: Two deploys racing (an operator's laptop and the workflow): the live
    checkpoint is read before phase 1, which may take minutes, and another
    deploy may publish a newer checkpoint meanwhile. The one that is now older
    must not put its checkpoint over it."""
    tp, site, _ = built_pool(tmp_path)
    push.deploy(local.load(site), store_for(endpoint, bucket))
    tp.add("bob", 1)
    rebuild(tp, site)  # size n: this deploy's site
    tp.add("bob", 1)
    newer = tmp_path / "newer-site"
    buildmod.build(tp.content, newer, signer=parse_private_key(tp.log_key))  # size p > n
    newer_checkpoint = (newer / CHECKPOINT).read_bytes()
    store = store_for(endpoint, bucket)
    raced = []

    def race(kind: str, rel: str) -> bool:
        if kind == "put" and not raced:  # the other deploy ends while this one is in phase 1
            raced.append(rel)
            store.client.put_object(Bucket=bucket, Key=f"www/{CHECKPOINT}", Body=newer_checkpoint)
        return False

    with pytest.raises(DeployError, match="smaller"):
        push.deploy(local.load(site), Recording(store, race))
    assert http_get(f"{endpoint}/{bucket}/www/{CHECKPOINT}") == newer_checkpoint


def test_a_lying_manifest_is_caught_by_verify_only(
    tmp_path: Path, endpoint: str, bucket: str
) -> None:
    """T94: Held, with a limit: a well-formed manifest that says the bucket holds the
    site's new index.html (right digest) while the bucket holds other bytes makes
    a plain deploy skip that object, on every run; --verify compares the
    listing's ETag (MD5 of a single PUT) with the site's bytes and puts it back."""
    _, site, _ = built_pool(tmp_path)
    store = store_for(endpoint, bucket)
    push.deploy(local.load(site), store)
    store.client.put_object(Bucket=bucket, Key="www/index.html", Body=b"<h1>defaced</h1>")
    assert push.deploy(local.load(site), store).uploaded == 0  # trusted, skipped
    report = push.deploy(local.load(site), store, verify=True)
    assert "index.html" in report.missing
    assert http_get(f"{endpoint}/{bucket}/www/index.html") == (site / "index.html").read_bytes()


def test_a_lost_manifest_deletes_only_leftover_dream_files_and_reports_the_rest(
    tmp_path: Path, endpoint: str, bucket: str
) -> None:
    """T97: with no usable manifest the deploy lists the bucket once; what it
    does not hold under dreams/ (an erased dream's files) is deleted after the
    checkpoint, and any other object it does not know is someone's: reported,
    never deleted."""
    _, site, _ = built_pool(tmp_path)
    store = store_for(endpoint, bucket)
    push.deploy(local.load(site), store)
    store.client.put_object(Bucket=bucket, Key="www/mine/notes.txt", Body=b"mine")
    store.client.put_object(Bucket=bucket, Key="www/dreams/0000000000000000/x.json", Body=b"{}")
    store.client.delete_object(Bucket=bucket, Key=f"www/{remote.NAME}")
    report = push.deploy(local.load(site), store)
    listed = store.listing()
    assert "mine/notes.txt" in listed and report.unknown == ["mine/notes.txt"]
    assert "dreams/0000000000000000/x.json" not in listed
    assert report.plan.delete == ["dreams/0000000000000000/x.json"]
    assert push.deploy(local.load(site), store).plan.uploads == []  # the manifest is back
