"""Review r91: the recent changes to ``check`` / ``check --base`` (THREATS.md
T49) and to the build's store notes (T81).

Each defect test fails on the reviewed HEAD and passes once the defect is
fixed; tests marked "(guard)" are attacks that held.

What was done: paths the pull request changes (and what it left
uncommitted) are compared by os.path.realpath, which never raises, so a
symlink loop is named by judge() and not a traceback, and uncommitted key
files are the pull request's too; a dream whose key file is broken on the
base branch is told a maintainer must fix it there; a logged dream whose
key file is gone is told to restore it, not to submit; a hint is added to
a signature error's line only where a new file is checked (never in
recheck, and never to a schema or parse problem, whose hints speak of
dreams or of a list); the fragments section's note is merged with the
others'; ignored files are named as not committed where a build reads them
(dreams, keys, rotations, erasures, log, pool.yaml). An empty folder or a
FIFO named as a dream, left open as a strict xfail then (git carries
neither), is named by one scandir of each folder a build scans (twenty-
fourth session).
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from builder import build as buildmod
from builder import buildcache
from builder.content import gate, pool
from builder.errors import InputError, SignatureError
from builder.formats import dream as dreamfmt
from builder.formats import ed25519
from builder.formats.note import parse_private_key
from tests.gitrun import git
from tests.pools import PoolFixture, make_pool
from tests.redteam import seed_of, signed, submit
from tests.redteam.test_gate import _check, _commit, _git

Run = Callable[..., Any]


def _drop_drafts(root: Path) -> None:
    for path in root.glob("in-*.json"):
        path.unlink()


def _key_file(tp: PoolFixture, author: str) -> Path:
    key_id = dreamfmt.key_id(ed25519.public_key_of(seed_of(author)))
    return tp.content / "keys" / f"{key_id[7:]}.yaml"


# --- defects ---------------------------------------------------------------


@pytest.mark.parametrize("where", ["evil", "content/keys/0123456789abcdef.yaml"])
def test_a_symlink_loop_in_a_pull_request_is_named_not_a_traceback(
    repo: PoolFixture, run: Run, where: str
) -> None:
    """T49: a pull request that adds a symlink pointing at itself (anywhere:
    the repository's root, content/keys) crashes `check --base` with
    ``RuntimeError: Symlink loop`` (Python <= 3.12, the workflow's 3.12)
    instead of naming the symlink: 6ed16a1f resolves every changed path
    (``changed = {(root / c.path).resolve() ...}``), where only the added
    contributor files (regular files) were resolved before; and ``_blame``
    resolves each key problem's file, a looping key symlink included. The
    run ends with no annotation and no summary. Suggested fix: compare paths
    without following links (``os.path.normpath`` of the repository-relative
    path, or ``os.path.realpath``, which does not raise), in ``changed``,
    in ``_blame`` and in ``_retires_pending`` alike."""
    root = repo.content.parent
    link = root / where
    os.symlink(link.name, link)
    _commit(root, "pull request")
    result = _check(run)  # raised RuntimeError: Symlink loop from '…'
    assert result.code == 1
    assert f"{where}: is a symlink" in result.err, result.err


def test_an_uncommitted_key_file_is_not_blamed_on_the_base_branch(
    repo: PoolFixture, run: Run
) -> None:
    """T49: a broken key file that is only in the work tree (untracked, or
    changed and not committed) is named "is not committed" (6ed16a1f), but
    its problems are then reported as warnings "on the base branch already,
    not caused by this pull request: a maintainer fixes it there": the base
    branch is blamed for what only the user's checkout holds (``_blame``
    counts as the pull request's only the paths the commits change).
    Suggested fix: add the uncommitted paths to ``changed`` before
    ``_blame``, so their problems are the user's."""
    root = repo.content.parent
    _commit(root, "pull request")
    (repo.content / "keys" / "0123456789abcdef.yaml").write_text("author: x\n")
    ada = _key_file(repo, "ada")
    ada.write_text(ada.read_text().replace("tier: guest", "tier: memeber"))
    result = _check(run)
    assert result.code == 1
    assert "is not committed" in result.err
    assert "on the base branch already" not in result.err, result.err


def test_a_dream_whose_key_file_is_broken_on_the_base_is_not_told_to_fix_it(
    repo: PoolFixture, run: Run
) -> None:
    """T49: b8772ee4's ``unknown_key_rule`` tells a pull request's dream whose
    key file was refused to "fix that file". Under `check --base`, when that
    key file is broken on the base branch (its problem is a warning "a
    maintainer fixes it there"), the contributor is told to fix a file that
    every change to is refused ("tiers and names in an existing key file ...
    are the maintainers'"). Suggested fix: in the gate, when the key file's
    problem went to the notes (not the pull request's), say that a
    maintainer must fix the key file first, not "fix that file"."""
    root = repo.content.parent
    ada = _key_file(repo, "ada")
    ada.write_text(ada.read_text().replace("tier: guest", "tier: memeber"))
    _commit(root, "base with a broken key file")  # the maintainers' mistake
    submit_dream = signed("ada", title="A second dream by ada")
    d = dreamfmt.parse(json.dumps(submit_dream).encode(), "x")
    (repo.content / "dreams" / f"{d.id}.json").write_text(json.dumps(submit_dream))
    _commit(root, "pull request")
    result = _check(run)
    assert result.code == 1
    assert "a maintainer fixes it there" in result.err  # the key file: not the PR's
    line = next(x for x in result.err.splitlines() if f"{d.id}.json" in x)
    assert "fix that file" not in line, line


def test_recheck_does_not_tell_a_logged_dream_to_be_signed_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run: Run
) -> None:
    """T49: 0190241c appends an error's hint to a single-problem refusal in
    ``pool.problems_of``, which `dreampool recheck` also uses for the findings
    of *logged* dreams (candidates for erasure). A logged dream that today's
    signature rule refuses is now listed with "(hint: the dream was changed
    after signing, or signed with another key; sign the draft again with
    `dreampool sign`)": wrong for a logged dream (its commitment matched:
    it was not changed), and contrary to recheck's own advice (erase it; a
    logged dream is never edited). The same holds for a single schema
    problem ("fix the fields listed above ..., then sign it again").
    Suggested fix: keep the hint out of ``problems_of`` (recheck's caller),
    or add it only where a new file is checked (scan, gate, submit)."""
    tp = make_pool(tmp_path)
    (target,) = submit(tp, signed("ada", title="Logged under an older verifier"))
    buildmod.build(tp.content, tmp_path / "site", signer=parse_private_key(tp.log_key))
    ada_public = ed25519.public_key_of(seed_of("ada"))
    real = ed25519.verify

    def stricter(public_key: bytes, message: bytes, signature: bytes) -> None:
        # Today's (stricter) rule refuses this old signature.
        if public_key == ada_public:
            raise SignatureError("signature does not verify")
        real(public_key, message, signature)

    monkeypatch.setattr(ed25519, "verify", stricter)
    result = run("recheck", "--content", tp.content)
    assert result.code == 1, result
    assert f"candidate {target}" in result.out
    assert "sign the draft again" not in result.out, result.out


def test_a_rotation_statement_is_not_called_a_dream(tmp_path: Path) -> None:
    """T49: 0190241c appends the dream loader's hint to a single problem, and
    a rotation statement is read with ``dreamfmt.load_json``: an empty (or
    any malformed) content/rotations/<16 hex>.json is now "the file is
    empty (hint: dreams are strict UTF-8 JSON of at most 64 KiB ...)" on
    `check` and `check --base` alike. Suggested fix: a hint that names what
    is read ("statements are strict UTF-8 JSON ...") or none for statements
    (``_verify_rotation`` re-raising with its own hint)."""
    tp = make_pool(tmp_path)
    submit(tp, signed("ada", title="Before the rotation"))
    old = dreamfmt.key_id(ed25519.public_key_of(seed_of("ada")))
    new_pub = ed25519.public_key_of(seed_of("ada, second key"))
    new_id = dreamfmt.key_id(new_pub)
    entry = pool.KeyEntry(new_id, "ada", new_pub, "guest", "2026-01-01", old)
    (tp.content / "keys" / f"{new_id[7:]}.yaml").write_bytes(pool.format_key_entry(entry))
    (tp.content / "rotations").mkdir(exist_ok=True)
    (tp.content / "rotations" / f"{new_id[7:]}.json").write_bytes(b"")
    _, problems = pool.load_keys(tp.content)
    (empty,) = [p for p in problems if "rotations" in p.file]
    assert empty.rule.startswith("the file is empty"), empty
    assert "dreams are" not in empty.rule, empty


def test_a_single_schema_problem_does_not_point_at_a_list_above(tmp_path: Path) -> None:
    """T49: 0190241c puts a single problem's hint on its own line; the schema
    hint was written for a list printed above it ("fix the fields listed
    above in <file> ..."), so `check` now prints
    "<file>: /title: ... (hint: fix the fields listed above in <file> ...)",
    pointing at nothing and repeating the file. Suggested fix: a hint for
    one problem ("fix this field ..., then sign it again") when there is
    one, or leave the schema hint off the line."""
    tp = make_pool(tmp_path)
    obj = signed("ada", title="")
    path = tp.content / "dreams" / "0123456789abcdef.json"
    path.write_text(json.dumps(obj))
    problems, _ = pool.check(tp.content)
    (only,) = [p for p in problems if p.file.endswith("0123456789abcdef.json")]
    assert "listed above" not in only.rule, only


def test_a_logged_dream_whose_key_file_is_gone_is_not_told_to_submit(
    tmp_path: Path, run: Run
) -> None:
    """T49: b8772ee4's ``unknown_key_rule`` tells every dream whose key file is
    missing to "submit the dream with `dreampool submit`, which adds its
    author's key file". For a *logged* dream (its salt beside it) whose key
    file was deleted, the log line of the same run says "restore the file or
    its key file from git history", and following the dream line instead
    registers the key afresh as a guest, dated today: a member's tier (and
    any rotatedFrom) silently lost. Suggested fix: for a dream with a salt
    beside it (logged), say to restore content/keys/<16 hex>.yaml from git
    history, not to submit."""
    tp = make_pool(tmp_path)
    (dream_id,) = submit(tp, signed("ada", title="Logged by a member"))
    key = _key_file(tp, "ada")
    key.write_text(key.read_text().replace("tier: guest", "tier: member"))
    buildmod.build(tp.content, tmp_path / "site", signer=parse_private_key(tp.log_key))
    key.unlink()
    result = run("check", "--content", tp.content)
    assert result.code == 1
    line = next(x for x in result.err.splitlines() if f"{dream_id}.json: /sig/keyId" in x)
    assert "dreampool submit" not in line, line


@pytest.mark.parametrize("kind", ["empty folder", "fifo"])
def test_check_base_does_not_say_ok_beside_an_entry_the_build_refuses(
    repo: PoolFixture, run: Run, kind: str
) -> None:
    """T49: 6ed16a1f makes `check --base` name what the commits do not hold
    "so check said ok beside a broken dream file a build would read" no
    more; but an entry git does not list (an empty folder, a FIFO) named
    like a dream passes `check --base` (exit 0) while `check` and the build
    refuse it ("unexpected entry"). Suggested fix: also run
    ``gate.special_files`` / the scan's entry test over the pool's folders
    (or compare their listing with ``git ls-tree HEAD``) and name what is
    neither committed nor a plain committed file."""
    root = repo.content.parent
    _commit(root, "pull request")
    entry = repo.content / "dreams" / "0123456789abcdef.json"
    if kind == "fifo":
        os.mkfifo(entry)
    else:
        entry.mkdir()
    whole = run("check", "--content", "content")
    assert whole.code == 1 and "unexpected entry" in whole.err
    based = _check(run)
    assert based.code == 1
    assert "0123456789abcdef.json" in based.err and "unexpected entry" in based.err


def test_check_base_names_an_ignored_dream_file_the_build_reads(
    repo: PoolFixture, run: Run
) -> None:
    """T49: b2593fb2 stopped naming ignored files (``--ignored=no``), for a
    virtual environment or a key file a checkout ignores; but the build reads
    every file of content/dreams, ignored or not: a broken dream file that
    .git/info/exclude (or a global excludes file) ignores passes
    `check --base` (exit 0) while `check` and the build refuse it. Suggested
    fix: name ignored files too where the build reads them (dreams/, keys/,
    rotations/, erasures/, log/, pool.yaml), leaving others out."""
    root = repo.content.parent
    _commit(root, "pull request")
    (root / ".git" / "info" / "exclude").write_text("content/dreams/0123456789abcdef.json\n")
    (repo.content / "dreams" / "0123456789abcdef.json").write_text("{bad")
    whole = run("check", "--content", "content")
    assert whole.code == 1
    assert _check(run).code == 1


def test_untagged_fragments_are_said_once_with_the_other_sections(tmp_path: Path) -> None:
    """T81: d125a07e merges the store's "not tagged with this log key" notes
    into one line (``merged_notes``), but the fragments section's note
    (builder/site/units.py) has its own wording, still "(written by a build
    without it, or planted ...)", which the pattern does not match: a store
    with untagged fragments and seals gets two notes, one the old alarm.
    Suggested fix: write the fragments note with ``_untagged_note`` (and its
    own ending), or let ``merged_notes`` take it too."""
    tp = make_pool(tmp_path)
    tp.add("ada", 2)
    signer = parse_private_key(tp.log_key)
    buildmod.build(tp.content, tmp_path / "site", signer=signer)
    store = tmp_path / ".site.builds" / "cache" / buildcache.STORE
    with sqlite3.connect(store) as db:
        for table in ("fragments", "seals"):
            db.execute(f'UPDATE "{table}" SET a = NULL')  # whole rows, no tag
    db.close()
    report = buildmod.build(tp.content, tmp_path / "site", signer=signer)
    untagged = [n for n in report.notes if "not tagged with this log key" in n]
    assert len(untagged) == 1, report.notes
    assert "or planted" not in untagged[0]


# --- guards ----------------------------------------------------------------


def test_guard_hostile_untracked_names_are_each_named_escaped(repo: PoolFixture, run: Run) -> None:
    """T49 (guard): ``uncommitted`` reads ``git status --porcelain -z``: names
    with spaces, a leading '-', a newline, a tab, quotes, bytes that are not
    UTF-8, 250 bytes, and a nested repository are each named once, escaped,
    and fail the check; no annotation carries a raw newline."""
    root = repo.content.parent
    _commit(root, "pull request")
    folder = os.fsencode(repo.content / "dreams")
    names = [b"a b.json", b"-n.json", b"x\n::error::y.json", b"t\tab.json", b'"q".json',
             b"\xff\xfe.json", b"q" * 250]  # fmt: skip
    for name in names:
        with open(os.path.join(folder, name), "wb") as f:
            f.write(b"{}")
    nested = repo.content / "dreams" / "nested"
    nested.mkdir()
    git(nested, "init", "-q")
    result = _check(run, "--format", "github")
    assert result.code == 1
    lines = [x for x in result.out.splitlines() if "is not committed" in x]
    assert len(lines) == len(names) + 1, result.out
    assert all(x.startswith("::error file=") for x in result.out.splitlines()), result.out
    for shown in ("a b.json", "-n.json", "x\\n%3A%3Aerror%3A%3Ay.json", "t\\tab.json",
                  '"q".json', "\\udcff\\udcfe.json", "dreams/nested"):  # fmt: skip
        assert any(shown in x for x in lines), (shown, result.out)


def test_guard_renames_and_mode_changes_of_pool_files_are_refused(
    repo: PoolFixture, run: Run
) -> None:
    """T49 (guard): a logged dream renamed to another contributor path, and
    one made executable, are each refused (a rename is a deletion and an
    addition; a mode change is a change), whatever the new code paths."""
    root = repo.content.parent
    first, second = sorted((repo.content / "dreams").glob("*.json"))
    _git(root, "mv", str(first), str(first.with_name("0123456789abcdef.json")))
    second.chmod(0o755)
    _commit(root, "pull request")
    result = _check(run)
    assert result.code == 1
    assert f"{first.relative_to(root)}: the pull request deletes a file" in result.err
    assert f"{second.relative_to(root)}: the pull request changes a file" in result.err


def test_guard_salt_restore_hint_is_escaped_in_annotations(repo: PoolFixture, run: Run) -> None:
    """T49 (guard): the new salt message puts the raw path in its rule text
    ("git checkout <base> -- <path>"); a salt name with a newline and '::'
    (there on the base, deleted by the pull request) still gives one
    annotation line, escaped."""
    root = repo.content.parent
    weird = repo.content / "dreams" / "x\n::warning::y.salt"
    weird.write_text("s")
    _commit(root, "base with a strange salt")
    weird.unlink()
    _commit(root, "pull request")
    result = _check(run, "--format", "github")
    assert result.code == 1
    (line,) = [x for x in result.out.splitlines() if "restore it from the base" in x]
    assert line.startswith("::error file=") and "\n" not in line
    assert "x\\n::warning::y.salt" in line.replace("%3A", ":"), line
    assert not any(x.startswith("::warning") for x in result.out.splitlines())


def test_guard_an_honest_pull_request_passes_in_a_fresh_checkout_of_its_merge_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run: Run
) -> None:
    """T49 (guard): what the check workflow runs on: a fresh clone (depth 2)
    of GitHub's merge commit of an honest pull request, the base holding the
    build's committed log state and salts and a .gitignore. Nothing there is
    "not committed", and the check passes; a racy index (files as new as the
    index) changes nothing."""
    origin = tmp_path / "origin"
    tp = make_pool(origin)
    (origin / ".gitignore").write_text("/site\n/.site.builds/\n")
    submit(tp, signed("ada", title="Logged one"))
    buildmod.build(tp.content, origin / "site", signer=parse_private_key(tp.log_key))
    _drop_drafts(origin)
    git(origin, "init", "-q", "-b", "main")
    git(origin, "add", "-A")
    git(origin, "commit", "-q", "-m", "base")
    git(origin, "checkout", "-q", "-b", "pr")
    submit(tp, signed("carol", title="A new voice"))
    _drop_drafts(origin)
    git(origin, "add", "-A")
    git(origin, "commit", "-q", "-m", "pull request")
    git(origin, "checkout", "-q", "main")
    git(origin, "merge", "-q", "--no-ff", "-m", "Merge pr into main", "pr")
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", "--depth", "2", f"file://{origin}", str(clone))
    shutil.rmtree(origin / "site", ignore_errors=True)
    monkeypatch.chdir(clone)
    assert git(clone, "status", "--porcelain", "--untracked-files=all") == ""
    result = _check(run)
    assert result.code == 0, result.err


