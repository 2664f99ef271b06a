"""The preview server: content types, cache headers, 404s, and no way out of the site."""

from __future__ import annotations

import http.client
import io
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from email.message import Message
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest

from builder.cli.progress import BAR_WIDTH, Progress, progress_enabled
from builder.errors import DreampoolError
from builder.site import serve as servemod
from builder.site.serve import make_server

SECRET = b"TOP SECRET outside the site"
NOT_FOUND_PAGE = b"<!doctype html><title>not here</title><h1>no such page</h1>\n"

FILES = {
    "index.html": b"<!doctype html><title>home</title>\n",
    "404.html": NOT_FOUND_PAGE,
    "static/style.css": b"body { margin: 0 }\n",
    "static/search.js": b"export {};\n",
    "api/dreams.json": b'{"dreams":[]}\n',
    "feed.xml": b'<feed xmlns="http://www.w3.org/2005/Atom"/>\n',
    "authors/ada/feed.xml": b'<feed xmlns="http://www.w3.org/2005/Atom"/>\n',
    "authors/ada/index.html": b"<!doctype html><title>ada</title>\n",
    "sitemap.xml": b'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"/>\n',
    "robots.txt": b"User-agent: *\nAllow: /\n",
    "static/logo.svg": b'<svg xmlns="http://www.w3.org/2000/svg"/>\n',
    "dreams/0123456789abcdef/index.html": b"<!doctype html><title>a dream</title>\n",
    "dreams/0123456789abcdef/record.json": b"{}\n",
    "dreams/0123456789abcdef/proof.tlog-proof": b"c2sp.org/tlog-proof@v1\n",
    "log/index.html": b"<!doctype html><title>log</title>\n",
    "log/checkpoint": b"test.example/pool\n3\nAAAA\n",
    "log/policy": b"log test.example/pool\n",
    "log/checkpoints/3": b"test.example/pool\n3\nAAAA\n",
    "log/consistency/2": b"AAAA\n",
    "log/tile/0/000": bytes(range(96)),
    "log/tile/0/000.p/2": bytes(64),
    "data.bin": b"\x00\x01",
}


@dataclass
class Site:
    root: Path
    server: ThreadingHTTPServer
    port: int


def start(site: Path, *, quiet: bool = True) -> tuple[ThreadingHTTPServer, threading.Thread]:
    server = make_server(site, quiet=quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return server, thread


def stop(server: ThreadingHTTPServer, thread: threading.Thread) -> None:
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)
    assert not thread.is_alive()


@pytest.fixture
def site(tmp_path: Path) -> Iterator[Site]:
    root = tmp_path / "site"
    for rel, data in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    (root / "emptydir").mkdir()
    (root / "emptydir" / "note.txt").write_bytes(b"listed nowhere\n")
    (tmp_path / "outside.txt").write_bytes(SECRET)
    (root / "escape").symlink_to(tmp_path / "outside.txt")
    (root / "escapedir").symlink_to(tmp_path)
    server, thread = start(root)
    try:
        yield Site(root, server, server.server_address[1])
    finally:
        stop(server, thread)


def fetch(
    site: Site, path: str, method: str = "GET", headers: dict[str, str] | None = None
) -> tuple[int, Message, bytes]:
    """One raw request: http.client sends the path exactly as given, unnormalized."""
    conn = http.client.HTTPConnection("127.0.0.1", site.port, timeout=5)
    try:
        conn.putrequest(method, path, skip_accept_encoding=True)
        for k, v in (headers or {}).items():
            conn.putheader(k, v)
        conn.endheaders()
        response = conn.getresponse()
        return response.status, response.headers, response.read()
    finally:
        conn.close()


def test_binds_to_loopback_on_an_ephemeral_port(site: Site) -> None:
    host, port = site.server.server_address[:2]
    assert host == "127.0.0.1" and port != 0


