"""Real-browser tests: Playwright for Python driving the system Chromium.

The browser is Debian's ``/usr/bin/chromium`` (``$DREAMPOOL_CHROMIUM`` overrides),
never one Playwright downloads. Without it, or without the ``playwright`` package,
these tests skip on a developer's machine and fail in CI (``$CI`` set), so a CI run
cannot pass by testing nothing.

Sites are served on 127.0.0.1 by the project's own preview server
(:func:`builder.site.serve.make_server`): WebCrypto needs a secure context, which
localhost is. A :class:`Served` site keeps its port while its files are swapped, so a
browser context (and its localStorage) sees a pool change under the same web origin.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from builder import build as buildmod
from builder.formats.note import parse_private_key
from builder.site.serve import make_server
from tests.conftest import REPO
from tests.pools import PoolFixture, make_pool

CHROMIUM = Path(os.environ.get("DREAMPOOL_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]
SCREENSHOTS = Path(os.environ.get("DREAMPOOL_SCREENSHOTS", "/tmp/dreampool-screenshots"))
# axe-core comes from the npm registry into a cache outside the repository.
CACHE = Path(os.environ.get("DREAMPOOL_TEST_CACHE", Path.home() / ".cache" / "dreampool-tests"))
AXE_VERSION = "4"

# What a page records for the tests: CSP violations, and a canary a payload would set.
PROBES = """
window.__csp = [];
document.addEventListener("securitypolicyviolation", (e) => {
  window.__csp.push(e.violatedDirective + " " + e.blockedURI);
});
"""


def missing(reason: str) -> None:
    """Skip locally; in CI a missing browser or tool is a failure, not a skip."""
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI must run the browser tests)", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        missing("playwright is not installed (pip install playwright)")
    if not CHROMIUM.exists():
        missing(f"{CHROMIUM} is missing (apt-get install chromium)")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture(scope="session")
def home_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A DREAMPOOL_HOME for the pools the browser tests make (see :func:`own_home`)."""
    return tmp_path_factory.mktemp("browser-home")


@contextmanager
def own_home(path: Path) -> Iterator[None]:
    """DREAMPOOL_HOME set to path while a fixture makes its pools, and only then: a
    session-long setting would leak into every test collected after these."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DREAMPOOL_HOME", str(path))
        yield


# --- serving ----------------------------------------------------------------------------


class Served:
    """A folder served on 127.0.0.1 from a thread; its files can be swapped in place."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.server = make_server(root, port=0)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/"
        # A short poll interval: shutdown() waits for the loop to notice it.
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self.thread.start()

    def swap(self, site: Path, mutate: Callable[[Path], None] | None = None) -> Served:
        """Serve a copy of ``site`` from now on, changed by ``mutate`` if given."""
        for child in self.root.iterdir():
            if child.is_dir():
                shutil.rmtree(child)
            else:
                child.unlink()
        # New mtimes, as a rebuild gives: the server's Last-Modified must change.
        shutil.copytree(site, self.root, dirs_exist_ok=True, copy_function=shutil.copy)
        if mutate is not None:
            mutate(self.root)
        return self

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[Path], Served]]:
    """``serve(site)``: a new server for a copy of site; all stop with the module."""
    servers: list[Served] = []

    def start(site: Path) -> Served:
        served = Served(tmp_path_factory.mktemp("served") / "site").swap(site)
        servers.append(served)
        return served

    yield start
    for s in servers:
        s.close()


# --- pools ------------------------------------------------------------------------------


@dataclass
class Pool:
    """A test pool, its log key and the site of its latest build."""

    fixture: PoolFixture
    site: Path
    ids: list[str]

    def build(self, out: Path, log_key: str | None = None) -> Path:
        signer = parse_private_key(log_key or self.fixture.log_key)
        buildmod.build(self.fixture.content, out, signer=signer)
        self.site = out
        return out


def new_pool(root: Path, log_key: str | None = None) -> Pool:
    """An empty pool under root; with log_key, the pool signs with that key instead."""
    tp = make_pool(root)
    if log_key is not None:
        vkey = parse_private_key(log_key).verifier.vkey
        tp = PoolFixture(tp.content, log_key, vkey)
    return Pool(tp, root / "site", [])


