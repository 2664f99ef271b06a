#!/usr/bin/env python3
"""The long fuzzing run: every target of ``tests/redteam/test_fuzz.py``, N examples each.

CI runs each target for a few hundred examples; this runs the same targets, with
the same strategies and the same per-example time bound, for as many as asked::

    python scripts/fuzz_long.py                          # 100,000 examples per target
    python scripts/fuzz_long.py --examples 50000 --jobs 2 --seed 7
    python scripts/fuzz_long.py --target dream.parse --target strictjson.loads

Prints one line per target as it finishes, then a table: examples run, seconds,
failures (0, or 1 with the finding Hypothesis shrank, and its traceback; Hypothesis
stops a target at its first finding). Exits 1 if anything was found. A finding is
fixed in the module that owns it and kept as a regression test (THREATS.md, T41).
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
import traceback
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def run_target(name: str, examples: int, seed: int) -> dict[str, Any]:
    """One target in a worker process: how many examples ran, how long, what was found."""
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    from tests.redteam.test_fuzz import fuzz, seeds

    seeds()  # built before the clock starts, as in CI
    started = time.monotonic()
    ran, finding = 0, ""
    try:
        ran = fuzz(name, examples, seed=seed)
    except BaseException:  # a finding (AssertionError, another exception) or a Hang
        finding = traceback.format_exc()
    return {
        "name": name,
        "examples": ran,
        "seconds": time.monotonic() - started,
        "failures": 1 if finding else 0,
        "finding": finding,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=100_000, help="examples per target")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="processes")
    parser.add_argument("--seed", type=int, help="Hypothesis seed (default: random)")
    parser.add_argument("--target", action="append", help="a target name (default: all)")
    args = parser.parse_args(argv)

    sys.path.insert(0, str(REPO))
    from tests.redteam.test_fuzz import TARGETS

    names = args.target or sorted(TARGETS)
    unknown = sorted(set(names) - set(TARGETS))
    if unknown:
        parser.error(f"unknown target(s) {', '.join(unknown)}; known: {', '.join(sorted(TARGETS))}")
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**32)
    print(
        f"fuzzing {len(names)} targets, {args.examples} examples each, seed {seed}, "
        f"{args.jobs} job(s)",
        flush=True,
    )
    started = time.monotonic()
    results = []
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        futures = [pool.submit(run_target, name, args.examples, seed) for name in names]
        for future in as_completed(futures):
            r = future.result()
            results.append(r)
            print(
                f"  done {r['name']}: {r['examples']} examples, {r['seconds']:.1f}s, "
                f"{r['failures']} failure(s)",
                flush=True,
            )
    results.sort(key=lambda r: r["name"])
    width = max(len(r["name"]) for r in results)
    print(f"\n{'target':{width}}  {'examples':>9}  {'seconds':>8}  failures")
    for r in results:
        print(f"{r['name']:{width}}  {r['examples']:>9}  {r['seconds']:>8.1f}  {r['failures']}")
    total = sum(r["examples"] for r in results)
    print(
        f"{'total':{width}}  {total:>9}  {time.monotonic() - started:>8.1f}  "
        f"{sum(r['failures'] for r in results)}  (wall clock, seed {seed})"
    )
    for r in results:
        if r["finding"]:
            print(f"\n--- {r['name']} ---\n{r['finding']}")
    return 1 if any(r["failures"] for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
