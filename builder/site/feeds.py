"""The site's machine-readable files: Atom feeds, sitemap, robots.txt, JSON API.

:func:`feed_pages` maps a :class:`~builder.site.model.SiteModel` to the pages
(:class:`~builder.site.page.Page`, one per site path) of::

    feed.xml                   the pool's 50 newest dreams (Atom 1.0, RFC 4287)
    authors/<slug>/feed.xml    an author's 50 newest dreams, anonymized ones left out
    tags/<slug>/feed.xml       a tag's 50 newest dreams
    sitemap.xml                a sitemap index (sitemaps.org protocol 0.9) of:
    sitemap-dreams-<k>.xml     the pages of the dreams (and tombstones) of log
                               leaves [k·SHARD_LEAVES, (k+1)·SHARD_LEAVES)
    sitemap-archive-<k>.xml    the archive's numbered pages k·SHARD_LEAVES+1 to
                               (k+1)·SHARD_LEAVES (builder.site.render, archive/<n>/)
    sitemap-pages-1.xml        the site's own pages (home, archive/, authors/, …)
    sitemap-pages-<j>.xml      j ≥ 2: the diaries and tag pages, SITEMAP_PAGES_PART
                               a file, in the order authors and tags first appear
    robots.txt                 allow all, and where the sitemap is
    api/dreams.json            the JSON API's index: the pool, its checkpoint,
                               and its shards
    api/dreams/<k>.json        the metadata of the dreams of log leaves
                               [k·SHARD_LEAVES, (k+1)·SHARD_LEAVES), in log order

Shards stay put. Whatever lists every dream is split by log leaf index, as the
search index is (:data:`builder.site.render.SEARCH_SHARD_LEAVES`): a new dream
joins the last shard, so a build after one new dream rewrites the index and
that shard, and a shard the log has moved past changes only when one of its
own dreams does (erased, re-tiered). One api/dreams.json of every dream, and
one sitemap, were rewritten whole by every build (at 100k dreams, 20 MB and
three 5 MB files). The sitemap of the diaries and tag pages is cut into parts
in the order authors and tags first appear (:func:`sitemap_pages`): one file
of them all, by name, was 486 KB at 100k dreams, rewritten by every build.

Links. With an absolute ``base_url`` (``https://…``) every link is absolute.
Otherwise the site may be served under any path, so feeds link relative to
the site root and set ``xml:base`` to that root as seen from the feed (``./``
or ``../../``; XML Base, RFC 3986 §5 resolution against the feed's URL), and
the sitemap lists paths relative to the site root. Pages are named by their
folder (``dreams/<id>/``), which every static host serves as its index.html.

Ids. RFC 4287 §4.2.6 wants an entry's id never to change, even when the feed
moves, so ids are tag URIs (RFC 4151) minted from the pool's origin rather
than URLs built from ``base_url``: for origin ``dreampool.example/sample``,
first signed in 2026, dream ``fe4be06e2406c5e2`` is
``tag:dreampool.example,2026:sample/dreams/fe4be06e2406c5e2``. The year is
the first checkpoint's, which an append-only log never changes.

Every byte is a function of the model: no wall clock; a feed with no entries
is ``updated`` at the latest checkpoint.

Rendering. The feeds, the sitemaps and robots.txt are templates
(``templates/feed.xml``, ``_entry.xml``, ``sitemap-index.xml``, ``urlset.xml``,
``robots.txt``), compiled and rendered as the HTML pages are
(:func:`builder.site.render.render_template`); this module computes what they
show (links, ids, dates, which dreams). The templates fix attribute order and
namespace prefixes, and put every value through the ``xml`` filter
(:func:`builder.text.xmltext.xml`: escaped for XML, and XML 1.0-safe, since
characters outside the ``Char`` production become U+FFFD; dreams refuse
control characters, but a feed must parse whatever a title holds). A dream's
``<entry>`` is rendered once (:func:`entry_xml`, kept by
:mod:`builder.site.units`) and placed in every feed that lists it. The JSON
API is no template: each file is one ``json.dumps`` (:func:`_json`), which
escapes by construction and has no layout to show.
"""

from __future__ import annotations

import functools
import itertools
import json
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Protocol, TypeVar
from urllib.parse import quote

from markupsafe import Markup

from builder.site import render
from builder.site.model import DreamView, ErasedView, SiteModel, absolute_base
from builder.site.page import Page, key_of
from builder.text import mdrender

