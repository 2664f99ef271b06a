"""The browser verifier in Chromium: docs/protocol.md §5 steps, pinning and history.

Each case opens a fresh browser context (fresh localStorage) unless it tests what a
browser remembers between visits; the pinning and history cases swap the files a
:class:`Served` site serves so the same context sees the pool change under the same
web origin. Mutations fail at the step the Python light client fails them at
(tests/test_lightclient.py's mapping).

The modules themselves meet three independent witnesses, as the Python ones do: the
published vectors (JCS, RFC 6962 Merkle, RFC 8032, the signed-note example), the
Python light client on a thousand mutated inputs (same failing step for each), and
hand-made attacks (small-order keys, S >= L, lying logs, witness quorum).
"""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from builder.errors import DreampoolError, VerificationError
from builder.formats import dream as dreamfmt
from builder.formats import note, strictjson
from builder.formats.b64 import b64url_encode
from builder.formats.checkpoint import Cosigner, cosign
from builder.formats.ed25519 import L
from builder.formats.policy import PolicyWitness, parse_policy
from builder.readers import lightclient
from tests.browser.conftest import (
    Pool,
    Served,
    kept,
    new_page,
    new_pool,
    own_home,
    steps_of,
    verify_by_hook,
    verify_dream,
)
from tests.conftest import VECTORS, vector_files
from tests.pools import ORIGIN
from tests.test_lightclient import (
    LARGE,
    SMALL,
    LogBuilder,
    flip,
    lying_log,
    replaced,
    signed_dream,
    standard_log,
)


@pytest.fixture
def context(browser: Any) -> Iterator[Any]:
    ctx = browser.new_context()
    yield ctx
    ctx.close()


@pytest.fixture(scope="module")
def site(standard_pool: Pool, serve: Callable[[Path], Served]) -> Served:
    return serve(standard_pool.site)


def dream_url(served: Served, dream_id: str) -> str:
    return f"{served.url}dreams/{dream_id}/"


def detail(panel: Any, step: int) -> str:
    return str(panel.locator(f'.verify-steps li[data-step="{step}"] .step-detail').inner_text())


# --- a valid dream ---------------------------------------------------------------------------


def test_valid_dream_verifies_all_five_steps(
    context: Any, site: Served, standard_pool: Pool
) -> None:
    page = new_page(context)
    first = standard_pool.ids[0]  # proved against the first checkpoint, so step 5 is real
    panel = verify_dream(page, dream_url(site, first))
    assert panel.get_attribute("data-verify-status") == "ok", panel.inner_text()
    assert panel.get_attribute("data-verify-step") is None
    assert steps_of(panel) == [(n, True) for n in range(1, 6)]
    assert "quorum none" in detail(panel, 1) and f"dream {first}" in detail(panel, 2)
    assert "is a prefix of the newer one" in detail(panel, 5)
    assert panel.get_attribute("data-pin") == "first-use"
    assert panel.get_attribute("data-history") == "first-visit"
    assert f"Verified: dream {first}" in panel.locator('[data-part="outcome"]').inner_text()
    assert kept(page, "pin")["policy"] == (standard_pool.site / "log/policy").read_text()
    assert kept(page, "seen")["checkpoint"] == (standard_pool.site / "log/checkpoint").read_text()
    assert page.evaluate("window.__csp") == [] and page.dialogs == []


def test_proof_against_the_current_checkpoint_passes_step_5_as_same_checkpoint(
    context: Any, site: Served, standard_pool: Pool
) -> None:
    page = new_page(context)
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    panel = verify_dream(page, dream_url(site, standard_pool.ids[-1]))
    assert panel.get_attribute("data-verify-status") == "ok", panel.inner_text()
    assert "same checkpoint" in detail(panel, 5)
    assert not [u for u in requests if "/log/consistency/" in u]  # nothing to prove


def test_second_visit_uses_the_pin_and_sees_history_unchanged(
    context: Any, site: Served, standard_pool: Pool
) -> None:
    page = new_page(context)
    verify_dream(page, dream_url(site, standard_pool.ids[0]))
    panel = verify_dream(page, dream_url(site, standard_pool.ids[1]))
    assert panel.get_attribute("data-verify-status") == "ok"
    assert panel.get_attribute("data-pin") == "pinned"
    assert panel.get_attribute("data-history") == "unchanged"
    assert "History unchanged since your last visit" in panel.inner_text()


# --- a mutated site fails at the step that reads the mutated byte ---------------------------


def flip_in(path: Path, start: bytes, end: bytes = b"\n", offset: int = 5) -> None:
    """Flip one byte ``offset`` bytes into the first span that starts with ``start``."""
    data = path.read_bytes()
    at = data.index(start) + offset
    assert data[at : at + 1] != end
    path.write_bytes(replaced(data, at, data[at] ^ 0x01))


def proof_of(root: Path, dream_id: str) -> Path:
    return root / "dreams" / dream_id / "proof.tlog-proof"


def record_flip(root: Path, dream_id: str) -> None:
    path = root / "dreams" / dream_id / "record.json"
    data = path.read_bytes()
    at = data.index(b'"title": "') + 12  # inside the title: the commitment breaks
    path.write_bytes(replaced(data, at, data[at] ^ 0x01))


def hash_flip(root: Path, dream_id: str) -> None:
    proof = proof_of(root, dream_id)
    lines = proof.read_bytes().split(b"\n")
    flip_in(proof, b"\n" + lines[3] + b"\n", offset=10)


def checkpoint_flip(root: Path, dream_id: str) -> None:
    proof = proof_of(root, dream_id)
    data = proof.read_bytes()
    cut = data.index(b"\n\n") + 2  # the embedded checkpoint's root line
    root_line = data[cut:].split(b"\n")[2]
    flip_in(proof, root_line, offset=3)


def policy_flip(root: Path, dream_id: str) -> None:
    flip_in(root / "log" / "policy", b"log ", offset=30)  # inside the vkey


