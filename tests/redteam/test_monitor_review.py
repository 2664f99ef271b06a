"""Review of ``dreampool monitor`` (presence, proof-only verdicts, bounded fetches) as a
hostile mirror or server (T65–T67).

Each test here fails on the reviewed code: it performs an attack and asserts what the
monitor should do. Helpers come from ``tests/test_monitor.py`` (synthetic logs served
from a directory or over HTTP on 127.0.0.1).
"""

from __future__ import annotations

import functools
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from builder.errors import DreampoolError
from builder.formats import tiles
from builder.formats.checkpoint import Checkpoint
from builder.readers import fetch, presence
from tests.test_lightclient import LARGE, SMALL, LogBuilder, signed_dream, standard_log
from tests.test_monitor import (
    QuietHandler,
    dream_folder,
    no_proxy,  # noqa: F401  (fixture)
    policy,  # noqa: F401  (fixture)
    serve,
    site_at,
    state,  # noqa: F401  (fixture)
)

# --- presence: "present" is a HEAD 200, nothing more ---------------------------------


class SpaFallbackHandler(QuietHandler):
    """A static host with a single-page-app fallback (Cloudflare Pages without a
    404.html, Netlify ``/* /index.html 200``, many nginx ``try_files`` setups): any
    path it has no file for is answered 200 with the app's index.html."""

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        if code != 404:
            super().send_error(code, message, explain)
            return
        body = b"<!doctype html><title>app</title>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)


