#!/usr/bin/env python3
"""Stage times of one `dreampool build`, for finding what dominates.

    benchmarks/profile_build.py CONTENT OUT [--cprofile FILE]

Runs the same stages as builder.build.build in this process and prints wall
seconds per stage and the peak resident memory. Not a test; figures go in
the issue notes.
"""

from __future__ import annotations

import argparse
import cProfile
import resource
import sys
import time
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from builder import build

STAGES: list[tuple[str, float, float]] = []


def resident_mb() -> float:
    """Current resident memory (not the peak), from /proc where there is one."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * resource.getpagesize() / 2**20
    except OSError:
        return float("nan")


@contextmanager
def stage(name: str):  # type: ignore[no-untyped-def]
    start = time.monotonic()
    yield
    STAGES.append((name, time.monotonic() - start, resident_mb()))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("content", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--cprofile", type=Path)
    args = parser.parse_args()
    profiler = cProfile.Profile() if args.cprofile else None
    if profiler:
        profiler.enable()
    start = time.monotonic()
    build.build(args.content, args.out, signer=build.load_log_key(None), stages=stage)
    total = time.monotonic() - start
    if profiler:
        profiler.disable()
        profiler.dump_stats(args.cprofile)
    for name, seconds, mb in STAGES:
        print(f"{name:>12} {seconds:8.2f} s   resident after: {mb:6.0f} MB")
    print(f"{'total':>12} {total:8.2f} s")
    print(f"{'peak':>12} {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:8.0f} MB")


if __name__ == "__main__":
    main()