def extra_flip(root: Path, dream_id: str) -> None:
    flip_in(proof_of(root, dream_id), b"\nextra ", offset=20)


def index_flip(root: Path, dream_id: str) -> None:
    proof = proof_of(root, dream_id)
    data = proof.read_bytes()
    at = data.index(b"\nindex ") + 7
    proof.write_bytes(data[:at] + b"7" + data[at + 1 :])


def current_checkpoint_flip(root: Path, dream_id: str) -> None:
    flip_in(root / "log" / "checkpoint", b"\n", offset=3)  # the size line


def consistency_flip(root: Path, dream_id: str) -> None:
    (path,) = (root / "log" / "consistency").iterdir()
    flip_in(path, b"", offset=4)


def record_missing(root: Path, dream_id: str) -> None:
    (root / "dreams" / dream_id / "record.json").unlink()


def other_dream(root: Path, dream_id: str) -> None:
    """A valid record and proof, but of another dream than the page shows."""
    dirs = sorted(p for p in (root / "dreams").iterdir() if p.name != dream_id)
    for name in ("record.json", "proof.tlog-proof"):
        (root / "dreams" / dream_id / name).write_bytes((dirs[0] / name).read_bytes())


@pytest.fixture(scope="module")
def mutation_page(
    browser: Any, standard_pool: Pool, serve: Callable[[Path], Served]
) -> Iterator[tuple[Any, Served]]:
    """One page and one server for the mutation cases; each case swaps the files and
    clears localStorage, so it starts as a first visit."""
    served = serve(standard_pool.site)
    ctx = browser.new_context()
    yield new_page(ctx), served
    ctx.close()


@pytest.mark.parametrize(
    ("mutate", "step"),
    [
        (record_flip, 2),
        (hash_flip, 3),
        (checkpoint_flip, 1),
        (policy_flip, 1),
        (extra_flip, 2),
        (index_flip, 2),
        (current_checkpoint_flip, 5),
        (consistency_flip, 5),
        (record_missing, 2),
        (other_dream, 2),
    ],
)
def test_mutated_site_fails_at_the_right_step(
    mutation_page: tuple[Any, Served],
    standard_pool: Pool,
    mutate: Callable[[Path, str], None],
    step: int,
) -> None:
    page, served = mutation_page
    first = standard_pool.ids[0]
    served.swap(standard_pool.site, lambda root: mutate(root, first))
    page.goto(served.url)
    page.evaluate("() => localStorage.clear()")
    panel = verify_by_hook(page, dream_url(served, first))
    assert panel.get_attribute("data-verify-status") == "failed", panel.inner_text()
    assert panel.get_attribute("data-verify-step") == str(step)
    shown = steps_of(panel)
    assert shown == [(n, True) for n in range(1, step)] + [(step, False)]
    assert f"step {step} failed" in panel.locator('[data-part="outcome"]').inner_text()
    assert panel.locator(f'li[data-step="{step}"] .step-hint').inner_text().startswith("hint:")
    assert panel.get_attribute("data-history") is None  # not checked after a failure
    if step != 1:
        assert kept(page, "pin") is not None  # step 1 held: the key is pinned


# --- the pinned key ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def two_logs(tmp_path_factory: pytest.TempPathFactory, home_dir: Path) -> tuple[Pool, Pool]:
    """A pool, and the same pool rebuilt from its dreams into a fresh log with another
    log key (a build refuses another key for an existing log, so the log starts over)."""
    root = tmp_path_factory.mktemp("rekeyed")
    with own_home(home_dir):
        a = new_pool(root / "a")
        a.ids += a.fixture.add("ada", 2)
        a.build(a.site)
        other_key, _ = note.generate_key(ORIGIN)
        b = new_pool(root / "b", log_key=other_key)
        shutil.rmtree(b.fixture.content)
        shutil.copytree(a.fixture.content, b.fixture.content, ignore=shutil.ignore_patterns("log"))
        b.ids = list(a.ids)
        b.build(b.site)
        assert (a.site / "log/policy").read_text() != (b.site / "log/policy").read_text()
    return a, b


def test_pinned_key_fails_loudly_when_the_pool_changes_its_key(
    context: Any, two_logs: tuple[Pool, Pool], serve: Callable[[Path], Served]
) -> None:
    a, b = two_logs
    served = serve(a.site)
    page = new_page(context)
    panel = verify_dream(page, dream_url(served, a.ids[0]))
    assert panel.get_attribute("data-verify-status") == "ok"
    assert panel.get_attribute("data-pin") == "first-use"
    fingerprint = panel.locator(".fingerprint").inner_text()
    assert len(fingerprint.replace(" ", "")) == 32
    pinned = kept(page, "pin")["policy"]
    assert a.fixture.vkey in pinned

    served.swap(b.site)  # the same dreams and origin, a new log with another key
    panel = verify_dream(page, dream_url(served, b.ids[0]))
    assert panel.get_attribute("data-verify-status") == "failed"
    assert panel.get_attribute("data-verify-step") == "1"
    assert panel.get_attribute("data-pin") == "changed"
    warning = panel.locator('[data-part="pin"]')
    assert warning.get_attribute("role") == "alert"
    text = warning.inner_text()
    assert "log key changed" in text and fingerprint in text
    assert kept(page, "pin")["policy"] == pinned  # the pin is not replaced silently

    # The reader decides the change is genuine and pastes the new policy.
    panel.locator("details.pin-paste summary").click()
    panel.locator('[data-part="paste"]').fill((b.site / "log" / "policy").read_text())
    panel.locator('[data-part="paste-save"]').click()
    page.wait_for_function(
        "() => document.querySelector('section.verify').dataset.verifyStatus === 'ok'"
    )
    assert b.fixture.vkey in kept(page, "pin")["policy"]
    assert panel.get_attribute("data-pin") == "pinned"


