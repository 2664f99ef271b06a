"""``dreampool deploy``: a built site published to a real S3 server (moto) on 127.0.0.1.

The server runs in this process (moto's ThreadedMotoServer, port 0) and is
reached over HTTP by boto3 exactly as a remote bucket would be; the site is
read back through the bucket's own HTTP endpoint (path-style URLs) by the
monitor and the proof verifier. Credentials are fake, from the environment.
"""

from __future__ import annotations

import gzip
import hashlib
import itertools
import json
import logging
import shutil
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from builder import build as buildmod
from builder.deploy import DeployError, headers, local, push, remote, s3
from builder.deploy.plan import CHECKPOINT
from builder.formats.note import parse_private_key
from tests.conftest import REPO
from tests.pools import PoolFixture, make_pool

moto_server = pytest.importorskip("moto.server")  # the test extra installs it: never skipped in CI
_names = itertools.count()


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # a line per request otherwise
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()


@pytest.fixture
def bucket(endpoint: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> str:
    """A fresh, publicly readable bucket; fake credentials, nothing read from ~."""
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_CONFIG_FILE": str(tmp_path / "no-aws-config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "no-aws-credentials"),
        "AWS_EC2_METADATA_DISABLED": "true",
        "no_proxy": "127.0.0.1,localhost",
    }.items():
        monkeypatch.setenv(name, value)
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "http_proxy", "HTTP_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    name = f"pool-{next(_names)}"
    client = store_for(endpoint, name).client
    client.create_bucket(Bucket=name)
    policy = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": "*",
                "Action": "s3:GetObject",
                "Resource": f"arn:aws:s3:::{name}/*",
            }
        ],
    }
    client.put_bucket_policy(Bucket=name, Policy=json.dumps(policy))
    return name


def store_for(endpoint: str, bucket: str, prefix: str = "www") -> s3.S3Store:
    return s3.S3Store(f"s3://{bucket}/{prefix}", endpoint_url=endpoint)


class Killed(BaseException):
    """The deploy's process dies here (nothing after it runs, not even a flush)."""


class Recording:
    """A store that logs every operation and can die at a chosen one."""

    def __init__(self, inner: s3.S3Store, die: Callable[[str, str], bool] | None = None) -> None:
        self.inner = inner
        self.ops: list[tuple[str, str]] = []
        self.die = die

    def _op(self, kind: str, rel: str) -> None:
        if self.die is not None and self.die(kind, rel):
            raise Killed(f"{kind} {rel}")
        self.ops.append((kind, rel))

    @property
    def url(self) -> str:
        return self.inner.url

    def get_manifest(self) -> bytes | None:
        return self.inner.get_manifest()

    def get_checkpoint(self) -> bytes | None:
        return self.inner.get_checkpoint()

    def put_manifest(self, data: bytes) -> None:
        self._op("manifest", remote.NAME)
        self.inner.put_manifest(data)

    def put(self, rel: str, data: bytes, content_type: str, cache_control: str) -> None:
        self._op("put", rel)
        self.inner.put(rel, data, content_type, cache_control)

    def delete(self, rel: str) -> None:
        self._op("delete", rel)
        self.inner.delete(rel)

    def listing(self) -> dict[str, tuple[int, str]]:
        return self.inner.listing()


def http_get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=10) as answer:
        data: bytes = answer.read()
        return data


def assert_consistent(store: s3.S3Store, site_dir: Path) -> dict[str, tuple[str, int, int]]:
    """Listing == manifest == local site (plus what the log keeps), byte for byte."""
    site = local.load(site_dir)
    raw = store.get_manifest()
    assert raw is not None
    manifest, why = remote.parse(raw)
    assert manifest is not None, why
    listed = store.listing()
    assert set(listed) == set(manifest)
    assert set(site.files) <= set(manifest)
    for rel, (digest, size) in site.files.items():
        assert manifest[rel] == (digest, size, headers.RULES_VERSION), rel
        assert listed[rel][0] == size, rel
    for rel in set(manifest) - set(site.files):
        assert rel.startswith("log/"), f"{rel}: left behind, not something the log needs"
    return manifest


