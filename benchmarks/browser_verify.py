"""How long the browser verifier takes for one dream of the sample pool.

Builds the shipped sample pool (a copy of content/; its log is signed, so no key is
needed), serves it on 127.0.0.1 with the preview server, opens a dream page in the
system Chromium and, with the inputs fetched once, runs docs/protocol.md §5 steps 1-5
(lightclient.js verifyProof) N times, timing each run in the page with
performance.now(): script and WebCrypto time, no network. Then it times the whole
panel (window.dreampoolVerify: fetches, pin and history included) for comparison.

    python benchmarks/browser_verify.py [-n 50] [--dream ID]

The budget is 50 ms of script time for one dream (median and p95 are printed).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from builder import build as buildmod  # noqa: E402
from builder.site.serve import make_server  # noqa: E402

CHROMIUM = os.environ.get("DREAMPOOL_CHROMIUM", "/usr/bin/chromium")
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]
BUDGET_MS = 50.0

# Fetch the inputs once, then time verifyProof alone, run after run.
TIME_STEPS = """async (n) => {
  const lc = await import(new URL("../../static/lightclient.js", location.href).href);
  const section = document.querySelector("section.verify[data-dream-id]");
  const get = async (path) => {
    const response = await fetch(new URL(path, location.href), { cache: "no-store" });
    return new Uint8Array(await response.arrayBuffer());
  };
  const proof = await get("proof.tlog-proof");
  const cp = new TextDecoder().decode(proof).split("\\n\\n")[1].split("\\n")[1];
  const inputs = {
    proof, record: await get("record.json"), policy: await get("../../log/policy"),
    newer: await get("../../log/checkpoint"), expectId: section.dataset.dreamId,
  };
  const current = new TextDecoder().decode(inputs.newer).split("\\n")[1];
  inputs.consistency = cp === current ? new Uint8Array() : await get(`../../log/consistency/${cp}`);
  const times = [];
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    const result = await lc.verifyProof(inputs);
    times.push(performance.now() - t);
    if (result.steps.length !== 5) throw new Error("not all five steps ran");
  }
  return times;
}"""

TIME_PANEL = """async (n) => {
  const times = [];
  for (let i = 0; i < n; i++) {
    const out = await window.dreampoolVerify();
    if (out.status !== "ok") throw new Error("panel: " + out.status);
    times.push(out.ms);
  }
  return times;
}"""


def summary(label: str, times: list[float]) -> str:
    ordered = sorted(times)
    p95 = ordered[max(0, round(0.95 * len(ordered)) - 1)]
    return (
        f"{label}: n={len(times)} median {statistics.median(ordered):.1f} ms, "
        f"p95 {p95:.1f} ms, min {ordered[0]:.1f} ms, max {ordered[-1]:.1f} ms"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=50, help="runs (default 50)")
    parser.add_argument("--dream", help="dream id (default: the first of the sample pool)")
    args = parser.parse_args(argv)
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        os.environ.setdefault("DREAMPOOL_HOME", str(Path(tmp) / "home"))
        content = Path(tmp) / "content"
        shutil.copytree(REPO / "content", content)
        site = Path(tmp) / "site"
        buildmod.build(content, site, signer=None)
        dream = (
            args.dream
            or sorted(p.name for p in (site / "dreams").iterdir() if (p / "record.json").exists())[
                0
            ]
        )
        server = make_server(site, port=0)
        thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        thread.start()
        url = f"http://127.0.0.1:{server.server_address[1]}/dreams/{dream}/"
        try:
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
                page: Any = browser.new_page()
                page.goto(url)
                page.evaluate(TIME_STEPS, 3)  # warm up: module compile, key import
                steps = page.evaluate(TIME_STEPS, args.n)
                panel = page.evaluate(TIME_PANEL, min(args.n, 20))
                version = browser.version
                browser.close()
        finally:
            server.shutdown()
            server.server_close()
    print(f"Chromium {version}, sample pool dream {dream}")
    print(summary("verifyProof, steps 1-5 (no network)", steps))
    print(summary("whole panel (fetches, pin, history)", panel))
    median = statistics.median(steps)
    verdict = "within" if median < BUDGET_MS else "OVER"
    print(f"{verdict} the {BUDGET_MS:.0f} ms budget")
    return 0 if median < BUDGET_MS else 1


if __name__ == "__main__":
    sys.exit(main())