def test_pasted_policy_of_another_log_is_refused(
    context: Any, site: Served, standard_pool: Pool
) -> None:
    page = new_page(context)
    panel = verify_dream(page, dream_url(site, standard_pool.ids[0]))
    panel.locator("details.pin-paste summary").click()
    other = LogBuilder().policy.decode()  # a log of another origin
    panel.locator('[data-part="paste"]').fill(other)
    panel.locator('[data-part="paste-save"]').click()
    message = panel.locator('[data-part="paste-message"]')
    message.filter(has_text="Not pinned").wait_for()
    assert "names no log test.example/pool" in message.inner_text()
    panel.locator('[data-part="paste"]').fill("log PRIVATE+KEY+x+00000000+AAAA\nquorum none\n")
    panel.locator('[data-part="paste-save"]').click()
    message.filter(has_text="private key").wait_for()
    assert "PRIVATE+KEY" not in message.inner_text()  # never echoed


def test_a_site_that_switches_to_another_log_origin_gets_no_new_first_use(
    context: Any, site: Served, standard_pool: Pool, serve: Callable[[Path], Served]
) -> None:
    page = new_page(context)
    verify_dream(page, dream_url(site, standard_pool.ids[0]))
    # The same site serves a log of another origin and another key.
    log = LogBuilder()
    log.add_key("ada")
    log.add_dream(signed_dream("ada", "first"))
    log.sign()
    first = standard_pool.ids[0]

    def switch(root: Path) -> None:
        log.write_site(root)
        for name in ("record.json", "proof.tlog-proof"):
            data = (root / "dreams" / log.ids["first"] / name).read_bytes()
            (root / "dreams" / first / name).write_bytes(data)

    site.swap(standard_pool.site, switch)
    try:
        panel = verify_dream(page, dream_url(site, first))
        assert panel.get_attribute("data-verify-status") == "failed"
        assert panel.get_attribute("data-verify-step") == "1"
        assert panel.get_attribute("data-pin") == "changed"
        assert "example.org/dreams" in panel.inner_text()
        assert kept(page, "pin", "example.org/dreams") is None
    finally:
        site.swap(standard_pool.site)


# --- watching the history ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory, home_dir: Path) -> dict[str, Any]:
    """v1 and v2 of one pool (v2 adds dreams), and a fork signed by the same key:
    fork-1 has v2's size but other dreams, fork-2 adds one more."""
    root = tmp_path_factory.mktemp("history")
    with own_home(home_dir):
        pool = new_pool(root / "pool")
        pool.fixture.add("ada", 2)
        v1 = pool.build(root / "v1")
        pool.fixture.add("bob", 2)
        v2 = pool.build(root / "v2")
        fork = new_pool(root / "fork", log_key=pool.fixture.log_key)
        fork.fixture.add("ada", 2)
        fork.fixture.add("bob", 2)
        fork1 = fork.build(root / "fork-1")
        fork.fixture.add("ada", 1)
        fork2 = fork.build(root / "fork-2")
        first_v1 = sorted(p.name for p in (v1 / "dreams").iterdir())[0]
        first_fork = sorted(p.name for p in (fork1 / "dreams").iterdir())[0]
    return {
        "v1": v1,
        "v2": v2,
        "fork1": fork1,
        "fork2": fork2,
        "id": first_v1,
        "fork_id": first_fork,
    }


def checkpoint_size(site: Path) -> int:
    return int((site / "log" / "checkpoint").read_text().split("\n")[1])


def test_history_unchanged_across_growth_and_rewritten_on_a_fork(
    context: Any, history: dict[str, Any], serve: Callable[[Path], Served]
) -> None:
    v1, v2, fork1, fork2 = history["v1"], history["v2"], history["fork1"], history["fork2"]
    assert checkpoint_size(fork1) == checkpoint_size(v2) < checkpoint_size(fork2)
    served = serve(v1)
    page = new_page(context)
    panel = verify_dream(page, dream_url(served, history["id"]))
    assert panel.get_attribute("data-history") == "first-visit"

    served.swap(v2)  # more dreams, the same log
    panel = verify_dream(page, dream_url(served, history["id"]))
    assert panel.get_attribute("data-verify-status") == "ok"
    assert panel.get_attribute("data-history") == "unchanged"
    m, n = checkpoint_size(v1), checkpoint_size(v2)
    assert f"History unchanged since your last visit (size {m} → {n})" in panel.inner_text()
    seen = kept(page, "seen")["checkpoint"]
    assert seen == (v2 / "log" / "checkpoint").read_text()

    served.swap(fork1)  # a different tree of the same size, signed by the same key
    panel = verify_dream(page, dream_url(served, history["fork_id"]))
    assert panel.get_attribute("data-verify-status") == "ok"  # the dream itself verifies
    assert panel.get_attribute("data-history") == "rewritten"
    warning = panel.locator('[data-part="history"]')
    assert warning.get_attribute("role") == "alert"
    text = warning.inner_text()
    assert "rewrote its history" in text and "two different trees" in text
    notes = warning.locator("pre").all_inner_texts()
    assert [n.strip() for n in notes] == [
        seen.strip(),
        (fork1 / "log/checkpoint").read_text().strip(),
    ]
    assert kept(page, "seen")["checkpoint"] == seen  # the evidence is kept

    served.swap(fork2)  # the fork grows: its consistency proof from size n is of its own tree
    panel = verify_dream(page, dream_url(served, history["fork_id"]))
    assert panel.get_attribute("data-history") == "rewritten", panel.inner_text()
    assert "gives old root" in panel.locator('[data-part="history"]').inner_text()

    # The reader accepts the new history; the next visit compares with it.
    panel.locator('[data-part="history"] button').click()
    assert kept(page, "seen")["checkpoint"] == (fork2 / "log/checkpoint").read_text()
    panel = verify_dream(page, dream_url(served, history["fork_id"]))
    assert panel.get_attribute("data-history") == "unchanged"


