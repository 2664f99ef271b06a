"""``dreampool serve``: preview a built site over HTTP on this machine.

A preview, not a production server: it binds to 127.0.0.1 unless told
otherwise, and serves only regular files inside the site folder. It sends the
headers a real host should send for the site, so what works here works there:

* content types by extension (a fixed table, not the system's mime.types,
  so every machine answers alike); the log's extensionless text files
  (``log/checkpoint``, ``log/policy``, ``log/checkpoints/N``,
  ``log/consistency/M``) and ``*.tlog-proof`` as UTF-8 text; tiles under
  ``log/tile/`` are binary hashes and entry bundles, so
  ``application/octet-stream``;
* ``Cache-Control: no-store`` for ``log/checkpoint``, which changes with
  every build and must never be served stale to a verifier, and
  ``immutable`` for tiles, which never change once written (C2SP
  tlog-tiles; a partial tile of a given width is fixed too); everything else
  ``no-cache``, so a rebuilt page shows at once and an unchanged one costs a
  304;
* ``404.html`` with status 404 for anything missing, for a folder without an
  ``index.html`` (no directory listings), and for a path that leaves the site
  folder, by ``..`` or by a symlink.

Each connection has its own thread and two limits, so slow or silent clients
cannot hold the server: a read or write that waits :data:`IDLE_TIMEOUT`
seconds ends the connection, and so does a request not answered within
:data:`REQUEST_DEADLINE` seconds of its first byte, however slowly a client
trickles it (one header byte at a time would otherwise reset the idle timer
for ever).
"""

from __future__ import annotations

import contextlib
import io
import os
import posixpath
import socket
import sys
import threading
from functools import partial
from http import HTTPStatus
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, BinaryIO

from builder.errors import DreampoolError

TEXT = "text/plain; charset=utf-8"
BINARY = "application/octet-stream"
CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".json": "application/json",  # UTF-8 by definition (RFC 8259 §8.1): no charset
    ".md": "text/markdown; charset=utf-8",  # agents/digest.md, agents/since/<m>.md
    ".xml": "application/xml",
    ".svg": "image/svg+xml",
    ".txt": TEXT,
    ".tlog-proof": TEXT,
    ".png": "image/png",
    ".ico": "image/x-icon",
    ".woff2": "font/woff2",
}
# Seconds one read or write on a connection may wait.
IDLE_TIMEOUT = 10.0
# Seconds a request may take from its first byte to its answer's last.
REQUEST_DEADLINE = 30.0
ATOM = "application/atom+xml"
NO_STORE = "no-store"
IMMUTABLE = "public, max-age=31536000, immutable"
REVALIDATE = "no-cache"


def content_type(rel: str) -> str:
    """The Content-Type for a site-relative POSIX path."""
    name = posixpath.basename(rel)
    if rel.startswith("log/tile/"):
        return BINARY
    if name == "feed.xml":
        return ATOM
    ext = posixpath.splitext(name)[1].lower()
    if ext in CONTENT_TYPES:
        return CONTENT_TYPES[ext]
    if rel.startswith("log/") and not ext:
        return TEXT
    return BINARY


def cache_control(rel: str) -> str:
    """The Cache-Control for a site-relative POSIX path (see the module doc)."""
    if rel == "log/checkpoint":
        return NO_STORE
    if rel.startswith("log/tile/"):
        return IMMUTABLE
    return REVALIDATE


class _Server(ThreadingHTTPServer):
    daemon_threads = True  # a hung browser connection must not keep Ctrl-C waiting
    request_queue_size = 64  # connections the kernel queues while one is accepted
    quiet = False


class _Server6(_Server):
    address_family = socket.AF_INET6


