#!/usr/bin/env python3
"""The floor under a cold build: only the work no build of this stack can skip.

    benchmarks/cold_floor.py CONTENT [--sample 500] [--runs 5] [--work DIR]

Issue 21 asks a cold build (a fresh clone of a logged pool, no store, no
output) to beat Hugo at 10k and 100k dreams and to take at most 5 minutes at
1M. This times, per dream, in CPU microseconds (the fastest of --runs passes
over --sample logged dreams of CONTENT, after one pass that warms up: for a
floor, noise only adds), the steps a cold build must do for each dream
whatever its design, done as plainly as this stack allows:

* ``read``: the dream file and its salt (the commitment binds it, and the
  record holds it: docs/protocol.md §2, §3.1), read whole with ``os.read``;
* ``parse``: the strict parser with the commitment checked against the
  dream's leaf (:func:`builder.formats.dream.parse_committed`: strict JSON,
  every §1 rule, JCS + SHA-256; §3.1) — no signature, as a logged dream's;
* ``markdown``: the summary through the site's Markdown renderer
  (markdown-it-py, :func:`builder.text.mdrender.render_markdown` without its
  cache): a page shows the summary as Markdown and entries as plain text
  (templates/dream.html);
* ``keywords``: the patterns' keywords of its title, summary and entries
  (:func:`builder.site.keywords.tokens`: jieba for Chinese), for the dreams
  the patterns count (:func:`builder.site.patterns.counts`: a member or
  maintainer key's, with consent to derivatives), as a share of all dreams;
* ``page``: a dream page holding only the dream (title, author, tags, the
  rendered summary, the entries), once through a minimal Jinja template
  (``page jinja``, the stack's template engine) and once as a plain Python
  f-string (``page plain``), both escaping as the site does;
* ``card`` and ``lists``: its card (minimal Jinja), and its share of the
  frames of the list pages that show it (each of its tags, the archive, its
  author's diary; :data:`PAGE_CARDS` cards a page, as render.py's tag and
  archive pages);
* ``record``: its record, ``json.dumps(indent=2)`` as the builder writes it
  (§2: "The pool writes it indented"; a published record never changes);
* ``proof``: its inclusion proof's hashes, from a Merkle tree of the pool's
  own leaves (the file adds their base64 and the checkpoint's text);
* ``leaves`` and ``tree``: its leaf read from the log by the strict leaf
  parser, and its share of building that tree (once a run, per leaf);
* ``write``: its folder and three files (page, record, proof) made in a new
  folder of --work, as the site's writer makes them (``O_CREAT | O_EXCL``).
  The kernel's time is in it: on this machine's ext4, files made within
  minutes of a large deletion cost many times more (PROFILE.md, "A cold
  build's files"), and this script deletes what it wrote when it ends: leave
  five minutes between two runs, or read ``write`` from the first.

And, once per build, ``start``: the wall seconds from spawning a Python
process that imports the libraries every build uses (:data:`STACK`) to its
exit, against the bare interpreter's (medians of --runs spawns): the part of
any build, a +1 among them, that no change to its work removes.

With ``--generation DIR`` (a built site's generation, as
``.site.builds/a``), per dream of that generation: ``digest``, reading every
file of it and checking its BLAKE2b digest, as a build must before it takes a
generation the publish workflow restored from its cache (THREATS.md T81: the
cache can be written by other code, and tar sets every size and mtime;
builder/site/writer.py), with ``read`` (the same without the digest) beside
it; and ``seal``, an ``lstat`` of each of its folders, what checking the seal
of a generation the build made itself costs every build. The first is the
floor under "+1 in a fresh clone with the store restored", which no build
that reuses a restored generation avoids; the last, under any build that
reuses its own.

With ``--compiled``, three steps are timed again on the same inputs with
compiled components that are not this project's dependencies (install them
in a separate environment: ``pip install markdown-it-pyrs jieba-fast
orjson``): ``markdown`` with markdown-it-pyrs (markdown-it ported to Rust,
CommonMark; not the site's exact rules: no link check, no raw-HTML and image
rules), ``keywords`` with jieba-fast's segmenter (jieba's algorithm in C) in
place of jieba's, ``record`` with orjson (``OPT_INDENT_2``; its bytes are
checked equal to the standard library's). What they would lower the floor
to, not what a build gives.

The floor of a cold build of n dreams on c cores is then n × (the sum) / c
seconds, with perfect parallelism and nothing else (no list page written, no
log tile, no search index, no feed): a bound below any real build. Printed
for ``page jinja`` and ``page plain``. Not a test; figures go in the issue
notes (benchmarks/PROFILE.md).
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import html
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import jinja2
from markupsafe import Markup

from builder.content import pool
from builder.formats import dream as dreamfmt
from builder.formats import leaf, merkle
from builder.site import keywords, render
from builder.text import mdrender

# The renderer without its cache (a build renders each summary once for its
# page; a cache hit across passes would time nothing).
_markdown: Callable[[str], str] = mdrender.render_markdown.__wrapped__

# Cards a list page holds.
PAGE_CARDS = render.TAG_PAGE_SIZE
assert render.ARCHIVE_PAGE_SIZE == PAGE_CARDS
SIZES = (10_000, 100_000, 1_000_000)
# What every build imports: templates, Markdown, YAML, Ed25519, the store.
STACK = (
    "import jinja2, markdown_it, yaml, sqlite3, json, hashlib; "
    "from cryptography.hazmat.primitives.asymmetric import ed25519"
)


def start_seconds(code: str, runs: int) -> float:
    """Median wall seconds of ``python -c code``, spawn to exit."""
    times = []
    for _ in range(runs):
        t0 = time.monotonic()
        subprocess.run([sys.executable, "-c", code], check=True)
        times.append(time.monotonic() - t0)
    return statistics.median(times)


_ENV = jinja2.Environment(autoescape=True)
PAGE = _ENV.from_string(
    "<!doctype html><html lang=en><head><meta charset=utf-8><title>{{ d.title }}</title>"
    "</head><body><main><h1>{{ d.title }}</h1><p>by <a href='../../authors/{{ author }}/'>"
    "{{ author }}</a></p><ul>{% for t in tags %}<li><a href='../../tags/{{ t }}/'>{{ t }}"
    "</a></li>{% endfor %}</ul><section>{{ summary }}</section>{% for e in entries %}"
    "<section class='{{ e.type }}'><h2>{{ e.type }}</h2><p>{{ e.text }}</p></section>"
    "{% endfor %}"
    "</main></body></html>"
)
CARD = _ENV.from_string(
    "<article><h3><a href='../../dreams/{{ id }}/'>{{ title }}</a></h3><p>{{ author }}</p>"
    "<ul>{% for t in tags %}<li>{{ t }}</li>{% endfor %}</ul></article>"
)
LIST = _ENV.from_string(
    "<!doctype html><html lang=en><head><meta charset=utf-8><title>{{ title }}</title>"
    "</head><body><main><h1>{{ title }}</h1>{% for c in cards %}{{ c }}{% endfor %}"
    "<nav><a href='../{{ n - 1 }}/'>older</a></nav></main></body></html>"
)


def page_plain(title: str, author: str, tags: list[str], summary: str, entries: list[Any]) -> str:
    e = html.escape
    t = e(title)
    tag_items = "".join(f"<li><a href='../../tags/{e(x)}/'>{e(x)}</a></li>" for x in tags)
    sections = "".join(
        f"<section class='{e(x['type'])}'><h2>{e(x['type'])}</h2><p>{e(x['text'])}</p></section>"
        for x in entries
    )
    return (
        f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{t}</title></head>"
        f"<body><main><h1>{t}</h1><p>by <a href='../../authors/{e(author)}/'>{e(author)}</a>"
        f"</p><ul>{tag_items}</ul><section>{summary}</section>{sections}</main></body></html>"
    )


def tiers(content: Path) -> dict[str, str]:
    """Each key id's tier, from the pool's key files."""
    directory, problems = pool.load_keys(content)
    if problems:
        raise SystemExit(f"{content}/keys: {problems[0]}")
    return {key_id: entry.tier for key_id, entry in directory.keys.items()}


class Log:
    """What the pool's log says, read by the strict leaf parser: each logged
    dream's leaf index and commitment, every leaf's hash, and the CPU µs the
    read took per leaf."""

    def __init__(self, content: Path) -> None:
        start = time.process_time_ns()
        self.dreams: dict[str, tuple[int, str]] = {}
        self.hashes: list[bytes] = []
        for shard in sorted((content / "log" / "leaves").glob("*.jsonl")):
            for line in shard.read_bytes().splitlines():
                parsed = leaf.parse(line)
                if isinstance(parsed, leaf.DreamLeaf):
                    self.dreams[parsed.id] = (len(self.hashes), parsed.commitment)
                self.hashes.append(merkle.leaf_hash(line))
        if not self.hashes:
            raise SystemExit(f"{content}/log/leaves: no leaf; build the pool with its log key")
        self.per_leaf_us = (time.process_time_ns() - start) / 1000 / len(self.hashes)


def logged(content: Path, sample: int, log: Log) -> list[tuple[Path, int, str]]:
    """Up to ``sample`` dream files of ``content`` the log holds, by name, each
    with its leaf's index and commitment."""
    files = sorted((content / "dreams").glob("*.json"))
    found = [(f, *log.dreams[f.stem]) for f in files if f.stem in log.dreams]
    if not found:
        raise SystemExit(f"{content}: no dream file the log holds")
    step = max(1, len(found) // sample)
    return found[::step][:sample]


def _read(path: str) -> bytes:
    fd = os.open(path, os.O_RDONLY)
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _commits(obj: Any, *, salt: str, expect: str) -> bool:
    return dreamfmt.commitment(obj, salt) == expect


class Clock:
    """CPU nanoseconds spent in each named step, summed over its uses."""

    def __init__(self) -> None:
        self.spent: dict[str, int] = {}

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        start = time.process_time_ns()
        yield
        self.spent[name] = self.spent.get(name, 0) + time.process_time_ns() - start


def one_pass(
    dreams: list[tuple[Path, int, str]], tree: merkle.MerkleTree, out: Path, tier: dict[str, str]
) -> dict[str, float]:
    """CPU µs per dream of each step, over ``dreams`` once."""
    clock = Clock()
    cards: list[str] = []
    listings = 0.0
    for path, index, logged_as in dreams:
        with clock("read"):
            data = _read(str(path))
            salt = _read(str(path.with_suffix(".salt"))).decode().strip()
        committed = functools.partial(_commits, salt=salt, expect=logged_as)
        with clock("parse"):
            d = dreamfmt.parse_committed(data, str(path), committed)
        if d is None:
            raise SystemExit(f"{path}: does not commit to its leaf; run `dreampool check`")
        body = d.body
        title, author, tags = body["title"], body["author"], list(body.get("tags", ()))
        texts = [
            t for t in (title, body.get("summary"), *(e["text"] for e in body["entries"])) if t
        ]
        with clock("markdown"):
            summary = _markdown(body["summary"]) if body.get("summary") else ""
        derivatives = body.get("consent", {}).get("derivatives", False)
        with clock("keywords"):
            if derivatives and tier.get(d.key_id) in ("member", "maintainer"):
                for t in texts:
                    keywords.tokens(t)
        with clock("page jinja"):
            page = PAGE.render(
                d=body, author=author, tags=tags, summary=Markup(summary), entries=body["entries"]
            )
        with clock("page plain"):
            page_plain(title, author, tags, summary, body["entries"])
        with clock("card"):
            cards.append(CARD.render(id=d.id, title=title, author=author, tags=tags))
        # Its tags' pages and the archive's, a card each; its author's diary, a
        # line of a page that holds more of them.
        listings += len(tags) + 1 + PAGE_CARDS / render.DIARY_PAGE_SIZE
        with clock("record"):
            record = _record(d.id, index, salt, body)
        with clock("proof"):
            proof = b"".join(tree.inclusion_proof(index, tree.size))
        with clock("write"):
            folder = f"{out}/dreams/{d.id}"
            os.mkdir(folder)
            for name, blob in (
                ("index.html", page.encode()),
                ("record.json", record),
                ("proof.tlog-proof", proof),
            ):
                fd = os.open(f"{folder}/{name}", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
                try:
                    os.write(fd, blob)
                finally:
                    os.close(fd)
    with clock("lists"):
        for j in range(0, len(cards), PAGE_CARDS):
            shown = [Markup(c) for c in cards[j : j + PAGE_CARDS]]
            LIST.render(title="tag", cards=shown, n=2)
    n = len(dreams)
    per = {name: ns / 1000 / n for name, ns in clock.spent.items()}
    # A frame per PAGE_CARDS listings; these frames showed each dream once.
    per["lists"] *= listings / n
    return per


def _record_object(dream_id: str, index: int, salt: str, body: Any) -> dict[str, Any]:
    """The record's fields as logbuild.record_bytes lays them out (docs/protocol.md §2)."""
    return {
        "format": "dreampool-record/v1",
        "id": dream_id,
        "index": index,
        "salt": salt,
        "dream": body,
    }


def _record(dream_id: str, index: int, salt: str, body: Any) -> bytes:
    """The record's bytes as logbuild.record_bytes writes them."""
    record = _record_object(dream_id, index, salt, body)
    return (json.dumps(record, ensure_ascii=False, indent=2) + "\n").encode("utf-8")


def compiled(
    dreams: list[tuple[Path, int, str]], runs: int, tier: dict[str, str]
) -> dict[str, tuple[float, float]]:
    """(this stack's, the compiled component's) CPU µs a dream of ``markdown``,
    ``keywords`` (the counted dreams', as a share of all) and ``record`` over
    ``dreams``, the fastest of ``runs`` passes each."""
    import jieba_fast  # type: ignore[import-not-found]
    import orjson  # type: ignore[import-not-found]
    from markdown_it_pyrs import MarkdownIt  # type: ignore[import-not-found]

    jieba_fast.setLogLevel(60)
    md = MarkdownIt("commonmark")
    bodies = []
    for path, index, _ in dreams:
        salt = path.with_suffix(".salt").read_text().strip()
        bodies.append((path.stem, index, salt, json.loads(path.read_bytes())))
    summaries = [b["summary"] for _, _, _, b in bodies if b.get("summary")]
    counted = [
        [t for t in (b["title"], b.get("summary"), *(e["text"] for e in b["entries"])) if t]
        for _, _, _, b in bodies
        if b.get("consent", {}).get("derivatives", False)
        and tier.get(b["sig"]["keyId"]) in ("member", "maintainer")
    ]
    fast_cut: Callable[[str], list[str]] = jieba_fast.lcut
    own_cut = keywords._cut
    options = orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE

    def fast_record(dream_id: str, index: int, salt: str, body: Any) -> bytes:
        data: bytes = orjson.dumps(_record_object(dream_id, index, salt, body), option=options)
        return data

    for args in bodies:
        if fast_record(*args) != _record(*args):
            raise SystemExit(f"orjson's record of {args[0]} is not the builder's bytes")

    def per_dream(fn: Callable[[], object]) -> float:
        fn()  # warm up (dictionaries, caches)
        spent = []
        for _ in range(runs):
            start = time.process_time_ns()
            fn()
            spent.append((time.process_time_ns() - start) / 1000 / len(dreams))
        return min(spent)

    def tokens_with(cut: Callable[[str], list[str]]) -> Callable[[], list[list[set[str]]]]:
        def run() -> list[list[set[str]]]:
            keywords._cut = cut  # type: ignore[assignment]
            try:
                return [[keywords.tokens(t) for t in ts] for ts in counted]
            finally:
                keywords._cut = own_cut

        return run

    own_words, fast_words = tokens_with(own_cut)(), tokens_with(fast_cut)()
    if own_words != fast_words:
        differ = sum(a != b for a, b in zip(own_words, fast_words, strict=True))
        print(
            f"note: jieba-fast's keywords differ from jieba's in {differ} of {len(counted)} dreams"
        )
    return {
        "markdown": (
            per_dream(lambda: [_markdown(t) for t in summaries]),
            per_dream(lambda: [md.render(t) for t in summaries]),
        ),
        "keywords": (per_dream(tokens_with(own_cut)), per_dream(tokens_with(fast_cut))),
        "record": (
            per_dream(lambda: [_record(*args) for args in bodies]),
            per_dream(lambda: [fast_record(*args) for args in bodies]),
        ),
    }


class Generation:
    """A built generation's plain files (never a link) and folders, and how
    many dreams it holds (its folders under ``dreams/``)."""

    def __init__(self, root: Path) -> None:
        self.files: list[str] = []
        self.folders: list[str] = []
        for folder, _, names in os.walk(root):
            self.folders.append(folder)
            for name in names:
                path = os.path.join(folder, name)
                if not os.path.islink(path):
                    self.files.append(path)
        try:
            with os.scandir(root / "dreams") as entries:
                self.dreams = sum(1 for e in entries if e.is_dir(follow_symlinks=False))
        except OSError:
            self.dreams = 0
        if not self.dreams:
            raise SystemExit(f"{root}/dreams: no dream; give a built site's generation")


def restored(
    gen: Generation, runs: int, new_hash: Callable[[], Any] | None = None
) -> dict[str, float]:
    """CPU µs per dream of gen's dreams, the fastest of ``runs`` passes after one
    that warms the page cache: ``seal``, an ``lstat`` of every folder (what the
    writer's seal of a generation it made costs); ``read``, every file opened and
    read; ``digest``, read and digested with BLAKE2b-128 as the writer does (or
    ``new_hash()``'s hash, as a compiled one would)."""

    def seal() -> None:
        for folder in gen.folders:
            os.lstat(folder)

    def read(digest: bool) -> None:
        for path in gen.files:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
            try:
                h = (new_hash or functools.partial(hashlib.blake2b, digest_size=16))()
                while chunk := os.read(fd, 1 << 20):
                    if digest:
                        h.update(chunk)
            finally:
                os.close(fd)

    steps: dict[str, Callable[[], None]] = {
        "seal": seal,
        "read": functools.partial(read, False),
        "digest": functools.partial(read, True),
    }
    out = {}
    for name, step in steps.items():
        step()
        spent = []
        for _ in range(runs):
            start = time.process_time_ns()
            step()
            spent.append(time.process_time_ns() - start)
        out[name] = min(spent) / 1000 / gen.dreams
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("content", type=Path)
    parser.add_argument("--sample", type=int, default=500)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--work", type=Path, help="where the files are written (a temp folder)")
    parser.add_argument("--cores", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--generation", type=Path, help="a built generation, to time its check")
    parser.add_argument(
        "--compiled",
        action="store_true",
        help="also time markdown-it-pyrs, jieba-fast, orjson (and blake3 with --generation)",
    )
    args = parser.parse_args()
    if args.sample < 1 or args.runs < 1 or args.cores < 1:
        parser.error("--sample, --runs and --cores must be at least 1")
    log = Log(args.content)
    dreams = logged(args.content, args.sample, log)
    tier = tiers(args.content)
    start = time.process_time_ns()
    tree = merkle.MerkleTree.from_leaf_hashes(log.hashes)
    tree_us = (time.process_time_ns() - start) / 1000 / tree.size
    keywords.prepare_all()  # the dictionary read once, as a build's workers share it
    work = Path(tempfile.mkdtemp(prefix="cold-floor-", dir=args.work))
    runs: list[dict[str, float]] = []
    try:
        for r in range(args.runs + 1):  # the first pass warms up, and is not counted
            out = work / f"run{r}"
            (out / "dreams").mkdir(parents=True)
            per = one_pass(dreams, tree, out, tier)
            if r:
                runs.append(per)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    steps = {name: min(p[name] for p in runs) for name in runs[0]}
    steps["leaves"] = log.per_leaf_us
    steps["tree"] = tree_us
    print(
        f"{len(dreams)} dreams of {args.content} ({tree.size} leaves), "
        f"fastest of {args.runs} passes, CPU µs a dream"
    )
    for name, us in steps.items():
        print(f"  {name:<12} {us:8.1f}")
    for page in ("page jinja", "page plain"):
        other = "page plain" if page == "page jinja" else "page jinja"
        total = sum(us for name, us in steps.items() if name != other)
        cells = ", ".join(f"{n:,}: {n * total / 1e6 / args.cores:.1f} s" for n in SIZES)
        print(f"floor with {page}: {total:.0f} µs a dream; on {args.cores} cores {cells}")
    if args.generation is not None:
        gen = Generation(args.generation)
        found = restored(gen, args.runs)
        if args.compiled:
            import blake3  # type: ignore[import-not-found]

            found["digest, blake3"] = restored(gen, args.runs, blake3.blake3)["digest"]
        print(
            f"restored generation: {len(gen.files)} files, {len(gen.folders)} folders, "
            f"{gen.dreams} dreams; CPU µs a dream (fastest of {args.runs}, page cache warm)"
        )
        for name, us in found.items():
            cells = ", ".join(f"{n:,}: {n * us / 1e6 / args.cores:.2f} s" for n in SIZES)
            print(f"  {name:<14} {us:8.1f}   on {args.cores} cores {cells}")
    if args.compiled:
        for name, (own, fast) in compiled(dreams, args.runs, tier).items():
            print(f"{name}: {own:.1f} µs a dream this stack, {fast:.1f} µs compiled")
    bare, stack = start_seconds("pass", args.runs), start_seconds(STACK, args.runs)
    print(f"start: {stack:.3f} s wall with the stack's imports ({bare:.3f} s the bare interpreter)")


if __name__ == "__main__":
    main()