class HeadLiesHandler(QuietHandler):
    """Answers every HEAD 200 (no body to send, nothing to check); GETs are honest."""

    def do_HEAD(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()


@pytest.mark.usefixtures("no_proxy")
@pytest.mark.parametrize("handler", [SpaFallbackHandler, HeadLiesHandler], ids=["spa", "head"])
def test_a_dropped_record_is_not_present_because_head_says_200(
    tmp_path: Path,
    policy: Path,  # noqa: F811
    state: Path,  # noqa: F811
    run: Callable[..., Any],
    handler: type[QuietHandler],
) -> None:
    """T65. The site drops a logged, unerased dream's record (as in
    test_a_dropped_dream_is_reported_missing), but its server answers 200 for a path
    it has no file for: an SPA fallback serving index.html, or a HEAD that says 200
    to everything. Presence asks only ``HEAD dreams/<id>/record.json`` and takes the
    200 as "present": the monitor prints "history unchanged ... all present" and
    exits 0, storing the state, so the dropped dream is never checked again as new.
    The record can be checked for real: GET it (it is small) and recompute the leaf
    from it (docs/protocol.md §5 step 2, the commitment)."""
    served = tmp_path / "www"
    site = site_at(served, LARGE, name="pool")
    (dream_folder(site, "late") / "record.json").unlink()  # no erasure leaf for it
    state.write_bytes(standard_log().checkpoints[SMALL])
    with serve(functools.partial(handler, directory=str(served))) as base:
        result = run("monitor", "--policy", policy, "--state", state, f"{base}/pool/")
    assert "history unchanged" not in result.out, result
    assert result.code != 0, result
    assert state.read_bytes() == standard_log().checkpoints[SMALL]


@pytest.mark.parametrize("body", ["another-dream", "empty", "not-json"])
def test_a_record_that_is_not_the_logged_dream_is_not_present(
    tmp_path: Path,
    policy: Path,  # noqa: F811
    state: Path,  # noqa: F811
    run: Callable[..., Any],
    body: str,
) -> None:
    """T65. The site keeps a file at ``dreams/<id>/record.json`` but it is not that
    dream: another dream's record, an empty file, or garbage. The monitor counts it
    present (exit 0, "every dream checked is present") although the leaf's
    commitment matches nothing the site serves: the dream is as gone as if the file
    were deleted."""
    site = site_at(tmp_path, LARGE)
    target = dream_folder(site, "late") / "record.json"
    target.write_bytes(
        {
            "another-dream": standard_log().record("first"),
            "empty": b"",
            "not-json": b"\x00\x01garbage",
        }[body]
    )
    state.write_bytes(standard_log().checkpoints[SMALL])
    result = run("monitor", "--policy", policy, "--state", state, "--all", site)
    assert "history unchanged" not in result.out, result
    assert result.code != 0, result


# --- cost: a single 404 makes the monitor hold every entry bundle at once -------------


def _bundle_log(bundles: int) -> LogBuilder:
    """A key, one dream at leaf 1, erasure fillers up to ``bundles`` full bundles."""
    log = LogBuilder()
    log.add_key("ada")
    log.add_dream(signed_dream("ada", "only"))
    log.add_fillers(bundles * tiles.TILE_WIDTH - 2)
    log.sign()
    return log


class _HostileSite:
    """Honest entry bundle 0; every other bundle the largest that decodes (256 entries of
    65,535 bytes, 16.8 MB); the one dream's record is "not found"."""

    def __init__(self, log: LogBuilder) -> None:
        self.log = log
        self.fetched = 0

    def fetch(self, path: str, limit: int) -> bytes:
        assert path.startswith("log/tile/entries/"), path
        self.fetched += 1
        if path.startswith("log/tile/entries/000"):
            return tiles.encode_entry_bundle(self.log.leaves[: tiles.TILE_WIDTH])
        entry = (tiles.MAX_ENTRY_SIZE).to_bytes(2, "big") + bytes(tiles.MAX_ENTRY_SIZE)
        data = entry * tiles.TILE_WIDTH
        assert len(data) <= limit
        return data

    def get(self, path: str, limit: int) -> bytes | None:
        # The monitor now GETs each record (finding 1); the one dream's is "not found".
        assert path.startswith("dreams/"), path
        return None

    def describe(self, path: str) -> str:
        return path


def test_one_missing_record_does_not_make_the_monitor_hold_every_bundle() -> None:
    """T67. To look for an erasure leaf, ``presence._erased_ids`` reads *every* entry
    bundle of the log into one list and checks them against the signed root only
    once all are in memory. A hostile site answers 404 for one record and serves
    every other bundle at the 16.8 MB maximum that still decodes: peak memory is
    (size / 256) x 16.8 MB before anything is rejected, 670 MB for a 10,000-leaf log,
    6.5 GB at 100,000, on every run. Each bundle can be checked against the tiles as
    it arrives (as check_presence already does leaf by leaf) and dropped."""
    bundles = 8
    log = _bundle_log(bundles)
    size = bundles * tiles.TILE_WIDTH
    cp = Checkpoint(log.origin, size, log.tree.root(size))
    site = _HostileSite(log)
    tracemalloc.start()
    try:
        with pytest.raises(DreampoolError):
            presence.check_presence(site, cp, [0], log.tree.hash_at)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 3 * presence.MAX_BUNDLE_SIZE, (
        f"peak {peak / 1e6:.0f} MB after {site.fetched} bundles fetched"
    )


# --- time: every fetch has a deadline, the run has none --------------------------------


class SlowHandler(QuietHandler):
    """Serves the site honestly, each answer just under the fetch deadline."""

    delay = 0.0

    def handle_one_request(self) -> None:
        time.sleep(self.delay)
        super().handle_one_request()


def _many_dreams_log(count: int) -> LogBuilder:
    log = LogBuilder()
    log.add_key("ada")
    for n in range(count):
        log.add_dream(signed_dream("ada", f"dream {n}"))
    log.sign()
    return log


@pytest.mark.usefixtures("no_proxy")
def test_a_slow_site_cannot_hold_the_monitor_for_dreams_times_the_deadline(
    tmp_path: Path, run: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """T67. Each fetch ends within DEFAULT_DEADLINE, but nothing bounds the run: a site
    that answers every request just under the deadline holds the monitor for
    (tiles + bundles + dreams / 4) deadlines. With the defaults (30 s, --sample 4) a
    pool of 1,000+ dreams keeps an hourly cron monitor busy for hours, runs pile up
    and race on the state file. Here: 2 s deadline, 0.3 s of delay per answer, 64 dreams;
    the run should give up (exit 3) within a few deadlines, not take ~20 s."""
    monkeypatch.setattr(fetch, "DEFAULT_DEADLINE", 2.0)
    log = _many_dreams_log(64)
    served = tmp_path / "www"
    log.write_site(served / "pool")
    (tmp_path / "policy").write_bytes(log.policy)
    handler = type("H", (SlowHandler,), {"delay": 0.3})
    with serve(functools.partial(handler, directory=str(served))) as base:
        started = time.monotonic()
        result = run(
            "monitor",
            "--policy",
            tmp_path / "policy",
            "--state",
            tmp_path / "state",
            "--all",
            # The run's deadline is an option (default 10 minutes, so an honest --all run
            # of a large pool fits); a cron job sets it under its interval.
            "--deadline",
            "5",
            f"{base}/pool/",
        )
        elapsed = time.monotonic() - started
    assert elapsed < 4 * 2.0, f"{elapsed:.1f} s, exit {result.code}"
    assert result.code == 3, result
    assert "deadline" in result.err, result


# --- state: a checkpoint verified in a run that ends in exit 3 is forgotten -------------


def _split_view() -> tuple[LogBuilder, LogBuilder]:
    """One log key, two views that agree on the first 4 leaves and sign size 5 twice."""
    views = []
    for last in ("four", "four, other view"):
        log = LogBuilder()
        log.add_key("ada")
        for title in ("one", "two", "three"):
            log.add_dream(signed_dream("ada", title))
        assert log.sign() == 4
        log.add_dream(signed_dream("ada", last))
        assert log.sign() == 5
        views.append(log)
    assert views[0].tree.root(5) != views[1].tree.root(5)
    return views[0], views[1]


@pytest.mark.parametrize("seen", [None, 4], ids=["first-use", "state-at-4"])
def test_a_signed_checkpoint_seen_before_an_unchecked_presence_is_not_forgotten(
    tmp_path: Path, run: Callable[..., Any], seen: int | None
) -> None:
    """T66. The log key signs two trees of size 5 (a split view). Run 1 sees view A,
    verifies its checkpoint (and, with a state, its consistency), but one record
    cannot be asked for (here a directory where record.json should be; over HTTP a
    503 or a timeout): exit 3, and the monitor keeps nothing of what it verified.
    Run 2 sees view B: the monitor trusts it on first use, or finds it consistent
    with the state at 4, and exits 0 storing it. It held two signed roots for size 5
    and reports "history unchanged". A site (or a log with a mirror) that makes
    presence fail whenever it shows the honest view can keep a monitor from ever
    comparing the two. A checkpoint proved consistent should be kept (or at least
    compared with the next one) whatever presence says."""
    honest, other = _split_view()
    policy_file = tmp_path / "policy"
    policy_file.write_bytes(honest.policy)
    state_file = tmp_path / "state"
    if seen is not None:
        state_file.write_bytes(honest.checkpoints[seen])
    site_a = honest.write_site(tmp_path / "a", 5)
    record = site_a / "dreams" / honest.ids["two"] / "record.json"
    record.unlink()
    record.mkdir()  # cannot be asked for: "not a regular file", unchecked
    first = run("monitor", "--policy", policy_file, "--state", state_file, "--all", site_a)
    assert first.code == 3, first
    site_b = other.write_site(tmp_path / "b", 5)
    second = run("monitor", "--policy", policy_file, "--state", state_file, "--all", site_b)
    assert second.code == 2, second
    assert "fork" in second.out


# --- exit codes: an argument that can never work is a local problem --------------------


@pytest.mark.parametrize(
    "url",
    ["http://example.org/my pool/", "http://exa mple.org/", "http://127.0.0.1:9/\x1b[2J/"],
    ids=["space-in-path", "space-in-host", "escape-in-path"],
)
def test_a_site_url_that_can_never_be_fetched_is_exit_1(
    tmp_path: Path,
    policy: Path,  # noqa: F811
    run: Callable[..., Any],
    url: str,
) -> None:
    """T67. docs/verifiers.md: exit 1 is "a local problem: the policy, the state file,
    the arguments — fix it"; exit 3 is the site's fault, "run again later; alert when
    it repeats". A SITE argument http.client will never send (a space or a control
    character in it) passes ``fetch.check_url`` and fails on every run as exit 3,
    "could not check ... run again later": a cron job alerts on the site forever for
    a typo in its own command line."""
    result = run("monitor", "--policy", policy, "--state", tmp_path / "state", url)
    assert result.code == 1, result
