#!/usr/bin/env python3
"""Deploy benchmark (issue 23): objects and bytes ``dreampool deploy`` uploads, cold and +1.

    .venv/bin/python -m benchmarks.deploy --pool DIR --log-key FILE [--work DIR]
        [--dry-run] [--memory]

DIR is a pool folder holding ``content/`` (benchmarks/run makes them, e.g.
pool-10000); it is copied into the work folder, never changed. Then:

* the copy is built (``dreampool build``, cold), and deployed to an empty
  bucket of a moto S3 server started in this process on 127.0.0.1 (real
  HTTP, boto3 as in production): the cold deploy;
* one signed dream is added (benchmarks/genpool.py, the next index), the pool
  built again, and deployed again: the +1 deploy;

and for each prints the objects and bytes uploaded and deleted, how often
and how big the remote manifest was written, and the wall seconds. With
--dry-run nothing is uploaded: the plans alone are printed (the +1 plan is
then against an empty bucket too, so only the cold figures mean anything).
Wall seconds against moto on this machine say little about a real service
(each request there costs a round trip); the counts are the point. With
--memory the bucket is a dict in this process (:class:`MemoryStore`): the
same deploy code and counts, minus moto's minutes per 10,000 requests, which
is how 100k is measured here.
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import genpool
from builder.deploy import local, push, s3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pool", type=Path, required=True, help="a pool folder with content/")
    parser.add_argument("--log-key", type=Path, required=True, help="the pool's log key")
    parser.add_argument("--work", type=Path, help="work folder (default: a temporary one)")
    parser.add_argument("--dry-run", action="store_true", help="plan only, upload nothing")
    parser.add_argument(
        "--memory",
        action="store_true",
        help="deploy into a bucket held in this process (MemoryStore) instead of moto: "
        "the same deploy code and the same counts, without a request's cost",
    )
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="deploybench-"))
    pool = work / "pool"
    if pool.exists():
        shutil.rmtree(pool)
    shutil.copytree(args.pool / "content", pool / "content")
    n = len(list((pool / "content" / "dreams").glob("*.json")))
    print(f"pool of {n} dreams copied to {pool}", flush=True)
    build(pool, args.log_key, "cold build")
    if args.memory:
        memory = MemoryStore()
        deploy(pool, memory, f"cold deploy, {n} dreams (in memory)", args.dry_run)
        genpool.generate(pool, n + 1, start=n)
        build(pool, args.log_key, "+1 build")
        deploy(pool, memory, f"+1 deploy, {n + 1} dreams (in memory)", args.dry_run)
        return

    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # a line per request otherwise

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    for name, value in {
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_CONFIG_FILE": str(work / "no-aws-config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(work / "no-aws-credentials"),
        "no_proxy": "127.0.0.1",
    }.items():
        os.environ[name] = value
    store = s3.S3Store("s3://bench/www", endpoint_url=f"http://{host}:{port}")
    store.client.create_bucket(Bucket="bench")
    try:
        deploy(pool, store, f"cold deploy, {n} dreams", args.dry_run)
        genpool.generate(pool, n + 1, start=n)
        build(pool, args.log_key, "+1 build")
        deploy(pool, store, f"+1 deploy, {n + 1} dreams", args.dry_run)
    finally:
        server.stop()


class MemoryStore:
    """A bucket prefix as a dict: :class:`builder.deploy.push.Store` with no network."""

    url = "memory://bench"

    def __init__(self) -> None:
        self.objects: dict[str, bytes] = {}
        self.manifest: bytes | None = None

    def get_checkpoint(self) -> bytes | None:
        return self.objects.get("log/checkpoint")

    def get_manifest(self) -> bytes | None:
        return self.manifest

    def put_manifest(self, data: bytes) -> None:
        self.manifest = data

    def put(self, rel: str, data: bytes, content_type: str, cache_control: str) -> None:
        self.objects[rel] = data

    def delete(self, rel: str) -> None:
        self.objects.pop(rel, None)

    def listing(self) -> dict[str, tuple[int, str]]:
        return {
            rel: (len(data), hashlib.md5(data).hexdigest()) for rel, data in self.objects.items()
        }


def build(pool: Path, log_key: Path, label: str) -> None:
    started = time.monotonic()
    subprocess.run(
        [sys.executable, "-m", "builder", "build", "--quiet", "--log-key", str(log_key)],
        cwd=pool,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    print(f"{label}: {time.monotonic() - started:.1f} s", flush=True)


def deploy(pool: Path, store: push.Store, label: str, dry_run: bool) -> None:
    started = time.monotonic()
    site = local.load(pool / "site")
    report = push.deploy(site, store, dry_run=dry_run)
    seconds = time.monotonic() - started
    plan = report.plan
    total = sum(size for _, size in site.files.values())
    print(
        f"{label}: site {len(site.files)} objects, {total} bytes; "
        f"upload {len(plan.uploads)} objects, {plan.upload_bytes()} bytes "
        f"(phase 1: {len(plan.first)}, phase 2: {len(plan.second)}); "
        f"delete {len(plan.delete)}, {plan.delete_bytes()} bytes; kept {len(plan.kept)}; "
        f"manifest written {report.manifest_writes}x, {report.manifest_bytes} bytes; "
        f"{seconds:.1f} s{' (dry run)' if dry_run else ''}",
        flush=True,
    )


if __name__ == "__main__":
    main()
