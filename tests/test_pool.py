"""The pool's content directory: submit, trust on first use, rotation, check."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from builder.content import pool
from builder.formats import dream as dreamfmt
from builder.formats import statement
from builder.formats.b64 import b64url_encode
from builder.formats.ed25519 import public_key_of
from tests.conftest import draft, write_json

ADA = bytes([1] * 32)
ADA2 = bytes([2] * 32)
BOB = bytes([3] * 32)

POOL_YAML = "title: Test pool\norigin: example.org/dreams\nbase_url: /\nk: 3\n"


@pytest.fixture
def content(tmp_path: Path) -> Path:
    root = tmp_path / "content"
    (root / "dreams").mkdir(parents=True)
    (root / "keys").mkdir()
    (root / "pool.yaml").write_text(POOL_YAML, encoding="utf-8")
    return root


def signed_file(tmp_path: Path, seed: bytes, name: str = "d.json", **fields: Any) -> Path:
    path = tmp_path / name
    path.write_text(
        json.dumps(dreamfmt.sign(draft(**fields), seed), ensure_ascii=False), encoding="utf-8"
    )
    return path


def snapshot(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def test_submit_registers_guest_key_and_writes_by_id(
    run: Any, content: Path, tmp_path: Path
) -> None:
    src = signed_file(tmp_path, ADA)
    d = dreamfmt.parse(src.read_bytes(), "x")
    result = run("submit", src, "--content", content)
    assert result.code == 0, result
    assert (content / "dreams" / f"{d.id}.json").read_bytes() == src.read_bytes()
    key_file = content / "keys" / f"{d.key_id[7:]}.yaml"
    assert "tier: guest" in key_file.read_text()
    assert f"registered new key {d.key_id} as guest" in result.out
    assert run("check", "--content", content).code == 0


def test_submit_again_says_already_and_writes_nothing(
    run: Any, content: Path, tmp_path: Path
) -> None:
    src = signed_file(tmp_path, ADA)
    assert run("submit", src, "--content", content).code == 0
    before = snapshot(content)
    result = run("submit", src, "--content", content)
    d = dreamfmt.parse(src.read_bytes(), "x")
    assert result.code == 0 and f"already in the pool as {d.id}" in result.out
    assert snapshot(content) == before


def test_tier_comes_from_the_directory_not_the_submission(
    run: Any, content: Path, tmp_path: Path
) -> None:
    src = signed_file(tmp_path, ADA)
    obj = json.loads(src.read_text())
    obj["tier"] = "maintainer"
    src.write_text(json.dumps(obj))
    result = run("submit", src, "--content", content)
    assert result.code == 1 and "/tier: unknown field" in result.err
    assert not list((content / "keys").iterdir())


def test_one_key_two_names_refused(run: Any, content: Path, tmp_path: Path) -> None:
    assert run("submit", signed_file(tmp_path, ADA), "--content", content).code == 0
    before = snapshot(content)
    other = signed_file(tmp_path, ADA, "e.json", author="mallory")
    result = run("submit", other, "--content", content)
    assert result.code == 1
    assert f"{other}: /author: key" in result.err and "registered to author 'ada'" in result.err
    assert snapshot(content) == before


def test_name_squatting_refused_without_rotation(run: Any, content: Path, tmp_path: Path) -> None:
    assert run("submit", signed_file(tmp_path, ADA), "--content", content).code == 0
    before = snapshot(content)
    squat = signed_file(tmp_path, BOB, "s.json", title="I am ada now")
    result = run("submit", squat, "--content", content)
    assert result.code == 1 and "author name 'ada' is held by key" in result.err
    assert "dreampool rotate" in result.err
    assert snapshot(content) == before


def rotation(old: bytes, new: bytes, author: str = "ada") -> dict[str, Any]:
    new_pub = public_key_of(new)
    return statement.sign(
        {
            "type": statement.ROTATE,
            "author": author,
            "oldKeyId": dreamfmt.key_id(public_key_of(old)),
            "newKeyId": dreamfmt.key_id(new_pub),
            "newPublicKey": b64url_encode(new_pub),
        },
        old,
    )


def test_rotation_signed_by_old_key_moves_the_name(run: Any, content: Path, tmp_path: Path) -> None:
    assert run("submit", signed_file(tmp_path, ADA), "--content", content).code == 0
    rot = tmp_path / "rot.json"
    rot.write_text(json.dumps(rotation(ADA, ADA2)))
    new = signed_file(tmp_path, ADA2, "n.json", title="With my new key")
    result = run("submit", rot, new, "--content", content)
    assert result.code == 0, result
    new_id = dreamfmt.key_id(public_key_of(ADA2))
    assert (
        f"rotatedFrom: '{dreamfmt.key_id(public_key_of(ADA))}'"
        in (content / "keys" / f"{new_id[7:]}.yaml").read_text()
    )
    assert (content / "rotations" / f"{new_id[7:]}.json").exists()
    # The rotation retired the old key at once: its dream, never logged (this
    # pool was never built), is refused now (docs/protocol.md §7).
    result = run("check", "--content", content)
    assert result.code == 1 and "problem(s)" in result.err, result
    assert result.err.count("is retired") == 1, result
    (old,) = [p for p in (content / "dreams").iterdir() if new_id not in p.read_text()]
    old.unlink()
    assert run("check", "--content", content).code == 0


def test_rotation_signed_by_someone_else_refused(run: Any, content: Path, tmp_path: Path) -> None:
    assert run("submit", signed_file(tmp_path, ADA), "--content", content).code == 0
    forged = rotation(BOB, ADA2)
    forged["oldKeyId"] = dreamfmt.key_id(public_key_of(ADA))
    rot = tmp_path / "rot.json"
    rot.write_text(json.dumps(forged))
    before = snapshot(content)
    result = run("submit", rot, signed_file(tmp_path, ADA2, "n.json"), "--content", content)
    assert result.code == 1 and str(rot) in result.err
    assert snapshot(content) == before


def test_one_bad_file_writes_nothing(run: Any, content: Path, tmp_path: Path) -> None:
    good = signed_file(tmp_path, ADA)
    bad = signed_file(tmp_path, BOB, "bad.json", author="bob")
    obj = json.loads(bad.read_text())
    obj["title"] = "tampered"
    bad.write_text(json.dumps(obj))
    result = run("submit", good, bad, "--content", content)
    assert result.code == 1 and f"{bad}: /sig: signature does not verify" in result.err
    assert "nothing was written" in result.err
    assert not list((content / "dreams").iterdir()) and not list((content / "keys").iterdir())


def test_pii_refused_with_hint_to_sign_again(run: Any, content: Path, tmp_path: Path) -> None:
    src = signed_file(
        tmp_path,
        ADA,
        entries=[{"text": "mail me at ada@example.com", "type": "fact", "confidence": "confirmed"}],
    )
    result = run("submit", src, "--content", content)
    assert result.code == 1
    assert f"{src}: /entries/0/text: still holds personal data (email)" in result.err
    assert "dreampool sign" in result.err and "ada@example.com" not in result.err
    assert not list((content / "dreams").iterdir())


def test_sign_redacts_and_reports_paths_not_text(run: Any, home: Path, tmp_path: Path) -> None:
    made = run("keygen", "--author", "ada")
    key_id = made.out.split("keyId")[1].split()[0]
    src = tmp_path / "draft.json"
    src.write_text(
        json.dumps(
            draft(
                entries=[
                    {
                        "text": "call 13812345678 or ada@example.com",
                        "type": "fact",
                        "confidence": "confirmed",
                    },
                    {
                        "text": "token ghp_abcdefghijklmnopqrstuvwxyz0123456789",
                        "type": "warning",
                        "confidence": "confirmed",
                    },
                ]
            )
        ),
        encoding="utf-8",
    )
    out = tmp_path / "signed.json"
    result = run("sign", src, "--key", key_id, "-o", out)
    assert result.code == 0, result
    assert "/entries/0/text: email → [email]" in result.err
    assert "/entries/0/text: phone → [phone]" in result.err
    assert "/entries/1/text: secret → [secret]" in result.err
    assert "13812345678" not in result.err and "ghp_" not in result.err
    assert "[email]" in out.read_text() and run("verify", out).code == 0


def test_sign_says_exactly_what_it_catches_and_what_not(
    run: Any, home: Path, tmp_path: Path
) -> None:
    """Issue 18: a national-format number was signed and published; `sign` now
    redacts it and says which layouts it catches and which it does not."""
    from builder.text import redact

    key_id = run("keygen", "--author", "ada").out.split("keyId")[1].split()[0]
    numbers = ["415-555-0199", "(415) 555-0199", "415.555.0199", "020-12345678", "tel: 4155550199"]
    entries = [{"text": f"call {n}", "type": "fact", "confidence": "confirmed"} for n in numbers]
    src = write_json(tmp_path / "draft.json", draft(entries=entries))
    out = tmp_path / "signed.json"
    result = run("sign", src, "--key", key_id, "-o", out)
    assert result.code == 0, result
    for i in range(len(numbers)):
        assert f"/entries/{i}/text: phone → [phone]" in result.err
    signed = json.loads(out.read_text(encoding="utf-8"))
    assert [e["text"] for e in signed["entries"]] == ["call [phone]"] * 4 + ["call tel: [phone]"]
    assert "dreampool: redaction replaces " + "; ".join(redact.CAUGHT.values()) in result.err
    assert f"it does not catch {redact.NOT_CAUGHT}" in result.err


def test_check_lists_every_problem(run: Any, content: Path, tmp_path: Path) -> None:
    assert run("submit", signed_file(tmp_path, ADA), "--content", content).code == 0
    dreams = content / "dreams"
    (dreams / "0000000000000000.json").write_bytes(
        signed_file(tmp_path, ADA, "x.json", title="misnamed").read_bytes()
    )
    (dreams / "notes.txt").write_text("hi")
    (dreams / "1111111111111111.json").symlink_to("/etc/passwd")
    (content / "pool.yaml").write_text(POOL_YAML + "colour: blue\n")
    result = run("check", "--content", content)
    assert result.code == 1
    assert "pool.yaml: /colour: unknown key" in result.err
    assert "0000000000000000.json: file name does not match the dream id" in result.err
    assert "notes.txt: unexpected entry" in result.err
    assert "1111111111111111.json: is a symlink" in result.err
    assert "4 problem(s)" in result.err


def test_a_salt_that_is_a_symlink_is_refused_not_read(content: Path, tmp_path: Path) -> None:
    """A pull request could make a dream's salt a symlink to /dev/zero (or a
    FIFO): `dreampool check` read it whole and ran out of memory. It is now a
    problem like any other symlink. Run with 1.5 GB of address space, so a
    regression fails fast instead of taking the machine's memory."""
    import resource
    import subprocess
    import sys

    from tests.pools import make_pool

    tp = make_pool(tmp_path / "pool")
    (dream_id,) = tp.add("ada", 1)
    (tp.content / "dreams" / f"{dream_id}.salt").symlink_to("/dev/zero")

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (3 << 29, 3 << 29))

    proc = subprocess.run(
        [sys.executable, "-m", "builder", "check", "--content", str(tp.content)],
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=cap,
    )
    assert proc.returncode == 1, proc.stderr
    assert f"{dream_id}.salt: is a symlink" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_check_github_format(run: Any, content: Path) -> None:
    (content / "pool.yaml").write_text(POOL_YAML + "title: again\n")
    result = run("check", "--content", content, "--format", "github")
    assert result.code == 1 and "::error file=" in result.out and ",line=5::" in result.out


