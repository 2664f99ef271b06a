"""Bounded HTTP(S) reads: the one way the readers' tools fetch from the network.

``dreampool monitor`` and ``dreampool mcp --site URL`` read a site through
:class:`builder.readers.monitor.HttpSite`, which calls :func:`get` here and nothing else
(:func:`exists`, a HEAD, proves nothing about a file's content; the monitor GETs
each record and checks it). Whatever the server does, a call

* ends within its **deadline**: wall-clock seconds for the whole exchange
  (connection, headers, body), not a socket timeout per read, which a server
  dripping one byte at a time never trips. The exchange runs in a worker thread;
  at the deadline the caller gets :class:`FetchError` and the connection is shut
  down under the worker;
* reads at most ``limit`` bytes of body (the caller's cap for that kind of file),
  refusing a larger Content-Length before reading and a longer body after
  ``limit + 1`` bytes;
* follows at most :data:`MAX_REDIRECTS` redirects, each only to an http(s) URL
  that parses, on the same host, never from https to http;
* reports every failure as a :class:`FetchError` (:class:`NotFound` for HTTP 404
  and 410) whose message has passed :func:`builder.errors.printable`: a reason
  phrase, a URL or a host name from the network reaches no terminal, log or agent
  with its control characters live.

It authenticates nothing: what it returns is checked by the caller.
"""

from __future__ import annotations

import http.client
import socket
import ssl
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from contextlib import suppress
from typing import IO, Any, TypeVar, cast

from builder.errors import DreampoolError, printable

__all__ = [
    "DEFAULT_DEADLINE",
    "MAX_REDIRECTS",
    "FetchError",
    "NotFound",
    "TooLarge",
    "check_url",
    "exists",
    "get",
]

DEFAULT_DEADLINE = 30.0
"""Seconds one fetch may take from start to last byte (read at call time)."""

MAX_REDIRECTS = 5

USER_AGENT = "dreampool"

_T = TypeVar("_T")


class FetchError(DreampoolError):
    """A URL could not be read: network, HTTP status, deadline, size or redirect."""


class NotFound(FetchError):
    """The server says there is no such file (HTTP 404 or 410)."""


class TooLarge(FetchError):
    """The server answers 200 with a body over the caller's limit for that kind of file."""


def _error(
    message: str, hint: str = "check the URL and the network; run again later"
) -> FetchError:
    return FetchError(printable(message), hint=hint)


def check_url(url: str) -> urllib.parse.SplitResult:
    """``url`` split, if it is an http(s) URL with a host that parses; else FetchError."""
    try:
        parts = urllib.parse.urlsplit(url)
        host, _ = parts.hostname, parts.port  # both raise ValueError on a bad netloc
    except ValueError:
        raise _error(f"{url} is not a URL that parses", hint="give an http(s) URL") from None
    if parts.scheme not in ("http", "https") or not host:
        raise _error(f"{url} is not an http(s) URL with a host", hint="give an http(s) URL")
    return parts


class _Connections:
    """The sockets one fetch opened, to shut down when its deadline passes."""

    __slots__ = ("_expired", "_lock", "_sockets")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._expired = False

    def add(self, sock: socket.socket | None) -> None:
        if sock is None:
            return
        with self._lock:
            self._sockets.append(sock)
            expired = self._expired
        if expired:
            _shut(sock)

    def expire(self) -> None:
        with self._lock:
            self._expired = True
            sockets = list(self._sockets)
        for sock in sockets:
            _shut(sock)


def _shut(sock: socket.socket) -> None:
    # A socket object is never reused for another connection, so shutting down one
    # whose connection is over only fails (EBADF), harmlessly.
    with suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


class _WatchedHTTP(http.client.HTTPConnection):
    connections: _Connections

    def connect(self) -> None:
        super().connect()
        self.connections.add(self.sock)


class _WatchedHTTPS(http.client.HTTPSConnection):
    connections: _Connections

    def connect(self) -> None:
        super().connect()
        self.connections.add(self.sock)


class _HTTPHandler(urllib.request.HTTPHandler):
    def __init__(self, connections: _Connections) -> None:
        super().__init__()
        self._class = type("Watched", (_WatchedHTTP,), {"connections": connections})

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        # The connection class carries this fetch's sockets; typeshed wants a protocol.
        return self.do_open(cast("Any", self._class), req)


class _HTTPSHandler(urllib.request.HTTPSHandler):
    def __init__(self, connections: _Connections) -> None:
        self._tls = ssl.create_default_context()
        super().__init__(context=self._tls)
        self._class = type("Watched", (_WatchedHTTPS,), {"connections": connections})

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(cast("Any", self._class), req, context=self._tls)