def test_guard_merged_notes_keep_every_other_note_as_it_is() -> None:
    """T81 (guard): only a whole untagged-rows note is merged; a note that
    holds that sentence inside a longer text (a path, a quoted error) and
    the damaged-rows note are kept as they are, in order."""
    untagged = buildcache.untagged_note("scan", 3)
    inner = f"/tmp/{untagged}/x was a link or not a plain file; removed it"
    notes = [
        inner,
        "the build store's scan had 2 damaged row(s); ignored",
        untagged,
        untagged + " ",
        buildcache.untagged_note("seals", 1),
    ]
    merged = buildcache.merged_notes(notes)
    assert merged[:3] == [inner, notes[1], untagged + " "]
    assert len(merged) == 4 and "(scan 3, seals 1)" in merged[3]


def test_guard_logged_dream_refused_or_missing_is_told_apart(tmp_path: Path, run: Run) -> None:
    """T49 (guard): b8772ee4 says "was refused" for a logged dream whose file
    is there (its key file broken), "is missing" when the file is gone, and a
    folder or a link under the dream's name is named with its own problem."""
    tp = make_pool(tmp_path)
    (dream_id,) = submit(tp, signed("ada", title="Logged"))
    buildmod.build(tp.content, tmp_path / "site", signer=parse_private_key(tp.log_key))
    file = tp.content / "dreams" / f"{dream_id}.json"
    key = _key_file(tp, "ada")
    key_text = key.read_text()
    key.write_text(key_text.replace("tier: guest", "tier: memeber"))
    result = run("check", "--content", tp.content)
    assert "was refused" in result.err and "is missing" not in result.err, result.err
    assert "its file" in result.err and "was refused (its problem is named" in result.err
    key.write_text(key_text)
    data = file.read_bytes()
    file.unlink()
    result = run("check", "--content", tp.content)
    assert "is missing and no erasure is recorded" in result.err, result.err
    file.mkdir()
    result = run("check", "--content", tp.content)
    assert "was refused" in result.err and "unexpected entry" in result.err, result.err
    file.rmdir()
    file.write_bytes(data)
    assert run("check", "--content", tp.content).code == 0


