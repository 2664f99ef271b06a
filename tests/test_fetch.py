"""builder.readers.fetch: every network read of the readers' tools is bounded, its errors printable.

Local HTTP servers on 127.0.0.1 misbehave on purpose: drip bytes, redirect to URLs that
do not parse, send terminal escapes in the reason phrase, send bodies over the cap.
"""

from __future__ import annotations

import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from builder.agents import mcp_server
from builder.errors import DreampoolError, printable
from builder.readers import fetch
from tests.test_monitor import (
    DripHandler,
    EscapeReasonHandler,
    EvilRedirectHandler,
    HugeHandler,
    dripping,
    finishes_within,
    serve,
)

pytestmark = pytest.mark.usefixtures("no_proxy")


@pytest.fixture
def no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")


def test_the_deadline_is_total_not_per_read() -> None:
    assert DripHandler.protocol_version == "HTTP/1.1"
    with dripping() as base:
        started = time.monotonic()
        with pytest.raises(fetch.FetchError, match=r"no complete answer within 1\.5 s"):
            fetch.get(base + "/log/checkpoint", 10_000, deadline=1.5)
        assert time.monotonic() - started < 3


def test_mcp_site_over_a_dripping_server_gives_up_at_the_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 19 item 13: ``dreampool mcp --site URL`` waited as long as the server dripped."""
    monkeypatch.setattr(fetch, "DEFAULT_DEADLINE", 1.0)
    with dripping() as base:
        done, result = finishes_within(5, lambda: mcp_server.open_reader(base, None))
    assert done, "mcp --site was still reading after 5 s"
    assert isinstance(result, DreampoolError), result
    assert "within 1 s" in result.message


class ManyRedirects(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(302)
        self.send_header("Location", f"/r{len(self.path)}{self.path}")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.mark.parametrize(
    "location",
    ["http://[evil]/", "http://[::1/", "http://example.org:99999/", "file:///etc/passwd"],
)
def test_a_redirect_goes_only_to_an_http_url_that_parses(
    location: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(EvilRedirectHandler, "location", location)
    with serve(EvilRedirectHandler) as base:
        with pytest.raises(fetch.FetchError, match=r"(?i)redirect") as info:
            fetch.get(base + "/x", 100)
        with pytest.raises(fetch.FetchError, match=r"(?i)redirect"):
            fetch.exists(base + "/x")
    assert printable(info.value.message) == info.value.message


def test_redirects_are_bounded() -> None:
    with serve(ManyRedirects) as base, pytest.raises(fetch.FetchError, match="HTTP 3"):
        fetch.get(base + "/x", 100)


def test_network_text_in_errors_is_escaped() -> None:
    with serve(EscapeReasonHandler) as base, pytest.raises(fetch.FetchError) as info:
        fetch.get(base + "/x", 100)
    assert printable(info.value.message) == info.value.message
    assert "\\x1b]0;owned\\x07" in info.value.message


def test_an_oversize_body_is_refused_after_limit_plus_one_bytes() -> None:
    with serve(HugeHandler) as base, pytest.raises(fetch.FetchError, match="over 1000 bytes"):
        fetch.get(base + "/x", 1000)


class Sized(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "5000000")
        self.end_headers()

    def do_HEAD(self) -> None:
        code = {"/here": 200, "/gone": 410, "/busy": 503}.get(self.path, 404)
        self.send_response(code)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


def test_a_content_length_over_the_cap_is_refused_before_reading() -> None:
    with serve(Sized) as base, pytest.raises(fetch.FetchError, match="5000000 bytes, over 100"):
        fetch.get(base + "/x", 100)


def test_exists_tells_absent_from_unchecked() -> None:
    with serve(Sized) as base:
        assert fetch.exists(base + "/here") is True
        assert fetch.exists(base + "/gone") is False
        assert fetch.exists(base + "/nothing") is False
        with pytest.raises(fetch.FetchError, match="HTTP 503"):
            fetch.exists(base + "/busy")


def test_urls_are_checked_before_any_request(tmp_path: Path) -> None:
    for url in ("ftp://example.org/", "http://[evil]/", "http:///nohost", str(tmp_path)):
        with pytest.raises(fetch.FetchError):
            fetch.get(url, 10)


def test_an_unreachable_host_is_an_error_not_a_traceback() -> None:
    with pytest.raises(fetch.FetchError, match=r"127\.0\.0\.1:9"):
        fetch.get("http://127.0.0.1:9/x", 10, deadline=3)
