"""Review r63 of 927a3e14 (the survey stats a sealed generation's files; the
commit seals by what it touched)."""

from __future__ import annotations

import os
from pathlib import Path

from builder.site import writer
from tests.golden_update import tree


def _plan() -> dict[str, bytes]:
    plan = {f"dreams/{i:03d}/index.html": f"page {i}".encode() for i in range(4)}
    plan["index.html"] = b"home"
    return plan


def _target(out: Path) -> Path:
    live = os.readlink(out).rsplit("/", 1)[1]
    return writer.builds_dir(out) / ("a" if live == "b" else "b")


def test_a_link_removed_after_the_survey_is_not_kept_as_the_file(tmp_path: Path) -> None:
    """T45, T81: untagged seal (forgeable). _remove_links runs after the
    survey's lstat passed a same-size, same-mtime link; the page is then
    kept unlooked-at and the published site lacks it."""
    out, seals = tmp_path / "site", {}
    for _ in range(2):
        with writer.SiteWriter(out, seals=seals) as w:
            w.add_all(_plan())
    gen = _target(out)
    page = gen / "dreams" / "002" / "index.html"
    st = os.lstat(page)
    page.unlink()
    os.symlink("x" * st.st_size, page)  # a link of the page's size
    os.utime(page, ns=(st.st_atime_ns, st.st_mtime_ns), follow_symlinks=False)
    # The store is untagged: whoever planted the link writes the seal too.
    entries, checksum = writer._read_manifest(gen.parent / f"manifest-{gen.name}")
    seals[gen.name] = writer._seal(gen, checksum, entries)
    with writer.SiteWriter(out, seals=seals) as w:
        w.add_all(_plan())
    assert tree(out) == _plan()


def test_a_page_edited_while_a_build_runs_is_replaced_by_the_next_build(
    tmp_path: Path,
) -> None:
    """T81 (a checkout kept between runs): a sealed generation's files are
    stat-ed by the survey as the build begins, not as each is kept (review
    r63 found the window this opens: the old code stat-ed at use). An edit
    made in place after that goes live with this build, as one made after
    the commit would; the next build writing that generation finds it by
    its stat and writes the page again. Nothing but a hand on the output
    folder during a build makes such an edit: a pull request's content is
    only read."""
    out, seals = tmp_path / "site", {}
    for _ in range(2):
        with writer.SiteWriter(out, seals=seals, seals_tagged=True) as w:
            w.add_all(_plan())
    opening = writer.Opening(out, seals=seals, seals_tagged=True, background=False)
    survey = opening.survey()  # what the forked survey finds as the build begins
    opening._result = lambda: survey
    page = _target(out) / "dreams" / "002" / "index.html"
    page.write_bytes(b"defaced, later")
    with writer.SiteWriter(out, opening=opening) as w:
        w.add_all(_plan())
    assert page.read_bytes() == b"defaced, later"  # the accepted window
    for _ in range(2):  # the next build writes the other generation, then this one
        with writer.SiteWriter(out, seals=seals, seals_tagged=True) as w:
            w.add_all(_plan())
    assert tree(out) == _plan()
    assert page.read_bytes() == b"page 2"
