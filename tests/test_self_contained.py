"""A clean clone is the whole product: no tracked file refers to a path outside it.

The needles are built from parts, so this file never holds one and needs no
exception for itself.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Collection

from tests.conftest import REPO

DOTDOT = ".."
# A sibling folder the project once read its vectors and protocol text from.
OUTSIDE = [DOTDOT + "/" + "shared", DOTDOT + "\\" + "shared"]
# Absolute paths of a developer's or an agent's machine.
ABSOLUTE = ["/" + "work" + "/", "/" + "home" + "/", "/" + "Users" + "/"]
# The protocol's only copy in the repository; the old name of the text outside it.
OLD_PROTOCOL = "PROTOCOL" + ".md"
# Files other work still has to change (see issue 18); nothing else may name it.
OLD_PROTOCOL_PENDING: set[str] = set()


def tracked() -> list[str]:
    out = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True
    ).stdout
    files = [name for name in out.decode("utf-8").split("\0") if name]
    assert len(files) > 100, "git ls-files listed almost nothing: is this a clone?"
    return files


def hits(needles: list[str], skip: Collection[str] = ()) -> list[str]:
    found = []
    for name in tracked():
        path = REPO / name
        if name in skip or not path.is_file():  # a deletion not yet committed
            continue
        data = path.read_bytes()
        for needle in needles:
            if needle.encode() in data:
                line = data[: data.index(needle.encode())].count(b"\n") + 1
                found.append(f"{name}:{line}: {needle}")
    return found


def test_no_tracked_file_refers_outside_the_repository() -> None:
    assert hits(OUTSIDE) == []


def test_no_tracked_file_holds_an_absolute_machine_path() -> None:
    assert hits(ABSOLUTE) == []


def test_the_protocol_is_named_by_its_path_in_the_repository() -> None:
    assert (REPO / "docs" / "protocol.md").is_file()
    assert hits([OLD_PROTOCOL], skip=OLD_PROTOCOL_PENDING) == []


def _slug(heading: str) -> str:
    """GitHub's anchor for a Markdown heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def test_links_to_the_protocol_name_a_section_it_has() -> None:
    anchors = {
        _slug(line.lstrip("#"))
        for line in (REPO / "docs" / "protocol.md").read_text(encoding="utf-8").splitlines()
        if line.startswith("#")
    }
    seen = 0
    for name in tracked():
        if not name.endswith(".md"):
            continue
        text = (REPO / name).read_text(encoding="utf-8")
        for anchor in re.findall(r"\]\((?:[./]*docs/)?protocol\.md#([^)\s]+)\)", text):
            seen += 1
            assert anchor in anchors, f"{name} links to docs/protocol.md#{anchor}"
    assert seen >= 2  # README.md's links to §1 and §5


def test_the_needles_find_what_they_look_for() -> None:
    # The check itself works: each needle is a plain substring of a real reference.
    sample = f"see {OUTSIDE[0]}/vectors and {ABSOLUTE[0]}h5/tests and {OLD_PROTOCOL} §1"
    assert all(n in sample for n in (OUTSIDE[0], ABSOLUTE[0], OLD_PROTOCOL))
