"""benchmarks/buildbench.py, the measuring parts of benchmarks/run: fast checks of what
it counts and how it judges a figure (the benchmark itself is run by hand)."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import shutil
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest

from benchmarks import buildbench as bb

REPO = Path(__file__).resolve().parent.parent


def test_verdict_says_met_or_by_how_much() -> None:
    assert bb.verdict(0.4, 0.5, " s") == "met"
    assert bb.verdict(0.5, 0.5, " s") == "met"
    assert bb.verdict(0.75, 0.5, " s") == "missed by 0.25 s"
    assert bb.verdict(1.0, 1.0, "×", strict=True) == "missed (equal)"
    assert bb.verdict(0.99, 1.0, "×", strict=True) == "met"


def test_a_pool_is_held_to_the_next_sizes_targets() -> None:
    assert bb.targets_for(1_000).size == 10_000
    assert bb.targets_for(10_000).size == 10_000
    assert bb.targets_for(10_001).size == 100_000
    assert bb.targets_for(5_000_000).size == 1_000_000


def _generation(root: Path, gen: str, files: dict[str, bytes]) -> None:
    for rel, data in files.items():
        (root / gen / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / gen / rel).write_bytes(data)


def test_rewrites_counts_new_inodes_not_kept_links(tmp_path: Path) -> None:
    """A build as builder.site.writer makes one: the new generation keeps a file of the
    live one by hard link, replaces one by rename, and adds one; only the last two
    were written. A written file that got an inode number the old generation held
    (ext4 reuses a removed file's at once) counts too: its mtime is the build's."""
    builds = tmp_path / ".site.builds"
    old = {"index.html": b"old index", "d/1.html": b"one", "d/2.html": b"two", "d/x.html": b"x"}
    _generation(builds, "a", old)
    (builds / "cache").mkdir()
    (builds / "cache" / "store.sqlite").write_bytes(b"s" * 10)
    (tmp_path / "content" / "log").mkdir(parents=True)
    (tmp_path / "content" / "log" / "checkpoint").write_bytes(b"c" * 7)
    (tmp_path / "site").symlink_to(".site.builds/a")
    before = bb.generation_inodes(builds)
    since = time.time_ns()
    time.sleep(0.01)
    _generation(builds, "b", {"index.html": b"new index!"})
    # d/3.html gets the inode number of a's d/x.html, removed: as ext4 reuses one.
    (builds / "b" / "d").mkdir()
    os.link(builds / "a" / "d/x.html", builds / "b" / "d/3.html")
    (builds / "a" / "d/x.html").unlink()
    (builds / "b" / "d/3.html").write_bytes(b"three")
    for rel in ("d/1.html", "d/2.html"):
        os.link(builds / "a" / rel, builds / "b" / rel)
    (builds / "manifest-b").write_bytes(b"m" * 3)
    (tmp_path / "content" / "log" / "checkpoint").write_bytes(b"C" * 8)
    (tmp_path / "site").unlink()
    (tmp_path / "site").symlink_to(".site.builds/b")
    got = bb.rewrites(tmp_path / "site", tmp_path / "content", before, since)
    assert got == bb.Rewrites(
        files=2,
        bytes=len(b"new index!three"),
        state_files=2,
        state_bytes=11,
        largest=((10, "index.html"), (5, "d/3.html")),
    )


def test_copy_derived_restores_all_or_the_store_alone(tmp_path: Path) -> None:
    src = tmp_path / "src"
    _generation(src, "a", {"index.html": b"x"})
    (src / "manifest-a").write_bytes(b"m")
    (src / "cache").mkdir()
    (src / "cache" / "store.sqlite").write_bytes(b"s")
    bb.copy_derived(src, tmp_path / "all", "all")
    assert sorted(os.listdir(tmp_path / "all")) == ["a", "cache", "manifest-a"]
    assert os.stat(tmp_path / "all" / "a" / "index.html").st_nlink == 1
    bb.copy_derived(src, tmp_path / "linked", "all", link_generations=True)
    assert os.stat(tmp_path / "linked" / "a" / "index.html").st_nlink == 2
    assert os.stat(tmp_path / "linked" / "manifest-a").st_nlink == 1
    bb.copy_derived(src, tmp_path / "store", "cache")
    assert os.listdir(tmp_path / "store") == ["cache"]


def test_trash_moves_a_tree_aside_and_empties_it_later(tmp_path: Path) -> None:
    """A timed run never follows the deletion of the tree it replaces (bb.Trash):
    the tree is renamed into the trash, whole, and deleted only by empty()."""
    trash = bb.Trash(tmp_path / "trash")
    tree = tmp_path / "clone"
    (tree / "site").mkdir(parents=True)
    (tree / "site" / "index.html").write_text("old\n")
    target = tmp_path / "elsewhere"
    target.mkdir()
    link = tmp_path / "site"
    link.symlink_to(target)
    trash.put(tree)
    trash.put(link)
    trash.put(tmp_path / "missing")  # nothing there: nothing to do
    assert not tree.exists() and not link.is_symlink()
    held = sorted(os.listdir(tmp_path / "trash"))
    assert len(held) == 2
    assert any((tmp_path / "trash" / h / "site" / "index.html").exists() for h in held)
    assert target.is_dir()  # a link is moved as a link, never what it names
    tree.mkdir()
    trash.put(tree)  # the same name again: a second place in the trash
    assert len(os.listdir(tmp_path / "trash")) == 3
    trash.empty()
    assert not (tmp_path / "trash").exists() and target.is_dir()


def test_a_server_that_exits_is_reported_with_what_it_printed(tmp_path: Path) -> None:
    """The MCP case's server exiting at start (here: a venv without the mcp extra)
    is reported with the last lines it wrote to stderr, not only its exit code,
    so whoever ran the benchmark sees what to fix."""
    server = [
        sys.executable,
        "-c",
        'import sys; sys.stderr.write("dreampool: error: the MCP server needs the mcp extra\\n");'
        " sys.exit(1)",
    ]
    with pytest.raises(bb.McpError) as caught:
        bb.time_mcp(server, dict(os.environ), {}, tmp_path / "mcp.stderr", timeout=30)
    assert "exited (1)" in str(caught.value)
    assert "the MCP server needs the mcp extra" in str(caught.value)


def _run_script() -> ModuleType:
    script = REPO / "benchmarks" / "run"
    loader = importlib.machinery.SourceFileLoader("benchmarks_run", str(script))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[loader.name] = module  # its dataclasses look their module up
    try:
        loader.exec_module(module)
    finally:
        del sys.modules[loader.name]
    return module


def test_a_failed_mcp_case_keeps_the_other_figures_in_the_report() -> None:
    """An MCP case that fails is a line of the report, beside every figure the
    builds gave: a failure there lost a whole run's table (20 minutes at 10k)."""
    run = _run_script()
    sample = bb.Sample(wall=2.0, cpu=2.5, mb=120.0)
    result = run.SizeResult(10_000, 100)
    for case in ("cold", "+0", "+1", "+1 after +1", "+100", "+1 restored"):
        result.builds[case] = sample
    for label in ("+1", "+1 after +1", "+1 restored"):
        largest = ((781_995, "search/s.json"),)
        result.rewrites[label] = bb.Rewrites(33, 1_872_000, 4, 10_000, largest)
    result.hugo = sample
    result.mcp_failed = "the server exited (1): the MCP server needs the mcp extra"
    table = run.report([result], 3, "all")
    assert "+1 restored" in table and "peak (all builds)" in table
    assert "+1 after +1" in table
    assert "mcp: failed: the server exited (1)" in table
    assert "needs the mcp extra" in table
    assert "largest, KB: search/s.json 782.0" in table


def test_the_cold_floor_times_every_step_on_the_shipped_sample(tmp_path: Path) -> None:
    """benchmarks/cold_floor.py's pass over logged dreams: each step timed
    (Markdown too, though the sample is smaller than the renderer's cache: the
    floor calls it uncached), each dream's files written where it says, the
    commitment checked against its leaf (a salt that does not match makes the
    strict parser refuse)."""
    from benchmarks import cold_floor
    from builder.formats import merkle

    log = cold_floor.Log(REPO / "content")
    # Every dream file of the sample is logged (one more leaf: an erased dream's).
    assert set(log.dreams) >= {p.stem for p in (REPO / "content" / "dreams").glob("*.json")}
    assert log.per_leaf_us > 0
    dreams = cold_floor.logged(REPO / "content", 10, log)
    assert len(dreams) == 10
    tree = merkle.MerkleTree.from_leaf_hashes(log.hashes)
    # The proofs come from the pool's own tree: its root is the signed one.
    from builder.formats.checkpoint import parse_checkpoint
    from builder.formats.note import split_note

    signed = REPO / "content" / "log" / "checkpoints" / str(tree.size)
    assert tree.root() == parse_checkpoint(split_note(signed.read_bytes())[0]).root
    out = tmp_path / "out"
    (out / "dreams").mkdir(parents=True)
    per = cold_floor.one_pass(dreams, tree, out, cold_floor.tiers(REPO / "content"))
    assert set(per) == {
        "read", "parse", "markdown", "keywords", "page jinja", "page plain",
        "card", "record", "proof", "write", "lists",
    }  # fmt: skip
    assert all(us > 0 for name, us in per.items() if name != "keywords")
    (tmp_path / "again" / "dreams").mkdir(parents=True)
    again = cold_floor.one_pass(dreams, tree, tmp_path / "again", {})  # no counted dream
    assert again["keywords"] < per["keywords"]
    from builder.text import mdrender

    assert cold_floor._markdown is mdrender.render_markdown.__wrapped__  # type: ignore[attr-defined]
    written = sorted(p.relative_to(out).parts[2] for p in out.glob("dreams/*/*"))
    assert written == sorted(["index.html", "record.json", "proof.tlog-proof"] * 10)

    # The record is the builder's own bytes (the floor times a copy of its code).
    from builder.formats import dream as dreamfmt
    from builder.log import logbuild

    path, index, _ = dreams[0]
    salt = path.with_suffix(".salt").read_text().strip()
    d = dreamfmt.parse(path.read_bytes(), str(path))
    made = cold_floor._record(d.id, index, salt, d.body)
    assert made == logbuild.record_bytes(logbuild.Admitted(d, index, salt, "2026-01-01"))

    # A salt that is not the logged one: the dream does not commit to its leaf.
    wrong = tmp_path / "wrong"
    (wrong / "dreams").mkdir(parents=True)
    path, _, _ = dreams[0]
    shutil.copy(path, wrong / "dreams" / path.name)
    (wrong / "dreams" / path.with_suffix(".salt").name).write_text("A" * 43)
    with pytest.raises(SystemExit, match="does not commit to its leaf"):
        cold_floor.one_pass(cold_floor.logged(wrong, 1, log), tree, tmp_path / "w2", {})


def test_the_cold_floor_reads_every_plain_file_of_a_generation(tmp_path: Path) -> None:
    """--generation: every plain file read and digested, links left alone,
    figures per dream of the generation (folders under dreams/)."""
    from benchmarks import cold_floor

    gen = tmp_path / "a"
    for dream_id in ("0123456789abcdef", "fedcba9876543210"):
        (gen / "dreams" / dream_id).mkdir(parents=True)
        (gen / "dreams" / dream_id / "index.html").write_bytes(b"x" * 3000)
    (gen / "index.html").write_text("home")
    (gen / "elsewhere").symlink_to("/etc/hostname")
    found = cold_floor.Generation(gen)
    assert (found.dreams, len(found.files), len(found.folders)) == (2, 3, 4)
    assert "elsewhere" not in " ".join(found.files)
    per = cold_floor.restored(found, 2)
    assert set(per) == {"seal", "read", "digest"} and all(us > 0 for us in per.values())
    with pytest.raises(SystemExit, match="no dream"):
        cold_floor.Generation(gen / "dreams" / "0123456789abcdef")


def test_measure_runs_the_command_in_the_folder_given(tmp_path: Path) -> None:
    """``python -m builder`` imports from its working folder before PYTHONPATH,
    so benchmarks/ab.py runs each tree's builds in that tree: measure must
    start the command there (ab.py compared one tree with itself before)."""
    script = "import os, pathlib; pathlib.Path('where').write_text(os.getcwd())"
    bb.measure([sys.executable, "-c", script], cwd=tmp_path)
    assert (tmp_path / "where").read_text() == str(tmp_path)


def test_measure_counts_what_the_command_wrote_to_disk(tmp_path: Path) -> None:
    """A +1's log and store files count whole in :func:`bb.rewrites` (the
    store was 955 MB at 100k); the sample says what the build made the
    kernel write, its workers included."""
    script = (
        "import os\n"
        "if os.fork() == 0:\n"
        "    open('child', 'wb').write(b'c' * 3_000_000); os._exit(0)\n"
        "os.wait(); open('parent', 'wb').write(b'p' * 2_000_000)\n"
    )
    sample = bb.measure([sys.executable, "-c", script], cwd=tmp_path)
    assert 5.0 <= sample.disk < 6.0
    low, high = sample._replace(disk=1.0), sample._replace(disk=9.0)
    assert bb.median([low, sample, high]).disk == sample.disk  # each field's own median