def test_a_shrunk_log_is_unchecked_not_rewritten_history(
    context: Any, history: dict[str, Any], serve: Callable[[Path], Served]
) -> None:
    """A checkpoint smaller than the one this browser saw is a rollback or a stale
    cache (a 10-minute Pages cache serves one for minutes): the browser cannot tell,
    so it says it could not check and keeps the larger checkpoint as its baseline;
    "rewritten" needs two signed checkpoints a proof shows inconsistent (issue 19;
    the monitor, which fetches with no-cache, calls a smaller size a rollback)."""
    served = serve(history["v2"])
    page = new_page(context)
    verify_dream(page, dream_url(served, history["id"]))
    served.swap(history["v1"])
    panel = verify_dream(page, dream_url(served, history["id"]))
    assert panel.get_attribute("data-history") == "unchecked"
    text = panel.locator('[data-part="history"]').inner_text()
    assert "older checkpoint" in text and "rolled its log back" in text
    assert kept(page, "seen")["checkpoint"] == (history["v2"] / "log/checkpoint").read_text()


# --- the verify page: local files, no network ---------------------------------------------------


def site_files(site: Path, dream_id: str) -> dict[str, Path]:
    proof = (site / "dreams" / dream_id / "proof.tlog-proof").read_text()
    size = proof.split("\n\n", 1)[1].split("\n")[1]
    return {
        "proof": site / "dreams" / dream_id / "proof.tlog-proof",
        "record": site / "dreams" / dream_id / "record.json",
        "policy": site / "log" / "policy",
        "checkpoint": site / "log" / "checkpoint",
        "consistency": site / "log" / "consistency" / size,
    }


def run_file_page(page: Any) -> Any:
    panel = page.locator("section.verify[data-verify-files]")
    panel.locator('[data-part="run"]').click()
    page.wait_for_function(
        "() => ['ok', 'failed', 'unavailable'].includes("
        "document.querySelector('section.verify').dataset.verifyStatus)"
    )
    return panel


def test_verify_page_checks_files_from_inputs_offline(
    context: Any, site: Served, standard_pool: Pool
) -> None:
    files = site_files(standard_pool.site, standard_pool.ids[0])
    page = new_page(context)
    page.goto(site.url + "verify/")
    requests: list[str] = []
    # The browser may fetch the page's icon when it likes; the verifier, nothing.
    page.on("request", lambda r: "/favicon." in r.url or requests.append(r.url))
    context.set_offline(True)  # nothing may be fetched from here on
    try:
        for slot in ("proof", "record", "policy"):
            page.set_input_files(f'input[data-slot="{slot}"]', str(files[slot]))
        panel = run_file_page(page)
        assert panel.get_attribute("data-verify-status") == "ok", panel.inner_text()
        assert [s for s in steps_of(panel) if s[0] < 5] == [(n, True) for n in range(1, 5)]
        assert "skipped" in panel.locator('li[data-step="5"]').inner_text()
        for slot in ("checkpoint", "consistency"):
            page.set_input_files(f'input[data-slot="{slot}"]', str(files[slot]))
        panel = run_file_page(page)
        assert steps_of(panel) == [(n, True) for n in range(1, 6)]
        record = files["record"].read_bytes().replace(b'"title": "', b'"title": "x', 1)
        page.set_input_files(
            'input[data-slot="record"]',
            files={"name": "record.json", "mimeType": "application/json", "buffer": record},
        )
        panel = run_file_page(page)
        assert panel.get_attribute("data-verify-status") == "failed"
        assert panel.get_attribute("data-verify-step") == "2"
    finally:
        context.set_offline(False)
    assert requests == []


def test_verify_page_takes_dropped_files_and_the_pinned_policy(
    context: Any, site: Served, standard_pool: Pool
) -> None:
    files = site_files(standard_pool.site, standard_pool.ids[0])
    page = new_page(context)
    verify_dream(page, dream_url(site, standard_pool.ids[0]))  # pins the key
    page.goto(site.url + "verify/")
    dropped = [
        {"name": path.name, "data": base64.b64encode(path.read_bytes()).decode()}
        for slot, path in files.items()
        if slot != "policy"
    ]
    page.evaluate(
        """(files) => {
          const dt = new DataTransfer();
          for (const f of files) {
            const bytes = Uint8Array.from(atob(f.data), (c) => c.charCodeAt(0));
            dt.items.add(new File([bytes], f.name));
          }
          const zone = document.querySelector('[data-part="dropzone"]');
          const init = { dataTransfer: dt, bubbles: true, cancelable: true };
          zone.dispatchEvent(new DragEvent("drop", init));
        }""",
        dropped,
    )
    page.locator('[data-part="dropped"]').filter(has_text="4 file(s) dropped").wait_for()
    listing = page.locator('[data-part="files"] li').evaluate_all(
        "items => Object.fromEntries(items.map(li => [li.dataset.slot, li.className]))"
    )
    assert listing == {
        "proof": "file-given",
        "record": "file-given",
        "policy": "file-missing",
        "checkpoint": "file-given",
        "consistency": "file-given",
    }
    panel = run_file_page(page)
    assert panel.get_attribute("data-verify-status") == "ok", panel.inner_text()
    assert steps_of(panel) == [(n, True) for n in range(1, 6)]
    assert panel.get_attribute("data-pin") == "pinned"
    assert "you pinned in this browser" in panel.locator('[data-part="pin"]').inner_text()


def test_verify_page_without_a_policy_or_pin_asks_for_one(
    context: Any, site: Served, standard_pool: Pool
) -> None:
    files = site_files(standard_pool.site, standard_pool.ids[0])
    page = new_page(context)
    page.goto(site.url + "verify/")
    for slot in ("proof", "record"):
        page.set_input_files(f'input[data-slot="{slot}"]', str(files[slot]))
    panel = run_file_page(page)
    assert panel.get_attribute("data-verify-status") == "failed"
    assert "Give the pool's policy" in panel.inner_text()


# --- a browser without Ed25519 --------------------------------------------------------------------