@pytest.mark.parametrize(
    ("path", "content_type"),
    [
        ("/", "text/html; charset=utf-8"),
        ("/index.html", "text/html; charset=utf-8"),
        ("/log/", "text/html; charset=utf-8"),
        ("/static/style.css", "text/css; charset=utf-8"),
        ("/static/search.js", "text/javascript; charset=utf-8"),
        ("/api/dreams.json", "application/json"),
        ("/dreams/0123456789abcdef/record.json", "application/json"),
        ("/feed.xml", "application/atom+xml"),
        ("/authors/ada/feed.xml", "application/atom+xml"),
        ("/sitemap.xml", "application/xml"),
        ("/static/logo.svg", "image/svg+xml"),
        ("/robots.txt", "text/plain; charset=utf-8"),
        ("/dreams/0123456789abcdef/proof.tlog-proof", "text/plain; charset=utf-8"),
        ("/log/checkpoint", "text/plain; charset=utf-8"),
        ("/log/policy", "text/plain; charset=utf-8"),
        ("/log/checkpoints/3", "text/plain; charset=utf-8"),
        ("/log/consistency/2", "text/plain; charset=utf-8"),
        ("/log/tile/0/000", "application/octet-stream"),
        ("/log/tile/0/000.p/2", "application/octet-stream"),
        ("/data.bin", "application/octet-stream"),
    ],
)
def test_content_types(site: Site, path: str, content_type: str) -> None:
    status, headers, body = fetch(site, path)
    assert status == 200, path
    assert headers["Content-Type"] == content_type
    assert headers["X-Content-Type-Options"] == "nosniff"
    rel = path.lstrip("/")
    rel = rel + "index.html" if rel.endswith("/") or not rel else rel
    assert body == FILES[rel]


def test_cache_headers(site: Site) -> None:
    assert fetch(site, "/log/checkpoint")[1]["Cache-Control"] == "no-store"
    immutable = "public, max-age=31536000, immutable"
    assert fetch(site, "/log/tile/0/000")[1]["Cache-Control"] == immutable
    assert fetch(site, "/log/tile/0/000.p/2")[1]["Cache-Control"] == immutable
    assert fetch(site, "/index.html")[1]["Cache-Control"] == "no-cache"
    assert fetch(site, "/log/checkpoints/3")[1]["Cache-Control"] == "no-cache"
    # A revalidation keeps the policy.
    later = "Fri, 01 Jan 2100 00:00:00 GMT"
    status, headers, _ = fetch(site, "/log/tile/0/000", headers={"If-Modified-Since": later})
    assert status == 304 and headers["Cache-Control"] == immutable


def test_missing_path_serves_404_page(site: Site) -> None:
    status, headers, body = fetch(site, "/no/such/page.html")
    assert status == 404
    assert body == NOT_FOUND_PAGE
    assert headers["Content-Type"] == "text/html; charset=utf-8"
    assert headers["Cache-Control"] == "no-store"
    status, _, body = fetch(site, "/no/such/page.html", method="HEAD")
    assert status == 404 and body == b""


def test_404_without_a_404_page(site: Site) -> None:
    (site.root / "404.html").unlink()
    status, _, body = fetch(site, "/nothing")
    assert status == 404 and b"404" in body


def test_no_directory_listing(site: Site) -> None:
    for path in ("/emptydir/", "/emptydir", "/dreams/", "/log/tile/0/"):
        status, _, body = fetch(site, path)
        assert status == 404, path
        assert body == NOT_FOUND_PAGE
        assert b"note.txt" not in body
    assert fetch(site, "/emptydir/note.txt")[0] == 200  # the file itself is served


def test_folder_without_slash_redirects_to_its_index(site: Site) -> None:
    status, headers, _ = fetch(site, "/authors/ada")
    assert status == 301 and headers["Location"] == "/authors/ada/"