class _Handler(SimpleHTTPRequestHandler):
    server_version = "dreampool-preview"
    _rel: str | None = None  # the site file this request is being answered with
    _status = 0

    # --- limits --------------------------------------------------------------

    def setup(self) -> None:
        super().setup()
        self.connection.settimeout(IDLE_TIMEOUT)  # every read and write, and the files'

    def handle_one_request(self) -> None:
        # The deadline starts with the request's first byte: an idle
        # keep-alive wait is the idle timeout's business.
        try:
            first = self.connection.recv(1, socket.MSG_PEEK)
        except OSError:
            self.close_connection = True
            return
        if not first:
            self.close_connection = True
            return
        timer = threading.Timer(REQUEST_DEADLINE, self._cut)
        timer.daemon = True
        timer.start()
        try:
            super().handle_one_request()
        finally:
            timer.cancel()

    def _cut(self) -> None:
        """End a request past its deadline: its blocked read or write returns."""
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    # --- what to serve -------------------------------------------------------

    def _root(self) -> str:
        return os.path.realpath(self.directory)

    def _inside(self, path: str) -> str | None:
        """``path``'s site-relative POSIX form if it resolves inside the site, else None."""
        root = self._root()
        try:
            real = os.path.realpath(path)
        except (OSError, ValueError):  # ValueError: an embedded NUL (%00)
            return None
        if real == root:
            return ""
        if not real.startswith(root + os.sep):
            return None
        return Path(os.path.relpath(real, root)).as_posix()

    def _resolve(self) -> str | None:
        """The site file a request names, or None when there is nothing to serve."""
        # translate_path drops the query, unquotes, and skips "." and ".." segments;
        # _inside then refuses symlinks that lead out of the site.
        rel = self._inside(self.translate_path(self.path))
        if rel is None:
            return None
        full = os.path.join(self._root(), rel)
        if os.path.isdir(full):
            rel = posixpath.join(rel, "index.html") if rel else "index.html"
            full = os.path.join(self._root(), rel)
        if not os.path.isfile(full):
            return None
        return rel

    def send_head(self) -> io.BytesIO | BinaryIO | None:
        self._rel = self._resolve()
        if self._rel is None:
            self.send_error(HTTPStatus.NOT_FOUND)
            return None
        return super().send_head()

    def list_directory(self, path: str | os.PathLike[str]) -> io.BytesIO | None:
        # Unreachable after _resolve, and kept so: a listing would show files
        # the site does not link to.
        self.send_error(HTTPStatus.NOT_FOUND)
        return None

    def guess_type(self, path: str | os.PathLike[str]) -> str:
        rel = self._inside(os.fspath(path))
        return BINARY if rel is None else content_type(rel)

    # --- headers and errors --------------------------------------------------

    def send_response(self, code: int, message: str | None = None) -> None:
        self._status = code
        super().send_response(code, message)

    def end_headers(self) -> None:
        if self._status in (HTTPStatus.OK, HTTPStatus.NOT_MODIFIED) and self._rel is not None:
            self.send_header("Cache-Control", cache_control(self._rel))
        elif self._status >= 400:
            self.send_header("Cache-Control", NO_STORE)
        self.send_header("X-Content-Type-Options", "nosniff")
        super().end_headers()

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        body = self._not_found_page() if code == HTTPStatus.NOT_FOUND else None
        if body is None:
            super().send_error(code, message, explain)
            return
        self._rel = None
        self.send_response(code)
        self.send_header("Content-Type", CONTENT_TYPES[".html"])
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _not_found_page(self) -> bytes | None:
        page = os.path.join(self._root(), "404.html")
        if self._inside(page) != "404.html" or not os.path.isfile(page):
            return None
        with open(page, "rb") as f:
            return f.read()

    # --- logging -------------------------------------------------------------

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        self.log_message('"%s" %s', self.requestline, int(code) if isinstance(code, int) else code)

    def log_error(self, format: str, *args: Any) -> None:
        pass  # log_request already says 404 (or 400…) on the request's one line

    def log_message(self, format: str, *args: Any) -> None:
        if getattr(self.server, "quiet", False):
            return
        text = format % args
        # The request line is the client's text: keep terminal escapes out of the log.
        safe = "".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in text)
        sys.stderr.write(f"{self.address_string()} {safe}\n")


def make_server(
    site: Path, port: int = 0, host: str = "127.0.0.1", *, quiet: bool = False
) -> ThreadingHTTPServer:
    """A server for ``site`` on ``host:port`` (port 0: any free port), not yet serving."""
    if not site.is_dir():
        raise DreampoolError(
            f"{site}: no such folder",
            hint="run `dreampool build` first, or pass --out DIR naming the built site",
        )
    # Not resolved: the site is a symlink to the live generation (builder.site.writer),
    # which the next build swaps; _root() follows it on every request.
    handler = partial(_Handler, directory=str(site.absolute()))
    server_class = _Server6 if ":" in host else _Server
    try:
        server = server_class((host, port), handler)
    except OSError as exc:
        raise DreampoolError(
            f"cannot listen on {host} port {port}: {exc.strerror or exc}",
            hint="pick another port with --port N",
        ) from None
    server.quiet = quiet
    return server