def built_pool(tmp_path: Path, dreams: int = 3) -> tuple[PoolFixture, Path, list[str]]:
    tp = make_pool(tmp_path)
    ids = tp.add("ada", dreams)
    site = tmp_path / "site"
    buildmod.build(tp.content, site, signer=parse_private_key(tp.log_key))
    return tp, site, ids


def rebuild(tp: PoolFixture, site: Path) -> None:
    buildmod.build(tp.content, site, signer=parse_private_key(tp.log_key))


def erase(tp: PoolFixture, dream_id: str, run: Callable[..., Any]) -> None:
    for p in tp.content.parent.glob("in-*.json"):
        p.unlink()
    assert run("erase", dream_id, "--reason", "legal", "--content", tp.content).code == 0


# --- the sample pool, deployed and read back over HTTP -----------------------------


def test_the_sample_pool_deployed_to_a_bucket_is_monitored_and_verified(
    tmp_path: Path, endpoint: str, bucket: str, run: Callable[..., Any]
) -> None:
    content = tmp_path / "content"
    shutil.copytree(REPO / "content", content)
    site = tmp_path / "site"
    buildmod.build(content, site, signer=None)
    result = run("deploy", f"s3://{bucket}/www", "--out", site, "--endpoint-url", endpoint)
    assert result.code == 0, result.err
    files = len(local.load(site).files)
    assert f"uploaded {files} objects" in result.out
    url = f"{endpoint}/{bucket}/www/"
    state = tmp_path / "state" / "sample.checkpoint"
    state.parent.mkdir()
    policy = content / "log" / "policy"
    result = run("monitor", "--policy", policy, "--state", state, url)
    assert result.code == 0, result.err
    assert "46 dreams checked: 45 present, 1 erased" in result.out
    dream = sorted(p.name for p in (site / "dreams").iterdir())[0]
    proof, record = tmp_path / "proof", tmp_path / "record.json"
    proof.write_bytes(http_get(f"{url}dreams/{dream}/proof.tlog-proof"))
    record.write_bytes(http_get(f"{url}dreams/{dream}/record.json"))
    result = run("verify-proof", "--record", record, "--policy", policy, proof)
    assert result.code == 0, result.err
    assert f"verified: dream {dream}" in result.out
    assert_consistent(store_for(endpoint, bucket), site)


def test_every_object_carries_its_content_type_and_cache_control(
    tmp_path: Path, endpoint: str, bucket: str
) -> None:
    _, site, ids = built_pool(tmp_path)
    store = store_for(endpoint, bucket)
    push.deploy(local.load(site), store)
    seen = set()
    for rel in local.load(site).files:
        head = store.client.head_object(Bucket=bucket, Key=f"www/{rel}")
        assert (head["ContentType"], head["CacheControl"]) == headers.headers(rel), rel
        seen.add(head["CacheControl"])
    assert seen == {headers.IMMUTABLE, headers.REVALIDATE, headers.PAGE}
    checkpoint = store.client.head_object(Bucket=bucket, Key=f"www/{CHECKPOINT}")
    assert checkpoint["ContentType"] == "text/plain; charset=utf-8"
    assert checkpoint["CacheControl"] == "no-cache"
    record = store.client.head_object(Bucket=bucket, Key=f"www/dreams/{ids[0]}/record.json")
    assert record["CacheControl"] == "public, max-age=31536000, immutable"
    manifest = store.client.head_object(Bucket=bucket, Key=f"www/{remote.NAME}")
    assert manifest["CacheControl"] == "no-store"


# --- only what changed ----------------------------------------------------------------