class _Redirects(urllib.request.HTTPRedirectHandler):
    """Follow a redirect only to an http(s) URL that parses, on the same host, never
    from https to http, at most :data:`MAX_REDIRECTS` times."""

    max_redirections = MAX_REDIRECTS
    max_repeats = 1

    def redirect_request(
        self,
        req: urllib.request.Request,
        fp: IO[bytes],
        code: int,
        msg: str,
        headers: http.client.HTTPMessage,
        newurl: str,
    ) -> urllib.request.Request | None:
        old = urllib.parse.urlsplit(req.full_url)
        try:
            target = urllib.parse.urljoin(req.full_url, newurl)
            new = check_url(target)
        except (ValueError, FetchError):
            raise _error(
                f"{req.full_url} redirects to {newurl!r}, not an http(s) URL that parses; "
                "not followed",
                hint="give the URL the site is served from",
            ) from None
        if new.hostname != old.hostname or (old.scheme == "https" and new.scheme != "https"):
            raise _error(
                f"{req.full_url} redirects to another host or scheme ({new.scheme}://"
                f"{new.hostname}); not followed",
                hint="give the URL the site is served from",
            )
        return super().redirect_request(req, fp, code, msg, headers, target)

    def http_error_302(
        self,
        req: urllib.request.Request,
        fp: IO[bytes],
        code: int,
        msg: str,
        headers: http.client.HTTPMessage,
    ) -> Any:
        # urllib parses the Location before redirect_request sees it, and a bad one
        # (http://[evil]/) raised ValueError, a traceback.
        try:
            return super().http_error_302(req, fp, code, msg, headers)
        except ValueError:
            raise _error(
                f"{req.full_url} redirects to {headers.get('Location', '')!r}, not an "
                "http(s) URL that parses; not followed",
                hint="give the URL the site is served from",
            ) from None

    http_error_301 = http_error_303 = http_error_307 = http_error_308 = http_error_302


def _bounded(url: str, deadline: float, work: Callable[[_Connections], _T]) -> _T:
    """``work(connections)`` in a worker thread; its result, or FetchError at the deadline."""
    connections = _Connections()
    done = threading.Event()
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = work(connections)
        except BaseException as exc:  # handed to the caller below
            box["error"] = exc
        finally:
            done.set()

    threading.Thread(target=run, name="dreampool-fetch", daemon=True).start()
    if not done.wait(deadline):
        connections.expire()
        raise _error(
            f"{url}: no complete answer within {deadline:g} s",
            hint="the server is too slow or withholds the file; run again later",
        )
    if "error" in box:
        raise box["error"]
    value: _T = box["value"]
    return value


def _request(url: str, method: str, limit: int, timeout: float, connections: _Connections) -> bytes:
    """One request: the body (at most ``limit`` bytes; HEAD: b""); NotFound for 404/410."""
    opener = urllib.request.build_opener(
        _HTTPHandler(connections), _HTTPSHandler(connections), _Redirects()
    )
    request = urllib.request.Request(
        url,
        method=method,
        headers={
            "User-Agent": USER_AGENT,
            "Accept-Encoding": "identity",
            # A stale cached checkpoint would look like a rollback.
            "Cache-Control": "no-cache",
        },
    )
    try:
        with opener.open(request, timeout=timeout) as response:
            if response.status != 200:
                raise _error(f"{url}: HTTP {response.status}, want 200")
            if method == "HEAD":
                return b""
            length = response.headers.get("Content-Length")
            if length is not None and length.isdigit() and int(length) > limit:
                raise TooLarge(
                    printable(f"{url} is {length} bytes, over {limit} for its kind"),
                    hint="check the URL and the network; run again later",
                )
            data: bytes = response.read(limit + 1)
    except urllib.error.HTTPError as exc:
        exc.close()
        if exc.code in (404, 410):
            raise NotFound(printable(f"{url}: HTTP {exc.code}"), hint="run again later") from None
        raise _error(f"{url}: HTTP {exc.code} {exc.reason}") from None
    except urllib.error.URLError as exc:
        raise _error(f"{url}: {exc.reason}") from None
    except (OSError, http.client.HTTPException, ValueError) as exc:
        raise _error(f"{url}: {exc or type(exc).__name__}") from None
    if len(data) > limit:
        raise TooLarge(
            printable(f"{url} is over {limit} bytes, too big for its kind"), hint="report it"
        )
    return data


def get(url: str, limit: int, *, deadline: float | None = None) -> bytes:
    """The body at ``url``, at most ``limit`` bytes, within ``deadline`` seconds.

    Raises :class:`NotFound` for HTTP 404/410 and :class:`FetchError` for anything else
    that is not a 200 with a body of at most ``limit`` bytes.
    """
    check_url(url)
    seconds = DEFAULT_DEADLINE if deadline is None else deadline
    return _bounded(url, seconds, lambda c: _request(url, "GET", limit, seconds, c))


def exists(url: str, *, deadline: float | None = None) -> bool:
    """Whether the server has a file at ``url`` (a HEAD request): True for 200, False for
    404/410, :class:`FetchError` for anything else (it could not be checked)."""
    check_url(url)
    seconds = DEFAULT_DEADLINE if deadline is None else deadline
    try:
        _bounded(url, seconds, lambda c: _request(url, "HEAD", 0, seconds, c))
    except NotFound:
        return False
    return True
