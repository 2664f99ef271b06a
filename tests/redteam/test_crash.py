"""Crash safety (THREATS.md T40): ``dreampool build`` killed with SIGKILL at 20+
moments spread over its run.

A pool of 150 dreams: 75 logged and published, 75 waiting. A clean build of the
waiting state is timed, and its result R (site and log state) kept: with salts
derived from the ids (:func:`fixed_salt`) and SOURCE_DATE_EPOCH set, a build of
that state is a function of it, so every later build must give R byte for byte.
Then, for each moment, a fresh
copy of the waiting state is built in a subprocess that is killed at that moment,
and after the kill:

1. the site is the previous one byte for byte, or (only if the swap completed) R's;
2. the log state passes ``builder.log.logbuild.verify_state``, its signed leaves and
   checkpoints are untouched, and any checkpoint it signed is R's, byte for byte
   (a different one would be a fork signed by the pool's own key);
3. the next build succeeds and gives R exactly: R's checkpoint, proved consistent
   with the checkpoint published before (RFC 9162 §2.1.4.2), and independently
   verified once.

``tests/test_site_build.py`` has the 6-kill version that also draws salts. To keep
this one under a minute, each kill's checks and next build (in this process) run
while the subprocess of the following kill runs on another core.
"""

from __future__ import annotations

import hashlib
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from builder.content import pool
from builder.formats import checkpoint as cpmod
from builder.formats import merkle
from builder.formats.b64 import b64_decode, b64url_encode
from builder.log import logbuild, logstate
from tests.independent_verifier import verify_site
from tests.pools import PoolFixture, make_pool
from tests.redteam import build, signed, submit, tree

KILLS = 24  # moments; at least 20 must land while the build runs
EPOCH = "1767225600"


def fixed_salt(dream_id: str) -> str:
    """The salt every build in this test gives ``dream_id``: a build makes a
    new dream's salt itself (a salt found beside it is replaced: T47), so
    builds of one state match byte for byte only with this in place of
    :func:`builder.log.logbuild.new_salt`."""
    return b64url_encode(hashlib.sha256(b"crash test salt " + dream_id.encode()).digest())


# `dreampool` with fixed salts, for the builds this test kills.
_MAIN = (
    "import sys; from builder.cli import main as cli; from builder.log import logbuild; "
    "from tests.redteam.test_crash import fixed_salt; "
    "logbuild.new_salt = fixed_salt; cli.run()"
)


def _cmd(root: Path) -> list[str]:
    return [
        sys.executable,
        "-c",
        _MAIN,
        "build",
        "--content",
        str(root / "content"),
        "--out",
        str(root / "site"),
        "--quiet",
    ]


def _link_copy(src: Path, dst: Path) -> None:
    # Hard links are safe: the pool replaces files (atomic_write, the site swap),
    # it never writes into one in place.
    shutil.copytree(src, dst, copy_function=os.link, symlinks=True)


def _checkpoint(note: bytes) -> cpmod.Checkpoint:
    return cpmod.parse_checkpoint(note.split(b"\n\n", 1)[0].decode() + "\n")


def _state(root: Path) -> dict[str, bytes]:
    """The log state and salts, without the temporaries a killed write leaves."""
    return {p: d for p, d in tree(root / "content").items() if "/.tmp-" not in f"/{p}"}