def test_browser_without_ed25519_points_to_the_cli(
    context: Any, site: Served, standard_pool: Pool
) -> None:
    page = new_page(context)
    page.add_init_script(
        """
        const importKey = crypto.subtle.importKey.bind(crypto.subtle);
        crypto.subtle.importKey = (format, key, alg, ...rest) =>
          (alg && (alg === "Ed25519" || alg.name === "Ed25519"))
            ? Promise.reject(new DOMException("Ed25519 is not supported", "NotSupportedError"))
            : importKey(format, key, alg, ...rest);
        """
    )
    panel = verify_dream(page, dream_url(site, standard_pool.ids[0]))
    assert panel.get_attribute("data-verify-status") == "unavailable"
    text = panel.inner_text()
    assert "cannot verify Ed25519" in text
    assert "dreampool verify-proof proof.tlog-proof --record record.json --policy policy" in text
    assert kept(page, "pin") is None


# --- the modules against published vectors and the Python light client ----------------------------


@pytest.fixture(scope="module")
def module_page(browser: Any, site: Served) -> Iterator[Any]:
    """A page of the site with the verifier's modules imported as window.m."""
    ctx = browser.new_context()
    page = ctx.new_page()
    page.goto(site.url + "verify/")
    page.evaluate(
        """async () => {
          const at = (name) => new URL(`../static/${name}`, location.href).href;
          window.m = {
            jcs: await import(at("jcs.js")),
            tlog: await import(at("tlog.js")),
            lc: await import(at("lightclient.js")),
          };
        }"""
    )
    yield page
    ctx.close()


def test_jcs_vectors(module_page: Any) -> None:
    inputs = vector_files("jcs/input")
    assert len(inputs) == 6
    cases = [{"name": p.name, "input": base64.b64encode(p.read_bytes()).decode()} for p in inputs]
    got = module_page.evaluate(
        """(cases) => cases.map((c) => {
          const bytes = Uint8Array.from(atob(c.input), (ch) => ch.charCodeAt(0));
          const value = m.jcs.parseStrict(bytes);
          return [c.name, Array.from(m.jcs.canonicalBytes(value))];
        })""",
        cases,
    )
    for name, out in got:
        want = (VECTORS / "jcs" / "output" / name).read_bytes()
        assert bytes(out) == want, name


def test_strict_json_refuses_what_python_refuses(module_page: Any) -> None:
    samples = [
        b'{"a": 1, "a": 2}',
        b"[NaN]",
        b"[1e400]",
        b"[9007199254740992]",
        b'["\\ud800"]',
        b"\xef\xbb\xbf{}",
        b"\xff",
        b"[" * 40 + b"]" * 40,
        b'{"a": "\x01"}',
        b"[01]",
        b"{}",
        b'{"__proto__": {"x": 1}, "b": [1.0, -0, 1E2]}',
        b"[9007199254740991, -9007199254740991]",
    ]
    got = module_page.evaluate(
        """(samples) => samples.map((s) => {
          const bytes = Uint8Array.from(atob(s), (ch) => ch.charCodeAt(0));
          try { return new TextDecoder().decode(m.jcs.canonicalBytes(m.jcs.parseStrict(bytes))); }
          catch (e) { return e.name === "JSONError" ? null : "unexpected " + e; }
        })""",
        [base64.b64encode(s).decode() for s in samples],
    )
    for sample, out in zip(samples, got, strict=True):
        try:
            want: str | None = strictjson.canonical(strictjson.loads(sample)).decode()
        except strictjson.JSONError:
            want = None
        assert out == want, sample


def js_steps(page: Any, cases: list[dict[str, bytes | None]]) -> list[int | None]:
    """The step at which the browser's verifyProof fails each case (None: it passes)."""
    encoded = [
        {k: None if v is None else base64.b64encode(v).decode() for k, v in case.items()}
        for case in cases
    ]
    result: list[int | None] = page.evaluate(
        """async (cases) => {
          const bytes = (s) => s === null ? null : Uint8Array.from(atob(s), (c) => c.charCodeAt(0));
          const out = [];
          for (const c of cases) {
            try {
              await m.lc.verifyProof({ proof: bytes(c.proof), record: bytes(c.record),
                policy: bytes(c.policy), newer: bytes(c.newer),
                consistency: bytes(c.consistency) });
              out.push(null);
            } catch (e) {
              if (!(e instanceof m.lc.VerificationError) || !e.hint) throw e;
              out.push(e.step);
            }
          }
          return out;
        }""",
        encoded,
    )
    return result


def py_step(case: dict[str, bytes | None]) -> int | None:
    try:
        lightclient.verify_proof(
            case["proof"] or b"",
            case["record"] or b"",
            case["policy"] or b"",
            newer=case["newer"],
            consistency=case["consistency"],
        )
    except VerificationError as exc:
        return exc.step
    return None


def base_case(log: LogBuilder, title: str = "first") -> dict[str, bytes | None]:
    return {
        "proof": log.proof(title),
        "record": log.record(title),
        "policy": log.policy,
        "newer": log.checkpoints.get(LARGE),
        "consistency": log.consistency(SMALL, LARGE) if LARGE in log.checkpoints else None,
    }


def mutations(log: LogBuilder) -> Iterator[dict[str, bytes | None]]:
    base = base_case(log)
    yield base
    for which, stride in (
        ("proof", 1),
        ("record", 5),
        ("policy", 1),
        ("newer", 3),
        ("consistency", 3),
    ):
        data = base[which]
        assert data is not None
        for pos in range(0, len(data), stride):
            yield {**base, which: replaced(data, pos, flip(pos, data[pos]))}
    yield {**base, "newer": None}
    yield {**base, "consistency": b""}
    yield {**base, "proof": log.proof("first", LARGE), "newer": log.checkpoints[SMALL]}


