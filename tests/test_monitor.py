"""``dreampool monitor``: rollbacks and forks caught, growth proved from tiles or consistency file.

The sites are the synthetic logs of ``test_lightclient`` (two checkpoints, SMALL and
LARGE, with full and partial tiles), laid out in a directory or served over HTTP
on 127.0.0.1.
"""

from __future__ import annotations

import functools
import hashlib
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from http.server import BaseHTTPRequestHandler, SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from builder.cli import main as cli
from builder.errors import DreampoolError
from builder.formats import strictjson
from builder.formats.b64 import b64_decode, b64_encode
from builder.formats.policy import parse_policy
from builder.readers import monitor
from tests.test_lightclient import (
    LARGE,
    SMALL,
    LogBuilder,
    build_standard_log,
    signed_dream,
    standard_log,
)


@functools.cache
def forked_log() -> LogBuilder:
    """Same log key and sizes as the standard log, another dream at index 1."""
    return build_standard_log(forked=True)


@pytest.fixture
def policy(tmp_path: Path) -> Path:
    path = tmp_path / "policy"
    path.write_bytes(standard_log().policy)
    return path


@pytest.fixture
def state(tmp_path: Path) -> Path:
    directory = tmp_path / "state"
    directory.mkdir()
    return directory / "example.org.checkpoint"


def site_at(tmp_path: Path, size: int, log: LogBuilder | None = None, name: str = "site") -> Path:
    root = tmp_path / name
    if root.exists():
        shutil.rmtree(root)
    return (log or standard_log()).write_site(root, size)


def monitor_run(policy: Path, state: Path, site: Path | str, *options: str) -> int:
    """``dreampool monitor`` as the command line runs it; its output goes to capsys."""
    args = ["monitor", "--policy", str(policy), "--state", str(state), *options, str(site)]
    return cli.main(args)


# --- directory sites ------------------------------------------------------------------


