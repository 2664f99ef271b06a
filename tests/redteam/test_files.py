"""File attacks (THREATS.md T11–T14, T42): names, paths and links that try to lead
the pool's reads and writes somewhere else, or to break the site's file tree.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from builder.cli import main as cli
from builder.content import pool
from builder.errors import DreampoolError
from builder.formats import dream as dreamfmt
from builder.log import erase, logbuild
from builder.site import model, writer
from tests.pools import PoolFixture, make_pool
from tests.redteam import build, dump, signed, submit, tree

WINDOWS_RESERVED = {"con", "prn", "aux", "nul"} | {
    f"{port}{n}" for port in ("com", "lpt") for n in range(10)
}
SAFE_COMPONENT = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]*")
# Two tags whose 48-bit short slugs collide, found by a birthday search of 2^24
# hashes (seconds of work): before the fix, the build stopped at an assert.
COLLIDING = ("Tag 1455831", "Tag 14532943")


@pytest.fixture
def tp(tmp_path: Path) -> PoolFixture:
    return make_pool(tmp_path)


@contextmanager
def deadline(seconds: int) -> Iterator[None]:
    """Fail (rather than hang the suite) if the block runs longer than ``seconds``."""

    def expire(signum: int, frame: Any) -> None:
        raise TimeoutError(f"still running after {seconds}s: a read blocked")

    old = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def check_site_paths(site: Path) -> list[str]:
    """Every path of the site is a plain relative path that any file system can hold."""
    paths = []
    for path in site.rglob("*"):
        rel = path.relative_to(site)
        for part in rel.parts:
            assert SAFE_COMPONENT.fullmatch(part), rel
            assert not part.endswith((".", " ")), rel
            assert part.split(".")[0].lower() not in WINDOWS_RESERVED, rel
        assert not path.is_symlink(), rel
        paths.append(str(rel))
    folded = [p.casefold() for p in paths]
    assert len(set(folded)) == len(folded), "two site paths differ only by case"
    return paths


HOSTILE_NAMES = [
    "../../escape",
    "/etc/passwd",
    "C:\\Windows\\win.ini",
    "..",
    ".",
    "con",
    "COM3",
    "lpt9",
    "com2",
    "aux.txt",
    "x:stream",
    "a/b",
    "Rust",
    "rust",
    "index",
    "feed",
    "x-0cff3c9b1cde",
    "%2e%2e%2f",
]


def test_names_and_ids_never_pick_a_path_outside_or_unsafe(tp: PoolFixture, tmp_path: Path) -> None:
    """T11, T13, T14: author names, tags and lineage parents that look like paths
    (traversal, absolute, drive letters, NTFS streams, device names, case twins)
    become ids or hashed slugs; the site holds only portable relative paths, and
    nothing is written beside it."""
    dreams = [
        signed(
            name,
            title=f"Dream of {name}",
            tags=HOSTILE_NAMES[:8],
            lineage={"parent": "../../../../tmp/pwned", "generation": 1},
        )
        for name in HOSTILE_NAMES[:6]
    ]
    dreams.append(signed("ada", tags=HOSTILE_NAMES[8:16]))
    dreams.append(signed("bob", tags=HOSTILE_NAMES[14:]))
    submit(tp, *dreams)
    outside = {p.name for p in tmp_path.iterdir()}
    build(tp, tmp_path / "site")
    # The site, and its generations and cache (builder.site.writer), nothing else.
    assert {p.name for p in tmp_path.iterdir()} == outside | {"site", ".site.builds"}
    paths = check_site_paths(tmp_path / "site")
    assert not [p for p in paths if "pwned" in p or "escape" in p or "passwd" in p]
    for path in (tmp_path / "site").rglob("*.html"):
        assert 'href="../../../../tmp/pwned' not in path.read_text(), path
    assert (tmp_path / "site" / "tags" / "rust").is_dir()  # the plain word keeps its name
    assert not (tmp_path / "site" / "tags" / "Rust").exists()


@pytest.mark.parametrize(
    "rel",
    [
        "../x",
        "/etc/x",
        "a/../../x",
        "dreams/../../x",
        "a\\..\\b",
        "",
        # Regressions: pathlib drops "." and empty segments, so these aliased other
        # paths (two writers of one file) or named the output folder itself.
        ".",
        "./a",
        "a/./b",
        "a//b",
        "a/",
        "a\x00b",
    ],
)
def test_writer_refuses_unsafe_plan_paths(tmp_path: Path, rel: str) -> None:
    """T11: the last wall: whatever a stage puts in the plan, the writer refuses a
    path that is absolute or climbs, before any byte is written."""
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "keep").write_text("old site")
    with pytest.raises(writer.PlanError):
        writer.write_tree(tmp_path / "site", {"index.html": b"new", rel: b"x"})
    assert tree(tmp_path / "site") == {"keep": b"old site"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["site"]


def test_symlinked_dream_pointing_outside_is_not_followed(tp: PoolFixture, tmp_path: Path) -> None:
    """T12: a symlink to a valid dream kept outside the pool is reported, never read."""
    obj = signed(title="Kept outside the pool")
    outside = tmp_path / "elsewhere.json"
    outside.write_bytes(dump(obj))
    dream_id = dreamfmt.parse(dump(obj), "x").id
    submit(tp, signed("ada", title="Registers the key"))
    (tp.content / "dreams" / f"{dream_id}.json").symlink_to(outside)
    problems, scanned = pool.check(tp.content)
    assert dream_id not in {s.dream.id for s in scanned}
    assert any("is a symlink" in p.rule for p in problems)
    report = build(tp, tmp_path / "site")
    assert dream_id not in report.admitted
    assert not (tmp_path / "site" / "dreams" / dream_id).exists()


@pytest.mark.parametrize("folder", pool.LAYOUT)
def test_symlinked_pool_folder_is_refused_and_nothing_is_written_through_it(
    tp: PoolFixture, tmp_path: Path, folder: str
) -> None:
    """T12: a pull request that turns ``content/dreams`` (or ``log``, ``keys`` …)
    into a symlink would lead reads, and the salt, leaf and checkpoint writes, out
    of the pool. check reports it; build, submit and erase refuse to start."""
    (first,) = submit(tp, signed("ada", title="Logged before the attack"))
    build(tp, tmp_path / "site")
    (tp.content / "rotations").mkdir(exist_ok=True)
    (tp.content / "erasures").mkdir(exist_ok=True)
    target = tp.content / folder
    elsewhere = tmp_path / "elsewhere"
    shutil.move(target, elsewhere)
    target.symlink_to(elsewhere, target_is_directory=True)
    submit_copy = tmp_path / "new.json"
    submit_copy.write_bytes(dump(signed("bob", title="Arrives during the attack")))
    before = tree(elsewhere)
    problems, _ = pool.check(tp.content)
    assert any(p.file == str(target) and "is a symlink" in p.rule for p in problems), problems
    with pytest.raises(DreampoolError):
        build(tp, tmp_path / "site")
    with pytest.raises(DreampoolError):
        pool.submit(tp.content, [submit_copy])
    with pytest.raises(DreampoolError):
        erase.erase(tp.content, first, "legal")
    assert tree(elsewhere) == before


def _log_file_cases(tp: PoolFixture) -> dict[str, Path]:
    cp = next((tp.content / "log" / "checkpoints").iterdir())
    salt = next((tp.content / "dreams").glob("*.salt"))
    return {
        "checkpoint": cp,
        "leaves": tp.content / "log" / "leaves" / "000000.jsonl",
        "history": tp.content / "log" / "history.jsonl",
        "policy": tp.content / "log" / "policy",
        "salt": salt,
        "pool.yaml": tp.content / "pool.yaml",
    }


@pytest.mark.parametrize(
    "which", ["checkpoint", "leaves", "history", "policy", "salt", "pool.yaml"]
)
def test_symlinked_state_file_is_refused_not_followed(
    tp: PoolFixture, tmp_path: Path, which: str
) -> None:
    """T12: each file of the log state or config replaced by a symlink to an
    identical copy outside: refused with an error of the project's family (before,
    a symlinked pool.yaml, salt or erasure was a bare OSError traceback)."""
    submit(tp, signed("ada"))
    build(tp, tmp_path / "site")
    path = _log_file_cases(tp)[which]
    copy = tmp_path / f"copy-{which}"
    shutil.copyfile(path, copy)
    path.unlink()
    path.symlink_to(copy)
    with pytest.raises(DreampoolError, match="symlink"):
        build(tp, tmp_path / "site")
    problems, scanned = pool.check(tp.content)
    with pytest.raises(DreampoolError, match="symlink"):
        if not problems:
            logbuild.verify_state(tp.content, scanned)
        else:
            raise DreampoolError("; ".join(p.rule for p in problems))


def test_fifo_in_content_never_blocks_a_build(tp: PoolFixture, tmp_path: Path) -> None:
    """T42: a FIFO where a file should be (a salt, the config, a dream) would make
    a plain open() wait for a writer for ever; the pool refuses it at once, and
    erase, which reads every file of the pool for residue, skips it."""
    (dream_id,) = submit(tp, signed("ada"))
    build(tp, tmp_path / "site")
    salt = tp.content / "dreams" / f"{dream_id}.salt"
    salt.unlink()
    os.mkfifo(salt)
    os.mkfifo(tp.content / "dreams" / ("f" * 16 + ".json"))
    with deadline(20):
        with pytest.raises(DreampoolError, match="not a regular file"):
            build(tp, tmp_path / "site")
        problems, _ = pool.check(tp.content)
        assert any("unexpected entry" in p.rule for p in problems)
        os.mkfifo(tp.content / "notes.fifo")  # erase searches every file for residue
        salt.unlink()
        for path in tp.content.parent.glob("in-*.json"):
            path.unlink()
        erase.erase(tp.content, dream_id, "legal")
        (tp.content / "pool.yaml").unlink()
        os.mkfifo(tp.content / "pool.yaml")
        with pytest.raises(DreampoolError, match="not a regular file"):
            pool.load_config(tp.content)


def _valid_names(dream_id: str) -> list[str]:
    upper = dream_id.upper() if dream_id.upper() != dream_id else "ABCDEF" + dream_id[6:]
    return [
        f"{dream_id}.json\u202egnp.exe",  # bidi override
        f"\u202e{dream_id}.json",
        f"{dream_id}\u200b.json",  # zero width
        f"{dream_id}.json\x07",  # control character
        f"{dream_id}.json:evil",  # NTFS alternate data stream
        f"{dream_id}.json::$DATA",
        f"{upper}.json",  # case-folding twin
        f"{dream_id}.JSON",
        f"{dream_id}.json.",  # Windows drops a trailing dot
        f"{dream_id}.json ",
        "CON",
        "con.json",
        "NUL.yaml",
        "..json",
    ]


def test_hostile_file_names_in_content_are_reported_never_read(tp: PoolFixture, run: Any) -> None:
    """T13: each file holds a valid dream, so reading it would admit it. Only the
    exact id name is read; every other name is reported, escaped so that no
    bidi or control character reaches the terminal or the CI annotation."""
    obj = signed(title="Filed under hostile names")
    dream_id = dreamfmt.parse(dump(obj), "x").id
    submit(tp, signed("ada", title="Registers the key"))
    names = _valid_names(dream_id)
    for name in names:
        (tp.content / "dreams" / name).write_bytes(dump(obj))
        (tp.content / "keys" / name).write_bytes(b"author: ada\n")
    problems, scanned = pool.check(tp.content)
    assert dream_id not in {s.dream.id for s in scanned}
    reported = [p for p in problems if "unexpected entry" in p.rule]
    assert len(reported) == 2 * (len(names) - 1)  # "..json" is hidden (a dotfile), not read
    for problem in problems:
        assert str(problem).isascii() and str(problem).isprintable(), repr(str(problem))
    for fmt in ("text", "github"):
        result = run("check", "--content", tp.content, "--format", fmt)
        assert result.code == 1
        for line in (result.out + result.err).splitlines():
            assert line.isprintable() and not re.search("[\u202a-\u202e\u200b]", line), line


def test_colliding_slugs_do_not_stop_the_build(tp: PoolFixture, tmp_path: Path) -> None:
    """T14 (regression): two names whose 48-bit slugs collide, as tags of one dream
    and as two authors. Before the fix the build stopped at an assert, after the
    dream was logged, so one guest submission stopped every later build."""
    assert model.slug(COLLIDING[0]) == model.slug(COLLIDING[1])
    submit(
        tp,
        signed("ada", tags=list(COLLIDING)),
        signed(COLLIDING[0], title="First twin"),
        signed(COLLIDING[1], title="Second twin"),
    )
    build(tp, tmp_path / "site")
    site = tmp_path / "site"
    check_site_paths(site)
    for kind in ("tags", "authors"):
        twins = [p for p in (site / kind).iterdir() if p.name.startswith("x-64d027d1991e")]
        assert len(twins) == 2 and all(len(p.name) == 34 for p in twins), twins
    pages = {
        p.name: (p / "index.html").read_text()
        for p in (site / "authors").iterdir()
        if p.name.startswith("x-64d027d1991e")
    }
    assert sorted("First twin" in html for html in pages.values()) == [False, True]


def test_a_fifo_named_on_the_command_line_never_blocks(
    tmp_path: Path, run: Any, home: Path
) -> None:
    """T42, issue 18 (regression): `dreampool import memos FIFO` and
    `verify-proof … --record FIFO` (or any of its files) opened the FIFO with a
    plain open(), which waits for a writer for ever. Each is refused at once."""
    from tests.test_lightclient import standard_log, write_inputs

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    p = write_inputs(tmp_path, standard_log(), "first")
    commands = [
        ("import", "memos", fifo),
        ("import", "memos", fifo, "-o", tmp_path / "draft.json"),
        ("verify-proof", p["proof"], "--record", fifo, "--policy", p["policy"]),
        ("verify-proof", fifo, "--record", p["record"], "--policy", p["policy"]),
        ("verify-proof", p["proof"], "--record", p["record"], "--policy", fifo),
        (
            "verify-proof", p["proof"], "--record", p["record"], "--policy", p["policy"],
            "--newer", fifo, "--consistency", p["consistency"],
        ),
        ("sign", fifo, "--key", "sha256:0000000000000000"),
        ("verify", fifo),
    ]  # fmt: skip
    for argv in commands:
        with deadline(20):
            result = run(*argv)
        assert result.code == 1, (argv, result)
        assert f"{fifo}: " in result.err and "not a regular file" in result.err, (argv, result)
    assert not (tmp_path / "draft.json").exists()


def test_an_oversized_file_is_reported_at_its_real_size(
    tmp_path: Path, run: Any, home: Path
) -> None:
    """T01, issue 18 (regression): a 2 MB draft was reported as "65537 bytes", the
    bytes read to see it was too big; the message now gives the file's size."""
    big = tmp_path / "big.json"
    big.write_bytes(b'{"title": "' + b"x" * 2_000_000 + b'"}')
    size = big.stat().st_size
    # A draft may be larger than the dream it signs (its fields are named
    # first: 21bd074c); a signed dream is not.
    for argv, limit in (
        (("sign", big, "--key", "sha256:0000000000000000"), cli.DRAFT_MAX_BYTES),
        (("verify", big), dreamfmt.MAX_BYTES),
    ):
        result = run(*argv)
        assert result.code == 1, result
        assert f"{big}: file is {size} bytes, the limit is {limit}" in result.err
        assert str(limit + 1) not in result.err
    result = run("import", "memos", big)
    assert result.code == 1, result
    assert f"{big}: file is {size} bytes, the limit is 1048576" in result.err
    assert "1048577" not in result.err
    tp = make_pool(tmp_path / "pool")  # and in a pool: submit and check
    result = run("submit", big, "--content", tp.content)
    assert result.code == 1 and f"file is {size} bytes" in result.err, result
    planted = tp.content / "dreams" / "0123456789abcdef.json"
    planted.write_bytes(big.read_bytes())
    result = run("check", "--content", tp.content)
    assert result.code == 1 and f"{planted}: file is {size} bytes" in result.err, result