# sitemaps.org: "no more than 50,000 URLs" a file (and 50 MB: ours stay near 5 MB).
SITEMAP_LIMIT = 50_000
# v2: api/dreams.json is an index of shards (api/dreams/<k>.json, log order);
# v1 was one file of every dream, newest first.
API_FORMAT = "dreampool-api/v2"
# Log leaves one shard of the JSON API and of the dreams' sitemap spans: about
# 400 KB of API and 200 KB of sitemap. At most SITEMAP_LIMIT, since a leaf holds
# one dream at most.
SHARD_LEAVES = 2048
# Diaries and tag pages a sitemap-pages-<j>.xml lists (j ≥ 2), about 30 KB: a
# new dream changes the parts of its author and of each of its (up to 8) tags.
SITEMAP_PAGES_PART = 256
FEED_LIMIT = 50
SUMMARY_LIMIT = mdrender.FEED_SUMMARY_LIMIT
# Used only when the model has no checkpoint at all (then it has no dreams either).
_FALLBACK_DATE = "1970-01-01T00:00:00Z"
_FALLBACK_YEAR = "2026"


class _HasIndex(Protocol):
    @property
    def index(self) -> int: ...


_Indexed = TypeVar("_Indexed", bound=_HasIndex)

# RFC 4151 §2.1: taggingEntity's authorityName is a DNS name (or an email address).
_DNS_NAME = re.compile(
    r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*"
)
# RFC 3986 pchar minus "%": what a tag URI's specific part may hold unencoded.
_TAG_SAFE = "/:@!$&'()*+,;=-._~"


def feed_pages(
    model: SiteModel,
    entries: Callable[[DreamView], str] | None = None,
    entry_key: Callable[[DreamView], str] | None = None,
) -> Iterator[Page]:
    """Every machine-readable file of the site, one at a time, for a writer to
    take as they come: a pool of a million dreams has 50,000 authors, and their
    feeds alone were 2.5 GB held at once. ``entries(dream)``, if given, returns
    :func:`entry_xml` of a dream, made once per build or kept from an earlier one
    (:mod:`builder.site.units`).

    With ``entry_key`` (a key of everything a dream's entry shows:
    :meth:`builder.site.units.Units.key_for`), each Atom feed carries a key, so a
    build keeps the feeds of the authors and tags nothing new touched instead
    of making them again (5,000 author feeds were 6% of a build after one new
    dream at 100k dreams)."""
    entry = entries or (lambda d: entry_xml(model, d))
    yield _feed_page(
        model,
        path="feed.xml",
        title=model.title,
        page="",
        key="feed",
        dreams=model.dreams,
        entry=entry,
        entry_key=entry_key,
    )
    for author in model.authors:
        # AuthorView.dream_ids already leaves out anonymized dreams; the filter
        # makes the promise local, since a leak here would undo the anonymity.
        # (the newest FEED_LIMIT of them, not each of the author's dreams looked up)
        own = (model.by_id[i] for i in author.dream_ids)
        yield _feed_page(
            model,
            path=f"authors/{author.slug}/feed.xml",
            title=f"{author.name} — {model.title}",
            page=f"authors/{author.slug}/",
            key=f"authors/{author.slug}/feed",
            dreams=list(itertools.islice((d for d in own if not d.anonymized), FEED_LIMIT)),
            entry=entry,
            entry_key=entry_key,
        )
    for tag in model.tags:
        yield _feed_page(
            model,
            path=f"tags/{tag.slug}/feed.xml",
            title=f"#{tag.name} — {model.title}",
            page=f"tags/{tag.slug}/",
            key=f"tags/{tag.slug}/feed",
            dreams=[model.by_id[i] for i in tag.dream_ids[:FEED_LIMIT]],
            entry=entry,
            entry_key=entry_key,
        )
    yield from sitemap_files(model, keyed=entry_key is not None)
    yield Page("robots.txt", None, lambda: _robots(model))
    yield from api_pages(model, entry_key)


# --- URLs and ids ------------------------------------------------------------


def _href(model: SiteModel, site_path: str) -> str:
    """A link to a site path: absolute, or relative to the site root (see ``xml:base``)."""
    base = absolute_base(model.base_url)
    if base is not None:
        return base + site_path
    return site_path or "./"


def tag_uri(model: SiteModel, *parts: str) -> str:
    """An RFC 4151 tag URI for a thing of this pool, stable wherever the site is hosted."""
    origin = model.origin
    match = _DNS_NAME.match(origin)
    if match and (match.end() == len(origin) or origin[match.end()] == "/"):
        authority, rest = match.group().lower(), origin[match.end() :]
    else:  # not DNS-shaped (a port, say): keep the whole origin in the specific part
        authority, rest = "dreampool.invalid", origin
    year = model.history[0].date[:4] if model.history else _FALLBACK_YEAR
    specific = "/".join(p for p in (rest.strip("/"), *parts) if p)
    return f"tag:{authority},{year}:{quote(specific, safe=_TAG_SAFE)}"