def test_guard_unknown_key_rule_reads_no_path_but_the_key_file(tmp_path: Path) -> None:
    """T49 (guard): ``unknown_key_rule`` builds a path from the dream's keyId;
    only a keyId the schema took (sha256: and 16 lowercase hex) reaches it,
    so no '../' leads outside content/keys."""
    obj = signed("ada")
    obj["sig"] = {**obj["sig"], "keyId": "sha256:../../../etc/passwd"}
    with pytest.raises(InputError):
        dreamfmt.parse(json.dumps(obj).encode(), "x")
    rule = pool.unknown_key_rule(tmp_path, "sha256:0123456789abcdef")
    assert "`dreampool submit`" in rule


def test_guard_gate_judge_still_refuses_what_it_refused(tmp_path: Path) -> None:
    """T49 (guard): judge, with the new ``_outside`` texts, still refuses
    salts (added, changed, deleted), log state and build state, whatever
    the status letter."""
    from builder.content.gitrepo import Change

    for status in ("A", "M", "D", "T", "X"):
        changes = [
            Change(status, "content/dreams/0123456789abcdef.salt", "100644", "100644"),
            Change(status, "content/log/leaves/000", "100644", "100644"),
            Change(status, ".Site.builds/x", "100644", "100644"),
        ]
        problems, added = gate.judge(changes, "content")
        assert len(problems) == 3 and added == gate.Contribution(), (status, problems)
