#!/usr/bin/env python3
"""CPU per admitted dream, step by step: what admitting a dream costs.

    benchmarks/admission.py [--n 200] [--runs 5] [--work DIR] [--only STEP,...]

Admitting a dream (the first build after it arrives) checks it
(:func:`builder.content.pool.check_dream`: strict parse, Ed25519 verify, the
redaction review of the signed text and of what a reader sees of it), then
renders its page, record, proof and card and takes its keywords and its
commitment. This generates N dreams (benchmarks/genpool.py, text in Chinese
and English, none holding personal data), builds them once with a throwaway
log key (so a model, a log and proofs exist), then times each step alone
over all N dreams, in this process, as CPU time (``time.process_time``:
user + system, so time the machine gives other processes is not counted).

Each figure is the median over --runs runs of (CPU of one pass over the N
dreams) / N, in microseconds. ``check_dream`` is the whole check (parse,
verify, redaction and reader view, and the glue between them); ``unit``
renders page, record, proof and card one after the other as a build does
(sharing the summary's rendered Markdown, which the single steps each render
again); ``total`` is check_dream + unit + keywords + commitment: a dream's
admission. Not a test: nothing here asserts a speed (figures go in
benchmarks/ADMISSION.md).
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import genpool
from builder import build, buildcache
from builder.content import pool
from builder.formats import dream as dreamfmt
from builder.formats import note
from builder.log import logbuild
from builder.site import patterns, render
from builder.site.model import SiteModel
from builder.site.units import Units
from builder.text import readerview, redact

# The steps, in the order admission runs them, each a function of one dream's
# prepared inputs (see _prepare).
Step = Callable[["_Item"], object]


class _Item:
    """One dream's inputs to every step, made once before timing."""

    __slots__ = ("body", "data", "file", "obj", "salt", "view")

    def __init__(self, data: bytes, file: str, salt: str, view: Any) -> None:
        self.data = data
        self.file = file
        self.obj = dreamfmt.load_json(data, file)
        self.body = dreamfmt.parse(data, file).body
        self.salt = salt
        self.view = view


def _parse(item: _Item) -> object:
    obj = dreamfmt.load_json(item.data, item.file)
    return dreamfmt.validate(obj, item.file)


def _unit(log: logbuild.Log, units: Units, item: _Item) -> object:
    """Page, record, proof and fragments of one dream, in the order and the one
    process builder.site.units renders them: the steps above timed alone each
    render the summary's Markdown afresh, where a build renders it once."""
    page = render.dream_page(units.model, item.view, units.card_for)
    record = logbuild.record_bytes(log.dreams[item.view.id])
    proof = logbuild.proof_bytes(log.state, log.tree, item.view.index)
    return page, record, proof, units._fragments(item.view)


def _steps(log: logbuild.Log, units: Units) -> dict[str, Step]:
    model = units.model
    return {
        "parse (strict JSON + schema)": _parse,
        "verify (Ed25519 + keyId)": lambda i: dreamfmt.verify(i.obj, i.file),
        "redaction review (source)": lambda i: redact.changes(i.body),
        "reader view review": lambda i: readerview.problems(i.body, i.file),
        "check_dream (all of the above)": lambda i: pool.check_dream(i.data, i.file),
        "page (dream.html)": lambda i: render.dream_page(model, i.view, units.card_for),
        "record (record.json)": lambda i: logbuild.record_bytes(log.dreams[i.view.id]),
        "proof (proof.tlog-proof)": lambda i: logbuild.proof_bytes(
            log.state, log.tree, i.view.index
        ),
        "card + diary + feed + search": lambda i: units._fragments(i.view),
        "unit (page..card, as a build)": lambda i: _unit(log, units, i),
        "keywords (jieba)": lambda i: patterns.dream_words(i.view),
        "commitment (JCS + SHA-256)": lambda i: logbuild.commitment(i.body, i.salt),
    }


def _prepare(work: Path, n: int) -> tuple[logbuild.Log, Units, list[_Item]]:
    """N dreams generated and built once; each dream's inputs to the steps."""
    content = work / "content"
    if not (content / "dreams").is_dir() or len(list((content / "dreams").iterdir())) < n:
        genpool.generate(work, n)
    key_file = work / "log.key"  # the pool's log is signed by this key from then on
    if not key_file.exists():
        key_file.write_text(note.generate_key("bench.example/pool")[0])
    signer = note.parse_private_key(key_file.read_text())
    retained: list[object] = []
    build.build(content, work / "site", signer=signer, retain=retained)
    log = next(x for x in retained if isinstance(x, logbuild.Log))
    view = next(x for x in retained if isinstance(x, SiteModel))
    units = Units(log, view, buildcache.BuildCache(work / "unused-cache"))
    items = []
    for d in view.dreams[:n]:
        path = content / "dreams" / f"{d.id}.json"
        items.append(_Item(path.read_bytes(), str(path), log.dreams[d.id].salt, d))
    return log, units, items


def measure(step: Step, items: list[_Item], runs: int) -> float:
    """Median over ``runs`` of the CPU microseconds per dream of one pass."""
    for item in items[: min(len(items), 20)]:  # warm caches (templates, jieba's dictionary)
        step(item)
    per_dream = []
    for _ in range(runs):
        start = time.process_time()
        for item in items:
            step(item)
        per_dream.append((time.process_time() - start) / len(items) * 1e6)
    return statistics.median(per_dream)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--work", type=Path, help="keep the generated pool here (reused)")
    parser.add_argument("--only", help="comma-separated step-name prefixes to run")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = args.work or Path(tmp)
        log, units, items = _prepare(work, args.n)
        gc.collect()
        gc.disable()  # as a build runs (builder.build)
        steps = _steps(log, units)
        wanted = args.only.split(",") if args.only else None
        print(f"{len(items)} dreams, median of {args.runs} runs, CPU µs per dream")
        total = 0.0
        for name, step in steps.items():
            if wanted and not any(name.startswith(w) for w in wanted):
                continue
            us = measure(step, items, args.runs)
            # check_dream holds the first four; the unit step holds the four before it.
            if name.split(" ")[0] in ("check_dream", "unit", "keywords", "commitment"):
                total += us
            print(f"  {name:<32} {us:8.1f}")
        if not wanted:
            print(f"  {'total (check + unit + keywords + commitment)':<32} {total:8.1f}")


if __name__ == "__main__":
    main()
