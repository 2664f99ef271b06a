"""Review r64 of fcd6d14c (the survey reads the live generation's manifest
and checks its seal)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from builder.site import writer
from tests.golden_update import tree


def _plan(changed: bool = False) -> dict[str, bytes]:
    plan = {f"dreams/{i:03d}/index.html": f"page {i}".encode() for i in range(6)}
    plan["index.html"] = b"home"
    if changed:
        plan["dreams/004/index.html"] = b"edited"
    return plan


def _live(out: Path) -> str:
    return os.readlink(out).rsplit("/", 1)[1]


def _build(out: Path, plan: dict[str, bytes], **kw: object) -> None:
    """What builder.site does: keep (own or lent) what a generation holds, else write."""
    with writer.SiteWriter(out, **kw) as w:  # type: ignore[arg-type]
        for rel, data in plan.items():
            d = writer.digest(data)
            if w.can_keep(rel, d):
                w.keep(rel, d)
            else:
                w.add(rel, data)


def test_a_page_replaced_in_the_live_generation_after_the_survey_is_not_lent_unread(
    tmp_path: Path,
) -> None:
    """T81: a live page replaced as tar does (unlink, write, old mtime) after
    the survey breaks the live seal, but the seal was judged at survey time:
    the page is lent unread, and sealed into the new generation."""
    out, seals = tmp_path / "site", {}
    for plan in (_plan(), _plan(), _plan(changed=True)):
        _build(out, plan, seals=seals, seals_tagged=True)
    opening = writer.Opening(out, seals=seals, seals_tagged=True, background=False)
    survey = opening.survey()  # what the forked survey finds as the build begins
    opening._result = lambda: survey
    page = writer.builds_dir(out) / _live(out) / "dreams" / "004" / "index.html"
    st = os.stat(page)
    page.unlink()
    page.write_bytes(b"PWNED!")  # the size of b"edited"
    os.utime(page, ns=(st.st_atime_ns, st.st_mtime_ns))
    _build(out, _plan(changed=True), opening=opening)
    assert tree(out) == _plan(changed=True)


def test_a_folder_link_removed_after_the_survey_is_not_kept_as_its_files(
    tmp_path: Path,
) -> None:
    """T45 (since 927a3e14, not this commit): with no seals, _remove_links
    returns a folder link's own path, not the files the survey stat-ed
    through it; those are kept unwritten and the site lacks them."""
    out = tmp_path / "site"
    for _ in range(2):
        writer.write_tree(out, _plan())
    folder = writer.builds_dir(out) / ("a" if _live(out) == "b" else "b") / "dreams" / "002"
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(folder, elsewhere)  # sizes and mtimes kept
    shutil.rmtree(folder)
    os.symlink(elsewhere, folder)
    writer.write_tree(out, _plan())
    assert tree(out) == _plan()
