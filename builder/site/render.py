"""The site's HTML pages, its search index and its static assets.

:func:`list_pages` turns the :class:`~builder.site.model.SiteModel` into the pages
(:class:`~builder.site.page.Page`, one per site path) of the URL scheme, and
:func:`dream_page` makes a dream's own (:mod:`builder.site.units` calls it):

    index.html                       home: latest dreams, counts, checkpoint
    archive/index.html               every dream, newest first: the newest
                                     ARCHIVE_PAGE_SIZE, a year/month index
                                     and links to the numbered pages
    archive/<n>/index.html           page n ≥ 1 of the archive (past
                                     ARCHIVE_PAGE_SIZE dreams), counted from the
                                     oldest, as a tag's numbered pages
    dreams/<id>/index.html           a dream, or a tombstone if it was erased
    authors/index.html               the newest AUTHOR_INDEX_PAGE_SIZE authors to
                                     join, with tiers and counts, and links to
                                     the numbered pages
    authors/index/<n>/index.html     page n ≥ 1 of the authors index, counted
                                     from the first to join, as a tag's pages
    authors/<slug>/index.html        a diary: keys and a timeline by month of the
                                     author's newest DIARY_PAGE_SIZE dreams
    authors/<slug>/<n>/index.html    page n ≥ 1 of a longer timeline, counted from
                                     the oldest, as a tag's numbered pages
    tags/index.html                  the TAG_INDEX_PAGE_SIZE most used tags, and
                                     links to the numbered pages
    tags/index/<n>/index.html        page n ≥ 1 of the tags index, counted from
                                     the first tag to appear, as a tag's pages
    tags/<slug>/index.html           a tag's newest TAG_PAGE_SIZE dreams, and links
                                     to its numbered pages
    tags/<slug>/<n>/index.html       page n ≥ 1 of a tag of more than TAG_PAGE_SIZE
                                     dreams: the n-th TAG_PAGE_SIZE of them, counted
                                     from the oldest (log order), newest first on the page
    lineage/index.html, lineage/<n>/index.html
                                     parent → child chains, one tree per root,
                                     LINEAGE_PAGE_TREES a page, oldest root first
    patterns/index.html              the k-anonymous patterns fragment, wrapped
    log/index.html                   checkpoints, the pool by month
                                     (builder.site.timeline), policy, how to monitor
    search/index.html                the search page (static/search.js)
    search/index.json, search/shard-<k>.json
                                     its index: a list of shards, each the
                                     dreams of SEARCH_SHARD_LEAVES log leaves
    verify/index.html                verify saved proofs in the browser, from local files
    404.html
    static/style.css, static/search.js
    static/jcs.js, crypto.js, merkle.js, tlog.js, lightclient.js, unicodepolicy.js,
    fetchcap.js, pins.js, history.js, markdown.js, markdown-it.min.js, display.js, verify.js
                                     the browser verifier (ES modules; markdown-it
                                     is markdown-it 14.1.0, MIT, for display.js)
    static/favicon.svg, favicon.ico  the icon (builder.site.favicon)

Safety, in the order a hostile dream meets it:

* Jinja autoescape is on for every HTML (and XML) template
  (:func:`autoescape`), and data is never template source, so ``{{ 7*7 }}``
  in a title stays text.
* Markdown (summaries only) goes through one markdown-it-py parser
  (:mod:`builder.text.mdrender`, which redaction judges too) with raw
  HTML off, links limited to http, https and mailto, ``rel="nofollow ugc
  noopener"`` on every link and images turned off: ``![a](b)`` reads as ``!``
  and a link, so a page never loads a remote image.
* Every element that holds user text carries ``dir="auto"``: a right-to-left
  title cannot reorder the text around it.
* No inline script, style or ``on*`` attribute anywhere: the pages carry a
  CSP meta that forbids them, and search.js and verify.js build what they
  show with ``textContent`` only.
* URL paths come from ids and :func:`builder.site.model.slug` alone.

Pages that stay put. A build after one new dream should rewrite a bounded set
of files whatever the pool's size, so a list longer than a page is numbered
from its oldest item, in log order (leaf index order): page n holds items
[(n-1)·size, n·size), a new item joins only the last page, and a full page
never changes again (unless one of its own dreams does: erased, re-tiered).
Numbered newest first, as before, one new dream shifted every page of its tag
(236 files, 60.7 MB at 100k dreams). What stays put:

* A full page shows nothing that depends on the list's length (no "page n of
  m", no total count) and links to its neighbours by number only: n-1 and
  n+1. The last page is *open* (:func:`archive_pages`): a list of k·size items
  has an empty page k+1, so a full page's "next" link always resolves and does
  not appear the moment the list grows.
* The entry page of a list knows the total and changes with it. For a tag,
  ``tags/<slug>/`` shows the tag's newest TAG_PAGE_SIZE dreams, newest first,
  which is what a reader arriving at a tag expects (as Hugo's list pages do),
  links "older" to the numbered page holding the next older dream, and lists
  every numbered page. A tag that fits one page has no numbered pages. (Showing
  only the open page there would show one card just after a page fills.) So
  a paged list names its newest dreams twice: on its entry page and on their
  numbered page. A diary (``authors/<slug>/``) is paged the same way
  (DIARY_PAGE_SIZE); only its entry page shows the author's keys. So is the
  authors index (AUTHOR_INDEX_PAGE_SIZE), in the order authors joined the log:
  a new author joins its open page, and a new dream changes the page of its
  author's card only. The tags index pages its numbered pages the same way, in
  the order tags first appear; its entry page shows the most used.
* Lineage pages keep their scheme (page 1, ``lineage/``, holds the oldest
  chains and lists every page; a later page links on by number).
* The search index is already sharded by leaf index (SEARCH_SHARD_LEAVES), and
  :mod:`builder.site.feeds` shards the sitemap and the JSON API the same way.

Links are relative to the page (``../`` per level), so the site works under
any sub-path; only 404.html, which a server shows at arbitrary paths, uses the
base path from ``base_url``. Rendering is a pure function of the model: the
same model gives the same bytes.
"""

