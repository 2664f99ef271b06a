"""A file of the site to make, and the key that names what its bytes depend on.

:func:`builder.site.render.list_pages`, :func:`builder.site.feeds.feed_pages` and
:func:`builder.site.agentdocs.agent_pages` hand out :class:`Page` values;
:mod:`builder.site` renders each one, or keeps the file a past build wrote
when the key is the one recorded for it then (:mod:`builder.buildcache`,
:meth:`builder.site.writer.SiteWriter.keep_all`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from builder.site.model import DreamView


@dataclass(frozen=True, slots=True)
class Page:
    """A file to make: ``render()`` gives its bytes. ``key``, when not None,
    names everything the bytes depend on, so a build that finds the same key
    from the last one may keep that file. ``shows`` names the dreams whose
    fragments (cards, diary lines, feed or search entries) it repeats, so
    they can be read from the store in one query before it is rendered
    (:meth:`builder.site.units.Units.prefetch`). A page that ``waits`` is
    rendered in the build's own process once every page before it is written:
    its ``render`` waits for what another process of the build computes (the
    patterns), which a forked worker could not ask for."""

    path: str
    key: str | None
    render: Callable[[], bytes]
    shows: Sequence[DreamView] = ()
    waits: bool = False


def key_of(parts: object) -> str:
    """A page key: a digest of ``repr(parts)``, so ``parts`` must hold only
    values whose repr is fixed and shows all they hold (str, int, None,
    tuples, lists, and dataclasses of these)."""
    return hashlib.blake2b(repr(parts).encode(), digest_size=16).hexdigest()
