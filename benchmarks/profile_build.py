#!/usr/bin/env python3
"""Stage times of one `dreampool build`, for finding what dominates.

    benchmarks/profile_build.py CONTENT OUT [--cprofile FILE [--cpu] [--top N]]

Runs the same stages as builder.build.build in this process and prints wall
seconds per stage and the peak resident memory. ``--cprofile FILE`` also
profiles the build (this process only: work forked to builder.parallel's
workers is not in it) and saves the stats to FILE; ``--top N`` prints the N
functions of most cumulative time; ``--cpu`` times the profile in CPU seconds
of this process instead of wall seconds, which on a shared, loaded machine
measures the build rather than its wait for a core. Not a test; figures go
in the issue notes (benchmarks/PROFILE.md).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
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
    parser.add_argument("--cpu", action="store_true", help="profile in CPU, not wall, seconds")
    parser.add_argument("--top", type=int, default=0, help="print the top N by cumulative time")
    args = parser.parse_args()
    profiler = None
    if args.cprofile:
        profiler = cProfile.Profile(time.process_time) if args.cpu else cProfile.Profile()
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
    if args.cprofile and args.top:
        print()
        pstats.Stats(str(args.cprofile)).sort_stats("cumulative").print_stats(args.top)


if __name__ == "__main__":
    main()