from __future__ import annotations

import bisect
import functools
import hashlib
import json
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any, TypeVar
from urllib.parse import urlsplit

import jinja2
from markupsafe import Markup

from builder.site import favicon, patterns, templates_compiled, timeline
from builder.site.model import TIER_RANK, AuthorView, DreamView, SiteModel, TagView
from builder.site.page import Page, key_of
from builder.text.mdrender import EXCERPT_LIMIT, LINK_REL, clip, plain_text, render_markdown
from builder.text.textlang import content_lang
from builder.text.xmltext import xml

_T = TypeVar("_T")

# The page kinds of the header nav, in order: (key, label, path from the root).
NAV = (
    ("home", "Home", ""),
    ("archive", "Archive", "archive/"),
    ("tags", "Tags", "tags/"),
    ("authors", "Authors", "authors/"),
    ("lineage", "Lineage", "lineage/"),
    ("patterns", "Patterns", "patterns/"),
    ("log", "Log", "log/"),
    ("search", "Search", "search/"),
    ("verify", "Verify", "verify/"),
)
# The browser verifier is seven ES modules: verify.js (the UI) imports lightclient.js
# (docs/protocol.md §5), which imports the formats: jcs.js, crypto.js, merkle.js, tlog.js,
# and unicodepolicy.js (§1.1, generated from builder/formats/unicodetables.py).
STATIC = (
    "style.css",
    "search.js",
    "jcs.js",
    "crypto.js",
    "merkle.js",
    "tlog.js",
    "lightclient.js",
    "unicodepolicy.js",
    "fetchcap.js",
    "pins.js",
    "history.js",
    "markdown.js",
    "markdown-it.min.js",
    "display.js",
    "verify.js",
    "favicon.svg",  # builder.site.favicon.svg(), kept as a file (tests/test_render.py)
)
LATEST = 20
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "object-src 'none'; base-uri 'none'; form-action 'none'"
)
ENTRY_HEADINGS = {
    "fact": "Facts",
    "decision": "Decisions",
    "preference": "Preferences",
    "lesson": "Lessons",
    "rule": "Rules",
    "warning": "Warnings",
    "theory": "Theories",
    "plan": "Plans",
}
MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
_WEB_URL = re.compile(r"https?://[^\s<>\"'`]{1,290}")


# --- Markdown ----------------------------------------------------------------


def is_web_url(text: str) -> bool:
    """Whether an entry's source is a bare http(s) URL, shown as a link."""
    return _WEB_URL.fullmatch(text) is not None


# --- Derived views -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TreeStep:
    """One step of a depth-first walk of a lineage tree, flat so that a chain
    of a thousand generations renders without recursion: "open" and "close" a
    nested list, "item" starts a dream's list item, "end" closes it."""

    kind: str
    dream: DreamView | None = None
    # An item's generation by the parent links: its root's plus its depth
    # under it. A root that names no parent is generation 0; one whose parent
    # is not in the pool is taken at its word (None if it declares none).
    generation: int | None = None


def lineage_roots(model: SiteModel) -> list[DreamView]:
    """Dreams that start a chain: those that name no parent, or one that is
    not in the pool (never submitted, or erased), among dreams that take part
    in lineage at all (declared or with children).

    The parent links alone decide: a dream whose parent is in the pool is
    shown under that parent, whatever generation it declares. So every dream
    is in one tree at most, and the trees hold each dream once. (Taken as a
    root, a dream that said generation 0 under a parent was also a tree of
    its own: a chain of n such dreams was n trees of n/2 dreams on average,
    and 1,200 dreams made 273 MB of lineage pages.) A cycle of parent links
    would have no root and be shown in no tree; a dream's id is 64 bits of a
    hash of its signature, over the parent it names, so closing a short cycle
    is a 64-bit preimage search."""
    return [
        d
        for d in reversed(model.dreams)  # oldest first: chains read in admission order
        if not d.parent_in_pool and (d.generation is not None or d.children)
    ]


def lineage_walk(model: SiteModel, root: DreamView) -> list[TreeStep]:
    # "seen" guards against a node reached twice (ids are hashes of signatures,
    # so a cycle cannot be made, but a guard is cheaper than that argument).
    seen = {root.id}
    steps = [TreeStep("open")]
    stack: list[Iterator[DreamView]] = []
    base = 0 if root.parent_id is None else root.generation

    def enter(dream: DreamView) -> None:
        # len(stack) is the dream's depth under the root: each open list of
        # children is one iterator on the stack.
        steps.append(TreeStep("item", dream, None if base is None else base + len(stack)))
        kids = [model.by_id[c] for c in dream.children if c in model.by_id and c not in seen]
        seen.update(k.id for k in kids)
        if kids:
            steps.append(TreeStep("open"))
            stack.append(iter(kids))
        else:
            steps.append(TreeStep("end"))

    enter(root)
    while stack:
        nxt = next(stack[-1], None)
        if nxt is None:
            stack.pop()
            steps += [TreeStep("close"), TreeStep("end")]
        else:
            enter(nxt)
    steps.append(TreeStep("close"))
    return steps