@pytest.fixture(scope="session")
def standard_pool(tmp_path_factory: pytest.TempPathFactory, home_dir: Path) -> Pool:
    """Two builds: the first dreams' proofs are against an older checkpoint than the
    current one (step 5 needs log/consistency), the last ones' against the current."""
    root = tmp_path_factory.mktemp("standard")
    with own_home(home_dir):
        pool = new_pool(root)
        pool.ids += pool.fixture.add("ada", 2)
        pool.ids += pool.fixture.add("bob", 1, title="Bob's first dream", tags=["testing"])
        pool.build(root / "site-1")
        pool.ids += pool.fixture.add("ada", 2)
        pool.build(root / "site")
    return pool


@pytest.fixture(scope="session")
def sample_site(tmp_path_factory: pytest.TempPathFactory, home_dir: Path) -> Path:
    """The shipped sample pool, built from a copy (its log is signed: no key needed)."""
    root = tmp_path_factory.mktemp("sample")
    shutil.copytree(REPO / "content", root / "content")
    with own_home(home_dir):
        buildmod.build(root / "content", root / "site", signer=None)
    return root / "site"


# --- pages --------------------------------------------------------------------------------


def new_page(context: Any) -> Any:
    """A page that records CSP violations and fails the test on any dialog."""
    page = context.new_page()
    page.add_init_script(PROBES)
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.dialogs = dialogs
    return page


def verify_dream(page: Any, url: str) -> Any:
    """Open a dream page, click Verify and wait for the outcome; return the panel."""
    page.goto(url)
    panel = page.locator("section.verify[data-dream-id]")
    panel.locator('[data-part="run"]').click()
    page.wait_for_function(
        "() => ['ok', 'failed', 'unavailable'].includes("
        "document.querySelector('section.verify').dataset.verifyStatus)"
    )
    return panel


def verify_by_hook(page: Any, url: str) -> Any:
    """Open a dream page and verify through window.dreampoolVerify (no click); the panel."""
    page.goto(url)
    page.evaluate("() => window.dreampoolVerify()")
    return page.locator("section.verify[data-dream-id]")


def steps_of(panel: Any) -> list[tuple[int, bool]]:
    """(number, ok) of each step the panel shows."""
    rows = panel.locator(".verify-steps li").evaluate_all(
        "items => items.map(li => [Number(li.dataset.step), li.dataset.ok === 'true'])"
    )
    return [(int(n), bool(ok)) for n, ok in rows]


def local_storage(page: Any) -> dict[str, Any]:
    raw = page.evaluate("() => Object.fromEntries(Object.entries(localStorage))")
    return {k: json.loads(v) for k, v in raw.items()}


def kept(page: Any, kind: str, log: str = "test.example/pool") -> Any:
    """What the verifier keeps of kind ("pin" or "seen") for log, in pins.js's layout
    ("dreampool/v2 <kind> <web origin><pool root path> <log origin>"): the one entry of
    any pool of this page's web origin, or None. Two would be ambiguous: an error."""
    found = [
        v
        for k, v in local_storage(page).items()
        if k.startswith(f"dreampool/v2 {kind} ") and k.endswith(f" {log}")
    ]
    assert len(found) <= 1, found
    return found[0] if found else None


@pytest.fixture(scope="session")
def axe_source() -> str:
    """axe.min.js from axe-core@4 on the npm registry, installed once into a cache dir."""
    target = CACHE / "axe"
    script = target / "node_modules" / "axe-core" / "axe.min.js"
    if not script.exists():
        npm = shutil.which("npm")
        if npm is None:
            missing("npm is missing, so axe-core cannot be installed (apt-get install npm)")
        target.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [npm, "install", "--prefix", str(target), "--no-audit", "--no-fund", "--silent",
             f"axe-core@{AXE_VERSION}"],
            check=True,
            timeout=300,
        )  # fmt: skip
    return script.read_text(encoding="utf-8")
