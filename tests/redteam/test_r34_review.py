"""Review r34: a generation under a tagged seal is not walked for links (f7f6175,
THREATS.md T45, T81), and jieba's prefix dictionary built without
``Tokenizer.initialize`` (71e4b35, 9cabb40, 02d0a45, T115).

A failing test is a defect found in review.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from builder import build as buildmod
from builder.formats.note import parse_private_key
from builder.site import writer
from tests.test_store_restore import _published, site_files
from tests.test_writer import plan_of


def _tagged(out: Path, seals: dict[str, bytes]) -> writer.SiteWriter:
    """The writer of a signing build: its seals are rows tagged with its row key."""
    return writer.SiteWriter(out, seals=seals, seals_tagged=True)


def _live(out: Path) -> Path:
    return writer.builds_dir(out) / os.readlink(out).rsplit("/", 1)[1]


def _sharing_an_inode(folder: Path, outside: Path) -> list[str]:
    """The files under ``folder`` that are the very inode of a file under ``outside``."""
    theirs = {(p.stat().st_dev, p.stat().st_ino) for p in outside.rglob("*") if p.is_file()}
    return sorted(
        str(p.relative_to(folder))
        for p in folder.rglob("*")
        if p.is_file() and not p.is_symlink() and (p.stat().st_dev, p.stat().st_ino) in theirs
    )


@pytest.mark.parametrize("where", ["folder", "generation"])
def test_a_folder_link_in_the_live_generation_leads_no_hard_link_outside(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """T45, T81. f7f6175 leaves the generation the signing build writes unwalked
    when its tagged seal holds; the live generation, which lends files to it
    (``keep``: ``os.link``), was never walked at all. Over a checkout kept between
    runs (review r33: tar makes only what its archive holds), the live
    generation's ``dreams/001/`` is replaced by a link to a folder outside,
    holding the page's public bytes. That breaks the live generation's seal
    only, so its files are read before they are lent (``_holds``), but
    ``O_NOFOLLOW`` covers the last component of the path alone: the read, then
    ``os.link``, go through the folder link. The generation the signing build
    publishes, under its tagged seal (it is never read), then holds the very
    inode of a file outside ``.site.builds``: whoever can write that file
    changes the published page, with no folder of the generation stamped, and
    every later build keeps it unread by its size and mtime. ``generation``:
    the live generation's own folder a link (which a build's derived.secure
    removes first; the writer alone followed it too)."""
    out, seals = tmp_path / "site", dict[str, bytes]()
    page = "dreams/001/index.html"
    first = plan_of(5)
    second = plan_of(5, changed=1)  # the live generation holds a page the other lacks
    for plan in (first, second):
        with _tagged(out, seals) as w:
            w.add_all(plan)
    outside = tmp_path / "outside"
    live = _live(out)
    if where == "folder":
        outside.mkdir()
        (outside / "index.html").write_bytes(second[page])
        shutil.rmtree(live / "dreams" / "001")
        (live / "dreams" / "001").symlink_to(outside, target_is_directory=True)
    else:
        shutil.copytree(live, outside)
        shutil.rmtree(live)
        live.symlink_to(outside, target_is_directory=True)

    verified: list[str] = []
    real = writer._check_generation

    def counted(gen: str, listed: dict[str, writer.Entry]) -> writer._Checked:
        verified.append(gen)
        return real(gen, listed)

    monkeypatch.setattr(writer, "_check_generation", counted)
    with _tagged(out, seals) as w:
        if not w.keep_all([(page, writer.digest(second[page]))]):
            w.add(page, second[page])
        for rel, data in second.items():
            if rel != page:
                w.add(rel, data)
    assert verified == []  # the target's tagged seal held: it was not read
    assert (out / page).read_bytes() == second[page]
    assert _sharing_an_inode(_live(out), outside) == []


def test_a_link_a_kept_checkout_gets_in_the_live_generation_is_not_followed_by_the_build(
    tmp_path: Path,
) -> None:
    """T45, T81: the same through ``build``: a pool published twice on one checkout (a
    dream added between, so only the live generation holds its files), then
    the live generation's ``dreams/<id>/`` made a link to a copy outside (as tar
    over the kept checkout can). The signing build keeps the dream's unit from
    the live generation through the link: the published files are inodes of
    files outside the build's state."""
    tp, origin = _published(tmp_path)
    signer = parse_private_key(tp.log_key)
    (new,) = tp.add("ada", 1)
    buildmod.build(tp.content, origin / "site", signer=signer)
    live = _live(origin / "site")
    outside = tmp_path / "outside"
    shutil.copytree(live / "dreams" / new, outside)
    shutil.rmtree(live / "dreams" / new)
    (live / "dreams" / new).symlink_to(outside, target_is_directory=True)
    before = {p.name: p.read_bytes() for p in outside.iterdir()}

    buildmod.build(tp.content, origin / "site", signer=signer)
    published = _live(origin / "site")
    assert published != live
    assert _sharing_an_inode(published, outside) == []
    assert {p.name: p.read_bytes() for p in outside.iterdir()} == before
    files = site_files(origin / "site")
    assert all(files[f"dreams/{new}/{name}"] == data for name, data in before.items())