def test_browser_agrees_with_the_python_light_client(module_page: Any) -> None:
    """Every byte of the proof and policy, and a stride of the other inputs, flipped:
    the browser fails each at the same step as builder.readers.lightclient."""
    cases = list(mutations(standard_log()))
    assert len(cases) > 900
    got = js_steps(module_page, cases)
    want = [py_step(c) for c in cases]
    disagree = [(i, g, w) for i, (g, w) in enumerate(zip(got, want, strict=True)) if g != w]
    assert not disagree, disagree[:10]
    assert want[0] is None and {1, 2, 3, 5} <= set(want)


def small_order_dream() -> dict[str, Any]:
    """A dream 'signed' by the identity point: (R, S) = (B, 1) verifies every
    message ([S]B = R, and [k]A is the identity). R = B is of prime order, so
    only the key rule refuses it (review r94: with R = the identity, the rule
    on R refused it too, and the test passed with the key rule taken out)."""
    identity = b"\x01" + b"\x00" * 31
    signed = signed_dream("ada", "small order")
    signed["sig"].update(
        publicKey=b64url_encode(identity),
        value=b64url_encode(bytes.fromhex("58" + "66" * 31) + (1).to_bytes(32, "little")),
        keyId=dreamfmt.key_id(identity),
    )
    return signed


def non_canonical_s_dream() -> dict[str, Any]:
    signed = signed_dream("ada", "non-canonical")
    sig = base64.urlsafe_b64decode(signed["sig"]["value"] + "==")
    s = int.from_bytes(sig[32:], "little") + L  # the same point, S >= L
    signed["sig"]["value"] = b64url_encode(sig[:32] + s.to_bytes(32, "little"))
    return signed


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (small_order_dream, "public key is a point of small order"),
        (non_canonical_s_dream, "S >= L"),
    ],
)
def test_small_order_keys_and_non_canonical_s_are_refused_at_step_4(
    module_page: Any, make: Callable[[], dict[str, Any]], message: str
) -> None:
    signed = make()
    log = LogBuilder()
    record_id = hashlib.sha256(b64url_decode_padded(signed["sig"]["value"])).hexdigest()[:16]
    log.add_dream(signed, record_id=record_id)
    log.sign()
    (title,) = log.ids
    case = {"proof": log.proof(title), "record": log.record(title), "policy": log.policy,
            "newer": None, "consistency": None}  # fmt: skip
    assert js_steps(module_page, [case]) == [4] == [py_step(case)]
    detail = module_page.evaluate(
        """async (c) => {
          const b = (s) => Uint8Array.from(atob(s), (ch) => ch.charCodeAt(0));
          const inputs = { proof: b(c.proof), record: b(c.record), policy: b(c.policy) };
          try { await m.lc.verifyProof(inputs); }
          catch (e) { return e.message; }
        }""",
        {k: base64.b64encode(v).decode() for k, v in case.items() if v is not None},
    )
    assert message in detail  # refused by the explicit check, whatever WebCrypto thinks


