# ruff: noqa: F811  (pytest fixtures imported from test_gate and test_publish_flow)
"""Review of the trust boundary (dae8c37..23bab10, THREATS.md T44–T49): what a
pull request can still do. Each test fails until its defect is fixed."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from builder import build as buildmod
from builder.errors import InputError
from builder.formats.note import parse_private_key
from tests.pools import PoolFixture
from tests.redteam import signed, submit
from tests.redteam.test_gate import Run, _check, _commit
from tests.test_publish_flow import World, contributor_dream, world  # noqa: F401 (fixture)


def test_the_check_workflow_runs_the_gate(world: World) -> None:
    """T49: the gate exists (`check --base`) but the check workflow that
    `dreampool init` writes runs `dreampool check` without --base (and checks
    out one commit, so HEAD^1 is not there): a pull request adding `pip.py` at
    the repository's root (run by `python -m pip install` in the publish
    workflow's install step, which can rewrite the installed dreampool the Build
    step runs with DREAMPOOL_LOG_KEY), or raising an existing key's tier,
    passes the check maintainers rely on."""
    contributor_dream(world, "mallory", "dream/pip", "An honest-looking dream")
    clone = world.root / "contrib-mallory"
    (clone / "pip.py").write_text("import os  # runs on `python -m pip install`\n")
    (clone / "sitecustomize.py").write_text("import os\n")
    world.shell.git("add", "-A", cwd=clone)
    world.shell.git("commit", "--quiet", "-m", "tidy", cwd=clone)
    world.shell.git("push", "--quiet", "origin", "dream/pip", cwd=clone)
    result = world.check_pull_request("dream/pip")
    assert not result.ok, result.log
    assert "pip.py" in result.log


def test_a_new_key_files_added_field_is_checked(repo: PoolFixture, run: Run) -> None:
    """T49, T15: a contributor's own key file is checked for its tier, its name
    and its public key, but `added` (shown on the author's page, in the Keys
    table) may be any YAML: phone numbers, e-mail addresses, any text, none of
    it signed or redacted. `check --base` passes it and the build publishes it."""
    root = repo.content.parent
    submit(repo, signed("carol", title="A new voice"))
    for path in root.glob("in-*.json"):
        path.unlink()
    key = next(p for p in (repo.content / "keys").glob("*.yaml") if "carol" in p.read_text())
    key.write_text(
        re.sub(r"added: .*", "added: 'call +1 555 867 5309 or mail victim@example.com'",
               key.read_text())
    )  # fmt: skip
    _commit(root, "pull request")
    result = _check(run)
    assert result.code == 1 and f"{key.relative_to(root)}: /added" in result.err, result
    with pytest.raises(InputError, match="/added"):  # merged anyway: nothing is published
        buildmod.build(repo.content, root / "site", signer=parse_private_key(repo.log_key))
    shown = [p for p in (root / "site").rglob("*") if p.is_file() and b"867 5309" in p.read_bytes()]
    assert shown == []


def test_an_erasure_logged_by_a_build_that_died_leaves_no_residue(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """T48: the old generation is retired only by the build that logs the
    erasure (``log.erased_now``). If that build dies after signing (killed, out
    of memory, the publish job's timeout, any error in the site stage: the
    publish workflow commits the signed state even when the build failed), the
    next build logs nothing new, never retires, and the generation it leaves
    behind still holds the erased dream's title and text."""
    from builder.log import erase
    from builder.site import writer
    from tests.pools import make_pool
    from tests.redteam import tree
    from tests.redteam.test_boundary import CANARIES

    tp = make_pool(tmp_path)
    (gone,) = submit(tp, signed("ada", title=f"The {CANARIES[0]}"))
    submit(tp, signed("bob", title="Bob stays"))
    site = tmp_path / "site"
    signer = parse_private_key(tp.log_key)
    buildmod.build(tp.content, site, signer=signer)
    submit(tp, signed("bob", title="Bob again"))
    buildmod.build(tp.content, site, signer=signer)  # both generations show the dream
    for path in tmp_path.glob("in-*.json"):
        path.unlink()
    erase.erase(tp.content, gone, "author-request")

    def killed(self: writer.SiteWriter) -> None:
        raise KeyboardInterrupt  # stands in for SIGKILL during the site stage

    with monkeypatch.context() as m:
        m.setattr(writer.SiteWriter, "commit", killed)
        with pytest.raises(KeyboardInterrupt):
            buildmod.build(tp.content, site, signer=signer)  # the erasure is signed
    buildmod.build(tp.content, site, signer=signer)
    holders = [p for p, data in tree(tmp_path).items() if CANARIES[0].encode() in data]
    assert holders == []