def test_first_run_trusts_and_stores(
    tmp_path: Path, policy: Path, state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site = site_at(tmp_path, SMALL)
    assert monitor_run(policy, state, site) == 0
    assert state.read_bytes() == standard_log().checkpoints[SMALL]
    assert "first use" in capsys.readouterr().out
    # no temporary file left; the lock file stays (removing it would race another run)
    assert sorted(p.name for p in state.parent.iterdir()) == [state.name, f"{state.name}.lock"]


def test_growth_is_proved_from_the_tiles(
    tmp_path: Path, policy: Path, state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state.write_bytes(standard_log().checkpoints[SMALL])
    site = site_at(tmp_path, LARGE)
    shutil.rmtree(site / "log" / "consistency")  # only the tiles can prove it
    assert (site / "log/tile/0/000.p/5").exists() and (site / "log/tile/1/000.p/1").exists()
    assert monitor_run(policy, state, site) == 0
    assert f"history unchanged: size {SMALL} → {LARGE}" in capsys.readouterr().out
    assert state.read_bytes() == standard_log().checkpoints[LARGE]


def check(site: Path, seen: int = SMALL) -> monitor.Verdict:
    """:func:`monitor.check_site` alone: the checkpoints compared, no presence check."""
    log = standard_log()
    return monitor.check_site(
        parse_policy(log.policy), log.checkpoints[seen], monitor.DirectorySite(site)
    )


def test_growth_falls_back_to_the_consistency_file(
    tmp_path: Path, policy: Path, state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site = site_at(tmp_path, LARGE)
    shutil.rmtree(site / "log" / "tile")
    verdict = check(site)
    assert verdict.status == "consistent"
    assert [w.split(":")[0] for w in verdict.warnings] == ["tiles"]
    # Without tiles no dream can be proved logged, so presence cannot be checked.
    state.write_bytes(standard_log().checkpoints[SMALL])
    assert monitor_run(policy, state, site) == monitor.EXIT_UNCHECKED
    assert "could not check: the dreams' records" in capsys.readouterr().err
    assert state.read_bytes() == standard_log().checkpoints[SMALL]


def test_bad_tiles_do_not_matter_when_the_consistency_file_verifies(tmp_path: Path) -> None:
    site = site_at(tmp_path, LARGE)
    (site / "log/tile/0/000").write_bytes(bytes(8192))
    verdict = check(site)
    assert verdict.status == "consistent"
    (warning,) = verdict.warnings
    assert warning.startswith("tiles:") and "log/consistency/5 verifies" in warning


def test_no_proof_to_be_had_is_an_error_not_a_verdict(
    tmp_path: Path, policy: Path, state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state.write_bytes(standard_log().checkpoints[SMALL])
    site = site_at(tmp_path, LARGE)
    shutil.rmtree(site / "log" / "tile")
    shutil.rmtree(site / "log" / "consistency")
    assert monitor_run(policy, state, site) == monitor.EXIT_UNCHECKED
    err = capsys.readouterr().err
    assert "could not check: no proof that size 5 → 268 only appended" in err
    assert "dreampool: hint: " in err
    assert state.read_bytes() == standard_log().checkpoints[SMALL]


def test_same_checkpoint_again_is_unchanged(
    tmp_path: Path, policy: Path, state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state.write_bytes(standard_log().checkpoints[SMALL])
    assert monitor_run(policy, state, site_at(tmp_path, SMALL)) == 0
    assert f"history unchanged: size {SMALL} → {SMALL}" in capsys.readouterr().out


def test_rollback_is_reported_and_the_state_kept(
    tmp_path: Path, policy: Path, state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = standard_log()
    state.write_bytes(log.checkpoints[LARGE])
    assert monitor_run(policy, state, site_at(tmp_path, SMALL)) == monitor.EXIT_UNCHECKED
    err = capsys.readouterr().err
    assert f"older checkpoint, size {SMALL}, than size {LARGE}" in err
    assert "withholding" in err
    assert state.read_bytes() == log.checkpoints[LARGE]


def test_fork_at_the_same_size(
    tmp_path: Path, policy: Path, state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state.write_bytes(standard_log().checkpoints[SMALL])
    assert monitor_run(policy, state, site_at(tmp_path, SMALL, forked_log())) == 2
    out = capsys.readouterr().out
    assert out.startswith("fork: two different roots are signed for tree size 5")
    assert forked_log().checkpoints[SMALL].decode() in out
    assert standard_log().checkpoints[SMALL].decode() in out
    assert state.read_bytes() == standard_log().checkpoints[SMALL]


@pytest.mark.parametrize("remove", [None, "tile", "consistency"])
def test_fork_at_a_larger_size(
    tmp_path: Path,
    policy: Path,
    state: Path,
    capsys: pytest.CaptureFixture[str],
    remove: str | None,
) -> None:
    state.write_bytes(standard_log().checkpoints[SMALL])
    site = site_at(tmp_path, LARGE, forked_log())
    if remove:
        shutil.rmtree(site / "log" / remove)
    assert monitor_run(policy, state, site) == 2
    out = capsys.readouterr().out
    assert out.startswith("fork: the ")
    assert f"with it the root of its first {SMALL} leaves" in out
    assert forked_log().checkpoints[LARGE].decode() in out
    assert state.read_bytes() == standard_log().checkpoints[SMALL]


def test_site_checkpoint_the_policy_does_not_accept(
    tmp_path: Path, policy: Path, state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = LogBuilder(log_seed=hashlib.sha256(b"another key").digest())
    other.add_key("ada")
    other.sign()
    assert monitor_run(policy, state, site_at(tmp_path, 1, other)) == monitor.EXIT_UNCHECKED
    assert "log/checkpoint" in capsys.readouterr().err
    assert not state.exists()


def test_state_file_the_policy_does_not_accept(
    tmp_path: Path, policy: Path, state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state.write_bytes(b"not a checkpoint\n")
    assert monitor_run(policy, state, site_at(tmp_path, SMALL)) == 1
    err = capsys.readouterr().err
    assert "state file" in err and "delete the state file" in err
    assert state.read_bytes() == b"not a checkpoint\n"


def test_missing_site_and_policy_are_errors(
    tmp_path: Path, policy: Path, state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert monitor_run(policy, state, tmp_path / "nowhere") == 1
    assert "site directory" in capsys.readouterr().err
    assert monitor_run(tmp_path / "no-policy", state, site_at(tmp_path, SMALL)) == 1
    assert "policy" in capsys.readouterr().err
    assert monitor_run(policy, state, "ftp://example.org/") == 1
    assert "http or https" in capsys.readouterr().err
    # A directory with no log/: the site has no checkpoint to check.
    assert monitor_run(policy, state, tmp_path) == monitor.EXIT_UNCHECKED
    assert "no such file" in capsys.readouterr().err


def test_directory_site_stays_inside_its_root(tmp_path: Path) -> None:
    root = site_at(tmp_path, SMALL)
    (tmp_path / "secret").write_bytes(b"secret")
    (root / "log" / "escape").symlink_to(tmp_path / "secret")
    site = monitor.DirectorySite(root)
    for path in ("../secret", "log/../../secret", "/etc/passwd", "log//checkpoint", ""):
        with pytest.raises(monitor.SiteError, match="relative path"):
            site.fetch(path, 100)
    with pytest.raises(monitor.SiteError, match="outside the site directory"):
        site.fetch("log/escape", 100)
    with pytest.raises(monitor.SiteError, match="not a regular file"):
        site.fetch("log", 100)
    with pytest.raises(monitor.SiteError, match="over 10 bytes"):
        site.fetch("log/checkpoint", 10)
    with pytest.raises(monitor.NotFoundError):
        site.fetch("log/checkpoint/x", 100)
    (root / "log" / "loop1").symlink_to(root / "log" / "loop2")
    (root / "log" / "loop2").symlink_to(root / "log" / "loop1")
    with pytest.raises(monitor.SiteError, match="loop"):
        site.fetch("log/loop1", 100)


def test_cli_exit_codes(tmp_path: Path, policy: Path, state: Path, run: Callable[..., Any]) -> None:
    small, large = site_at(tmp_path, SMALL, name="small"), site_at(tmp_path, LARGE, name="large")
    args = ("monitor", "--policy", policy, "--state", state)
    assert run(*args, small).code == 0
    assert run(*args, large).code == 0
    result = run(*args, small)
    assert result.code == 3 and "older checkpoint" in result.err
    result = run(*args, tmp_path / "nowhere")
    assert result.code == 1 and "dreampool: error:" in result.err
    result = run("monitor", "--help")
    assert result.code == 0
    for code in ("0 history unchanged", "2 a verdict", "3 could not check", "1 a local"):
        assert code in " ".join(result.out.split())


# --- http(s) sites --------------------------------------------------------------------


class QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


class RedirectHandler(BaseHTTPRequestHandler):
    """Sends every request to the same port on another host name."""

    def do_GET(self) -> None:
        address = self.server.server_address
        assert isinstance(address, tuple)
        port = address[1]
        self.send_response(302)
        self.send_header("Location", f"http://localhost:{port}{self.path}")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def serve(handler: Callable[..., BaseHTTPRequestHandler]) -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.fixture
def no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")


@pytest.mark.usefixtures("no_proxy")
def test_http_site(
    tmp_path: Path, policy: Path, state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    served = tmp_path / "www"
    site = site_at(served, SMALL, name="pool")
    with serve(functools.partial(QuietHandler, directory=str(served))) as base:
        url = f"{base}/pool"  # the site root, below the server's root
        assert monitor_run(policy, state, url) == 0
        assert "first use" in capsys.readouterr().out
        site_at(served, LARGE, name="pool")
        shutil.rmtree(site / "log" / "consistency")  # prove it from tiles fetched over HTTP
        assert monitor_run(policy, state, url + "/") == 0
        assert f"size {SMALL} → {LARGE}" in capsys.readouterr().out
        site_at(served, LARGE, forked_log(), name="pool")
        assert monitor_run(policy, state, url) == 2
        capsys.readouterr()
        assert monitor_run(policy, state, f"{base}/nothing-here") == 3
        assert "HTTP 404" in capsys.readouterr().err
    assert state.read_bytes() == standard_log().checkpoints[LARGE]


@pytest.mark.usefixtures("no_proxy")
def test_http_redirect_to_another_host_is_refused(
    policy: Path, state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with serve(RedirectHandler) as base:
        assert monitor_run(policy, state, base) == monitor.EXIT_UNCHECKED
    assert "redirects to another host" in capsys.readouterr().err
    assert not state.exists()


def test_http_site_urls_are_checked() -> None:
    for url in ("http://", "https://user:pw@example.org/", "https://example.org/?q=1"):
        with pytest.raises(monitor.SiteError):
            monitor.HttpSite(url)
    with pytest.raises(monitor.SiteError):
        monitor.HttpSite("http://example.org").fetch("../x", 10)


def test_unreachable_http_site_is_an_error(policy: Path, state: Path) -> None:
    with pytest.raises(DreampoolError):
        monitor.check_site(
            parse_policy(policy.read_bytes()),
            None,
            monitor.HttpSite("http://127.0.0.1:9/", deadline=2),
        )


# --- issue 19: presence, verdicts only from proofs, bounded fetches -------------------


def dream_folder(site: Path, title: str, log: LogBuilder | None = None) -> Path:
    return site / "dreams" / (log or standard_log()).ids[title]


def test_a_dropped_dream_is_reported_missing(
    tmp_path: Path, policy: Path, state: Path, run: Callable[..., Any]
) -> None:
    """Issue 19 item 8: the site drops a logged dream's record and page, with no erasure
    leaf. Before the fix the monitor said "history unchanged" and exited 0."""
    state.write_bytes(standard_log().checkpoints[SMALL])
    site = site_at(tmp_path, LARGE)
    shutil.rmtree(dream_folder(site, "late"))  # a dream new since the state
    shutil.rmtree(dream_folder(site, "second"))  # and one from before
    result = run("monitor", "--policy", policy, "--state", state, "--all", site)
    assert result.code == 2, result
    for title in ("late", "second"):
        dream_id = standard_log().ids[title]
        index = standard_log().index_of(title)
        assert f"missing: dream {dream_id} (leaf {index})" in result.out
    assert "history unchanged" not in result.out
    assert state.read_bytes() == standard_log().checkpoints[SMALL]  # not stored


def test_a_dream_new_since_the_state_is_always_checked(
    tmp_path: Path, policy: Path, state: Path, run: Callable[..., Any]
) -> None:
    """Without --all, every leaf added since the state is checked (and a sample of
    the older ones)."""
    state.write_bytes(standard_log().checkpoints[SMALL])
    site = site_at(tmp_path, LARGE)
    (dream_folder(site, "fourth") / "record.json").unlink()
    result = run("monitor", "--policy", policy, "--state", state, "--sample", "0", site)
    assert result.code == 2, result
    assert f"missing: dream {standard_log().ids['fourth']}" in result.out


def erased_log() -> LogBuilder:
    """Key, two dreams, size 3 signed; then the first dream erased, size 4 signed."""
    log = LogBuilder()
    log.add_key("ada")
    log.add_dream(signed_dream("ada", "kept"))
    log.add_dream(signed_dream("ada", "erased"))
    log.sign()
    log.add_leaf({"v": 1, "kind": "erasure", "id": log.ids["erased"], "reason": "legal"})
    log.sign()
    return log


def test_an_erased_dream_is_not_missing(
    tmp_path: Path, policy: Path, state: Path, run: Callable[..., Any]
) -> None:
    log = erased_log()
    state.write_bytes(log.checkpoints[3])
    site = site_at(tmp_path, 4, log)
    (dream_folder(site, "erased", log) / "record.json").unlink()  # erasure: §3
    result = run("monitor", "--policy", policy, "--state", state, "--all", site)
    assert result.code == 0, result
    assert "history unchanged: size 3 → 4" in result.out
    assert "2 dreams checked: 1 present, 1 erased" in result.out
    (dream_folder(site, "kept", log) / "record.json").unlink()
    result = run("monitor", "--policy", policy, "--state", state, "--all", site)
    assert result.code == 2 and f"missing: dream {log.ids['kept']} (leaf 1)" in result.out


@pytest.mark.parametrize(
    ("leaf", "rule"),
    [
        ({"tier": "maintainer"}, "unknown member(s) 'tier'"),
        ({"v": 2}, "/v: must be the integer 1"),
        ({"keyId": "sha256:" + "0" * 16}, "/keyId: is not the keyId of publicKey"),
    ],
    ids=["extra-member", "v-2", "keyid-not-of-key"],
)
def test_a_signed_key_leaf_that_section_3_refuses_is_never_taken_for_one(
    tmp_path: Path,
    policy: Path,
    state: Path,
    run: Callable[..., Any],
    leaf: dict[str, Any],
    rule: str,
) -> None:
    """docs/protocol.md §3 (builder.formats.leaf): the monitor used to take any leaf whose
    kind is "key" for a key leaf, whatever else it held, and report the log as
    checked. A leaf the log signed that §3 refuses is no leaf of v1: the monitor
    could not check the log, and says which rule the leaf breaks."""
    log = LogBuilder()
    log.add_key("ada")
    key = strictjson.loads(log.leaves[0])
    log.add_leaf({**key, **leaf})
    log.add_dream(signed_dream("ada", "kept"))
    log.sign()
    result = run(
        "monitor", "--policy", policy, "--state", state, "--all", site_at(tmp_path, 3, log)
    )
    assert result.code == monitor.EXIT_UNCHECKED, result
    assert "leaf 1 is signed by the log but is no dream, key or erasure leaf" in result.err
    assert rule in result.err


def growth_log() -> LogBuilder:
    """Checkpoints at 4 (a power of two: the consistency proof omits the old root) and 5."""
    log = LogBuilder()
    log.add_key("ada")
    for title in ("one", "two", "three"):
        log.add_dream(signed_dream("ada", title))
    assert log.sign() == 4
    log.add_dream(signed_dream("ada", "four"))
    assert log.sign() == 5
    return log


@pytest.mark.parametrize(
    "consistency",
    [b"garbled\n", b"", "wrong-hashes"],
    ids=["unparsable", "empty", "wrong-hashes"],
)
def test_a_mirror_cannot_fake_a_fork(
    tmp_path: Path,
    policy: Path,
    state: Path,
    run: Callable[..., Any],
    consistency: bytes | str,
) -> None:
    """Issue 19 item 12: state at 4, honest growth to 5; the mirror serves no tiles
    and a garbled log/consistency/4. Before the fix: "fork", exit 2, with both honest
    checkpoints as "evidence". Now: could not check, exit 3, state kept."""
    log = growth_log()
    state.write_bytes(log.checkpoints[4])
    site = site_at(tmp_path, 5, log)
    shutil.rmtree(site / "log" / "tile")
    if consistency == "wrong-hashes":  # parses, but is not the log's proof
        first = b64_decode((site / "log/consistency/4").read_text().splitlines()[0])
        consistency = (b64_encode(bytes([first[0] ^ 1]) + first[1:]) + "\n").encode()
    assert isinstance(consistency, bytes)
    (site / "log/consistency/4").write_bytes(consistency)
    result = run("monitor", "--policy", policy, "--state", state, site)
    assert result.code == 3, result
    assert "fork" not in result.out + result.err
    assert "could not check" in result.err
    assert "log/consistency/4" in result.err and "log/tile/" in result.err
    assert state.read_bytes() == log.checkpoints[4]


def test_tampered_tiles_alone_are_not_a_fork(
    tmp_path: Path, policy: Path, state: Path, run: Callable[..., Any]
) -> None:
    """A tile changed in transit and no consistency file: the proof from the tiles
    does not reproduce the new signed root, so it proves nothing either way."""
    state.write_bytes(standard_log().checkpoints[SMALL])
    site = site_at(tmp_path, LARGE)
    shutil.rmtree(site / "log" / "consistency")
    tile = site / "log/tile/0/000"
    data = bytearray(tile.read_bytes())
    data[6 * 32] ^= 1
    tile.write_bytes(bytes(data))
    result = run("monitor", "--policy", policy, "--state", state, site)
    assert result.code == 3, result
    assert "fork" not in result.out


def test_a_fork_proved_by_tiles_prints_the_proof(
    tmp_path: Path, policy: Path, state: Path, run: Callable[..., Any]
) -> None:
    """A fork at a larger size is proved by node hashes that reproduce the new signed
    root and give another old root; the monitor prints them for anyone to re-check."""
    state.write_bytes(standard_log().checkpoints[SMALL])
    site = site_at(tmp_path, LARGE, forked_log())
    shutil.rmtree(site / "log" / "consistency")
    result = run("monitor", "--policy", policy, "--state", state, site)
    assert result.code == 2, result
    assert result.out.startswith(f"fork: the tiles reproduce the new root of size {LARGE}")
    assert "evidence: consistency proof" in result.out
    assert standard_log().checkpoints[SMALL].decode() in result.out


def test_a_smaller_checkpoint_is_stale_not_a_verdict(
    tmp_path: Path, policy: Path, state: Path, run: Callable[..., Any]
) -> None:
    """A smaller checkpoint is one the log did sign: a stale copy, or entries withheld.
    Neither is proved by the two notes, so it is exit 3, and the state is kept."""
    state.write_bytes(standard_log().checkpoints[LARGE])
    result = run("monitor", "--policy", policy, "--state", state, site_at(tmp_path, SMALL))
    assert result.code == 3, result
    assert "older checkpoint" in result.err
    assert state.read_bytes() == standard_log().checkpoints[LARGE]


class RecordErrorHandler(QuietHandler):
    """Serves the site, but answers 503 for one dream's record."""

    broken = ""

    def do_GET(self) -> None:
        if self.broken and self.path.endswith(self.broken):
            self.send_error(503, "busy")
            return
        super().do_GET()

    def do_HEAD(self) -> None:
        if self.broken and self.path.endswith(self.broken):
            self.send_error(503, "busy")
            return
        super().do_HEAD()


@pytest.mark.usefixtures("no_proxy")
def test_a_record_that_cannot_be_fetched_is_not_missing(
    tmp_path: Path, policy: Path, state: Path, run: Callable[..., Any]
) -> None:
    served = tmp_path / "www"
    site_at(served, LARGE, name="pool")
    state.write_bytes(standard_log().checkpoints[SMALL])
    broken = f"{standard_log().ids['late']}/record.json"
    handler = type("H", (RecordErrorHandler,), {"broken": broken})
    with serve(functools.partial(handler, directory=str(served))) as base:
        result = run("monitor", "--policy", policy, "--state", state, f"{base}/pool/")
    assert result.code == 3, result
    assert "could not check" in result.err and "503" in result.err
    assert "missing" not in result.out
    assert state.read_bytes() == standard_log().checkpoints[SMALL]


class DripHandler(BaseHTTPRequestHandler):
    """Answers 200 with a long body, one byte every 0.2 s, until the server stops."""

    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "4000")
        self.end_headers()
        for _ in range(4000):
            try:
                self.wfile.write(b"x")
                self.wfile.flush()
            except OSError:
                return
            if STOP.wait(0.2):
                return

    def log_message(self, format: str, *args: Any) -> None:
        pass


STOP = threading.Event()


@contextmanager
def dripping() -> Iterator[str]:
    STOP.clear()
    try:
        with serve(DripHandler) as base:
            yield base
    finally:
        STOP.set()


def finishes_within(seconds: float, call: Callable[[], object]) -> tuple[bool, object]:
    """Run ``call`` in a thread; (whether it returned in time, what it returned or raised)."""
    box: list[object] = []

    def work() -> None:
        try:
            box.append(call())
        except BaseException as exc:  # reported to the test
            box.append(exc)

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    thread.join(seconds)
    return (not thread.is_alive(), box[0] if box else None)


@pytest.mark.usefixtures("no_proxy")
def test_a_dripped_checkpoint_hits_the_total_deadline(
    policy: Path, state: Path, run: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 19 item 13: a byte every 0.2 s stays under any per-read socket timeout;
    only a deadline on the whole fetch ends it."""
    from builder.readers import fetch

    monkeypatch.setattr(fetch, "DEFAULT_DEADLINE", 1.0)
    with dripping() as base:
        started = time.monotonic()
        done, result = finishes_within(
            6, lambda: run("monitor", "--policy", policy, "--state", state, base)
        )
        elapsed = time.monotonic() - started
    assert done, "the monitor was still reading after 6 s"
    assert elapsed < 4, elapsed
    assert result.code == 3, result
    assert "within 1 s" in result.err
    assert not state.exists()


class EvilRedirectHandler(BaseHTTPRequestHandler):
    location = "http://[evil]/"

    def do_GET(self) -> None:
        self.send_response(302)
        self.send_header("Location", self.location)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_HEAD = do_GET

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.mark.usefixtures("no_proxy")
def test_a_redirect_to_a_url_that_does_not_parse_is_an_error(
    policy: Path, state: Path, run: Callable[..., Any]
) -> None:
    """Issue 19 item 13: ``Location: http://[evil]/`` crashed the monitor with a
    ValueError traceback."""
    with serve(EvilRedirectHandler) as base:
        result = run("monitor", "--policy", policy, "--state", state, base)
    assert result.code == 3, result
    assert "redirect" in result.err and "dreampool: error:" in result.err


class EscapeReasonHandler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(500, "\x1b]0;owned\x07\x1b[2J")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.mark.usefixtures("no_proxy")
def test_a_reason_phrase_with_terminal_escapes_is_never_passed_on_raw(
    policy: Path, state: Path, run: Callable[..., Any]
) -> None:
    """Issue 19 item 13: the reason phrase is network text; the error the fetch
    raises (which ``mcp --site`` hands to agents too) holds it escaped."""
    with serve(EscapeReasonHandler) as base:
        with pytest.raises(monitor.SiteError) as info:
            monitor.HttpSite(base).fetch("log/checkpoint", 100)
        assert "\x1b" not in info.value.message and "\x07" not in info.value.message
        assert "HTTP 500" in info.value.message and "\\x1b]0;owned" in info.value.message
        result = run("monitor", "--policy", policy, "--state", state, base)
    assert result.code == 3
    assert "\x1b" not in result.out + result.err


class HugeHandler(BaseHTTPRequestHandler):
    """A body far over any cap, with no Content-Length to warn of it."""

    protocol_version = "HTTP/1.0"

    def do_GET(self) -> None:
        self.send_response(200)
        self.end_headers()
        with suppress(OSError):
            for _ in range(64):
                self.wfile.write(bytes(65536))

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.mark.usefixtures("no_proxy")
def test_an_oversize_body_is_refused(policy: Path, state: Path, run: Callable[..., Any]) -> None:
    with serve(HugeHandler) as base:
        result = run("monitor", "--policy", policy, "--state", state, base)
    assert result.code == 3, result
    assert "over" in result.err and "bytes" in result.err


# --- run-level guards: the state lock, the seen checkpoint, the site URL ---------------


def test_a_second_concurrent_run_is_exit_3_and_leaves_the_state(
    tmp_path: Path, policy: Path, state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import fcntl
    import os

    site = site_at(tmp_path, LARGE)
    state.write_bytes(standard_log().checkpoints[SMALL])
    fd = os.open(f"{state}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # another run holds it
        assert monitor_run(policy, state, site) == monitor.EXIT_UNCHECKED
        assert "another monitor run holds the state" in capsys.readouterr().err
    finally:
        os.close(fd)
    assert state.read_bytes() == standard_log().checkpoints[SMALL]
    assert monitor_run(policy, state, site) == 0  # released: the next run goes ahead
    assert state.read_bytes() == standard_log().checkpoints[LARGE]
    assert not monitor.seen_path(state).exists()  # a full check folds it into the state


def test_a_missing_dream_keeps_the_state_but_remembers_the_checkpoint(
    tmp_path: Path, policy: Path, state: Path
) -> None:
    site = site_at(tmp_path, LARGE)
    (dream_folder(site, "late") / "record.json").unlink()
    state.write_bytes(standard_log().checkpoints[SMALL])
    assert monitor_run(policy, state, site) == monitor.EXIT_EVIDENCE
    assert state.read_bytes() == standard_log().checkpoints[SMALL]
    assert monitor.seen_path(state).read_bytes() == standard_log().checkpoints[LARGE]


@pytest.mark.parametrize(
    ("given", "sent"),
    [
        ("https://bücher.example/pool", "https://xn--bcher-kva.example/pool/"),
        ("http://example.org:8080/tr%C3%A4ume/", "http://example.org:8080/tr%C3%A4ume/"),
        ("http://example.org/träume", "http://example.org/tr%C3%A4ume/"),
        ("http://[::1]:8000/", "http://[::1]:8000/"),
    ],
)
def test_a_site_url_is_sent_in_ascii(given: str, sent: str) -> None:
    assert monitor.site_base(given) == sent


def test_a_host_idna_cannot_encode_is_exit_1(tmp_path: Path, policy: Path, state: Path) -> None:
    assert monitor_run(policy, state, "http://" + "ü" * 70 + ".example/") == 1


def test_a_record_over_any_records_size_is_altered(
    tmp_path: Path, policy: Path, state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A file too large to be a record is not "could not check" forever: it is not the dream."""
    site = site_at(tmp_path, LARGE)
    (dream_folder(site, "late") / "record.json").write_bytes(b" " * (300 * 1024))
    state.write_bytes(standard_log().checkpoints[SMALL])
    assert monitor_run(policy, state, site) == monitor.EXIT_EVIDENCE
    assert "altered: dream" in capsys.readouterr().out