def b64url_decode_padded(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def test_witness_quorum_in_the_browser(module_page: Any) -> None:
    cosigner = Cosigner.from_seed("witness.example/w1", hashlib.sha256(b"w1").digest())
    log = LogBuilder(witnesses=(PolicyWitness("w1", cosigner.verifier),), quorum="w1")
    log.add_key("ada")
    log.add_dream(signed_dream("ada", "first"))
    size = log.sign()
    bare = {"proof": log.proof("first"), "record": log.record("first"), "policy": log.policy,
            "newer": None, "consistency": None}  # fmt: skip
    text = log.checkpoints[size][: log.checkpoints[size].index(b"\n\n") + 1].decode()
    log.checkpoints[size] += cosign(text, cosigner, 1_700_000_000).encode()
    cosigned = {**bare, "proof": log.proof("first")}
    assert (
        js_steps(module_page, [bare, cosigned]) == [1, None] == [py_step(bare), py_step(cosigned)]
    )


@pytest.mark.parametrize(
    "edit",
    [
        lambda d: d.update(title="changed after signing"),
        lambda d: d["sig"].update(keyId="sha256:" + "0" * 16),
        lambda d: d.update(extra="field"),
        lambda d: d.update(title=""),
        lambda d: d.update(lineage={"generation": 1.0}),
        lambda d: d.update(tags=["a", "a"]),
        lambda d: d.update(summary="bidi \u202e override"),
    ],
)
def test_lying_log_dreams_fail_step_4_in_the_browser(
    module_page: Any, edit: Callable[[dict[str, Any]], None]
) -> None:
    log = lying_log(edit)
    (title,) = log.ids
    case = {"proof": log.proof(title), "record": log.record(title), "policy": log.policy,
            "newer": None, "consistency": None}  # fmt: skip
    assert js_steps(module_page, [case]) == [4] == [py_step(case)]


def test_record_with_float_index_fails_step_2_as_in_python(module_page: Any) -> None:
    log = standard_log()
    record = json.loads(log.record("first"))
    text = json.dumps(record, indent=2).replace('"index": 1,', '"index": 1.0,')
    case = {**base_case(log), "record": text.encode()}
    assert js_steps(module_page, [case]) == [2] == [py_step(case)]


def policy_samples() -> list[bytes]:
    log = LogBuilder().signer.verifier.vkey
    w = [
        Cosigner.from_seed(f"witness.example/w{i}", hashlib.sha256(b"w%d" % i).digest())
        for i in range(3)
    ]
    w0, w1, w2 = (c.verifier.vkey for c in w)
    good = [
        f"log {log}\nquorum none\n",
        f"# a comment\n\n  log\t{log}  https://example.org/log/ \nquorum none\n",
        f"log {log}\nwitness a {w0}\nwitness b {w1}\nwitness c {w2}\n"
        "group two 2 a b c\ngroup any1 any two c\nquorum any1\n",
        f"log {log}\nwitness a {w0}\nwitness b {w1}\ngroup g all a b\nquorum g\n",
        "quorum none\n",
    ]
    bad = [
        b"",
        f"log {log}\nquorum none".encode(),  # no final newline
        f"log {log}\r\nquorum none\n".encode(),
        f"log {log}\n".encode(),  # no quorum
        f"log {log}\nquorum none\nquorum none\n".encode(),
        f"log {log}\nlog {log}\nquorum none\n".encode(),
        f"log {log}\nwitness a {w0}\nwitness a {w1}\nquorum a\n".encode(),
        f"log {log}\nwitness a {w0}\nwitness b {w0}\nquorum a\n".encode(),
        f"log {log}\nwitness a {w0}\ngroup g 2 a\nquorum g\n".encode(),
        f"log {log}\nwitness a {w0}\ngroup g 0 a\nquorum g\n".encode(),
        f"log {log}\nwitness a {w0}\ngroup g 01 a\nquorum g\n".encode(),
        f"log {log}\nwitness a {w0}\ngroup g any a a\nquorum g\n".encode(),
        f"log {log}\nwitness a {w0}\ngroup g any none\nquorum g\n".encode(),
        f"log {log}\ngroup g any a\nwitness a {w0}\nquorum g\n".encode(),
        f"log {log}\nquorum nobody\n".encode(),
        f"log {w0}\nquorum none\n".encode(),  # a witness key as a log key
        f"log {log}\nwitness a {log}\nquorum a\n".encode(),
        f"log {log} a b\nquorum none\n".encode(),
        f"log {log}\nwitness none {w0}\nquorum none\n".encode(),
        f"logs {log}\nquorum none\n".encode(),
        f"log {log[:-2]}A=\nquorum none\n".encode(),
        f"log {log}\nquorum none\n\x00".encode(),
        b"log \xff\nquorum none\n",
    ]
    return [g.encode() for g in good] + bad


def test_policy_parsing_agrees_with_python(module_page: Any) -> None:
    samples = policy_samples()
    got = module_page.evaluate(
        """async (samples) => {
          const out = [];
          for (const s of samples) {
            const bytes = Uint8Array.from(atob(s), (ch) => ch.charCodeAt(0));
            try { await m.tlog.parsePolicy(bytes); out.push(true); }
            catch (e) {
              if (!(e instanceof m.tlog.VerificationError)) throw e;
              out.push(false);
            }
          }
          return out;
        }""",
        [base64.b64encode(s).decode() for s in samples],
    )
    want = []
    for s in samples:
        try:
            parse_policy(s)
            want.append(True)
        except DreampoolError:
            want.append(False)
    assert got == want
    assert want.count(True) == 5


def test_merkle_vectors(module_page: Any) -> None:
    """transparency-dev/merkle's inclusion and consistency vectors, in merkle.js."""
    module_page.evaluate(
        """async () => {
          m.merkle = await import(new URL("../static/merkle.js", location.href).href);
        }"""
    )
    vectors = []
    for path in sorted((VECTORS / "merkle").rglob("*.json")):
        v = json.loads(path.read_text(encoding="utf-8"))
        kind = path.relative_to(VECTORS / "merkle").parts[0]
        ints = ("leafIdx", "treeSize") if kind == "inclusion" else ("size1", "size2")
        vectors.append({**v, "kind": kind, "name": str(path), **{k: str(v[k]) for k in ints}})
    assert len(vectors) == 196
    got = module_page.evaluate(
        """async (vectors) => {
          const b = (s) => Uint8Array.from(atob(s), (ch) => ch.charCodeAt(0));
          const out = [];
          for (const v of vectors) {
            const proof = (v.proof || []).map(b);
            try {
              if (v.kind === "inclusion") {
                await m.merkle.verifyInclusion(b(v.leafHash), BigInt(v.leafIdx),
                  BigInt(v.treeSize), proof, b(v.root));
              } else {
                await m.merkle.verifyConsistency(BigInt(v.size1), BigInt(v.size2),
                  b(v.root1), b(v.root2), proof);
              }
              out.push([v.name, false]);
            } catch (e) {
              if (!(e instanceof m.merkle.VerificationError)) throw e;
              out.push([v.name, true]);
            }
          }
          return out;
        }""",
        vectors,
    )
    want = {v["name"]: v["wantErr"] for v in vectors}
    wrong = [name for name, failed in got if failed != want[name]]
    assert not wrong, wrong
    assert sum(want.values()) > 150  # mostly mutated negatives


def test_ed25519_and_signed_note_vectors(module_page: Any) -> None:
    """RFC 8032 §7.1 TESTs 1-3 (and each with a flipped bit), and the C2SP signed-note
    example, through crypto.js and tlog.js."""
    rfc = json.loads((VECTORS / "ed25519" / "rfc8032-7.1.json").read_text(encoding="utf-8"))
    note_text = (VECTORS / "note" / "signed-note-example.txt").read_text(encoding="utf-8")
    vkey = (VECTORS / "note" / "signed-note-example.vkey").read_text(encoding="utf-8").strip()
    got = module_page.evaluate(
        """async ([vectors, note, vkey]) => {
          const crypto = await import(new URL("../static/crypto.js", location.href).href);
          const h = (s) => Uint8Array.from(s.match(/../g) || [], (x) => parseInt(x, 16));
          const out = [];
          for (const v of vectors) {
            const sig = h(v.signature);
            await crypto.ed25519Verify(h(v.publicKey), h(v.message), sig);
            sig[5] ^= 1;
            try {
              await crypto.ed25519Verify(h(v.publicKey), h(v.message), sig);
              out.push("flipped signature verifies");
            } catch (e) { out.push(e.message); }
          }
          const key = await m.tlog.parseLogKey(vkey);
          const opened = await m.tlog.openNote(new TextEncoder().encode(note), [key]);
          out.push(opened.text);
          return out;
        }""",
        [rfc["vectors"], note_text, vkey],
    )
    assert got == ["signature does not verify"] * 3 + ["This is an example message.\n"]


def test_the_browser_client_over_every_protocol_vector(module_page: Any) -> None:
    """docs/vectors through the site's own modules in Chromium (issue 20: the
    browser client passes every vector): each positive dream verifies, each
    negative log case fails at the step docs/vectors names (the Python client
    agrees), and crypto.js refuses the universal signature under each of the
    48 public keys docs/protocol.md §1 refuses."""
    from tests.conftest import REPO

    docs = REPO / "docs" / "vectors"
    values = json.loads((docs / "vectors.json").read_text(encoding="utf-8"))
    cases: list[dict[str, bytes | None]] = []
    want: list[int | None] = []
    site = docs / "site"
    for d in values["dreams"]:
        folder = site / "dreams" / d["id"]
        cases.append(
            {
                "proof": (folder / "proof.tlog-proof").read_bytes(),
                "record": (folder / "record.json").read_bytes(),
                "policy": (site / "log" / "policy").read_bytes(),
                "newer": None,
                "consistency": None,
            }
        )
        want.append(None)
    large = docs / "large"
    for d in values["large"]["dreams"]:
        if d["erased"]:
            continue  # an erased dream has a proof and no record: nothing to verify here
        folder = large / "dreams" / d["id"]
        cases.append(
            {
                "proof": (folder / "proof.tlog-proof").read_bytes(),
                "record": (folder / "record.json").read_bytes(),
                "policy": (large / "log" / "policy").read_bytes(),
                "newer": None,
                "consistency": None,
            }
        )
        want.append(None)
    witnessed_id = values["witnessed"]["dream"]
    cases.append(  # a proof under a witness-cosigned checkpoint, policy quorum w1
        {
            "proof": (docs / "witnessed" / "proof.tlog-proof").read_bytes(),
            "record": (site / "dreams" / witnessed_id / "record.json").read_bytes(),
            "policy": (docs / "witnessed" / "policy").read_bytes(),
            "newer": None,
            "consistency": None,
        }
    )
    want.append(None)
    cases.append(  # the same dream's uncosigned proof under that policy: quorum not met
        {
            "proof": (site / "dreams" / witnessed_id / "proof.tlog-proof").read_bytes(),
            "record": (site / "dreams" / witnessed_id / "record.json").read_bytes(),
            "policy": (docs / "witnessed" / "policy").read_bytes(),
            "newer": None,
            "consistency": None,
        }
    )
    want.append(1)
    negative = docs / "negative"
    for case in values["negative"]["cases"]:
        cases.append(
            {
                "proof": (negative / case["name"] / "proof.tlog-proof").read_bytes(),
                "record": (negative / case["name"] / "record.json").read_bytes(),
                "policy": (negative / "log" / "policy").read_bytes(),
                "newer": None,
                "consistency": None,
            }
        )
        want.append(case["refusedAtStep"])
    assert len(want) >= 11
    assert js_steps(module_page, cases) == want
    assert [py_step(c) for c in cases] == want
    keys = values["negative"]["refusedPublicKeysHex"]
    assert len(keys) == 48
    verdicts = module_page.evaluate(
        """async (keys) => {
          const crypto = await import(new URL("../static/crypto.js", location.href).href);
          const h = (s) => Uint8Array.from(s.match(/../g), (x) => parseInt(x, 16));
          // R = B, S = 1: of prime order, so only the key rule refuses it (r94)
          const sig = new Uint8Array(64); sig.fill(0x66, 1, 32); sig[0] = 0x58; sig[32] = 1;
          const out = [];
          for (const k of keys) {
            try { await crypto.ed25519Verify(h(k), new TextEncoder().encode("any"), sig);
                  out.push("accepted"); }
            catch (e) { out.push("refused"); }
          }
          return out;
        }""",
        keys,
    )
    assert verdicts == ["refused"] * 48


def test_the_browser_refuses_what_the_unicode_policy_refuses(module_page: Any) -> None:
    """docs/protocol.md §1.1 in Chromium: every dream of docs/vectors/negative/unicode.json
    is refused at the field it names, and the browser's unicodepolicy.js gives the same
    verdict as builder.formats.unicodepolicy on the accepted and refused samples and on one
    code point of every refused range (at its start and end), after a letter."""
    from builder.formats import unicodepolicy
    from tests.conftest import REPO
    from tests.test_unicodepolicy import ACCEPTED, REFUSED_TEXT

    cases = json.loads((REPO / "docs" / "vectors" / "negative" / "unicode.json").read_text())
    got = module_page.evaluate(
        "(dreams) => dreams.map((d) => m.lc.validateDream(d))", [c["dream"] for c in cases]
    )
    for case, problems in zip(cases, got, strict=True):
        assert [p.split(":")[0] for p in problems] == [case["pointer"]], (case["name"], problems)
    # docs/vectors/accepted.json: what §1 and §1.1 allow, the browser allows.
    accepted = json.loads((REPO / "docs" / "vectors" / "accepted.json").read_text())
    got = module_page.evaluate(
        "(dreams) => dreams.map((d) => m.lc.validateDream(d))", [c["dream"] for c in accepted]
    )
    assert {c["name"]: p for c, p in zip(accepted, got, strict=True) if p} == {}
    texts = [t for t, _ in ACCEPTED] + [t for t, _ in REFUSED_TEXT]
    texts += [f"a{chr(cp)}" for lo, hi in unicodepolicy.REFUSED for cp in (lo, hi)]
    texts += ["a\U000e0100\u180b\U0001bca0", "\u0915\u094d\u200c\u0937"]
    texts = [t for t in texts if not any(0xD800 <= ord(c) <= 0xDFFF for c in t)]  # no JSON
    js = module_page.evaluate(
        """async (texts) => {
          const u = await import(new URL("../static/unicodepolicy.js", location.href).href);
          return texts.map((t) => { const r = u.firstRefused(t); return r ? r.index : null; });
        }""",
        texts,
    )
    want = [(r.index if (r := unicodepolicy.first_refused(t)) else None) for t in texts]
    assert js == want
