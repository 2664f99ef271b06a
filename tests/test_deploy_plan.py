"""The pure parts of ``dreampool deploy``: the plan's phases, the header rules, the
remote manifest's strict parser."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from builder.deploy import DeployError, headers, local, remote
from builder.deploy.plan import CHECKPOINT, make_plan, needed_by_the_log
from builder.site.serve import content_type
from builder.site.writer import write_tree

R = headers.RULES_VERSION


def entry(digest: str, size: int = 1) -> tuple[str, int]:
    return (digest * 32)[:32], size


def remote_of(local: dict[str, tuple[str, int]]) -> dict[str, remote.RemoteEntry]:
    return {p: (d, s, R) for p, (d, s) in local.items()}


def test_phases_tiles_first_checkpoint_then_what_names_it_deletions_last() -> None:
    old = {
        CHECKPOINT: entry("a"),
        "index.html": entry("a"),
        "about.html": entry("a"),
        "dreams/x/record.json": entry("a"),
        "log/tile/0/000.p/1": entry("a"),
    }
    new = {
        CHECKPOINT: entry("b"),
        "index.html": entry("b"),  # names the new root
        "about.html": entry("a"),  # unchanged
        "tags/t/index.html": entry("b"),
        "dreams/y/record.json": entry("b"),
        "log/tile/0/000.p/1": entry("a"),
        "log/tile/0/000.p/2": entry("b"),
    }
    plan = make_plan(new, remote_of(old), lambda p: p == "index.html")
    assert plan.first == ["log/tile/0/000.p/2", "dreams/y/record.json"]
    # every page after the checkpoint (it may link what phase 2 puts), naming it or not
    assert plan.second == [CHECKPOINT, "index.html", "tags/t/index.html"]
    assert plan.delete == ["dreams/x/record.json"]
    assert plan.kept == []
    assert plan.upload_bytes() == 5 and plan.delete_bytes() == 1


def test_only_changed_paths_are_asked_whether_they_name_the_checkpoint() -> None:
    site = {CHECKPOINT: entry("b"), "log/a": entry("a"), "log/b": entry("b"), "c.html": entry("c")}
    asked: list[str] = []
    had = remote_of({**site, "log/b": entry("c"), "c.html": entry("d")})
    make_plan(site, had, lambda p: bool(asked.append(p)))
    assert asked == ["log/b"]  # a changed page goes after the checkpoint anyway


def test_no_manifest_means_everything_is_uploaded_and_nothing_deleted() -> None:
    site = {CHECKPOINT: entry("a"), "index.html": entry("a")}
    plan = make_plan(site, None, lambda p: False)
    assert sorted(plan.uploads) == sorted(site) and plan.delete == [] == plan.kept


def test_other_header_rules_mean_upload_again() -> None:
    site = {"index.html": entry("a")}
    plan = make_plan(site, {"index.html": (entry("a")[0], 1, R - 1)}, lambda p: False)
    assert plan.uploads == ["index.html"]


def test_what_a_published_checkpoint_needs_is_never_deleted() -> None:
    site = {CHECKPOINT: entry("a"), "log/tile/0/000": entry("a")}
    gone = [
        "log/tile/0/001",  # a full tile
        "log/tile/entries/001",
        "log/checkpoints/7",
        "log/consistency/3",
        "log/tile/0/001.p/3",  # partial, its full tile not in the site
    ]
    plan = make_plan(site, remote_of({**site, **{p: entry("z") for p in gone}}), lambda p: False)
    assert plan.kept == sorted(gone) and plan.delete == []
    assert not needed_by_the_log("log/tile/0/000.p/5", site)  # its full tile is there
    assert not needed_by_the_log("dreams/x/record.json", site)


def test_cache_rules() -> None:
    rules = {
        CHECKPOINT: "no-cache",
        "log/tile/0/000": headers.IMMUTABLE,
        "log/tile/0/000.p/17": headers.IMMUTABLE,
        "log/tile/entries/x001/002": headers.IMMUTABLE,
        "log/checkpoints/12": "no-cache",
        "log/consistency/11": "no-cache",
        "log/policy": "no-cache",
        "dreams/0123456789abcdef/record.json": headers.IMMUTABLE,
        "dreams/0123456789abcdef/proof.tlog-proof": "no-cache",
        "dreams/0123456789abcdef/index.html": "public, max-age=300",
        "index.html": "public, max-age=300",
        "static/verify.js": "public, max-age=300",
        "api/dreams.json": "public, max-age=300",
    }
    for rel, want in rules.items():
        assert headers.cache_control(rel) == want, rel
        assert headers.headers(rel) == (content_type(rel), want)
    assert headers.long_lived("dreams/0123456789abcdef/record.json")
    assert not headers.long_lived("dreams/0123456789abcdef/index.html")
    assert headers.IMMUTABLE == "public, max-age=31536000, immutable"


def test_content_types_are_the_preview_servers() -> None:
    assert content_type(CHECKPOINT) == "text/plain; charset=utf-8"
    assert content_type("log/tile/0/000") == "application/octet-stream"
    assert content_type("feed.xml") == "application/atom+xml"
    assert content_type("favicon.ico") == "image/x-icon"


# --- the remote manifest -------------------------------------------------------------


def test_manifest_round_trip() -> None:
    files = {"index.html": ("ab" * 16, 10, R), "dreams/é/record.json": ("cd" * 16, 0, R)}
    assert remote.parse(remote.dumps(files)) == (files, "")


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"", "not strict JSON"),
        (b'{"format":"dreampool-deploy","version":1,"files":{},"x":1}', "exactly"),
        (b'{"format":"dreampool-deploy","version":2,"files":{}}', "/format and /version"),
        (b'{"format":"dreampool-deploy","version":1,"files":[]}', "/files is not an object"),
        (b'{"format":"dreampool-deploy","version":1,"files":{"a/../b":["%s",1,1]}}', "plain"),
        (
            b'{"format":"dreampool-deploy","version":1,"files":{".dreampool-deploy.json.gz":'
            b'["%s",1,1]}}',
            "plain",
        ),
        (b'{"format":"dreampool-deploy","version":1,"files":{"a":["%s",true,1]}}', "size"),
        (b'{"format":"dreampool-deploy","version":1,"files":{"a":["AB",1,1]}}', "digest"),
        (b'{"format":"dreampool-deploy","version":1,"files":{"a":["%s",1]}}', "expected"),
        (b'{"format":"dreampool-deploy","version":1,"files":{"a":1,"a":2}}', "not strict JSON"),
    ],
)
def test_manifest_parser_refuses_and_says_why(data: bytes, why: str) -> None:
    if b"%s" in data:
        data = data.replace(b"%s", b"0" * 32)
    files, reason = remote.parse(gzip.compress(data))
    assert files is None and why in reason


@given(st.binary(max_size=300), st.booleans())
def test_manifest_parser_never_raises(data: bytes, zipped: bool) -> None:
    files, reason = remote.parse(gzip.compress(data) if zipped else data)
    assert (files is None) == bool(reason)


@pytest.mark.parametrize(
    "data",
    [
        b"{}",  # not gzip
        gzip.compress(b"{}")[:-3],  # cut short
        gzip.compress(b"{}") + b"x",  # trailing bytes
        gzip.compress(b"{}") * 2,  # two members
    ],
)
def test_manifest_must_be_one_whole_gzip_stream(data: bytes) -> None:
    assert remote.parse(data) == (None, f"not one gzip stream of at most {remote.MAX_BYTES} bytes")


def test_a_gzip_bomb_stops_at_the_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(remote, "MAX_BYTES", 1000)
    files, reason = remote.parse(gzip.compress(b" " * 100_000))
    assert files is None and "at most 1000 bytes" in reason


def test_a_site_holding_the_deploys_manifest_name_is_refused(tmp_path: Path) -> None:
    site = tmp_path / "site"
    write_tree(site, {remote.NAME: b"{}", CHECKPOINT: b"o\n1\nAAAA\n"})
    with pytest.raises(DeployError, match="the deploy's own manifest"):
        local.load(site)
    write_tree(site, {CHECKPOINT: b"o\n1\nAAAA\n"})
    assert set(local.load(site).files) == {CHECKPOINT}