def test_one_more_dream_uploads_only_what_the_manifests_say_changed(
    tmp_path: Path, endpoint: str, bucket: str
) -> None:
    tp, site, _ = built_pool(tmp_path)
    store = store_for(endpoint, bucket)
    first = push.deploy(local.load(site), store)
    before = local.load(site).files
    assert first.uploaded == len(before) and first.deleted == 0
    tp.add("bob", 1)
    rebuild(tp, site)
    after = local.load(site).files
    changed = {p for p in after if before.get(p) != after[p]}
    gone = set(before) - set(after)
    assert 0 < len(changed) < len(after) // 2
    report = push.deploy(local.load(site), store)
    assert report.uploaded == len(changed)
    assert report.uploaded_bytes == sum(after[p][1] for p in changed)
    assert report.deleted + len(report.plan.kept) == len(gone)
    assert_consistent(store, site)
    again = push.deploy(local.load(site), store)
    assert (again.uploaded, again.deleted, again.manifest_writes) == (0, 0, 0)


def test_the_checkpoint_goes_after_what_it_needs_and_before_what_names_it(
    tmp_path: Path, endpoint: str, bucket: str
) -> None:
    tp, site, _ = built_pool(tmp_path)
    push.deploy(local.load(site), store_for(endpoint, bucket))
    tp.add("bob", 1)
    rebuild(tp, site)
    store = Recording(store_for(endpoint, bucket))
    push.deploy(local.load(site), store)
    puts = [rel for kind, rel in store.ops if kind == "put"]
    at = puts.index(CHECKPOINT)
    root = (site / CHECKPOINT).read_bytes().split(b"\n")[2]
    for rel in puts[:at]:
        assert root not in (site / rel).read_bytes(), f"{rel} names a checkpoint not yet live"
    named = {rel for rel in puts[at + 1 :]}
    assert {"index.html", "log/index.html", "api/dreams.json", "llms.txt"} <= named
    assert any(rel.startswith("log/tile/") for rel in puts[:at])
    assert any(rel.startswith("dreams/") for rel in puts[:at])
    assert store.ops[-1] == ("manifest", remote.NAME)


# --- erasure: deleted only once the checkpoint recording it is live ----------------------


def test_an_erased_dream_is_deleted_after_the_checkpoint_and_named_for_purging(
    tmp_path: Path, endpoint: str, bucket: str, run: Callable[..., Any]
) -> None:
    tp, site, ids = built_pool(tmp_path)
    target = f"s3://{bucket}/www"
    assert run("deploy", target, "--out", site, "--endpoint-url", endpoint).code == 0
    erase(tp, ids[1], run)
    rebuild(tp, site)
    store = Recording(store_for(endpoint, bucket))
    report = push.deploy(local.load(site), store)
    record = f"dreams/{ids[1]}/record.json"
    deletes = [i for i, (kind, _) in enumerate(store.ops) if kind == "delete"]
    assert ("delete", record) in store.ops
    checkpoint = store.ops.index(("put", CHECKPOINT))
    manifest = store.ops.index(("manifest", remote.NAME), checkpoint)
    assert checkpoint < manifest < min(deletes)
    assert all(kind == "delete" for kind, _ in store.ops[min(deletes) : -1])
    assert report.purge == [record]
    assert_consistent(store.inner, site)
    with pytest.raises(urllib.error.HTTPError):
        http_get(f"{endpoint}/{bucket}/www/{record}")


def test_the_cli_prints_the_paths_to_purge(
    tmp_path: Path, endpoint: str, bucket: str, run: Callable[..., Any]
) -> None:
    tp, site, ids = built_pool(tmp_path)
    args = ("deploy", f"s3://{bucket}/www", "--out", site, "--endpoint-url", endpoint)
    assert run(*args).code == 0
    erase(tp, ids[0], run)
    rebuild(tp, site)
    dry = run(*args, "--dry-run")
    assert dry.code == 0 and f"purge dreams/{ids[0]}/record.json" in dry.out
    assert "delete 4 " in dry.out
    result = run(*args)
    assert result.code == 0, result.err
    assert f"purge dreams/{ids[0]}/record.json" in result.out
    assert "purge them from your CDN" in result.err


