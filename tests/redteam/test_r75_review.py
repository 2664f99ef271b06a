"""Review r75 (of bd242d31, "the salt read later commits the held dream to
its leaf; autocrlf=input converts", and cc364216, filekeys.load_beside).

One defect (the first test, which fails on cc364216; fixed: each logcheck
line names the digest of the scan row it stood for, as the store read or
wrote it, so a row written again since is checked dream by dream):

* T81/T44: bd242d31 checks the store's copy of a logged dream only where
  its record.json is rendered (``salt_text`` via ``Admitted.salt``). Other
  files show the same deferred dream without ever making its record: the
  agents' digest (``agents/digest.md``: title, summary, entries, in full) and
  the API shard (``api/dreams/<k>.json``: title). A wrong but tagged scan row
  of a logged dream (r74's case) whose unit is kept (its key stands, or does
  not hash what changed: a summary or entry is not in the unit key) is then
  published there under the signed checkpoint the moment a new, unrelated
  dream is added. On 7485cede step 3 refused the same build ("the build
  cache is damaged; nothing was logged").

What held: ``_converts`` against git 2.39's own reading of core.autocrlf
(bare key = true, empty = false, 00/0k = false, Input, garbage); salt_text
runs once per rendered record (a full re-render of 12 dreams: 12 calls);
load_beside's thread has ended before every fork of a build.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import pytest

from builder import buildcache, parallel
from builder.buildcache import BuildCache
from builder.content import filekeys, gitrepo
from builder.errors import LogError
from builder.formats.dream import Dream
from builder.log import logbuild
from builder.site import writer
from tests.gitrun import git
from tests.redteam.test_r74_review import _records_verify
from tests.redteam.test_r74_review import by_dream as by_dream  # the fixture
from tests.test_log_check import _publish, _published


def _garble(site: Path, signer: Any, content: Path, victim: str, **change: Any) -> None:
    """r74's wrong but tagged scan row (what a bug in the build writes), and
    no stored commitment to short-cut step 3 with."""
    store = BuildCache(writer.builds_dir(site) / "cache", key=buildcache.row_key(signer.seed))
    blob, _ = filekeys.of_bytes((content / "dreams" / f"{victim}.json").read_bytes())
    digest, d = store["scan"][blob]
    store["scan"][blob] = (digest, Dream(d.id, d.key_id, d.public_key, {**d.body, **change}))
    store["commit"].clear()
    store.save()


def _holding(site: Path, needle: bytes) -> list[str]:
    root = site.resolve()
    files = (p for p in root.rglob("*") if p.is_file())
    return sorted(str(p.relative_to(root)) for p in files if needle in p.read_bytes())


# --- defect --------------------------------------------------------------------


@pytest.mark.parametrize("field", ["title", "summary"])
def test_a_wrong_scan_row_is_published_where_no_record_is_made(
    tmp_path: Path, by_dream: list[int], field: str
) -> None:
    """T81/T44 (bd242d31 fixed r74 only where record.json is rendered). The
    newest logged dream's scan row holds another title (or summary), tagged
    with the row key; the logcheck row stands (no dream checked again), the
    dream's unit is kept (its record is not rendered, so salt_text never
    runs), and a new unrelated dream makes the build render agents/digest.md
    (and, for the title, api/dreams/0.json) from the wrong row: the signed
    site publishes text for leaf N that leaf N does not commit to, while
    every record.json still verifies. On 7485cede step 3 refused this build.
    Expected: the build refuses (the build cache is damaged) or publishes
    nothing of the wrong row."""
    tp, signer, site, ids = _published(tmp_path)
    _publish(tp, site, signer)
    victim = ids[-1]  # among the digest's newest dreams
    _garble(site, signer, tp.content, victim, **{field: "PWNED by the store"})
    tp.add("bob", 1)  # unrelated: no lineage to the victim
    try:
        _publish(tp, site, signer)
    except LogError as exc:
        assert "build cache" in exc.message
        return
    _records_verify(site, tp.content)  # the records are right ...
    assert by_dream == [0]  # ... the row stood ...
    # ... and the wrong text went out elsewhere.
    assert _holding(site, b"PWNED by the store") == []


# --- what held -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "converts"),
    [
        ("autocrlf", True),  # a bare key is true
        ("autocrlf =", False),  # empty is false to git (we may say either)
        ("autocrlf = 00", False),
        ("autocrlf = 0k", False),
        ("autocrlf = 2", True),
        ("autocrlf = Input", True),
        ("autocrlf = TRUE", True),
        ("autocrlf = garbage", True),  # git fails on every command: None
    ],
)
def test_autocrlf_as_git_reads_it_never_vouches_for_a_converted_file(
    tmp_path: Path, line: str, converts: bool
) -> None:
    """T80 (holds): for every core.autocrlf value git converts with,
    clean_blobs vouches for nothing (values git reads as false may go either
    way: that costs time only)."""
    root = tmp_path / "repo"
    (root / "content" / "dreams").mkdir(parents=True)
    (root / "content" / "dreams" / "a.salt").write_bytes(b"x\n")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "x")
    with open(root / ".git" / "config", "a", encoding="utf-8") as f:
        f.write(f"[core]\n\t{line}\n")
    found = gitrepo.clean_blobs(root / "content")
    if converts:  # {} (git converts) or None (git cannot read its config)
        assert not found


def test_salt_text_runs_once_per_rendered_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """T81 (holds, cost): a pool title change renders every unit again; the
    lazy salt is read and checked once per dream, not per page that lists it."""
    tp, signer, site, _ids = _published(tmp_path, 12)
    _publish(tp, site, signer)
    calls: list[str] = []
    real = logbuild.salt_text

    def counted(content: Path, dream_id: str, *a: Any) -> str:
        calls.append(dream_id)
        return real(content, dream_id, *a)

    monkeypatch.setattr(logbuild, "salt_text", counted)
    monkeypatch.setattr(parallel, "workers", lambda: 1)  # every unit in this process
    config = tp.content / "pool.yaml"
    config.write_text(config.read_text().replace("Test pool", "Another title"))
    _publish(tp, site, signer)
    assert sorted(calls) == sorted(set(calls)) and len(calls) == 12


_SEEN: list[list[str]] | None = None


def _before_fork() -> None:
    if _SEEN is not None:
        _SEEN.append(sorted(t.name for t in threading.enumerate()))


os.register_at_fork(before=_before_fork)


def test_no_filekeys_thread_is_alive_at_any_fork_of_a_build(tmp_path: Path) -> None:
    """T81 (cc364216 holds): load_beside's thread (and clean_blobs' git
    threads) have ended before the build forks anything after them."""
    global _SEEN
    tp, signer, site, _ids = _published(tmp_path)
    tp.add("bob", 2)
    _SEEN = []
    try:
        _publish(tp, site, signer)
        seen = _SEEN
    finally:
        _SEEN = None
    assert seen, "the build forked nothing (no survey)"
    for names in seen:
        assert not [n for n in names if n.startswith(("dreampool-filekeys", "dreampool-git"))]
