"""Review r67 of c636cb6f (files a worker found unchanged are checked too)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from builder.site import writer
from tests.golden_update import tree
from tests.redteam.test_r64_review import _build, _plan


def test_a_page_replaced_between_the_surveys_folder_and_file_stats_is_not_sealed_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """T81 (r65/r66 by the survey's own order): _survey_target lstat-s the
    folders (the seal's check) before it stats the files (_files_now, 300,000
    stats at 100k dreams, in the background while the build reads the pool).
    A page replaced as tar does between the two leaves the folder stats old
    (the seal holds) and the file stats new, so _replaced_kept finds the file
    as the survey did; its folder is touched, lstat-ed anew at commit, and the
    seal vouches for the foreign page: every later build keeps it unread."""
    out, seals = tmp_path / "site", {}
    for _ in range(2):
        _build(out, _plan(), seals=seals, seals_tagged=True)
    target = writer.Opening(out, seals=seals, seals_tagged=True, background=False)
    name = target.target
    target.close()
    page = writer.builds_dir(out) / name / "index.html"
    files_now = writer._files_now

    def replaced_first(gen: str, entries: dict) -> tuple:
        if gen.endswith(name):
            st = os.stat(page)
            page.unlink()
            page.write_bytes(b"PWN!")  # the size of b"home"
            os.utime(page, ns=(st.st_atime_ns, st.st_mtime_ns))
            monkeypatch.setattr(writer, "_files_now", files_now)
        return files_now(gen, entries)

    monkeypatch.setattr(writer, "_files_now", replaced_first)
    _build(out, _plan(changed=True), seals=seals, seals_tagged=True)  # goes live with it
    _build(out, _plan(changed=True), seals=seals, seals_tagged=True)  # the other one
    _build(out, _plan(changed=True), seals=seals, seals_tagged=True)  # this one again
    assert tree(out) == _plan(changed=True)