# --- killed half-way, run again ------------------------------------------------------------


def _kill_in(phase: int, plan_first: set[str], after: int) -> Callable[[str, str], bool]:
    count = itertools.count(1)
    live = []

    def die(kind: str, rel: str) -> bool:
        if rel == CHECKPOINT:
            live.append(rel)
        if phase == 1 and kind == "put" and rel in plan_first:
            return next(count) > after
        if phase == 2 and kind == "put" and rel not in plan_first and rel != CHECKPOINT:
            return next(count) > after
        if phase == 3:  # the manifest write that follows the checkpoint
            return kind == "manifest" and bool(live)
        if phase == 4:
            return kind == "delete" and next(count) > after
        return False

    return die


@pytest.mark.parametrize("phase", [1, 2, 3, 4])
def test_a_deploy_killed_in_any_phase_completes_when_run_again(
    tmp_path: Path, endpoint: str, bucket: str, run: Callable[..., Any], phase: int
) -> None:
    tp, site, ids = built_pool(tmp_path, dreams=4)
    push.deploy(local.load(site), store_for(endpoint, bucket))
    erase(tp, ids[1], run)
    erase(tp, ids[2], run)
    tp.add("bob", 2)
    rebuild(tp, site)
    plan = push.deploy(local.load(site), store_for(endpoint, bucket), dry_run=True).plan
    assert plan.first and len(plan.second) > 2 and len(plan.delete) == 2
    after = 1 if phase == 4 else 2
    killer = Recording(store_for(endpoint, bucket), _kill_in(phase, set(plan.first), after))
    with pytest.raises(Killed):
        push.deploy(local.load(site), killer)
    if phase == 1:
        assert ("put", CHECKPOINT) not in killer.ops  # never live before what it needs
    if phase < 4:
        assert not any(kind == "delete" for kind, _ in killer.ops)
    rerun = Recording(store_for(endpoint, bucket))
    report = push.deploy(local.load(site), rerun)
    done = {rel for kind, rel in killer.ops if kind == "put"}
    redone = {rel for kind, rel in rerun.ops if kind == "put"}
    # The rerun sends what the killed run had not surely stored, not everything again.
    assert redone | done >= set(plan.uploads)
    assert len(redone) < len(plan.uploads) or phase == 1
    if phase == 4:  # all uploaded and recorded: only the deletions are done again
        # (the first one too: the manifest still lists it; a DELETE of a missing key succeeds)
        assert rerun.ops == [("delete", p) for p in plan.delete] + [("manifest", remote.NAME)]
    assert report.uploaded == len(redone)
    assert_consistent(store_for(endpoint, bucket), site)
    http_checkpoint = http_get(f"{endpoint}/{bucket}/www/{CHECKPOINT}")
    assert http_checkpoint == (site / CHECKPOINT).read_bytes()


# --- untrusted remote manifest -----------------------------------------------------------


@pytest.mark.parametrize(
    "damage",
    [
        b"",
        b"\xff\xfe garbage",
        b'{"format": "dreampool-deploy", "version": 1, "files": {"../x": ["00", 1, 1]}}',
        b'{"format": "someone-else", "version": 7, "files": {}}',
        b'{"format": "dreampool-deploy", "version": 1, "files": {"a": ["%s", -1, 1]}}'
        % (b"0" * 32),
        b'{"format": "dreampool-deploy", "version": 1, "files": {}, "files": {}}',
        b"[" * 10_000,
    ],
)
def test_a_damaged_or_foreign_remote_manifest_means_upload_everything(
    tmp_path: Path, endpoint: str, bucket: str, run: Callable[..., Any], damage: bytes
) -> None:
    _, site, _ = built_pool(tmp_path, dreams=1)
    store = store_for(endpoint, bucket)
    push.deploy(local.load(site), store)
    # Raw, and gzipped as a deploy writes it (so the JSON layer is reached too).
    body = damage if len(damage) < 20 else gzip.compress(damage)
    store.client.put_object(Bucket=bucket, Key=f"www/{remote.NAME}", Body=body)
    result = run("deploy", f"s3://{bucket}/www", "--out", site, "--endpoint-url", endpoint)
    assert result.code == 0, result.err
    assert "Traceback" not in result.err
    assert f"the remote manifest {remote.NAME} was not used" in result.err
    assert f"uploaded {len(local.load(site).files)} objects" in result.out
    assert_consistent(store, site)