def lineage_children(model: SiteModel, d: DreamView) -> tuple[list[DreamView], list[DreamView]]:
    """A dream's children as (listed, replies), each oldest first: ``replies``
    are the children by a guest key (or a tier :data:`TIER_RANK` does not know)
    under a dream of a higher tier, which its page shows collapsed; the rest are
    listed. Anyone can make a guest key and name any dream as its parent, so a
    guest's reply must not read as the continuation of a maintainer's or a
    member's work: every child is shown with its tier, and these apart."""
    listed: list[DreamView] = []
    replies: list[DreamView] = []
    for c in d.children:
        if c in model.by_id:
            kid = model.by_id[c]
            apart = _rank(kid.tier) >= _GUEST and _rank(kid.tier) > _rank(d.tier)
            (replies if apart else listed).append(kid)
    return listed, replies


def tier_counts(model: SiteModel, ids: Sequence[str]) -> list[tuple[str, int]]:
    """(tier, how many of ``ids`` are of it), most trusted first, for the tiers present."""
    counts: dict[str, int] = defaultdict(int)
    for i in ids:
        if i in model.by_id:
            counts[model.by_id[i].tier] += 1
    return sorted(counts.items(), key=lambda tc: (_rank(tc[0]), tc[0]))


_GUEST = TIER_RANK["guest"]


def _rank(tier: str) -> int:
    """A tier's rank, 0 the most trusted; a tier not known ranks below guest."""
    return TIER_RANK.get(tier, len(TIER_RANK))


def by_month(dreams: Sequence[DreamView]) -> list[tuple[str, str, list[DreamView]]]:
    """(YYYY-MM, "Month YYYY", dreams) groups, newest month first."""
    groups: dict[str, list[DreamView]] = defaultdict(list)
    for d in dreams:
        groups[d.month].append(d)
    out = []
    for month in sorted(groups, reverse=True):
        year, mm = month.split("-")
        out.append((month, f"{MONTHS[int(mm) - 1]} {year}", groups[month]))
    return out


def proof_size(model: SiteModel, index: int) -> int | None:
    """The size of the checkpoint a dream's proof.tlog-proof is against: the
    first one that holds the leaf (docs/protocol.md §5; see logbuild.proof_bytes),
    or None before one does. The sizes only grow (an append-only log)."""
    sizes = model.checkpoint_sizes
    at = bisect.bisect_right(sizes, index)  # the first size > index
    return sizes[at] if at < len(sizes) else None


@functools.lru_cache(maxsize=64)
def excerpt(markdown: str, limit: int = EXCERPT_LIMIT) -> str:
    """At most ``limit`` characters of a summary's text, Markdown syntax removed
    (plain text: the template escapes it like any other), cut between tokens."""
    return clip(plain_text(markdown), limit)


SEARCH_JOIN = " · "
"""Between the texts of a search shard's ``text``: a visible separator, not a line break."""


def search_entry(d: DreamView) -> str:
    """A dream's object in its search shard (search_shard), as JSON text.

    ``text`` is the summary as plain text and each entry's text as the author
    wrote them, joined by :data:`SEARCH_JOIN`: a result shows it in one paragraph,
    where a line break would read as a space and join the end of one text to the
    start of the next ("+44 20" and "7946 0958" into a phone number); the dot
    joins no token. search.js folds them (NFKC, lower case) to match
    and shows a snippet of the original with the match marked. The title and
    tags are searched from their own fields. ``tier`` is the key directory's,
    shown on the result as on a card: a guest's dream among a maintainer's
    must not read as one of theirs.
    """
    parts = [plain_text(d.summary)] if d.summary else []
    parts += [e.text for e in d.entries]
    entry = {
        "id": d.id,
        "title": d.title,
        "author": d.author,
        "tags": [t.name for t in d.tags],
        "tier": d.tier,
        "date": d.day,
        "text": SEARCH_JOIN.join(parts),
    }
    return json.dumps(entry, ensure_ascii=False, separators=(",", ":"))


def search_entry_bytes(d: DreamView) -> bytes:
    return search_entry(d).encode()


# v4: each dream carries its key's tier, shown as a badge on its result.
# v3: "text" is the original text, not folded (v2 held it NFKC-folded, lower case).
SEARCH_FORMAT = "dreampool-search/v4"
# Log leaves a search shard spans: search/shard-<k>.json holds the dreams with
# log index in [k·2048, (k+1)·2048), ≈2 MB of text. A shard the log has
# moved past changes only when one of its dreams does (erased, re-tiered), so
# a build keeps it, and search.js shows results from the newest shard while
# it fetches the older ones: one index.json of every dream was 110 MB at 100k
# dreams, rewritten by every build and downloaded whole before a first result.
SEARCH_SHARD_LEAVES = 2048