def test_an_erasure_another_build_logged_leaves_no_residue(tmp_path: Path) -> None:
    """T48: the same gap without a crash. The erasure is logged by one build
    (the publish workflow); a maintainer's checkout that pulls it and builds
    its own output (operators.md: `dreampool build --out /tmp/site`, no key
    needed when nothing is new) logs nothing, so it never retires, and its
    other generation keeps the erased dream's text under the checkout."""
    from builder.log import erase
    from tests.pools import make_pool
    from tests.redteam import tree
    from tests.redteam.test_boundary import CANARIES

    tp = make_pool(tmp_path)
    (gone,) = submit(tp, signed("ada", title=f"The {CANARIES[0]}"))
    submit(tp, signed("bob", title="Bob stays"))
    signer = parse_private_key(tp.log_key)
    preview = tmp_path / "preview"
    buildmod.build(tp.content, tmp_path / "site", signer=signer)
    buildmod.build(tp.content, preview, signer=None)
    submit(tp, signed("bob", title="Bob again"))
    buildmod.build(tp.content, tmp_path / "site", signer=signer)
    buildmod.build(tp.content, preview, signer=None)  # both preview generations show it
    for path in tmp_path.glob("in-*.json"):
        path.unlink()
    erase.erase(tp.content, gone, "author-request")
    buildmod.build(tp.content, tmp_path / "site", signer=signer)  # logs the erasure
    buildmod.build(tp.content, preview, signer=None)  # nothing new to log
    holders = [p for p, data in tree(tmp_path).items() if CANARIES[0].encode() in data]
    assert holders == []


def test_a_file_name_that_is_not_utf8_is_named_not_a_traceback(
    repo: PoolFixture, run: Run, tmp_path: Path
) -> None:
    """T49, T41: a pull request adding a file whose name is not UTF-8 (git
    stores any bytes). `check --base` names it on stderr, but writing the
    workflow's summary (`--summary "$GITHUB_STEP_SUMMARY"`) ends in a
    UnicodeEncodeError traceback: the gate's paths are not escaped as the
    whole-pool check's are (pool._scan: unicode_escape)."""
    root = repo.content.parent
    (root / os.fsdecode(b"content/dreams/\xff.json")).write_bytes(b"{}")
    _commit(root, "pull request")
    summary = tmp_path / "summary.md"
    result = _check(run, "--format", "github", "--summary", summary)
    assert result.code == 1
    assert "content/dreams/" in summary.read_text(encoding="utf-8")


def test_a_new_key_that_breaks_an_old_one_is_named(repo: PoolFixture, run: Run) -> None:
    """T49, T08: a pull request adds only a key file, `author: Ada`, with a key
    id that sorts before ada's (one try in two). `check --base` fails, but the
    one file it names is ada's existing key file ("author name looks like
    'Ada'"), which the pull request did not touch: it reads as an old problem
    of the pool, not as this pull request's. Merged, every later build is
    refused whole ("fix the key directory first") until a maintainer finds the
    new file."""
    from builder.formats import ed25519
    from builder.formats.b64 import b64url_encode
    from builder.formats.dream import key_id
    from tests.redteam import seed_of

    root = repo.content.parent
    ada = key_id(ed25519.public_key_of(seed_of("ada")))
    n = 0
    while True:
        public = ed25519.public_key_of(seed_of(f"squatter {n}"))
        if key_id(public) < ada:
            break
        n += 1
    new = repo.content / "keys" / f"{key_id(public)[7:]}.yaml"
    new.write_text(f'author: "Ada"\npublicKey: {b64url_encode(public)}\ntier: guest\n'
                   "added: '2026-01-01'\n")  # fmt: skip
    _commit(root, "pull request")
    result = _check(run)
    assert result.code == 1
    assert str(new.relative_to(root)) in result.err, result.err