# --- --dry-run and --verify ----------------------------------------------------------------


def test_dry_run_changes_nothing(
    tmp_path: Path, endpoint: str, bucket: str, run: Callable[..., Any]
) -> None:
    tp, site, _ = built_pool(tmp_path)
    store = store_for(endpoint, bucket)
    args = ("deploy", f"s3://{bucket}/www", "--out", site, "--endpoint-url", endpoint)
    result = run(*args, "--dry-run")
    assert result.code == 0 and store.listing() == {} and store.get_manifest() is None
    files = local.load(site).files
    assert f"would upload {len(files)} objects ({sum(s for _, s in files.values())} bytes)" in (
        result.out
    )
    assert f"upload 2 {files[CHECKPOINT][1]} {CHECKPOINT}" in result.out
    assert run(*args).code == 0
    tp.add("bob", 1)
    rebuild(tp, site)
    listed, manifest = store.listing(), store.get_manifest()
    result = run(*args, "--dry-run", "--verify")
    assert result.code == 0 and "dry run, nothing changed" in result.out
    assert store.listing() == listed and store.get_manifest() == manifest


def test_verify_puts_back_a_deleted_object_and_reports_strangers(
    tmp_path: Path, endpoint: str, bucket: str, run: Callable[..., Any]
) -> None:
    _, site, ids = built_pool(tmp_path)
    store = store_for(endpoint, bucket)
    push.deploy(local.load(site), store)
    gone = f"dreams/{ids[0]}/index.html"
    swapped = f"dreams/{ids[1]}/record.json"
    store.client.delete_object(Bucket=bucket, Key=f"www/{gone}")
    size = local.load(site).files[swapped][1]
    store.client.put_object(Bucket=bucket, Key=f"www/{swapped}", Body=b"x" * size)
    store.client.put_object(Bucket=bucket, Key="www/stranger.html", Body=b"hi")
    args = ("deploy", f"s3://{bucket}/www", "--out", site, "--endpoint-url", endpoint)
    plain = run(*args)
    assert plain.code == 0 and "uploaded 0 objects" in plain.out  # no listing: not seen
    result = run(*args, "--verify")
    assert result.code == 0, result.err
    assert f"verify: {gone} is in the manifest but not in the bucket" in result.err
    assert f"verify: {swapped} is in the manifest but not in the bucket" in result.err
    assert "verify: stranger.html is in the bucket but neither" in result.err
    assert "uploaded 2 objects" in result.out
    assert http_get(f"{endpoint}/{bucket}/www/{swapped}") == (site / swapped).read_bytes()
    assert http_get(f"{endpoint}/{bucket}/www/{gone}") == (site / gone).read_bytes()


# --- the trust boundary and the command line ---------------------------------------------


def test_a_symlink_in_the_site_is_refused_not_followed(
    tmp_path: Path, endpoint: str, bucket: str, run: Callable[..., Any]
) -> None:
    _, site, _ = built_pool(tmp_path, dreams=1)
    secret = tmp_path / "secret"
    secret.write_text("private")
    target = site.resolve() / "robots.txt"
    target.unlink()
    target.symlink_to(secret)
    result = run("deploy", f"s3://{bucket}/www", "--out", site, "--endpoint-url", endpoint)
    assert result.code == 1 and "Traceback" not in result.err
    assert "robots.txt: a symlink" in result.err
    assert all(b"private" not in http_get_or_empty(endpoint, bucket, k) for k in ["robots.txt"])


