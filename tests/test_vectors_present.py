"""tests/vectors holds every published vector the suite reads, inside the repository.

The vector tests parametrize over the files they find; if a folder went
missing they would collect zero cases and pass. This counts each folder (and
the provenance notes that must travel with the data) so that cannot happen.
"""

from __future__ import annotations

import json

import pytest

from tests.conftest import REPO, VECTOR_COUNTS, VECTORS, vector_files


def test_vectors_live_inside_the_repository() -> None:
    assert VECTORS.resolve().is_relative_to(REPO)
    assert VECTORS == REPO / "tests" / "vectors"


@pytest.mark.parametrize("folder", sorted(VECTOR_COUNTS))
def test_each_vector_folder_holds_the_expected_count(folder: str) -> None:
    files = sorted(p for p in (VECTORS / folder).rglob("*") if p.is_file())
    assert len(files) == VECTOR_COUNTS[folder], folder
    assert all(p.stat().st_size > 0 for p in files), folder


def test_the_exact_totals() -> None:
    assert VECTOR_COUNTS == {
        "merkle/inclusion": 98,
        "merkle/consistency": 98,
        "jcs/input": 6,
        "jcs/output": 6,
        "ed25519": 1,
        "note": 2,
    }
    every = sorted(p.relative_to(VECTORS).as_posix() for p in VECTORS.rglob("*") if p.is_file())
    # the counted folders, the two upstream licences, and the provenance README
    assert len(every) == sum(VECTOR_COUNTS.values()) + 3
    assert {"README.md", "merkle/LICENSE", "jcs/LICENSE"} <= set(every)


def test_jcs_inputs_and_outputs_pair_up() -> None:
    names = [p.name for p in vector_files("jcs/input")]
    assert names == [p.name for p in vector_files("jcs/output")]


def test_the_rfc8032_file_holds_three_vectors() -> None:
    (path,) = vector_files("ed25519")
    assert len(json.loads(path.read_text(encoding="utf-8"))["vectors"]) == 3


def test_provenance_travels_with_the_data() -> None:
    readme = (VECTORS / "README.md").read_text(encoding="utf-8")
    for source in (
        "transparency-dev/merkle",
        "cyberphone/json-canonicalization",
        "C2SP",
        "RFC 8032",
        "Apache-2.0",
        "CC BY 4.0",
        "Copied on",
    ):
        assert source in readme, source
    for licence in ("merkle/LICENSE", "jcs/LICENSE"):
        assert "Apache License" in (VECTORS / licence).read_text(encoding="utf-8")


def test_a_missing_folder_fails_loudly(monkeypatch: pytest.MonkeyPatch) -> None:
    import tests.conftest as conftest

    monkeypatch.setattr(conftest, "VECTORS", REPO / "tests" / "no-such-vectors")
    with pytest.raises(FileNotFoundError, match="expected 98"):
        conftest.vector_files("merkle/inclusion")