def test_sigkill_at_random_moments_leaves_site_and_log_recoverable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """T40: 24 kills spread over the build's run (see the module docstring)."""
    monkeypatch.setenv("SOURCE_DATE_EPOCH", EPOCH)
    base = tmp_path / "base"
    tp = make_pool(base)
    submit(tp, *(signed("ada", title=f"Ada's logged dream {n}") for n in range(75)))
    build(tp, base / "site")
    before_site = tree(base / "site")
    before_state = logstate.load(tp.content)
    before_size = before_state.signed_size
    before_note = (base / "site" / "log" / "checkpoint").read_bytes()
    submit(tp, *(signed("bob", title=f"Bob's waiting dream {n}") for n in range(75)))
    monkeypatch.setattr(logbuild, "new_salt", fixed_salt)  # the next builds, in this process

    # The reference: a clean build, timed once caches are warm (the first run of
    # a fresh interpreter compiles and loads more than the kills' runs will).
    env = {**os.environ, "DREAMPOOL_LOG_KEY": tp.log_key, "SOURCE_DATE_EPOCH": EPOCH}
    durations = []
    for name in ("warm-up", "ref"):
        ref = tmp_path / name
        _link_copy(base, ref)
        started = time.monotonic()
        subprocess.run(_cmd(ref), env=env, check=True, capture_output=True)
        durations.append(time.monotonic() - started)
    duration = min(durations)
    shutil.rmtree(tmp_path / "warm-up")
    want_site, want_state = tree(ref / "site"), _state(ref)
    want_note = (ref / "site" / "log" / "checkpoint").read_bytes()
    old, new = _checkpoint(before_note), _checkpoint(want_note)
    assert new.size == before_size + 76  # bob's key and 75 dreams
    proof = [b64_decode(x) for x in want_site[f"log/consistency/{before_size}"].decode().split()]
    merkle.verify_consistency(old.size, new.size, old.root, new.root, proof)
    verify_site(ref / "site", tp.vkey)

    def check(root: Path, returncode: int) -> str:
        content = root / "content"
        site_now = tree(root / "site")
        swapped = site_now == want_site
        assert swapped or site_now == before_site, "the site is neither the old one nor R's"
        state = logstate.load(content)
        assert state.leaves[:before_size] == before_state.leaves
        for size, note in state.checkpoints.items():
            assert note == (
                before_state.checkpoints.get(size) or want_state[f"log/checkpoints/{size}"]
            ), f"checkpoint {size} is not R's"
        directory, _ = pool.load_keys(content)
        scanned, problems = pool.scan_dreams(content, directory)
        assert not problems
        logbuild.verify_state(content, scanned)
        if returncode == 0:
            outcome = "completed"  # the build ended before its moment
        elif swapped:
            outcome = "swapped"  # killed after the new site was swapped in
        elif state.signed_size > before_size:
            outcome = "signed"  # killed after signing, before the swap
        elif len(state.leaves) > before_size:
            outcome = "tail"  # killed between the leaves and the checkpoint
        else:
            outcome = "before-log"  # killed before the log state changed
        report = build(PoolFixture(content, tp.log_key, tp.vkey), root / "site")
        assert report.size == new.size
        assert tree(root / "site") == want_site
        assert _state(root) == want_state
        assert not list(root.glob(".site.new-*")), "a staging folder was left behind"
        return outcome

    # Moments are stratified over the build's run: kill k lands in the k-th of KILLS
    # equal slices of it. A build that ends before its moment (runs vary with the
    # checks running beside it) shortens the estimate and its slice is tried again.
    rng = random.Random(20260101)
    outcomes: list[str] = []
    killed = attempts = 0
    pending: tuple[Path, int] | None = None
    while killed < KILLS and attempts < 2 * KILLS:
        moment = duration * (0.02 + 0.93 * (killed + rng.random()) / KILLS)
        root = tmp_path / f"kill-{attempts}"
        attempts += 1
        _link_copy(base, root)
        started = time.monotonic()
        proc = subprocess.Popen(
            _cmd(root), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        timer = threading.Timer(moment, proc.send_signal, (signal.SIGKILL,))
        timer.start()
        if pending is not None:  # the previous kill's checks, while this build runs
            outcomes.append(check(*pending))
            shutil.rmtree(pending[0])
        proc.wait()
        timer.cancel()
        assert proc.returncode in (0, -signal.SIGKILL), proc.returncode
        if proc.returncode == 0:
            duration = min(duration, time.monotonic() - started)
        killed += proc.returncode == -signal.SIGKILL
        pending = (root, proc.returncode)
    assert pending is not None
    outcomes.append(check(*pending))
    assert killed >= 20, f"only {killed} kills landed in {attempts} tries ({duration:.2f}s build)"
    assert set(outcomes) - {"swapped", "completed"}, outcomes  # some kills left the old site
    print(
        f"\n{killed} kills in {attempts} tries of a {duration:.2f}s build: "
        + ", ".join(f"{o} {outcomes.count(o)}" for o in sorted(set(outcomes)))
    )


def test_temporaries_of_a_killed_write_do_not_stop_the_next_build(tmp_path: Path) -> None:
    """T40 (regression): atomic_write makes ``.tmp-…`` beside its target and renames
    it; SIGKILL between the two leaves it there. In content/log/leaves that made
    every later build fail ("unexpected file") until someone deleted it by hand."""
    tp = make_pool(tmp_path)
    submit(tp, signed("ada", title="Before the kill"))
    build(tp, tmp_path / "site")
    for folder in ("log/leaves", "log", "log/checkpoints", "dreams"):
        (tp.content / folder / ".tmp-k1ll3d").write_bytes(b'{"v":1,"kind":"dre')
    submit(tp, signed("bob", title="After the kill"))
    report = build(tp, tmp_path / "site")
    assert report.signed and report.size == 4
    directory, _ = pool.load_keys(tp.content)
    scanned, problems = pool.scan_dreams(tp.content, directory)
    assert not problems and logbuild.verify_state(tp.content, scanned) == 4
    verify_site(tmp_path / "site", tp.vkey)