@pytest.mark.parametrize("k", ["0", "three", "1e3"])
def test_config_k_out_of_range_says_what_it_found(run: Any, content: Path, k: str) -> None:
    """A new user's audit (23rd session): "/k: must be a whole number between
    1 and 1000" did not say what the file held."""
    (content / "pool.yaml").write_text(POOL_YAML.replace("k: 3", f"k: {k}"))
    result = run("check", "--content", content)
    assert result.code == 1
    assert f"/k: must be a whole number between 1 and 1000, is {k!r}" in result.err


def test_config_needs_origin(run: Any, content: Path) -> None:
    (content / "pool.yaml").write_text("title: x\n")
    result = run("check", "--content", content)
    assert result.code == 1 and "pool.yaml: /origin: is required" in result.err


def test_dream_by_unknown_key_is_a_problem(content: Path, tmp_path: Path, run: Any) -> None:
    src = signed_file(tmp_path, ADA)
    d = dreamfmt.parse(src.read_bytes(), "x")
    (content / "dreams" / f"{d.id}.json").write_bytes(src.read_bytes())
    result = run("check", "--content", content)
    assert result.code == 1 and "is not in the key directory" in result.err


def test_check_says_what_to_do_about_a_dream_edited_after_signing_or_empty(
    content: Path, tmp_path: Path, run: Any
) -> None:
    """A new user's audit (23rd session): `check` said "/sig: signature does
    not verify" with no fix (`verify` had one), and an empty file was "not
    valid JSON: Expecting value (column 1)"."""
    src = signed_file(tmp_path, ADA)
    d = dreamfmt.parse(src.read_bytes(), "x")
    edited = json.loads(src.read_bytes())
    edited["title"] += "!"
    (content / "dreams" / f"{d.id}.json").write_text(json.dumps(edited))
    (content / "dreams" / "0123456789abcdef.json").write_bytes(b"")
    result = run("check", "--content", content)
    assert result.code == 1
    assert "/sig: signature does not verify (hint: the dream was changed after signing" in (
        result.err
    )
    assert "sign the draft again with `dreampool sign`" in result.err
    assert "0123456789abcdef.json:1: the file is empty" in result.err


