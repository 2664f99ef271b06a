#!/usr/bin/env python3
"""The floor under ``dreampool mcp``'s start: an MCP server that does nothing else.

    benchmarks/mcp_floor.py --content DIR [--runs 5] [--work DIR]

Issue 21 asks ``dreampool mcp --content`` to answer ``initialize`` within 1 s.
This times, in one run and with the same client (:func:`benchmarks.buildbench.time_start`,
newline-delimited JSON-RPC over stdio, from spawning the process to the answer):

* ``floor``: a Python process that imports the official ``mcp`` SDK, declares one
  tool and serves stdio (:data:`FLOOR`): the unavoidable work of any MCP server in
  Python on this stack (interpreter start, the SDK's import of pydantic and its
  types);
* ``python``: the interpreter alone, answering ``initialize`` by hand (:data:`BARE`);
* ``dreampool``: ``dreampool mcp --content DIR``, which reads the checkout in the
  background after it answers.

Each figure is the median of --runs spawns, in seconds of wall time. ``dreampool −
floor`` is what this project adds. Not a test: nothing here asserts a speed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import buildbench as bb

FLOOR = """
from mcp.server.mcpserver import MCPServer
server = MCPServer("floor")

@server.tool()
def ping() -> str:
    return "pong"

server.run("stdio")
"""

BARE = """
import json, sys
for line in sys.stdin:
    msg = json.loads(line)
    if "id" in msg:
        result = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                  "serverInfo": {"name": "bare", "version": "1"}}
        if msg["method"] == "tools/list":
            result = {"tools": []}
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}) + "\\n")
        sys.stdout.flush()
"""


def start(cmd: list[str], work: Path) -> float:
    """Seconds from spawning ``cmd`` to its answer to ``initialize``."""
    return bb.time_start(cmd, dict(os.environ), work / "mcp-floor.stderr")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--content", type=Path, required=True, help="a pool checkout's content/")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--work", type=Path, default=None)
    args = parser.parse_args()
    # ``-m builder`` imports from the working folder first: this tree's (benchmarks/run).
    args.content = args.content.absolute()
    args.work = None if args.work is None else args.work.absolute()
    os.chdir(Path(__file__).resolve().parent.parent)
    work = args.work or Path(tempfile.mkdtemp(prefix="mcp-floor-"))
    work.mkdir(parents=True, exist_ok=True)
    dreampool = [sys.executable, "-m", "builder"]
    cases = {
        "python": [sys.executable, "-c", BARE],
        "floor": [sys.executable, "-c", FLOOR],
        "dreampool": [*dreampool, "mcp", "--content", str(args.content)],
    }
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(args.runs):
        for name, cmd in cases.items():  # interleaved, so load hits each case alike
            times[name].append(start(cmd, work))
    medians = {name: statistics.median(ts) for name, ts in times.items()}
    for name, median in medians.items():
        runs = " ".join(f"{t:.2f}" for t in times[name])
        print(f"{name:10} median {median:.2f} s   runs {runs}")
    print(f"dreampool adds {medians['dreampool'] - medians['floor']:+.2f} s to the SDK floor")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