def http_get_or_empty(endpoint: str, bucket: str, rel: str) -> bytes:
    try:
        return http_get(f"{endpoint}/{bucket}/www/{rel}")
    except urllib.error.HTTPError:
        return b""


def test_a_file_edited_after_the_build_is_refused(
    tmp_path: Path, endpoint: str, bucket: str, run: Callable[..., Any]
) -> None:
    _, site, _ = built_pool(tmp_path, dreams=1)
    (site / "robots.txt").write_text("changed by hand")
    result = run("deploy", f"s3://{bucket}/www", "--out", site, "--endpoint-url", endpoint)
    assert result.code == 1 and "robots.txt: the file is not what the build wrote" in result.err


def test_command_line_errors_are_one_line_not_a_traceback(
    tmp_path: Path, endpoint: str, bucket: str, run: Callable[..., Any], monkeypatch: Any
) -> None:
    _, site, _ = built_pool(tmp_path, dreams=1)
    for target, message in [
        ("http://x/y", "expected an s3:// URL"),
        ("s3://A_B/x", "the bucket name must be"),
        ("s3://bucket/a/../b", "the prefix must be plain path segments"),
    ]:
        result = run("deploy", target, "--out", site)
        assert result.code == 1 and message in result.err, result.err
    result = run("deploy", f"s3://{bucket}/www", "--out", tmp_path / "nothing")
    assert result.code == 1 and "not a built site" in result.err
    result = run("deploy", "s3://no-such-bucket/www", "--out", site, "--endpoint-url", endpoint)
    assert result.code == 1 and "NoSuchBucket" in result.err and "Traceback" not in result.err
    monkeypatch.setitem(__import__("sys").modules, "boto3", None)
    result = run("deploy", f"s3://{bucket}/www", "--out", site)
    assert result.code == 1 and "pip install 'dreampool[s3]'" in result.err


def test_a_deploy_error_is_a_dreampool_error() -> None:
    with pytest.raises(DeployError):
        s3.parse_target("s3://")


class _MemoryBucket:
    """A bucket prefix as a dict (push.Store), to count the manifest's writes."""

    url = "memory://test"

    def __init__(self) -> None:
        self.objects: dict[str, bytes] = {}
        self.manifest: bytes | None = None

    def get_checkpoint(self) -> bytes | None:
        return self.objects.get(CHECKPOINT)

    def get_manifest(self) -> bytes | None:
        return self.manifest

    def put_manifest(self, data: bytes) -> None:
        self.manifest = data

    def put(self, rel: str, data: bytes, content_type: str, cache_control: str) -> None:
        self.objects[rel] = data

    def delete(self, rel: str) -> None:
        self.objects.pop(rel, None)

    def listing(self) -> dict[str, tuple[int, str]]:
        return {rel: (len(d), hashlib.md5(d).hexdigest()) for rel, d in self.objects.items()}


def test_the_manifest_writes_add_up_to_a_few_times_its_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write every FLUSH_EVERY uploads made a cold deploy write the manifest
    n / FLUSH_EVERY times (100k dreams: 78 writes, 376 MB for a 2.1 GB site; at
    1M it grows as n²). Batches grow with the manifest, so its writes add up to
    a few times its final size, and every object still arrives."""
    monkeypatch.setattr(push, "FLUSH_EVERY", 2)
    _, site, _ = built_pool(tmp_path, dreams=40)
    files = local.load(site).files
    bucket = _MemoryBucket()
    report = push.deploy(local.load(site), bucket)
    assert set(bucket.objects) == set(files) and bucket.manifest is not None
    final = len(bucket.manifest)
    assert report.manifest_bytes <= 12 * final, (report.manifest_writes, report.manifest_bytes)
    assert report.manifest_writes < len(files) // 2 // 2  # not one per FLUSH_EVERY uploads
