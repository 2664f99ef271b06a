"""Review r65 of 474e6589 (a live page replaced after the survey is read
before it is lent)."""

from __future__ import annotations

import os
from pathlib import Path

from builder.site import writer
from tests.golden_update import tree
from tests.redteam.test_r64_review import _build, _plan


def test_a_page_replaced_in_a_touched_folder_after_the_survey_is_not_sealed_in(
    tmp_path: Path,
) -> None:
    """T81 (the target side of r64, as old as the seals: a commit lstat-ed every
    folder anew, and now still those it touched): a page
    of the generation being written, replaced as tar does (unlink, write, old
    mtime) after the survey, is kept by the survey's stat; its folder (here the
    generation's own, always touched) is lstat-ed anew at commit, so the seal
    vouches for the foreign page and every later build of that generation
    keeps it unread (THREATS.md says the next one writes it again)."""
    out, seals = tmp_path / "site", {}
    for _ in range(2):
        _build(out, _plan(), seals=seals, seals_tagged=True)
    opening = writer.Opening(out, seals=seals, seals_tagged=True, background=False)
    survey = opening.survey()
    opening._result = lambda: survey
    page = writer.builds_dir(out) / opening.target / "index.html"
    st = os.stat(page)
    page.unlink()
    page.write_bytes(b"PWN!")  # the size of b"home"
    os.utime(page, ns=(st.st_atime_ns, st.st_mtime_ns))
    _build(out, _plan(changed=True), opening=opening)  # goes live with it (documented)
    _build(out, _plan(changed=True), seals=seals, seals_tagged=True)  # the other one
    _build(out, _plan(changed=True), seals=seals, seals_tagged=True)  # this one again
    assert tree(out) == _plan(changed=True)
