"""benchmarks/buildbench.py, the measuring parts of benchmarks/run: fast checks of what
it counts and how it judges a figure (the benchmark itself is run by hand)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from benchmarks import buildbench as bb


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
    were written."""
    builds = tmp_path / ".site.builds"
    _generation(builds, "a", {"index.html": b"old index", "d/1.html": b"one", "d/2.html": b"two"})
    (builds / "cache").mkdir()
    (builds / "cache" / "store.sqlite").write_bytes(b"s" * 10)
    (tmp_path / "content" / "log").mkdir(parents=True)
    (tmp_path / "content" / "log" / "checkpoint").write_bytes(b"c" * 7)
    (tmp_path / "site").symlink_to(".site.builds/a")
    before = bb.generation_inodes(builds)
    since = time.time_ns()
    time.sleep(0.01)
    _generation(builds, "b", {"index.html": b"new index!", "d/3.html": b"three"})
    for rel in ("d/1.html", "d/2.html"):
        os.link(builds / "a" / rel, builds / "b" / rel)
    (builds / "manifest-b").write_bytes(b"m" * 3)
    (tmp_path / "content" / "log" / "checkpoint").write_bytes(b"C" * 8)
    (tmp_path / "site").unlink()
    (tmp_path / "site").symlink_to(".site.builds/b")
    got = bb.rewrites(tmp_path / "site", tmp_path / "content", before, since)
    assert got == bb.Rewrites(files=2, bytes=len(b"new index!three"), state_files=2, state_bytes=11)


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
