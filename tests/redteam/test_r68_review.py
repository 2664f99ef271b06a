"""Review r68 of 4dec38c1 (the survey stats the files before the folders)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from builder.site import writer
from tests.golden_update import tree
from tests.redteam.test_r64_review import _build, _plan


def test_a_page_replaced_between_the_surveys_file_and_folder_stats_is_not_sealed_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """T81 (the window r67's test no longer reaches: it replaces the page
    before _files_now, so before both stats). Replaced as tar does after the
    file stats and before the folders' lstat: the seal must fail."""
    out, seals = tmp_path / "site", {}
    for _ in range(2):
        _build(out, _plan(), seals=seals, seals_tagged=True)
    target = writer.Opening(out, seals=seals, seals_tagged=True, background=False)
    name = target.target
    target.close()
    page = writer.builds_dir(out) / name / "index.html"
    files_now = writer._files_now

    def replaced_after(gen: str, entries: dict) -> tuple:
        found = files_now(gen, entries)
        if gen.endswith(name):
            st = os.stat(page)
            page.unlink()
            page.write_bytes(b"PWN!")
            os.utime(page, ns=(st.st_atime_ns, st.st_mtime_ns))
            monkeypatch.setattr(writer, "_files_now", files_now)
        return found

    monkeypatch.setattr(writer, "_files_now", replaced_after)
    for _ in range(3):
        _build(out, _plan(changed=True), seals=seals, seals_tagged=True)
    assert tree(out) == _plan(changed=True)
