#!/usr/bin/env python3
"""Two builder trees, one after the other, on consecutive builds after one new dream.

    benchmarks/ab.py --work DIR --size N [--runs 7] [--admit 1] OLD_TREE NEW_TREE ...

What a pool's CI does merge after merge, and how benchmarks/PROFILE.md
compares a change with the code before it: each tree (a checkout of this
repository, put first on ``PYTHONPATH``) gets its own clone of the pool
``DIR/pool-N`` that ``benchmarks/run --sizes N --work DIR`` made (and its
log key ``DIR/log.key``), built three times untimed so that both site
generations and the store are that tree's own (a store of other code is
void: builder.buildcache.code_digest). Then, run after run, the trees take
turns: one new dream (``--admit N``: N of them) committed to the tree's
clone as a merged pull request would be, then built and timed as
``benchmarks/run`` times a build (wall; user + system of the build and its
workers; peak resident memory). Taking turns spreads whatever else the
machine does over every tree alike.

A tree needs ``builder/templates`` reachable from its ``builder`` package
(a link to ``../templates`` in a plain clone). The clones are
``DIR/ab-N-<i>`` and are made afresh each time.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import buildbench as bb
from benchmarks import genpool


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--size", type=int, required=True)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--admit", type=int, default=1, help="new dreams a run builds")
    parser.add_argument("trees", nargs="+", type=Path)
    args = parser.parse_args()
    origin = args.work / f"pool-{args.size}"
    key_file = args.work / "log.key"
    if not (origin / "admitted").exists() or not key_file.exists():
        raise SystemExit(f"no pool at {origin}: run benchmarks/run --sizes {args.size} first")
    env = {
        **os.environ,
        "DREAMPOOL_LOG_KEY": key_file.read_text().strip(),
        "CI": "1",
        "DREAMPOOL_HOME": str(args.work / "home"),
    }
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as an installed dreampool runs

    def build(tree: Path, checkout: Path) -> bb.Sample:
        cmd = [sys.executable, "-m", "builder", "build", "--quiet"]
        cmd += ["--content", str(checkout / "content"), "--out", str(checkout / "site")]
        # In the tree: ``-m`` puts the working folder before PYTHONPATH (bb.measure).
        return bb.measure(cmd, {**env, "PYTHONPATH": str(tree.resolve())}, cwd=tree.resolve())

    checkouts = []
    for i, tree in enumerate(args.trees):
        checkout = args.work / f"ab-{args.size}-{i}"
        bb.remove_tree(checkout)
        bb.clone(origin, checkout)
        for _ in range(3):
            build(tree, checkout)
        checkouts.append(checkout)
        print(f"{tree}: {checkout} built three times", flush=True)
    samples: dict[Path, list[bb.Sample]] = {tree: [] for tree in args.trees}
    for run in range(args.runs):
        for tree, checkout in zip(args.trees, checkouts, strict=True):
            have = bb.count_dreams(checkout / "content")
            genpool.generate(checkout, have + args.admit, start=have)
            bb.commit_content(checkout, f"merge: {args.admit} new dream(s)")
            sample = build(tree, checkout)
            samples[tree].append(sample)
            print(
                f"{tree} run {run}: {sample.wall:.2f} s, {sample.cpu:.2f} s CPU, "
                f"{sample.mb:.0f} MB, {sample.disk:.1f} MB written",
                flush=True,
            )
    for tree, got in samples.items():
        walls = ", ".join(f"{s.wall:.2f}" for s in got)
        mid = bb.median(got)
        print(
            f"{tree}: wall {walls}; median {mid.wall:.2f} s, {mid.cpu:.2f} s CPU, "
            f"peak {max(s.mb for s in got):.0f} MB, {mid.disk:.1f} MB written"
        )


if __name__ == "__main__":
    main()