@pytest.mark.parametrize(
    "path",
    [
        "/../outside.txt",
        "/../../../../etc/passwd",
        "/%2e%2e/outside.txt",
        "/%2E%2E/%2e%2e/etc/passwd",
        "/..%2foutside.txt",
        "/static/..%2f..%2foutside.txt",
        "/static/%2e%2e%2f%2e%2e%2foutside.txt",
        "/..\\outside.txt",
        "/escape",
        "/escapedir/outside.txt",
        "/escapedir/",
        "/%00",
        "/index.html%00.txt",
        "//etc/passwd",
        "/etc/passwd",
    ],
)
def test_paths_never_leave_the_site(site: Site, path: str) -> None:
    status, _, body = fetch(site, path)
    assert status == 404, path
    assert SECRET not in body and b"root:" not in body


def test_query_strings_are_ignored(site: Site) -> None:
    status, _, body = fetch(site, "/index.html?utm=1#x")
    assert status == 200 and body == FILES["index.html"]


def test_one_log_line_per_request_unless_quiet(
    tmp_path: Path, site: Site, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    fetch(site, "/index.html")  # the fixture's server is quiet
    assert capsys.readouterr().err == ""
    server, thread = start(site.root, quiet=False)
    try:
        loud = Site(site.root, server, server.server_address[1])
        fetch(loud, "/index.html")
        with socket.create_connection(("127.0.0.1", loud.port), timeout=5) as raw:
            raw.sendall(b"GET /missing\x1b[31m HTTP/1.0\r\n\r\n")
            while raw.recv(4096):
                pass
    finally:
        stop(server, thread)
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2, lines
    assert '"GET /index.html HTTP/1.1" 200' in lines[0]
    assert "404" in lines[1] and "\x1b" not in lines[1]


def test_missing_site_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(DreampoolError) as info:
        make_server(tmp_path / "nope")
    assert "dreampool build" in (info.value.hint or "")


def test_port_in_use_is_an_error(site: Site) -> None:
    with pytest.raises(DreampoolError) as info:
        make_server(site.root, port=site.port)
    assert "--port" in (info.value.hint or "")


def test_serve_announces_and_stops_on_ctrl_c(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "site"
    root.mkdir()
    (root / "index.html").write_bytes(FILES["index.html"])
    server = make_server(root)
    port = server.server_address[1]

    def interrupted(poll_interval: float = 0.5) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(server, "serve_forever", interrupted)
    monkeypatch.setattr(servemod, "make_server", lambda *a, **k: server)
    from builder.cli import main as cli

    assert cli.main(["serve", "--out", str(root), "--port", str(port)]) == 0
    err = capsys.readouterr().err
    assert err == f"dreampool: serving {root} at http://127.0.0.1:{port}/ (Ctrl-C to stop)\n"
    assert server.socket.fileno() == -1  # closed: nothing listens there any more


# --- builder.cli.progress: the build's other terminal nicety ----------------------
# (kept here because this change adds no test module of its own)


class FakeStream(io.StringIO):
    def __init__(self, tty: bool) -> None:
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_progress_enabled_only_on_a_terminal_outside_ci() -> None:
    tty, pipe = FakeStream(True), FakeStream(False)
    assert progress_enabled(False, tty, {})
    assert progress_enabled(False, tty, {"CI": ""})  # set but empty: not CI
    assert not progress_enabled(True, tty, {})
    assert not progress_enabled(False, tty, {"CI": "true"})
    assert not progress_enabled(False, pipe, {})


def test_progress_draws_in_place_and_ends_the_line() -> None:
    stream, clock = FakeStream(True), FakeClock()
    with Progress(100, "pages", enabled=True, stream=stream, clock=clock) as p:
        for _ in range(100):
            clock.now += 0.02
            p.advance()
    out = stream.getvalue()
    assert out.endswith("\n") and out.count("\n") == 1
    assert out.startswith("\rpages [")
    # 2 s of work: a first draw, a redraw every 0.1 s at most, a last draw.
    assert 3 <= out.count("\r") <= 1 + 20 + 1
    last = out.rsplit("\r", 1)[1]
    assert last.startswith("pages [" + "#" * BAR_WIDTH + "] 100%  100/100  50.0/s")


def test_progress_throttles_a_fast_loop() -> None:
    stream, clock = FakeStream(True), FakeClock()
    with Progress(10_000, "dreams", enabled=True, stream=stream, clock=clock) as p:
        for _ in range(10_000):
            p.advance()  # the clock never moves: no redraw at all
    assert stream.getvalue().count("\r") == 2  # on entering and on closing


def test_progress_blanks_a_longer_previous_line() -> None:
    stream, clock = FakeStream(True), FakeClock()
    with Progress(1000, "x", enabled=True, stream=stream, clock=clock) as p:
        clock.now += 0.5
        p.advance(100)  # 200.0/s
        clock.now += 29.5
        p.advance(1)  # 3.4/s: a shorter line, which must cover the longer one
    fast, slow = stream.getvalue().split("\r")[2:4]
    assert "200.0/s" in fast and "3.4/s" in slow
    assert len(slow) >= len(fast) and slow.endswith(" ")


def test_progress_is_silent_when_disabled_or_piped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    for stream, enabled in ((FakeStream(True), False), (FakeStream(False), None)):
        with Progress(5, "x", enabled=enabled, stream=stream) as p:
            p.advance(5)
        assert stream.getvalue() == ""
    tty = FakeStream(True)
    with Progress(1, "x", stream=tty) as p:  # enabled=None decides from the stream
        p.advance()
    assert tty.getvalue().endswith("\n")


def test_progress_ends_the_line_on_an_exception() -> None:
    stream = FakeStream(True)
    with pytest.raises(RuntimeError), Progress(3, "x", enabled=True, stream=stream) as p:
        p.advance()
        raise RuntimeError("boom")
    assert stream.getvalue().endswith("\n") and "1/3" in stream.getvalue()


def test_progress_with_nothing_to_do() -> None:
    stream = FakeStream(True)
    with Progress(0, "empty", enabled=True, stream=stream):
        pass
    assert "100%  0/0" in stream.getvalue()


def _closed_within(sock: socket.socket, seconds: float) -> bool:
    """Whether the server closes ``sock`` within ``seconds`` (reading what it sends)."""
    sock.settimeout(seconds)
    try:
        while sock.recv(4096):
            pass
    except TimeoutError:
        return False
    except OSError:  # reset by the server
        return True
    return True


def test_slow_and_silent_connections_are_cut_and_hold_no_one_up(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 18 (regression): connections that sent nothing, or trickled a
    request a byte at a time, were held for as long as the client liked. Each
    read now waits at most IDLE_TIMEOUT and a request has REQUEST_DEADLINE from
    its first byte; other clients are answered meanwhile."""
    import time

    monkeypatch.setattr(servemod, "IDLE_TIMEOUT", 1.0)
    monkeypatch.setattr(servemod, "REQUEST_DEADLINE", 2.0)
    silent = [socket.create_connection(("127.0.0.1", site.port)) for _ in range(10)]
    partial = [socket.create_connection(("127.0.0.1", site.port)) for _ in range(10)]
    for s in partial:
        s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n")  # headers never end
    trickle = socket.create_connection(("127.0.0.1", site.port))
    started = time.monotonic()
    try:
        status, _, body = fetch(site, "/")
        assert status == 200 and body == FILES["index.html"]
        assert time.monotonic() - started < 1.0  # answered while the others wait
        # A byte every 0.5 s keeps each read under the idle timeout; the
        # deadline ends the request all the same.
        for byte in b"GET / HTTP/1.1\r\nX-Slow: " + b"a" * 20:
            try:
                trickle.sendall(bytes([byte]))
            except OSError:
                break
            time.sleep(0.5)
            if time.monotonic() - started > 4:
                break
        assert time.monotonic() - started < 5
        assert _closed_within(trickle, 2.0)
        for s in silent + partial:
            assert _closed_within(s, 3.0)
        assert time.monotonic() - started < 10
        assert fetch(site, "/")[0] == 200
    finally:
        for s in [*silent, *partial, trickle]:
            s.close()