def test_a_key_file_of_yaml_aliases_is_refused_quickly(repo: PoolFixture) -> None:
    """T49, T02: YAML aliases (anchors are SafeLoader's) make a 900-byte key
    file a list of 2^40 strings; `_key_entry` calls `str()` on `publicKey`
    (and on `added`) before any type check, so `check --base` (and, once
    merged, every build: load_keys runs first) spends hours and all memory on
    it. The check job times out naming nothing; the publish job the same,
    every run, until someone finds the file."""
    import subprocess
    import sys

    from tests.conftest import REPO

    root = repo.content.parent
    items = ['&a0 ["xxxxxxxxxxxxxxxx"]'] + [f"&a{i} [*a{i - 1}, *a{i - 1}]" for i in range(1, 40)]
    key = repo.content / "keys" / "00000000000000aa.yaml"
    key.write_text("author: x\npublicKey: [" + ", ".join(items) + "]\ntier: guest\nadded: x\n")
    _commit(root, "pull request")
    try:
        result = subprocess.run(
            [sys.executable, "-m", "builder", "check", "--content", "content", "--base", "HEAD^1"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=30,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
    except subprocess.TimeoutExpired:
        pytest.fail("check --base did not finish in 30 s on a 900-byte key file")
    assert result.returncode == 1
    assert "content/keys/00000000000000aa.yaml" in result.stderr


def test_a_store_damaged_where_reads_do_not_look_costs_time_only(tmp_path: Path) -> None:
    """T44/buildcache ("any damage is a miss, never an error"): damage is
    caught when a section is opened or read, but not when rows are written.
    A store whose free-page list is damaged (a power cut under
    `synchronous=NORMAL` in rollback-journal mode can do it; here one field of
    the freelist trunk page) reads fine, then `save()` raises a bare
    `sqlite3.DatabaseError` after the site went live and the checkpoint was
    signed: the build exits with a traceback, and so does every later build,
    until someone deletes the folder by hand."""
    import sqlite3
    import struct

    from tests.pools import make_pool

    tp = make_pool(tmp_path)
    submit(tp, signed("ada", title="One"))
    signer = parse_private_key(tp.log_key)
    site = tmp_path / "site"
    buildmod.build(tp.content, site, signer=signer)
    store = tmp_path / ".site.builds" / "cache" / "store.sqlite"
    db = sqlite3.connect(store, isolation_level=None)
    db.execute("CREATE TABLE junk (x BLOB)")
    db.executemany("INSERT INTO junk VALUES (?)", [(b"z" * 3000,) for _ in range(50)])
    db.execute("DROP TABLE junk")  # 51 free pages
    db.close()
    data = bytearray(store.read_bytes())
    page_size = struct.unpack(">H", data[16:18])[0]
    trunk = struct.unpack(">I", data[32:36])[0]
    offset = (trunk - 1) * page_size
    data[offset + 4 : offset + 8] = struct.pack(">I", 0xFFFFFF)  # its count of leaf pages
    store.write_bytes(bytes(data))
    for title in ("Two", "Three"):
        submit(tp, signed("bob", title=title))
        report = buildmod.build(tp.content, site, signer=signer)  # raised DatabaseError
        assert len(report.admitted) == 1


@pytest.mark.parametrize(
    "text",
    ["? [1, 2]\n: x\n", "author: x\npublicKey: " + "[" * 5000 + "]" * 5000 + "\n"],
    ids=["unhashable-key", "deep-nesting"],
)
def test_a_key_file_yaml_cannot_end_check_in_a_traceback(
    repo: PoolFixture, run: Run, text: str
) -> None:
    """T49, T41: `_strict_yaml` catches YAMLError only. Its duplicate-key check
    (`key in result`) meets a YAML complex key (`? [1, 2]`): a bare TypeError
    ("unhashable type: 'list'"); 5,000 nested brackets: a RecursionError in
    PyYAML's constructor. `check --base` shows a traceback naming no file.
    Merged, every build ends in the same traceback (load_keys runs first)."""
    root = repo.content.parent
    (repo.content / "keys" / "00000000000000ab.yaml").write_text(text)
    _commit(root, "pull request")
    result = _check(run)
    assert result.code == 1
    assert "content/keys/00000000000000ab.yaml" in result.err


def test_a_rotation_statement_comes_with_its_key(repo: PoolFixture, run: Run) -> None:
    """T49 (low): the gate lets a contributor add "the rotation statement of
    that new key", but checks nothing of an added rotation file unless a key
    file names it: any bytes pass under any 16-hex name, and stay in the
    pool. The name squats the one path the real key's author will need
    (their pull request then *changes* a file, and is refused)."""
    root = repo.content.parent
    (repo.content / "rotations").mkdir(exist_ok=True)
    (repo.content / "rotations" / "0123456789abcdef.json").write_bytes(b"not even JSON")
    _commit(root, "pull request")
    result = _check(run)
    assert result.code == 1
    assert "content/rotations/0123456789abcdef.json" in result.err
