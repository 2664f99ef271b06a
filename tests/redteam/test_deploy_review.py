"""Red-team review of ``dreampool deploy s3://`` (issue 23).

Each test states a promise of the deploy and a way it was broken. They run
against moto's S3 server on 127.0.0.1 through tests/test_deploy.py's fixtures.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from builder.deploy import local, push
from builder.deploy.plan import CHECKPOINT
from tests.test_deploy import (  # noqa: F401  (pytest fixtures, used by name)
    Killed,
    Recording,
    bucket,
    built_pool,
    endpoint,
    http_get,
    rebuild,
    store_for,
)


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
    """Promise: readers never see a broken state; a deploy killed at any point
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