# --- Atom (RFC 4287) ---------------------------------------------------------


def _feed_page(
    model: SiteModel,
    *,
    path: str,
    title: str,
    page: str,
    key: str,
    dreams: Sequence[DreamView],
    entry: Callable[[DreamView], str],
    entry_key: Callable[[DreamView], str] | None,
) -> Page:
    shown = dreams[:FEED_LIMIT]

    def render() -> bytes:
        return _feed(model, path=path, title=title, page=page, key=key, dreams=shown, entry=entry)

    if entry_key is None:
        return Page(path, None, render, shown)
    # Everything _feed reads: the feed's own strings, the site's (links,
    # tag URIs with the first checkpoint's year), its date and its entries.
    year = model.history[0].date if model.history else None
    site = (model.base_url, model.origin, year)
    parts = (path, title, page, key, site, _updated(model, shown), list(map(entry_key, shown)))
    return Page(path, key_of(parts), render, shown)


def _feed(
    model: SiteModel,
    *,
    path: str,
    title: str,
    page: str,
    key: str,
    dreams: Sequence[DreamView],
    entry: Callable[[DreamView], str],
) -> bytes:
    """One Atom feed of the newest ``FEED_LIMIT`` of ``dreams`` (newest first):
    templates/feed.xml, its entries as ``entry`` renders them."""
    shown = dreams[:FEED_LIMIT]
    relative = absolute_base(model.base_url) is None
    return _file(
        "feed.xml",
        xml_base=("../" * path.count("/") or "./") if relative else None,
        id=tag_uri(model, key),
        title=title,
        updated=_updated(model, shown),
        self_href=_href(model, path),
        page_href=_href(model, page),
        # Rendered by _entry.xml (entry_xml), whose every value is escaped
        # there; joined here, as one value, since 50 of them through the
        # template's loop doubled the cost of a feed.
        entries=Markup("".join(entry(dream) + "\n" for dream in shown)),
    )


def _updated(model: SiteModel, shown: Sequence[DreamView]) -> str:
    """A feed's ``updated``: its newest entry's date, or with no entries the
    latest checkpoint's (so an empty feed changes with every checkpoint)."""
    return shown[0].date if shown else model.checkpoint.date if model.checkpoint else _FALLBACK_DATE


def entry_xml(model: SiteModel, dream: DreamView) -> str:
    """A dream's ``<entry>`` (templates/_entry.xml), indented for its place in
    a feed, without a last newline: the same in every feed that lists it."""
    named = not (dream.author is None or dream.author_slug is None or dream.anonymized)
    return render.render_template(
        "_entry.xml",
        d=dream,
        id=tag_uri(model, "dreams", dream.id),
        href=_href(model, f"dreams/{dream.id}/"),
        author=dream.author if named else None,
        diary=_href(model, f"authors/{dream.author_slug}/") if named else None,
        scheme=tag_uri(model, "tags"),
        summary=_clip(dream.summary or (dream.entries[0].text if dream.entries else "")),
    ).removesuffix("\n")


def _clip(text: str, limit: int = SUMMARY_LIMIT) -> str:
    """``text`` stripped, at most ``limit`` characters including a closing "…",
    cut between tokens (:func:`builder.text.mdrender.clip`)."""
    return mdrender.clip(text, limit)


# --- sitemap, robots ---------------------------------------------------------