def test_a_content_folder_that_is_a_file_or_the_repository_root_says_where_the_pool_is(
    run: Any, content: Path, tmp_path: Path
) -> None:
    """A new user's audit (23rd session): `--content README.md` gave "README.md/
    pool.yaml: Not a directory" with no hint, and `--content .` at a pool's
    repository root suggested `dreampool init`."""
    readme = tmp_path / "README.md"
    readme.write_text("x")
    result = run("build", "--content", readme, "--out", tmp_path / "site")
    assert result.code == 1 and "is not a pool (it is not a folder)" in result.err, result.err
    assert "hint:" in result.err
    result = run("check", "--content", content.parent)
    assert result.code == 1 and f"hint: pass --content {content}: the pool is there" in result.err


def test_check_on_missing_pool(run: Any, tmp_path: Path) -> None:
    result = run("check", "--content", tmp_path / "nope")
    assert result.code == 1 and "is not a pool" in result.err and "hint:" in result.err


# --- key files --------------------------------------------------------------------

_AUTHORS = st.text(min_size=1, max_size=64).filter(lambda a: not dreamfmt.validate_author(a, "x"))


@given(
    author=_AUTHORS,
    seed=st.binary(min_size=32, max_size=32),
    tier=st.sampled_from(pool.TIERS),
    added=st.dates(),
    rotated=st.none() | st.from_regex(r"sha256:[0-9a-f]{16}", fullmatch=True),
)
def test_format_key_entry_writes_what_the_reader_reads(
    author: str, seed: bytes, tier: str, added: Any, rotated: str | None
) -> None:
    """Every entry `submit` can write (any author name a dream may carry, any
    date) reads back through the strict reader as the same entry."""
    public = public_key_of(seed)
    key_id = dreamfmt.key_id(public)
    entry = pool.KeyEntry(key_id, author, public, tier, added.isoformat(), rotated)
    data = pool.format_key_entry(entry)
    assert pool.read_key_file(data, "k.yaml", key_id[7:]) == (entry, [])


