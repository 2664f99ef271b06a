"""Review r66 of 47c9e627 (a kept page replaced after the survey leaves no seal)."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

from builder.site import writer
from tests.golden_update import tree
from tests.redteam.test_r64_review import _build


def _plan(changed: bool = False) -> dict[str, bytes]:
    plan = {"index.html": b"home", "dreams/000/record.json": b"rec0"}
    plan["dreams/000/index.html"] = b"edited" if changed else b"page 0"
    return plan


def test_a_page_stored_unchanged_by_a_forked_worker_and_replaced_is_not_sealed_in(
    tmp_path: Path,
) -> None:
    """T81 (r65 again, by the other way a file is kept): Units.write and
    assemble._render_pages call store() in forked workers (200+ units, 512+
    pages) and record() the pickled result. A file store() found unchanged
    comes back as an equal copy of its ``had`` entry, not the object, so
    _replaced_kept takes it as "written anew" and never lstat-s it. Its folder
    is touched (the unit's page changed), so the seal vouches for a record
    replaced as tar does after the survey, and later builds keep it unread."""
    out, seals = tmp_path / "site", {}
    for _ in range(2):
        _build(out, _plan(), seals=seals, seals_tagged=True)
    opening = writer.Opening(out, seals=seals, seals_tagged=True, background=False)
    survey = opening.survey()
    opening._result = lambda: survey
    page = writer.builds_dir(out) / opening.target / "dreams" / "000" / "record.json"
    st = os.stat(page)
    page.unlink()
    page.write_bytes(b"PWN!")  # the size of b"rec0"
    os.utime(page, ns=(st.st_atime_ns, st.st_mtime_ns))
    with writer.SiteWriter(out, opening=opening) as w:
        w.keep("index.html", writer.digest(b"home"))
        for rel, data in _plan(changed=True).items():
            if rel == "index.html":
                continue
            w.prepare(rel)
            # What a forked worker hands back through its pipe.
            entry, changed = pickle.loads(pickle.dumps(w.store(rel, data)))
            w.record(rel, entry, changed)
    _build(out, _plan(changed=True), seals=seals, seals_tagged=True)  # the other one
    _build(out, _plan(changed=True), seals=seals, seals_tagged=True)  # this one again
    assert tree(out) == _plan(changed=True)
