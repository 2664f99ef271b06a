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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from builder import monitor
from builder.errors import DreampoolError
from builder.policy import parse_policy
from tests.test_lightclient import (
    LARGE,
    SMALL,
    LogBuilder,
    build_standard_log,
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


def monitor_run(policy: Path, state: Path, site: Path | str) -> int:
    return monitor.run_monitor(policy, state, str(site))


# --- directory sites ------------------------------------------------------------------


def test_first_run_trusts_and_stores(
    tmp_path: Path, policy: Path, state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site = site_at(tmp_path, SMALL)
    assert monitor_run(policy, state, site) == 0
    assert state.read_bytes() == standard_log().checkpoints[SMALL]
    assert "first use" in capsys.readouterr().out
    assert [p.name for p in state.parent.iterdir()] == [state.name]  # no temporary file left


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


def test_growth_falls_back_to_the_consistency_file(
    tmp_path: Path, policy: Path, state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state.write_bytes(standard_log().checkpoints[SMALL])
    site = site_at(tmp_path, LARGE)
    shutil.rmtree(site / "log" / "tile")
    assert monitor_run(policy, state, site) == 0
    out = capsys.readouterr().out
    assert f"history unchanged: size {SMALL} → {LARGE}" in out
    assert "warning" not in out
    assert state.read_bytes() == standard_log().checkpoints[LARGE]


def test_bad_tiles_do_not_matter_when_the_consistency_file_verifies(
    tmp_path: Path, policy: Path, state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state.write_bytes(standard_log().checkpoints[SMALL])
    site = site_at(tmp_path, LARGE)
    (site / "log/tile/0/000").write_bytes(bytes(8192))
    assert monitor_run(policy, state, site) == 0
    out = capsys.readouterr().out
    assert "warning: tiles:" in out and "but log/consistency/5 verifies" in out


def test_no_proof_to_be_had_is_an_error_not_a_verdict(
    tmp_path: Path, policy: Path, state: Path
) -> None:
    state.write_bytes(standard_log().checkpoints[SMALL])
    site = site_at(tmp_path, LARGE)
    shutil.rmtree(site / "log" / "tile")
    shutil.rmtree(site / "log" / "consistency")
    with pytest.raises(monitor.MonitorError, match="cannot check") as info:
        monitor_run(policy, state, site)
    assert info.value.hint
    assert state.read_bytes() == standard_log().checkpoints[SMALL]


def test_same_checkpoint_again_is_unchanged(
    tmp_path: Path, policy: Path, state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state.write_bytes(standard_log().checkpoints[SMALL])
    assert monitor_run(policy, state, site_at(tmp_path, SMALL)) == 0
    assert f"history unchanged: size {SMALL} → {SMALL}" in capsys.readouterr().out


def test_rollback_prints_both_checkpoints(
    tmp_path: Path, policy: Path, state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = standard_log()
    state.write_bytes(log.checkpoints[LARGE])
    assert monitor_run(policy, state, site_at(tmp_path, SMALL)) == 2
    out = capsys.readouterr().out
    assert out.startswith("rollback: ")
    assert log.checkpoints[LARGE].decode() in out and log.checkpoints[SMALL].decode() in out
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
    assert out.startswith(f"fork: no consistency proof from size {SMALL} to {LARGE} verifies")
    assert forked_log().checkpoints[LARGE].decode() in out
    assert state.read_bytes() == standard_log().checkpoints[SMALL]


def test_site_checkpoint_the_policy_does_not_accept(
    tmp_path: Path, policy: Path, state: Path
) -> None:
    other = LogBuilder(log_seed=hashlib.sha256(b"another key").digest())
    other.add_key("ada")
    other.sign()
    with pytest.raises(monitor.MonitorError, match="log/checkpoint"):
        monitor_run(policy, state, site_at(tmp_path, 1, other))
    assert not state.exists()


def test_state_file_the_policy_does_not_accept(tmp_path: Path, policy: Path, state: Path) -> None:
    state.write_bytes(b"not a checkpoint\n")
    with pytest.raises(monitor.MonitorError, match="state file") as info:
        monitor_run(policy, state, site_at(tmp_path, SMALL))
    assert info.value.hint and "delete the state file" in info.value.hint
    assert state.read_bytes() == b"not a checkpoint\n"


def test_missing_site_and_policy_are_errors(tmp_path: Path, policy: Path, state: Path) -> None:
    with pytest.raises(monitor.SiteError):
        monitor_run(policy, state, tmp_path / "nowhere")
    with pytest.raises(monitor.MonitorError, match="policy"):
        monitor_run(tmp_path / "no-policy", state, site_at(tmp_path, SMALL))
    with pytest.raises(monitor.SiteError, match="http or https"):
        monitor_run(policy, state, "ftp://example.org/")
    with pytest.raises(monitor.NotFoundError):
        monitor_run(policy, state, tmp_path)  # a directory with no log/


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
    assert result.code == 2 and result.out.startswith("rollback: ")
    result = run(*args, tmp_path / "nowhere")
    assert result.code == 1 and "dreampool: error:" in result.err


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
        site_at(served, SMALL, forked_log(), name="pool")
        assert monitor_run(policy, state, url) == 2
        with pytest.raises(monitor.NotFoundError, match="HTTP 404"):
            monitor_run(policy, state, f"{base}/nothing-here")
    assert state.read_bytes() == standard_log().checkpoints[LARGE]


@pytest.mark.usefixtures("no_proxy")
def test_http_redirect_to_another_host_is_refused(policy: Path, state: Path) -> None:
    with (
        serve(RedirectHandler) as base,
        pytest.raises(monitor.SiteError, match="redirects to another host"),
    ):
        monitor_run(policy, state, base)
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
            monitor.HttpSite("http://127.0.0.1:9/", timeout=2),
        )
