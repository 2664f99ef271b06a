"""The HTTP headers an object of the site is stored with: Content-Type and Cache-Control.

Content types are :func:`builder.site.serve.content_type`'s table (one table for
the preview server and the bucket). Cache rules, by path, for a bucket behind a
CDN (docs/operators.md, "Object storage and a CDN", has the table and the why):

* ``log/checkpoint`` changes with every build: ``no-cache`` (a cache revalidates
  it on every request). C2SP tlog-tiles, "Checkpoints": "This endpoint is
  mutable, so its headers SHOULD prevent caching beyond a few seconds."
* ``log/tile/…``, full and partial tiles and entry bundles: a path names its
  bytes for ever (a partial tile's path carries its width, and its first
  ``W`` hashes never change), so ``public, max-age=31536000, immutable``.
  C2SP tlog-tiles, "Merkle Tree" and "Log entries": "This endpoint is
  immutable, so its caching headers SHOULD be long-lived."
* ``dreams/<id>/record.json`` never changes once published
  (docs/protocol.md §5) but is deleted when the dream is erased: immutable
  too, and an erasure's deploy names the paths to purge from the CDN
  (:data:`LONG_LIVED`).
* the rest of ``log/`` (``checkpoints/N`` gains witness cosignatures,
  ``consistency/M`` proves M to the current size, ``policy``) and every
  ``*.tlog-proof`` (re-rendered when its checkpoint is cosigned): ``no-cache``.
* everything else, pages, feeds, the API, scripts and styles (their names
  carry no digest): ``public, max-age=300``, so a build shows within five
  minutes and a CDN absorbs a crowd.
"""

from __future__ import annotations

import posixpath

from builder.site.serve import content_type

IMMUTABLE = "public, max-age=31536000, immutable"
REVALIDATE = "no-cache"
PAGE = "public, max-age=300"
# Raised whenever a rule above changes: the remote manifest records it, and a
# deploy under other rules uploads every object again (with the new headers).
RULES_VERSION = 1


def cache_control(rel: str) -> str:
    """The Cache-Control for a site-relative POSIX path (see the module doc)."""
    if rel == "log/checkpoint":
        return REVALIDATE  # C2SP tlog-tiles, "Checkpoints"
    if rel.startswith("log/tile/"):
        return IMMUTABLE  # C2SP tlog-tiles, "Merkle Tree", "Log entries"
    if rel.startswith("log/") or rel.endswith(".tlog-proof"):
        return REVALIDATE
    if rel.startswith("dreams/") and posixpath.basename(rel) == "record.json":
        return IMMUTABLE  # docs/protocol.md §5: never changes; erasure deletes it
    return PAGE


def long_lived(rel: str) -> bool:
    """Whether a cache may keep ``rel`` long after it is deleted (a CDN must be purged)."""
    return cache_control(rel) == IMMUTABLE


def headers(rel: str) -> tuple[str, str]:
    """(Content-Type, Cache-Control) for ``rel``."""
    return content_type(rel), cache_control(rel)
