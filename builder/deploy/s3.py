"""The bucket, through boto3: the one module that talks to object storage.

boto3 is an optional extra (``pip install 'dreampool[s3]'``), imported only
here and only when a deploy runs. Credentials come from boto3's own chain
(``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``, ``AWS_PROFILE`` and the
config files, web identity for OIDC in CI, instance roles), never from the
command line. ``--endpoint-url`` selects any S3-compatible service (Cloudflare
R2, MinIO, Backblaze B2) and path-style addressing, which all of them serve;
AWS itself gets virtual-hosted addressing. Each request is retried by
botocore's "standard" mode (throttling, 5xx, dropped connections), up to
:data:`ATTEMPTS` times with backoff. Every failure becomes a
:class:`~builder.deploy.DeployError` naming the object and what the service said.
"""

from __future__ import annotations

import re
from typing import Any

from builder.deploy import DeployError, remote
from builder.deploy.plan import CHECKPOINT
from builder.formats.note import MAX_NOTE_SIZE

ATTEMPTS = 5
INSTALL = "pip install 'dreampool[s3]'"
# S3's bucket naming rules (also R2's, MinIO's and B2's): 3-63 of a-z 0-9 . -
_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")


def parse_target(url: str) -> tuple[str, str]:
    """(bucket, key prefix ending in "/" or empty) of ``s3://BUCKET[/PREFIX]``."""
    hint = "give the target as s3://BUCKET or s3://BUCKET/PREFIX"
    if not url.startswith("s3://"):
        raise DeployError(f"target {url!r}: expected an s3:// URL", hint=hint)
    bucket, _, prefix = url[len("s3://") :].partition("/")
    if not _BUCKET.fullmatch(bucket):
        raise DeployError(
            f"target {url!r}: the bucket name must be 3-63 characters of a-z, 0-9, '.' and '-'",
            hint=hint,
        )
    prefix = prefix.strip("/")
    if prefix and not remote.plain_path(prefix):
        raise DeployError(
            f"target {url!r}: the prefix must be plain path segments (no '.', '..' or '//')",
            hint=hint,
        )
    return bucket, prefix + "/" if prefix else ""


class S3Store:
    """One prefix of one bucket (the :class:`builder.deploy.push.Store` protocol)."""

    def __init__(
        self, url: str, *, endpoint_url: str | None = None, region: str | None = None
    ) -> None:
        self.url = url.rstrip("/")
        self.bucket, self.prefix = parse_target(url)
        try:
            import boto3  # type: ignore[import-untyped, import-not-found, unused-ignore]
            import botocore.config  # type: ignore[import-untyped, import-not-found, unused-ignore]
            import botocore.exceptions  # type: ignore[import-untyped, import-not-found, unused-ignore]
        except ImportError:
            raise DeployError(
                "deploying to object storage needs boto3, which is not installed",
                hint=f"install it with `{INSTALL}`",
            ) from None
        self._errors: tuple[type[Exception], ...] = (
            botocore.exceptions.BotoCoreError,
            botocore.exceptions.ClientError,
        )
        config = botocore.config.Config(
            retries={"max_attempts": ATTEMPTS, "mode": "standard"},
            s3={"addressing_style": "path" if endpoint_url else "auto"},
            connect_timeout=10,
            read_timeout=60,
            max_pool_connections=16,
            # boto3 1.36 began sending CRC checksums on every upload, which some
            # S3-compatible services refuse; send and check them only where S3 requires.
            request_checksum_calculation="when_required",
            response_checksum_validation="when_required",
        )
        try:
            self.client: Any = boto3.session.Session().client(
                "s3", endpoint_url=endpoint_url, region_name=region, config=config
            )
        except self._errors as exc:
            raise self._error("cannot set up the S3 client", exc) from None

    def key(self, rel: str) -> str:
        return self.prefix + rel

    def get_manifest(self) -> bytes | None:
        key = self.key(remote.NAME)
        try:
            answer = self.client.get_object(Bucket=self.bucket, Key=key)
            if int(answer.get("ContentLength", 0)) > remote.MAX_BYTES:
                return b""  # too big to be ours: parse() refuses it
            body: bytes = answer["Body"].read(remote.MAX_BYTES + 1)
            return body
        except self._errors as exc:
            if _code(exc) in ("NoSuchKey", "404"):
                return None
            raise self._error(f"cannot read {key}", exc) from None

    def get_checkpoint(self) -> bytes | None:
        """The live ``log/checkpoint`` (at most MAX_NOTE_SIZE + 1 bytes of it), None if none."""
        key = self.key(CHECKPOINT)
        try:
            answer = self.client.get_object(Bucket=self.bucket, Key=key)
            body: bytes = answer["Body"].read(MAX_NOTE_SIZE + 1)
            return body
        except self._errors as exc:
            if _code(exc) in ("NoSuchKey", "404"):
                return None
            raise self._error(f"cannot read {key}", exc) from None

    def put_manifest(self, data: bytes) -> None:
        self._put(self.key(remote.NAME), data, "application/gzip", "no-store")

    def put(self, rel: str, data: bytes, content_type: str, cache_control: str) -> None:
        self._put(self.key(rel), data, content_type, cache_control)

    def _put(self, key: str, data: bytes, content_type: str, cache_control: str) -> None:
        try:
            self.client.put_object(
                Bucket=self.bucket,
                Key=key,
                Body=data,
                ContentType=content_type,
                CacheControl=cache_control,
            )
        except self._errors as exc:
            raise self._error(f"cannot upload {key}", exc) from None

    def delete(self, rel: str) -> None:
        key = self.key(rel)
        try:
            self.client.delete_object(Bucket=self.bucket, Key=key)
        except self._errors as exc:
            raise self._error(f"cannot delete {key}", exc) from None

    def listing(self) -> dict[str, tuple[int, str]]:
        """Every object under the prefix but the manifest: path → (size, ETag)."""
        out: dict[str, tuple[int, str]] = {}
        try:
            pages = self.client.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=self.prefix
            )
            for page in pages:
                for obj in page.get("Contents", []):
                    rel = obj["Key"][len(self.prefix) :]
                    if rel != remote.NAME:
                        out[rel] = (int(obj["Size"]), str(obj.get("ETag", "")).strip('"'))
        except self._errors as exc:
            raise self._error(f"cannot list {self.url}/", exc) from None
        return out

    def _error(self, what: str, exc: Exception) -> DeployError:
        code = _code(exc)
        detail = f"{code}: {_message(exc)}" if code else str(exc)
        hint = "check the bucket, --endpoint-url and --region, and the credentials"
        if code in ("AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch") or (
            type(exc).__name__ in ("NoCredentialsError", "PartialCredentialsError")
        ):
            hint = (
                "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE, or a web "
                "identity role in CI) for an identity that may write this bucket"
            )
        return DeployError(f"{self.url}: {what}: {detail}", hint=hint)


def _code(exc: Exception) -> str:
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        return str(response.get("Error", {}).get("Code", ""))
    return ""


def _message(exc: Exception) -> str:
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        return str(response.get("Error", {}).get("Message", "")) or str(exc)
    return str(exc)
