"""Every internal link and asset of the built sample site resolves, at the
root and under a sub-path (GitHub project pages serve a site under /repo/)."""

from __future__ import annotations

import posixpath
import shutil
from html.parser import HTMLParser
from pathlib import Path, PurePosixPath
from urllib.parse import unquote, urlsplit

import pytest

from builder import build as buildmod
from tests.conftest import REPO


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name in ("href", "src") and value is not None:
                self.links.append(value)


def broken_links(site: Path, base_path: str) -> list[str]:
    """Links that resolve to no file, for a site served at ``base_path``."""
    broken = []
    for page in sorted(site.rglob("*.html")):
        rel = page.relative_to(site).as_posix()
        parser = _Links()
        parser.feed(page.read_text(encoding="utf-8"))
        # The URL this page is served at (directory pages end in /).
        url_dir = PurePosixPath(base_path + rel).parent
        for link in parser.links:
            parts = urlsplit(link)
            if parts.scheme or parts.netloc or link.startswith(("#", "mailto:")):
                continue
            path = unquote(parts.path)
            if rel == "404.html" and not path.startswith(base_path):
                broken.append(f"{rel}: {link} (404.html must use the base path)")
                continue
            target = PurePosixPath(path) if path.startswith("/") else url_dir / path
            resolved = _normalize(target, path.endswith("/") or path in ("", ".", ".."))
            if not resolved.startswith(base_path):
                broken.append(f"{rel}: {link} leaves the site")
                continue
            local = site / resolved[len(base_path) :]
            if link.endswith("/") or (local.is_dir()):
                local = local / "index.html"
            if not local.is_file():
                broken.append(f"{rel}: {link}")
    return broken


def _normalize(path: PurePosixPath, trailing: bool) -> str:
    text = posixpath.normpath(str(path))
    return text + "/" if trailing and not text.endswith("/") else text


@pytest.mark.parametrize(
    ("base_url", "base_path"),
    [("/", "/"), ("https://example.org/pool/", "/pool/"), ("/deep/sub/path/", "/deep/sub/path/")],
)
def test_every_link_of_the_sample_resolves(tmp_path: Path, base_url: str, base_path: str) -> None:
    content = tmp_path / "content"
    shutil.copytree(REPO / "content", content)
    site = tmp_path / "site"
    buildmod.build(content, site, signer=None, base_url=base_url)
    pages = list(site.rglob("*.html"))
    assert len(pages) > 100
    assert broken_links(site, base_path) == []