def test_the_sample_pools_key_files_read_as_they_are_written() -> None:
    """content/keys holds what format_key_entry writes, byte for byte."""
    from tests.conftest import REPO

    files = sorted((REPO / "content" / "keys").glob("*.yaml"))
    assert files
    for path in files:
        entry, problems = pool.read_key_file(path.read_bytes(), str(path), path.stem)
        assert entry is not None and not problems, problems
        assert pool.format_key_entry(entry) == path.read_bytes()


def test_the_key_cache_holds_plain_json_and_is_checked_again(content: Path, tmp_path: Path) -> None:
    """load_keys's cache maps a key file's content (builder.content.filekeys) to its
    mapping, a dict of str to str (what a JSON store keeps exactly); an entry
    the cache garbled is a problem, never a traceback or a key."""
    pool.submit(content, [signed_file(tmp_path, ADA)])
    cache: dict[Any, Any] = {}
    first, problems = pool.load_keys(content, cache=cache)
    assert not problems and len(cache) == 1
    ((digest, mapping),) = cache.values()
    assert type(mapping) is dict and all(type(v) is str for v in mapping.values())
    assert json.loads(json.dumps(mapping)) == mapping
    again, problems = pool.load_keys(content, cache=dict(cache))
    assert again.keys == first.keys and not problems
    for garbled in (["x"], {"author": 3}, {**mapping, "tier": "root"}, None):
        blob = next(iter(cache))
        directory, problems = pool.load_keys(content, cache={blob: (digest, garbled)})
        assert not directory.keys and problems, garbled


def test_dream_body_is_the_file_s_object_only_for_the_bytes_named(tmp_path: Path) -> None:
    """pool.dream_body (where a stored dream's body is found when its store row
    cannot be read again): the object of content/dreams/<id>.json if its bytes
    have the SHA-256 named, else None: other bytes, no file, a link, an id
    that is not one."""
    dreams = tmp_path / "dreams"
    dreams.mkdir()
    data = b'{"title": "t", "entries": []}'
    (dreams / "00112233aabbccdd.json").write_bytes(data)
    sha = hashlib.sha256(data).hexdigest()
    assert pool.dream_body(tmp_path, "00112233aabbccdd", sha) == {"title": "t", "entries": []}
    assert pool.dream_body(tmp_path, "00112233aabbccdd", "0" * 64) is None
    assert pool.dream_body(tmp_path, "00112233aabbccde", sha) is None
    (dreams / "00112233aabbccde.json").symlink_to(dreams / "00112233aabbccdd.json")
    assert pool.dream_body(tmp_path, "00112233aabbccde", sha) is None
    (dreams / "x.json").write_bytes(data)
    assert pool.dream_body(tmp_path, "../dreams/x", sha) is None