def leaf_shards(dreams: Iterable[_Indexed], leaves: int) -> list[tuple[int, list[_Indexed]]]:
    """``dreams`` (anything with a log ``index``) as (k, those of leaves
    [k·leaves, (k+1)·leaves)), k ascending, each shard in log order."""
    shards: dict[int, list[_Indexed]] = {}
    for d in sorted(dreams, key=lambda d: d.index):
        shards.setdefault(d.index // leaves, []).append(d)
    return sorted(shards.items())


def site_pages(model: SiteModel) -> list[tuple[str, str | None]]:
    """The site's own pages, as (site path of its folder, lastmod or None): all
    but verify/ are dated by the pool, so their file changes with every build."""
    pool_date = model.checkpoint.date if model.checkpoint else None
    pages: list[tuple[str, str | None]] = [
        (p, pool_date)
        for p in ("", "archive/", "authors/", "tags/", "lineage/", "patterns/", "log/", "search/")
    ]
    pages.append(("verify/", None))  # static: it changes with dreampool, not with the pool
    return pages


def sitemap_pages(model: SiteModel) -> list[tuple[str, str | None]]:
    """Each author's diary and each tag's page, as (site path of its folder,
    lastmod or None), in an order that only grows at its end: the order they
    first appear in the log (an author's
    :attr:`~builder.site.model.AuthorView.joined`, a tag's oldest dream,
    :attr:`~builder.site.model.TagView.first`; at the
    same leaf the author first, then tags by name). A new author or tag joins
    the end, so a new dream changes the parts (:data:`SITEMAP_PAGES_PART`) of
    its author and its tags, and a part of others keeps its file. Only an
    erasure, or a maintainer removing a key, moves the folders after it.
    Numbered pages of lists are not listed: their entry pages link them."""
    joined: list[tuple[tuple[int, int, str], tuple[str, str | None]]] = []
    for author in model.authors:
        # The newest dream the diary shows; an anonymized dream's date would hint at it.
        newest = model.by_id[author.dream_ids[0]].date if author.dream_ids else None
        joined.append(((author.joined, 0, author.name), (f"authors/{author.slug}/", newest)))
    for t in model.tags:  # dream_ids newest first
        joined.append(((t.first, 1, t.name), (f"tags/{t.slug}/", model.by_id[t.dream_ids[0]].date)))
    return [page for _, page in sorted(joined)]


def sitemap_dreams(model: SiteModel) -> list[tuple[int, list[tuple[str, str | None]]]]:
    """The dreams' pages and the tombstones of erased ones as (k, [(folder,
    lastmod)]) shards of :data:`SHARD_LEAVES` log leaves, in log order."""
    listed: list[DreamView | ErasedView] = [*model.dreams, *model.erased]
    return [
        (k, [(f"dreams/{d.id}/", d.date) for d in part])
        for k, part in leaf_shards(listed, SHARD_LEAVES)
    ]


def sitemap_archive(model: SiteModel) -> list[tuple[int, list[tuple[str, str | None]]]]:
    """The archive's numbered pages (:func:`builder.site.render.archive_pages`)
    as (k, [(folder, lastmod)]) shards of pages k·SHARD_LEAVES+1 to
    (k+1)·SHARD_LEAVES: a shard of full pages keeps its bytes as the pool grows
    (a full page's newest dream, its lastmod, is fixed), and a new dream changes
    only the shard of the open page. An empty open page has no lastmod."""
    size = render.ARCHIVE_PAGE_SIZE
    ids = [d.id for d in model.dreams]
    shards: dict[int, list[tuple[str, str | None]]] = {}
    for number in range(1, render.archive_pages(len(ids), size) + 1):
        listed, _, _ = render.archive_page(ids, number, size)
        lastmod = max((model.by_id[i].date for i in listed), default=None)
        folder = render.archive_page_path(number).removesuffix("index.html")
        shards.setdefault((number - 1) // SHARD_LEAVES, []).append((folder, lastmod))
    return sorted(shards.items())


def sitemap_files(model: SiteModel, *, keyed: bool = False) -> Iterator[Page]:
    """``sitemap.xml``, an index (sitemaps.org, "Using Sitemap index files")
    of ``sitemap-dreams-<k>.xml`` (append-stable shards by log leaf, see the
    module docstring), ``sitemap-archive-<k>.xml`` (the archive's numbered
    pages, append-stable too: :func:`sitemap_archive`) and
    ``sitemap-pages-1.xml`` (the site's own pages: :func:`site_pages`) and
    ``sitemap-pages-<j>.xml``, j ≥ 2 (the diaries and tag pages,
    :data:`SITEMAP_PAGES_PART` a file, in the append-stable order of
    :func:`sitemap_pages`).
    They sit at the root, beside the index: a sitemap may only list URLs under
    its own folder.

    With ``keyed`` (the build) each sitemap but the index carries a key of
    what it lists, so a build keeps the shards the log has moved past instead
    of making every one again (each build made all of them: 0.1 s CPU at 10k
    dreams, 2,048 URLs a shard)."""
    assert max(SHARD_LEAVES, SITEMAP_PAGES_PART) <= SITEMAP_LIMIT  # a dream a leaf at most
    parts: list[tuple[str, list[tuple[str, str | None]]]] = [
        (f"sitemap-dreams-{k}.xml", part) for k, part in sitemap_dreams(model)
    ]
    parts += [(f"sitemap-archive-{k}.xml", part) for k, part in sitemap_archive(model)]
    parts.append(("sitemap-pages-1.xml", site_pages(model)))
    pages, size = sitemap_pages(model), SITEMAP_PAGES_PART
    for number, start in enumerate(range(0, len(pages), size), 2):
        parts.append((f"sitemap-pages-{number}.xml", pages[start : start + size]))
    index = [
        # Its newest page's date (RFC 3339 UTC strings of one shape sort as times).
        (_href(model, path), max((lastmod for _, lastmod in part if lastmod), default=None))
        for path, part in parts
    ]
    yield Page("sitemap.xml", None, lambda: _file("sitemap-index.xml", sitemaps=index))
    for path, part in parts:
        # Everything a sitemap shows: its folders and dates, and the links' base.
        key = key_of(("sitemap", path, model.base_url, part)) if keyed else None
        yield Page(path, key, functools.partial(_urlset, model, part))


def _urlset(model: SiteModel, part: Sequence[tuple[str, str | None]]) -> bytes:
    return _file("urlset.xml", urls=[(_href(model, p), mod) for p, mod in part])


def _robots(model: SiteModel) -> bytes:
    """robots.txt (RFC 9309): allow all, and the sitemap's absolute URL if
    there is one (templates/robots.txt)."""
    base = absolute_base(model.base_url)
    return _file("robots.txt", sitemap=None if base is None else f"{base}sitemap.xml")


def _file(template: str, **context: Any) -> bytes:
    """A file of the site from its template, rendered as every page is
    (:func:`builder.site.render.render_template`), in UTF-8."""
    return render.render_template(template, **context).encode("utf-8")


# --- JSON API ----------------------------------------------------------------


def api_pages(
    model: SiteModel, entry_key: Callable[[DreamView], str] | None = None
) -> Iterator[Page]:
    """``api/dreams.json`` and its shards ``api/dreams/<k>.json``. With
    ``entry_key`` (as :func:`feed_pages`) each shard carries a key, so a
    build keeps the shards whose dreams did not change."""
    shards = leaf_shards(model.dreams, SHARD_LEAVES)  # docs/protocol.md §8
    yield Page("api/dreams.json", None, lambda: api_index(model, shards))
    for k, part in shards:
        key = (
            None
            if entry_key is None
            else key_of(("api", k, SHARD_LEAVES, list(map(entry_key, part))))
        )
        yield Page(f"api/dreams/{k}.json", key, functools.partial(api_shard, k, part))


def api_index(model: SiteModel, shards: Sequence[tuple[int, Sequence[DreamView]]]) -> bytes:
    """api/dreams.json, ``json.dumps`` (sorted keys, compact) of::

        {"dreams": n, "format": "dreampool-api/v2",
         "pool": {"checkpoint": {"root": …, "size": …} | null, "origin": …, "title": …},
         "shard_leaves": SHARD_LEAVES,
         "shards": [{"dreams": m, "leaves": [first, end], "path": "dreams/<k>.json"}, …]}

    shards in log order, only those holding a dream; ``path`` is relative to
    this file's folder; ``leaves`` is the half-open range of log indexes."""
    checkpoint = model.checkpoint
    index = {
        "dreams": len(model.dreams),
        "format": API_FORMAT,
        "pool": {
            "title": model.title,
            "origin": model.origin,
            "checkpoint": (
                {"size": checkpoint.size, "root": checkpoint.root} if checkpoint else None
            ),
        },
        "shard_leaves": SHARD_LEAVES,
        "shards": [
            {
                "dreams": len(part),
                "leaves": [k * SHARD_LEAVES, (k + 1) * SHARD_LEAVES],
                "path": f"dreams/{k}.json",
            }
            for k, part in shards
        ],
    }
    return _json(index) + b"\n"  # docs/protocol.md §8: the index


def api_shard(k: int, dreams: Sequence[DreamView]) -> bytes:
    """api/dreams/<k>.json: ``{"dreams": [dream, …], "format": …, "leaves":
    [first, end]}`` in log order, each dream ``{"author", "date", "id",
    "index", "tags", "tier", "title"}`` (author null when anonymized); made one
    dream at a time as UTF-8 (a whole API as Python objects and one str was over
    a gigabyte at a million dreams). Nothing in it depends on dreams outside
    the shard, the checkpoint or the pool's title, so a shard the log has moved
    past keeps its bytes."""
    body = b",".join(
        _json(
            {
                "id": d.id,
                "title": d.title,
                "author": None if d.anonymized else d.author,
                "tags": [t.name for t in d.tags],
                "tier": d.tier,
                "date": d.date,
                "index": d.index,
            }
        )
        for d in dreams
    )
    leaves = _json([k * SHARD_LEAVES, (k + 1) * SHARD_LEAVES])
    # The document's own keys, sorted: dreams, format, leaves (docs/protocol.md §8).
    return b'{"dreams":[%b],"format":%b,"leaves":%b}\n' % (body, _json(API_FORMAT), leaves)


def _json(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode()