def search_shards(model: SiteModel) -> list[tuple[int, list[DreamView]]]:
    """The search shards as (k, their dreams), newest first, as the dreams are."""
    shards: dict[int, list[DreamView]] = {}
    for d in model.dreams:  # log index descending
        shards.setdefault(d.index // SEARCH_SHARD_LEAVES, []).append(d)
    return list(shards.items())


def search_index(model: SiteModel, shards: Sequence[tuple[int, Sequence[DreamView]]]) -> bytes:
    """search/index.json: ``{"dreams": n, "format": …, "shards": [{"dreams": …,
    "path": "shard-<k>.json"}, …]}``, newest shard first, compact."""
    index = {
        "dreams": len(model.dreams),
        "format": SEARCH_FORMAT,
        "shards": [{"dreams": len(ds), "path": f"shard-{k}.json"} for k, ds in shards],
    }
    return json.dumps(index, sort_keys=True, separators=(",", ":")).encode()


def search_shard(
    dreams: Sequence[DreamView], entry: Callable[[DreamView], bytes] = search_entry_bytes
) -> bytes:
    """search/shard-<k>.json: ``{"dreams": [entry, …], "format": …}``, newest
    first, compact: the bytes of ``json.dumps`` of the whole, joined from the
    entries (made once per dream and kept: :mod:`builder.site.units`)."""
    out = bytearray(b'{"dreams":[')
    for i, d in enumerate(dreams):
        if i:
            out += b","
        out += entry(d)
    out += b'],"format":"%s"}' % SEARCH_FORMAT.encode()
    return bytes(out)


# --- Pages ---------------------------------------------------------------------


def lang_attribute(text: str) -> Markup:
    """`` lang="zh"`` (or ja, ko) for an element holding ``text`` in a CJK script,
    else nothing: the page's language (en, the interface's) applies."""
    lang = content_lang(text)
    return Markup(f' lang="{lang}"') if lang else Markup("")


# The files templates make, by extension: HTML pages, XML feeds and sitemaps
# (builder.site.feeds), and plain text (robots.txt).
TEMPLATE_SUFFIXES = (".html", ".xml", ".txt")
# Those escaped as markup: every one but plain text, which has no escaping.
ESCAPED_SUFFIXES = (".html", ".xml")


def autoescape(name: str | None) -> bool:
    """Whether Jinja escapes what a template prints: for HTML and XML (and a
    template made from a string, which is HTML here), not for plain text. As
    :func:`jinja2.select_autoescape`, but named, so that :func:`compiled_key`
    can say what it is."""
    return name is None or name.endswith(ESCAPED_SUFFIXES)


# The settings of every Jinja environment of the site: the build's (from the
# compiled modules or from the sources) and the one scripts/compile_templates.py
# compiles the modules with. All of them are made by environment() alone, so the
# compiled code and the build cannot drift apart.
JINJA_OPTIONS: dict[str, Any] = {
    "autoescape": autoescape,
    "undefined": jinja2.StrictUndefined,
    "trim_blocks": True,
    "lstrip_blocks": True,
    "keep_trailing_newline": True,
    "auto_reload": False,
}


def environment(loader: jinja2.BaseLoader) -> jinja2.Environment:
    """A Jinja environment of the site reading its templates through ``loader``:
    :data:`JINJA_OPTIONS`, the site's filters, tests and globals."""
    env = jinja2.Environment(loader=loader, **JINJA_OPTIONS)
    env.filters["markdown"] = lambda text: Markup(render_markdown(text))
    env.filters["excerpt"] = excerpt
    env.filters["lang"] = lang_attribute
    env.filters["xml"] = xml
    env.tests["web_url"] = is_web_url
    env.tests["counted_in_patterns"] = patterns.counts
    env.globals.update(
        NAV=NAV,
        CSP=CSP,
        ENTRY_HEADINGS=ENTRY_HEADINGS,
        LINK_REL=LINK_REL,
        proof_size=proof_size,
        nav_links=nav_links,
        lineage_children=lineage_children,
        tier_counts=tier_counts,
    )
    return env


def source_loader() -> jinja2.BaseLoader:
    """The templates' sources, as installed (``templates/`` installs as ``builder.templates``)."""
    return jinja2.PackageLoader("builder.templates", "")


def is_template(name: str) -> bool:
    """Whether a file the template package holds is a template (not a static
    asset, the package's ``__init__.py`` or a ``__pycache__`` file)."""
    return "/" not in name and name.endswith(TEMPLATE_SUFFIXES)


def compiled_key(env: jinja2.Environment) -> str:
    """A digest of everything Jinja's compiled code for ``env``'s templates
    depends on: the Jinja version (the generated code calls its runtime, which
    is no stable interface between versions), :data:`JINJA_OPTIONS` (the
    lexer's settings and autoescape are compiled in), the names of the filters
    and tests and what they are passed (the compiler looks them up), and each
    template's name and source. :mod:`builder.site.templates_compiled` records
    the key of what its modules were compiled from."""
    assert env.loader is not None
    h = hashlib.sha256(f"jinja2 {jinja2.__version__}\0".encode())
    for option, value in sorted(JINJA_OPTIONS.items()):
        # The autoescape function by what it decides (its repr names an address).
        shown = f"autoescape{ESCAPED_SUFFIXES!r}" if value is autoescape else repr(value)
        h.update(f"{option}={shown}\0".encode())
    for kind, functions in (("filter", env.filters), ("test", env.tests)):
        for name, function in sorted(functions.items()):
            passed = getattr(function, "jinja_pass_arg", None)
            h.update(f"{kind} {name} {passed!r}\0".encode())
    for name in sorted(filter(is_template, env.loader.list_templates())):
        source = env.loader.get_source(env, name)[0].encode()
        h.update(f"{name}\0{len(source)}\0".encode() + source)
    return h.hexdigest()


def _environment() -> tuple[jinja2.Environment, bool]:
    """The build's environment, and whether it loads the compiled modules.

    The templates are compiled ahead of time (scripts/compile_templates.py)
    into :mod:`builder.site.templates_compiled`, a folder of the installed
    package, and loaded from there with :class:`jinja2.ModuleLoader`:
    compiling them from source was paid by every build (under a profiler,
    0.94 s CPU, 22% of a +1 build at 2,001 dreams; without one, 0.08 s for the
    first dream page of a process, 0.003 s from the modules with their
    bytecode, as pip installs them). The modules are code, as every module of
    the package is; they are read from the installed package only, never from
    the pool or the build's output (THREATS.md T44, T45).

    When the modules were compiled from anything but what is installed now (a
    different Jinja, which the dependency range allows; a template edited
    without running the script) the build compiles the templates from source,
    as it did before: the same bytes, at the old cost. A fallback, not a pinned
    Jinja version, so that a pool never fails to build over it;
    tests/test_compiled_templates.py fails when the committed modules are not
    what the script makes, so the fallback is never what this repository ships.
    The key covers what the modules were compiled from, not the modules: like
    every module of the package they are trusted as installed, and that test
    holds the committed ones to the script.
    """
    source = environment(source_loader())
    if compiled_key(source) != templates_compiled.SOURCE_KEY:
        return source, False
    return environment(jinja2.ModuleLoader(templates_compiled.__path__)), True


@functools.lru_cache(maxsize=256)
def nav_links(root: str, nav: str) -> Markup:
    """The navigation's items for pages at one depth with one current link:
    the same on every dream page, so rendered once, not per page."""
    return Markup(render_template("_nav.html", root=root, nav=nav))


# TEMPLATES_COMPILED: whether this process renders with the compiled modules.
_ENV, TEMPLATES_COMPILED = _environment()


_CARD = _ENV.from_string('{% import "_macros.html" as m %}{{ m.card(d, root, level) }}')


def render_template(template: str, **context: Any) -> str:
    """The one way the site renders a template (``templates/``): its HTML pages
    and fragments here, its Atom feeds, sitemaps and robots.txt in
    :mod:`builder.site.feeds`; with the build's environment (the compiled
    modules, or the sources: :func:`_environment`)."""
    return _render(_ENV.get_template(template), context)


def _render(page: jinja2.Template, context: dict[str, Any]) -> str:
    """As :meth:`jinja2.Template.render`, but the context is made with one dict
    merge of the globals and ``context``, passed as the context's own
    (``new_context(shared=True)``, Jinja's documented way to pass data "as
    is"): ``render`` copies the globals, a :class:`collections.ChainMap`, key
    by key into each render's context, 20 µs of a 28 µs render of an empty
    template, which is most of a feed entry's or a card's. The context holds
    the same names either way, since a template of the site has no globals of
    its own (tests/test_compiled_templates.py)."""
    scope = page.new_context({**_ENV.globals, **context}, shared=True)
    try:
        return _ENV.concat(page.root_render_func(scope))
    except Exception:
        _ENV.handle_exception()  # Jinja's traceback, as render gives


def _root(depth: int) -> str:
    return "../" * depth if depth else "./"


def _base_path(base_url: str) -> str:
    path = urlsplit(base_url).path or "/"
    return path if path.endswith("/") else path + "/"


@dataclass(frozen=True, slots=True)
class _Later:
    """A page's context value made when the page is rendered, not when its
    :class:`Page` is listed: a build keeps most list pages unrendered (their
    key is the last build's), and grouping each one's dreams by month
    (:func:`by_month`) was a tenth of listing them at 100k dreams."""

    make: Callable[..., Any]
    args: tuple[Any, ...]


def _page(model: SiteModel, path: str, template: str, nav: str, **context: Any) -> bytes:
    """One page at ``path``; ``nav`` names the header link marked as current."""
    for name, value in context.items():
        if isinstance(value, _Later):
            context[name] = value.make(*value.args)
    absolute = model.base_url.startswith(("https://", "http://"))
    canonical = path != "404.html" and absolute
    context.setdefault("root", _root(path.count("/")))
    html = render_template(
        template,
        site=model,
        nav=nav,
        erased=model.erased_ids,
        canonical=model.base_url + path.removesuffix("index.html") if canonical else None,
        **context,
    )
    return html.encode("utf-8")


# Cards per archive page: every dream of the pool, paged as a tag is.
ARCHIVE_PAGE_SIZE = 100
TAG_PAGE_SIZE = 100  # cards per tag page; a tag of 20,000 dreams makes 200 pages, not one
# Lines of a diary's timeline a page (about 600 bytes each): authors/<slug>/
# shows the newest, authors/<slug>/<n>/ the n-th from the oldest.
DIARY_PAGE_SIZE = 200
# Authors a page of the authors index (about 280 bytes each): authors/ shows
# the newest to join, authors/index/<n>/ the n-th from the first. One page of
# every author was 1.37 MB at 100k dreams (5,000 authors), made and written
# again by every build.
AUTHOR_INDEX_PAGE_SIZE = 200
# Tags a page of the tags index: tags/ shows the most used, tags/index/<n>/
# the n-th in the order they first appear (a tag's vocabulary grows with the pool).
TAG_INDEX_PAGE_SIZE = 200


# Chains per lineage page. Roots come oldest first, so a chain stays on its
# page as the pool grows, and a new dream makes only its chain's page again;
# one page of every chain was 8.6 MB of HTML at 100k dreams (8,111 chains),
# made again whenever any chain grew.
LINEAGE_PAGE_TREES = 100


def archive_pages(count: int, size: int) -> int:
    """How many numbered pages a list of ``count`` items, ``size`` a page in log
    order, has: none while its entry page shows them all (``count <= size``),
    else ``count // size + 1``. Every page but the last is full; the last is
    *open* (new items join it; it is empty when ``count`` is a multiple of
    ``size``). So a full page always has a next page to link to, and never
    changes again when the list grows (see the module docstring)."""
    return 0 if count <= size else count // size + 1


def archive_page(newest_first: Sequence[_T], number: int, size: int) -> tuple[list[_T], bool, int]:
    """Numbered page ``number`` (:func:`archive_pages`) of a list whose ids are
    ``newest_first``: its ids (newest first on the page), whether it is full,
    and the position of its oldest (0 is the list's oldest, in log order).
    Page n holds positions [(n-1)·size, n·size) (docs/protocol.md §8)."""
    count = len(newest_first)
    lo, hi = (number - 1) * size, min(number * size, count)
    # Positions hi-1 down to lo: newest_first[count - hi], then on to [count - 1 - lo].
    return list(newest_first[count - hi : count - lo]), hi - lo == size, lo


def archive_page_path(number: int | None) -> str:
    """The archive's entry page (its newest dreams) is ``archive/``; its
    numbered page n ≥ 1, counted from the pool's oldest dream, ``archive/<n>/``."""
    return "archive/index.html" if number is None else f"archive/{number}/index.html"


def lineage_page_path(number: int) -> str:
    """Page 1 of the chains is ``lineage/``, page n ≥ 2 is ``lineage/<n>/``."""
    return "lineage/index.html" if number == 1 else f"lineage/{number}/index.html"


def tag_page_path(slug: str, number: int | None) -> str:
    """A tag's entry page (its newest dreams) is ``tags/<slug>/``; its numbered
    page n ≥ 1, counted from its oldest dreams, is ``tags/<slug>/<n>/``."""
    return f"tags/{slug}/index.html" if number is None else f"tags/{slug}/{number}/index.html"


def index_page_path(kind: str, number: int | None) -> str:
    """The authors (``kind`` "authors") or tags index: its entry page is
    ``<kind>/``, its numbered page n ≥ 1, counted from the first to appear,
    ``<kind>/index/<n>/``. No author's or tag's folder is called ``index``
    (:func:`builder.site.model.slug` reserves the word), so the two never meet,
    as ``authors/<n>/`` would with an author called "2"."""
    return f"{kind}/index.html" if number is None else f"{kind}/index/{number}/index.html"


def archive_page_of(position: int, size: int) -> int:
    """The numbered page (:func:`archive_pages`) that holds a list's item at
    ``position`` (0 is its oldest, in log order): fixed once it is admitted."""
    return position // size + 1


def dream_page(
    model: SiteModel, d: DreamView, card_html: Callable[[DreamView, int, str], Markup]
) -> bytes:
    return _page(model, f"dreams/{d.id}/index.html", "dream.html", "", dream=d, card_html=card_html)


def card_template(model: SiteModel, d: DreamView, root: str, level: Any) -> str:
    """A dream's card; :mod:`builder.site.units` passes placeholders for root and level."""
    context = {"d": d, "level": level, "root": root, "site": model, "erased": model.erased_ids}
    return _render(_CARD, context)


def diary_item_template(model: SiteModel, d: DreamView, root: str) -> str:
    """A dream's line in its author's timeline (diary.html), without its last newline."""
    html = render_template("_diary_item.html", d=d, root=root, site=model, erased=model.erased_ids)
    return html.removesuffix("\n")


def _diary_pages(
    model: SiteModel,
    a: AuthorView,
    size: int,
    page: Callable[..., Page],
    key_of_page: Callable[..., str | None],
    diary_item: Callable[[DreamView, str], Markup],
) -> Iterator[Page]:
    """An author's diary ``authors/<slug>/`` (keys, and a timeline of the
    newest ``size`` dreams) and, past ``size`` dreams, its numbered pages
    ``authors/<slug>/<n>/``, filled in log order as a tag's are
    (:func:`_tag_pages`): a full one shows nothing that depends on the
    author's count or keys, so it never changes again."""
    count = len(a.dream_ids)
    pages = archive_pages(count, size)
    newest = [model.by_id[i] for i in a.dream_ids[:size]]
    yield page(
        f"authors/{a.slug}/index.html",
        "diary.html",
        "authors",
        key=key_of_page(a, size, pages, dreams=newest),
        shows=newest,
        author=a,
        name=a.name,
        slug=a.slug,
        shown=len(newest),
        tier=a.tier,
        count=count,
        months=_Later(by_month, (newest,)),
        diary_item=diary_item,
        number=None,
        pages=pages,
        older=archive_page_of(count - size - 1, size) if pages else None,
        size=size,
        full=False,
    )
    for number in range(1, pages + 1):
        ids, full, _ = archive_page(a.dream_ids, number, size)
        listed = [model.by_id[i] for i in ids]
        yield page(
            f"authors/{a.slug}/{number}/index.html",
            "diary.html",
            "authors",
            key=key_of_page(a.name, a.slug, a.tier, number, size, full, dreams=listed),
            shows=listed,
            author=None,
            name=a.name,
            slug=a.slug,
            shown=len(listed),
            tier=a.tier,
            count=None,
            months=_Later(by_month, (listed,)),
            diary_item=diary_item,
            number=number,
            pages=None,
            older=None,
            size=size,
            full=full,
        )


def _index_pages(
    kind: str,
    in_order: Sequence[AuthorView] | Sequence[TagView],
    entry: Sequence[AuthorView] | Sequence[TagView],
    card: Callable[[Any], tuple[Any, ...]],
    size: int,
    page: Callable[..., Page],
    key_of_page: Callable[..., str | None],
    **entry_context: Any,
) -> Iterator[Page]:
    """An index of every author or tag (``kind``: its folder, template and nav
    key), paged as a tag is (:func:`_tag_pages`) in the order they first appear
    in the log (``in_order``: :attr:`builder.site.model.AuthorView.joined`,
    :attr:`builder.site.model.TagView.first`). The entry page ``<kind>/`` shows
    ``entry`` and knows how many there are; past ``size``, numbered page n
    (:func:`index_page_path`) holds those at positions [(n-1)·size, n·size),
    newest first on the page, and shows nothing that depends on the count. A
    new one joins the open page; a card shows only its own ``card`` (name,
    counts), so a new dream changes the pages that show its author or tags."""
    newest_first = list(reversed(in_order))
    count = len(newest_first)
    pages = archive_pages(count, size)
    yield page(
        index_page_path(kind, None),
        f"{kind}.html",
        kind,
        key=key_of_page(
            kind,
            count,
            size,
            pages,
            sorted(entry_context.items()),
            [card(x) for x in entry],
            dreams=(),
        ),
        listed=entry,
        count=count,
        number=None,
        pages=pages,
        size=size,
        full=False,
        first=1,
        **entry_context,
    )
    for number in range(1, pages + 1):
        listed, full, lo = archive_page(newest_first, number, size)
        yield page(
            index_page_path(kind, number),
            f"{kind}.html",
            kind,
            key=key_of_page(kind, number, size, full, [card(x) for x in listed], dreams=()),
            listed=listed,
            count=None,
            number=number,
            pages=None,
            size=size,
            full=full,
            first=lo + 1,
        )


def _author_card(a: AuthorView) -> tuple[Any, ...]:
    return (a.name, a.slug, a.tier, len(a.dream_ids), len(a.keys))  # templates/authors.html


def _tag_card(t: TagView) -> tuple[Any, ...]:
    return (t.name, t.slug, len(t.dream_ids))  # templates/tags.html


def _tag_pages(
    model: SiteModel,
    t: TagView,
    size: int,
    page: Callable[..., Page],
    key_of_page: Callable[..., str | None],
) -> Iterator[Page]:
    """A tag's entry page and, when it has more than ``size`` dreams, its
    numbered pages (see the module docstring, "Pages that stay put").

    The entry page ``tags/<slug>/`` shows the newest ``size`` dreams and
    links every numbered page: it knows the tag's count and changes with it.
    Numbered page n holds the tag's dreams at positions [(n-1)·size, n·size)
    counted from its oldest (log order), newest first on the page; it shows
    nothing that depends on the tag's count, so once full it never changes
    (unless one of its own dreams does)."""
    count = len(t.dream_ids)
    pages = archive_pages(count, size)
    newest = [model.by_id[i] for i in t.dream_ids[:size]]
    older = archive_page_of(count - size - 1, size) if pages else None
    yield page(
        tag_page_path(t.slug, None),
        "tag.html",
        "tags",
        key=key_of_page(t.name, t.slug, count, size, pages, dreams=newest),
        shows=newest,
        name=t.name,
        slug=t.slug,
        count=count,
        dreams=newest,
        number=None,
        pages=pages,
        older=older,
        size=size,
        full=False,
        first=1,
    )
    for number in range(1, pages + 1):
        ids, full, lo = archive_page(t.dream_ids, number, size)
        listed = [model.by_id[i] for i in ids]
        yield page(
            tag_page_path(t.slug, number),
            "tag.html",
            "tags",
            key=key_of_page(t.name, t.slug, number, size, full, dreams=listed),
            shows=listed,
            name=t.name,
            slug=t.slug,
            count=None,
            dreams=listed,
            number=number,
            pages=None,
            older=None,
            size=size,
            full=full,
            first=lo + 1,
        )


@dataclass(frozen=True, slots=True)
class ArchiveMonth:
    """A month of the archive's index: how many dreams, and the numbered pages
    that hold its newest and its oldest (None while the entry page shows all)."""

    month: str  # YYYY-MM
    label: str  # "Month YYYY"
    count: int
    year: str
    newest_page: int | None
    oldest_page: int | None


def archive_months(
    ids_newest_first: Sequence[str], model: SiteModel, size: int
) -> list[ArchiveMonth]:
    """The archive's year/month index, newest month first."""
    count = len(ids_newest_first)
    paged = archive_pages(count, size) > 0
    # Per month: its newest position, its oldest and how many (0 is the pool's
    # oldest, in log order). Positions fall as the ids are walked, so a month's
    # first one seen is its newest and its last one seen its oldest.
    newest: dict[str, int] = {}
    oldest: dict[str, int] = {}
    counts: Counter[str] = Counter()
    by_id = model.by_id
    for i, dream_id in enumerate(ids_newest_first):
        month = by_id[dream_id].date[:7]
        position = count - 1 - i
        newest.setdefault(month, position)
        oldest[month] = position
        counts[month] += 1
    out = []
    for month in sorted(counts, reverse=True):  # as by_month orders them
        year, mm = month.split("-")
        out.append(
            ArchiveMonth(
                month,
                f"{MONTHS[int(mm) - 1]} {year}",
                counts[month],
                month[:4],
                archive_page_of(newest[month], size) if paged else None,
                archive_page_of(oldest[month], size) if paged else None,
            )
        )
    return out


def _archive_pages(
    model: SiteModel, size: int, page: Callable[..., Page], key_of_page: Callable[..., str | None]
) -> Iterator[Page]:
    """The archive: every dream of the pool (erased ones are not in the
    model), paged exactly as a tag (:func:`_tag_pages`, docs/protocol.md §8).
    ``archive/`` shows the newest ``size`` dreams, by month, and an index of
    every month naming the numbered pages that hold it; it changes with every
    dream. Numbered page n holds positions [(n-1)·size, n·size) from the
    oldest, newest first, by month; a full one never changes (unless one of
    its own dreams does, or an erasure before it moves the positions)."""
    ids = [d.id for d in model.dreams]
    count = len(ids)
    pages = archive_pages(count, size)
    newest = list(model.dreams[:size])
    index = archive_months(ids, model, size)
    yield page(
        archive_page_path(None),
        "archive.html",
        "archive",
        key=key_of_page("archive", count, size, pages, index, dreams=newest),
        shows=newest,
        count=count,
        shown=len(newest),
        groups=_Later(by_month, (newest,)),
        index=index,
        number=None,
        pages=pages,
        older=archive_page_of(count - size - 1, size) if pages else None,
        size=size,
        full=False,
        first=1,
    )
    for number in range(1, pages + 1):
        listed_ids, full, lo = archive_page(ids, number, size)
        listed = [model.by_id[i] for i in listed_ids]
        yield page(
            archive_page_path(number),
            "archive.html",
            "archive",
            key=key_of_page("archive", number, size, full, dreams=listed),
            shows=listed,
            count=None,
            shown=len(listed),
            groups=_Later(by_month, (listed,)),
            index=None,
            number=number,
            pages=None,
            older=None,
            size=size,
            full=full,
            first=lo + 1,
        )


def list_pages(
    model: SiteModel,
    patterns_html: str | Callable[[], str],
    card_html: Callable[[DreamView, int, str], Markup],
    diary_item: Callable[[DreamView, str], Markup],
    *,
    dream_key: Callable[[DreamView], str] | None = None,
    search_entry: Callable[[DreamView], bytes] = search_entry_bytes,
) -> Iterator[Page]:
    """Every page but the dreams' own, the search index and the static assets.

    ``patterns_html`` (or a function returning it, called when the last
    page, the patterns', is rendered, so the patterns can be computed while
    the other pages render: that page then ``waits``) is trusted HTML
    from :mod:`builder.site.patterns`, already escaped there; it is placed in the
    layout as it is. ``card_html(dream, level, root)`` gives a dream's card,
    ``diary_item(dream, root)`` its line in a diary.

    With ``dream_key`` (a key of everything a dream's fragments show:
    :meth:`builder.site.units.Units.key`), tag pages, diaries and the lineage page
    carry a key: their own parameters (for lineage, the trees' shape) and
    their dreams' keys.
    """

    def page(
        path: str,
        template: str,
        nav: str,
        key: str | None = None,
        shows: Sequence[DreamView] = (),
        **context: Any,
    ) -> Page:
        context.setdefault("card_html", card_html)
        return Page(path, key, lambda: _page(model, path, template, nav, **context), shows)

    def key_of_page(*parts: Any, dreams: Sequence[DreamView]) -> str | None:
        if dream_key is None:
            return None
        site = (model.title, model.origin, model.base_url)
        return key_of((site, parts, list(map(dream_key, dreams))))

    latest = model.dreams[:LATEST]
    yield page("index.html", "home.html", "home", shows=latest, latest=latest)
    yield from _archive_pages(model, ARCHIVE_PAGE_SIZE, page, key_of_page)
    for e in model.erased:
        yield page(f"dreams/{e.id}/index.html", "erased.html", "", gone=e)
    # The authors index: the newest to join first; "older" links the numbered
    # page that holds the next one.
    authors = sorted(model.authors, key=lambda a: (a.joined, a.name))
    size = AUTHOR_INDEX_PAGE_SIZE
    newest = list(reversed(authors))[:size]
    older = archive_page_of(len(authors) - size - 1, size) if len(authors) > size else None
    yield from _index_pages(
        "authors", authors, newest, _author_card, size, page, key_of_page, older=older
    )
    for a in model.authors:
        yield from _diary_pages(model, a, DIARY_PAGE_SIZE, page, key_of_page, diary_item)
    # The tags index: its entry page shows the most used (the model's order),
    # its numbered pages every tag in the order they first appear.
    tags = sorted(model.tags, key=lambda t: (t.first, t.name))
    size = TAG_INDEX_PAGE_SIZE
    yield from _index_pages("tags", tags, model.tags[:size], _tag_card, size, page, key_of_page)
    size = TAG_PAGE_SIZE
    for t in model.tags:
        yield from _tag_pages(model, t, size, page, key_of_page)
    trees = [(r, lineage_walk(model, r)) for r in lineage_roots(model)]
    per = LINEAGE_PAGE_TREES
    pages = max(1, archive_pages(len(trees), per))
    for number in range(1, pages + 1):
        first = (number - 1) * per
        shown = trees[first : first + per]
        shape = [[(s.kind, s.dream.id if s.dream else None) for s in steps] for _, steps in shown]
        in_trees = [s.dream for _, steps in shown for s in steps if s.dream is not None]
        # Only page 1, the entry page, knows how many pages there are; a page
        # after it links to the next by number once it is full (archive_pages).
        total = pages if number == 1 else None
        full = len(shown) == per
        yield page(
            lineage_page_path(number),
            "lineage.html",
            "lineage",
            key=key_of_page("lineage", number, per, total, full, shape, dreams=in_trees),
            trees=shown,
            first=first,
            number=number,
            pages=total,
            full=full,
        )
    months, charts = timeline.charts(model)
    yield page("log/index.html", "log.html", "log", months=months, charts=charts)
    yield page("search/index.html", "search.html", "search")
    yield page("verify/index.html", "verify.html", "verify")
    yield page("404.html", "404.html", "", root=_base_path(model.base_url))
    shards = search_shards(model)
    yield Page("search/index.json", None, lambda: search_index(model, shards))
    for number, listed in shards:
        yield Page(
            f"search/shard-{number}.json",
            key_of_page("search", number, dreams=listed),
            functools.partial(search_shard, listed, search_entry),
            listed,
        )
    static = resources.files("builder.templates") / "static"
    for name in STATIC:
        yield Page(f"static/{name}", None, (static / name).read_bytes)
    # favicon.ico at the root is where a browser looks when a page names no
    # icon (builder.site.favicon); the pages name it and static/favicon.svg.
    yield Page("favicon.ico", favicon.ICO_KEY, favicon.ico)

    def patterns_page() -> bytes:
        fragment = patterns_html() if callable(patterns_html) else patterns_html
        path = "patterns/index.html"
        return _page(
            model, path, "patterns.html", "patterns", card_html=card_html, patterns=Markup(fragment)
        )

    yield Page("patterns/index.html", None, patterns_page, waits=callable(patterns_html))
