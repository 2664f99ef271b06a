"""Anonymity attacks (issue 19, item 11): a reader who wants to know who wrote
a dream its author asked to keep anonymous (``consent.anonymize: true``), and
an author who hides behind the reserved name ``anonymous``.

An anonymized dream is signed by a one-time key under the author name
``anonymous`` (``dreampool sign``), so nothing published names its author or
carries their key; the pool refuses a new anonymized dream signed under any
other name, and keeps the name ``anonymous`` to one-time guest keys.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from builder.content import pool
from builder.errors import InputError
from builder.formats import dream as dreamfmt
from builder.formats.note import parse_private_key
from builder.log import logstate
from tests.conftest import draft, write_json
from tests.pools import PoolFixture, make_pool
from tests.redteam import build, dump, seed_of, set_tier, signed, submit, tree
from tests.siteapi import site_api_dreams

ANON = {"share": True, "derivatives": True, "anonymize": True}
Run = Callable[..., Any]


@pytest.fixture
def tp(tmp_path: Path) -> PoolFixture:
    return make_pool(tmp_path)


def one_time(n: int, **fields: Any) -> dict[str, Any]:
    """An anonymized dream as `dreampool sign` makes it: author ``anonymous``, a
    key of its own (fixed here, from ``n``, so tests are reproducible)."""
    fields.setdefault("title", f"An anonymous dream {n}")
    return signed("anonymous", seed=seed_of(f"one-time {n}"), consent=ANON, **fields)


def _holders(files: dict[str, bytes], needles: list[bytes]) -> list[str]:
    return sorted(path for path, data in files.items() if any(n in data for n in needles))


def _leaves(content: Path) -> list[dict[str, Any]]:
    return [json.loads(leaf) for leaf in logstate.load(content).leaves]


def test_an_anonymized_dream_publishes_no_name_or_key_of_its_author(
    run: Run, home: Path, tmp_path: Path
) -> None:
    """T68: nightjar signs a draft with ``consent.anonymize: true`` with their
    own key, submits it and the pool builds. No published file (record, proof,
    pages, feeds, API, agent files, search, log tiles and leaves) and nothing
    the pool commits (key files, leaves) carries nightjar's name or key:
    the dream is signed by a one-time key under the author ``anonymous``, which
    has no diary and is not listed among the authors. The one-time key's
    private half is kept nowhere."""
    tp = make_pool(tmp_path)
    made = run("keygen", "--author", "nightjar")
    assert made.code == 0, made
    own_key = made.out.split("keyId", 1)[1].split()[0]
    keys_before = sorted(p.name for p in (home / "keys").iterdir())
    source = write_json(tmp_path / "draft.json", draft(author="nightjar", consent=ANON))
    out = tmp_path / "signed.json"
    result = run("sign", source, "--key", own_key, "-o", out)
    assert result.code == 0, result
    obj = json.loads(out.read_text(encoding="utf-8"))
    assert obj["author"] == "anonymous"
    assert obj["sig"]["keyId"] != own_key
    assert sorted(p.name for p in (home / "keys").iterdir()) == keys_before
    assert run("submit", out, "--content", tp.content).code == 0
    out.unlink()
    site = tmp_path / "site"
    report = build(tp, site)
    assert len(report.admitted) == 1 and not report.refused
    (dream_id,) = report.admitted
    own_public = json.loads(next((home / "keys").iterdir()).read_text())["publicKey"]
    assert obj["sig"]["publicKey"] != own_public
    needles = [b"nightjar", own_key.encode(), own_key[7:].encode(), own_public.encode()]
    assert _holders(tree(site), needles) == []
    assert _holders(tree(tp.content), needles) == []
    record = json.loads((site / "dreams" / dream_id / "record.json").read_text())
    assert record["dream"]["author"] == "anonymous"
    authors = (site / "authors" / "index.html").read_text(encoding="utf-8")
    assert "anonymous" not in authors.split("<main", 1)[-1].split("</p>", 1)[-1]
    assert not (site / "authors" / "anonymous").exists()


def test_sign_says_what_anonymity_costs(run: Run, home: Path, tmp_path: Path) -> None:
    """T68: `dreampool sign --anonymize` (no key of the author needed) says
    what it costs: the dream counts as a guest's, it cannot be linked to the
    author, who can neither prove authorship later nor ask for erasure by
    signature (a maintainer can still erase it), and the one-time key is gone."""
    source = write_json(tmp_path / "draft.json", draft(author="nightjar"))
    out = tmp_path / "signed.json"
    result = run("sign", source, "--anonymize", "-o", out)
    assert result.code == 0, result
    obj = json.loads(out.read_text(encoding="utf-8"))
    assert obj["author"] == "anonymous" and obj["consent"]["anonymize"] is True
    said = " ".join(result.err.split())
    for words in (
        "guest",
        "cannot be linked to you",
        "cannot later prove",
        "maintainers",
        "one-time key",
        "discarded",
    ):
        assert words in said, (words, said)
    assert not (home / "keys").exists() or not any((home / "keys").iterdir())


def test_an_anonymized_dream_under_a_real_name_is_refused(tp: PoolFixture, tmp_path: Path) -> None:
    """T68: a dream with ``consent.anonymize: true`` signed under an author's
    own name (what `sign` made before) would publish that name and key: `submit`
    refuses it and tells the author to sign it again with `dreampool sign`; a
    build refuses it too and logs nothing of it."""
    obj = signed("nightjar", consent=ANON)
    path = tmp_path / "named.json"
    path.write_bytes(dump(obj))
    with pytest.raises(InputError) as info:
        pool.submit(tp.content, [path])
    text = str(info.value) + " ".join(str(p) for p in info.value.problems)
    assert "/consent/anonymize" in text and "dreampool sign" in text
    assert not any((tp.content / "dreams").iterdir())
    # Put in by hand (or by an old client): the build refuses it, logs nothing.
    submit(tp, signed("ada", title="A named dream"))
    d = dreamfmt.parse(dump(obj), "x")
    (tp.content / "dreams" / f"{d.id}.json").write_bytes(dump(obj))
    pool.atomic_write(
        tp.content / "keys" / f"{d.key_id[7:]}.yaml",
        pool.format_key_entry(
            pool.KeyEntry(d.key_id, "nightjar", d.public_key, "guest", "2026-01-01")
        ),
    )
    report = build(tp, tmp_path / "site")
    assert d.id not in report.admitted
    assert any(p.pointer == "/consent/anonymize" for p in report.refused), report.refused
    assert _holders({"leaves": b"".join(logstate.load(tp.content).leaves)}, [b"nightjar"]) == []


def test_an_anonymized_dream_logged_under_a_real_name_still_builds_and_check_warns(
    tp: PoolFixture, tmp_path: Path, run: Run
) -> None:
    """T68: a dream logged before the rule (anonymized, under its author's
    name) stays: the log is append-only and the build still builds it. `check`
    names it with a warning that says what is published and what to do
    (erase it, sign it again with `dreampool sign`), and exits 0; an author
    whose only dreams are such dreams is not listed among the authors."""
    submit(tp, signed("ada", title="A named dream"))
    legacy = signed("nightjar", consent=ANON)
    d = dreamfmt.parse(dump(legacy), "x")
    # Before the rule: written and logged as a build then did.
    (tp.content / "dreams" / f"{d.id}.json").write_bytes(dump(legacy))
    pool.atomic_write(
        tp.content / "keys" / f"{d.key_id[7:]}.yaml",
        pool.format_key_entry(
            pool.KeyEntry(d.key_id, "nightjar", d.public_key, "guest", "2026-01-01")
        ),
    )
    _log_as_before(tp)
    site = tmp_path / "site"
    report = build(tp, site)
    assert not report.refused, report.refused
    assert (site / "dreams" / d.id / "record.json").exists()
    authors = (site / "authors" / "index.html").read_text(encoding="utf-8")
    assert "nightjar" not in authors
    assert "ada" in authors
    result = run("check", "--content", tp.content)
    assert result.code == 0, result
    assert "warning" in result.err and d.id in result.err, result
    said = " ".join(result.err.split())
    assert "dreampool erase" in said and "dreampool sign" in said, said


def _log_as_before(tp: PoolFixture) -> None:
    """Log every dream of the pool as a build before the anonymity rule did,
    whatever the rules are now: write the leaves and sign a checkpoint."""
    from builder.formats import checkpoint as cp
    from builder.formats import leaf as leaffmt
    from builder.formats import merkle
    from builder.formats.policy import Policy, PolicyLog, format_policy
    from builder.log import logbuild

    signer = parse_private_key(tp.log_key)
    content = tp.content
    state = logstate.load(content)
    policy = Policy((PolicyLog(signer.verifier, None),), (), (), "none")
    (content / "log").mkdir(exist_ok=True)
    pool.atomic_write(content / "log" / "policy", format_policy(policy).encode())
    state.policy = format_policy(policy)
    leaves: list[bytes] = []
    keys: set[str] = set()
    for path in sorted((content / "dreams").glob("*.json")):
        d = dreamfmt.parse(path.read_bytes(), str(path))
        if d.key_id not in keys:
            keys.add(d.key_id)
            leaves.append(leaffmt.encode(leaffmt.KeyLeaf(d.key_id, d.public_key, d.author)))
        salt = logbuild.new_salt(d.id)
        pool.atomic_write(path.with_suffix(".salt"), salt.encode() + b"\n")
        leaves.append(leaffmt.encode(leaffmt.DreamLeaf(d.id, logbuild.commitment(d.body, salt))))
    tree_ = merkle.MerkleTree.from_leaf_hashes(merkle.leaf_hash(x) for x in leaves)
    logstate.append(content, state, leaves)
    note = cp.sign_checkpoint(cp.Checkpoint(logbuild_origin(tp), tree_.size, tree_.root()), signer)
    logstate.record_checkpoint(content, state, tree_.size, note, "2026-01-01T00:00:00Z")


def logbuild_origin(tp: PoolFixture) -> str:
    return pool.load_config(tp.content).origin


def test_many_one_time_keys_share_the_name_anonymous(tp: PoolFixture, tmp_path: Path) -> None:
    """T70: ``anonymous`` is the one name many keys may hold: three one-time
    keys, each with its one dream, are admitted as guests, with no rotation;
    the author ``anonymous`` has no diary and is not listed."""
    ids = submit(tp, one_time(1), one_time(2), one_time(3), signed("ada"))
    directory, problems = pool.load_keys(tp.content)
    assert problems == []
    anonymous = directory.by_author("anonymous")
    assert len(anonymous) == 3 and {k.tier for k in anonymous} == {"guest"}
    site = tmp_path / "site"
    report = build(tp, site)
    assert sorted(report.admitted) == sorted(ids) and not report.refused
    assert not (site / "authors" / "anonymous").exists()
    shown = {r["id"]: r for r in site_api_dreams(site)}
    for dream_id in ids[:3]:
        assert shown[dream_id]["author"] is None


def test_a_one_time_key_signs_one_dream(tp: PoolFixture, tmp_path: Path) -> None:
    """T70: a key under ``anonymous`` signs one dream: a second dream by a
    logged one-time key is refused by `submit` and by the build, so nobody can
    keep an unnamed identity going under the name."""
    submit(tp, one_time(1))
    build(tp, tmp_path / "site")
    again = one_time(1, title="The same key again")
    path = tmp_path / "again.json"
    path.write_bytes(dump(again))
    with pytest.raises(InputError) as info:
        pool.submit(tp.content, [path])
    assert any("one dream" in p.rule for p in info.value.problems), info.value.problems
    d = dreamfmt.parse(dump(again), "x")
    (tp.content / "dreams" / f"{d.id}.json").write_bytes(dump(again))
    report = build(tp, tmp_path / "site")
    assert d.id not in report.admitted and report.refused
    # Two dreams by one new one-time key in one submission: refused too.
    pair = [one_time(9, title="first"), one_time(9, title="second")]
    files = []
    for n, obj in enumerate(pair):
        files.append(tmp_path / f"pair{n}.json")
        files[-1].write_bytes(dump(obj))
    with pytest.raises(InputError):
        pool.submit(tp.content, files)


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("tier", "member", "guest"),
        ("rotatedFrom", "sha256:0123456789abcdef", "rotat"),
    ],
)
def test_an_anonymous_key_is_always_a_guest_and_never_rotated(
    tp: PoolFixture, field: str, value: str, words: str
) -> None:
    """T70: a maintainer cannot raise a one-time key (its dreams would count
    toward the patterns' k as a trusted author), nor link it to another key."""
    submit(tp, one_time(1))
    (path,) = (tp.content / "keys").glob("*.yaml")
    text = path.read_text(encoding="utf-8")
    if field == "tier":
        text = text.replace("tier: guest", f"tier: {value}")
    else:
        text += f"{field}: '{value}'\n"
    path.write_text(text, encoding="utf-8")
    _, problems = pool.load_keys(tp.content)
    assert any(words in p.rule and "anonymous" in p.rule for p in problems), problems


def test_the_name_anonymous_is_for_anonymized_dreams_only(tp: PoolFixture, tmp_path: Path) -> None:
    """T70: a dream under ``anonymous`` that does not ask for anonymity is
    refused, and so is a name that looks like it (``Anonymous``), which would
    pass for the reserved name on a page."""
    for n, obj in enumerate(
        [
            signed("anonymous", seed=seed_of("one-time x")),
            signed("Anonymous"),
            signed("ａｎｏｎｙｍｏｕｓ"),
        ]
    ):
        path = tmp_path / f"{n}.json"
        path.write_bytes(dump(obj))
        with pytest.raises(InputError) as info:
            pool.submit(tp.content, [path])
        assert any("anonymous" in p.rule for p in info.value.problems), info.value.problems


def test_anonymous_dreams_do_not_count_as_authors_for_patterns(
    tp: PoolFixture, tmp_path: Path
) -> None:
    """T70: one-time keys are free to make, and any number of them may be
    one person, perhaps an author already counted: they count toward no
    pattern's k, even at ``min_tier=guest`` (the pool's k is 2 here)."""
    from builder.log import logbuild
    from builder.site import model, patterns

    submit(tp, signed("ada", tags=["zebra"]), one_time(1, tags=["zebra"]))
    set_tier(tp, "ada", "member")
    build(tp, tmp_path / "site")
    directory, _ = pool.load_keys(tp.content)
    config = pool.load_config(tp.content)
    scanned, _ = pool.scan_dreams(tp.content, directory)
    log = logbuild.update(tp.content, scanned, origin=config.origin, signer=None)
    view = model.build_model(log, directory, config, base_url="/")
    found = patterns.compute_patterns(view, min_tier="guest")
    assert "zebra" not in {t.term for t in found.tags}, found.tags


def test_key_leaves_do_not_sit_beside_their_dreams(tp: PoolFixture, tmp_path: Path) -> None:
    """T69: the key leaf of a dream's key was appended just before the
    dream's leaf, so a key's log index (shown in its author's diary) gave away
    its first dream, anonymized or not. A build now appends all its new key
    leaves first, by keyId, then its dreams, by id: within a build, a key leaf's
    position says nothing of which dream it came with."""
    ids = submit(tp, signed("ada"), signed("bob"), signed("carol"), signed("dora"))
    build(tp, tmp_path / "site")
    leaves = _leaves(tp.content)
    kinds = [leaf["kind"] for leaf in leaves]
    assert kinds == ["key"] * 4 + ["dream"] * 4, kinds
    assert [leaf["keyId"] for leaf in leaves[:4]] == sorted(leaf["keyId"] for leaf in leaves[:4])
    assert [leaf["id"] for leaf in leaves[4:]] == sorted(ids)
    # The next build, with a one-time key: the same order, after what is logged.
    (more,) = submit(tp, one_time(1))
    build(tp, tmp_path / "site")
    kinds = [leaf["kind"] for leaf in _leaves(tp.content)[8:]]
    assert kinds == ["key", "dream"] and _leaves(tp.content)[9]["id"] == more


def test_an_agent_drafting_an_anonymized_dream_signs_it_with_a_one_time_key(
    tp: PoolFixture, home: Path
) -> None:
    """T68: the MCP server's dream_draft (an agent writing its own dream)
    signs an anonymized draft as `dreampool sign` does: under ``anonymous``,
    by a one-time key, not the agent's key, and says what that costs."""
    from builder.agents import mcp_server
    from builder.content import keystore

    key = keystore.create_author_key("nightjar")
    body = {k: v for k, v in draft(consent=ANON).items() if k != "author"}
    result = mcp_server.draft_dream(body, key.key_id, tp.content)
    d = dreamfmt.parse(result.path.read_bytes(), str(result.path))
    assert d.author == "anonymous" and d.key_id != key.key_id
    assert result.key_id == d.key_id and result.tier == "guest"
    assert b"nightjar" not in b"".join(p.read_bytes() for p in tp.content.rglob("*.*"))
    assert sorted(p.name for p in (home / "keys").iterdir()) == [f"{key.key_id[7:]}.key"]
    tools = mcp_server.Tools(None, content=tp.content)  # type: ignore[arg-type]  # drafting reads no site
    out = tools.dream_draft("Another", body["entries"], key.key_id, anonymize=True)
    assert "cannot be linked to you" in " ".join(out.text.split())


def test_anonymous_keys_retire_none_of_each_other(tp: PoolFixture, tmp_path: Path) -> None:
    """T70: a later key leaf of an author retires the earlier keys
    (docs/protocol.md §3), but one-time keys all hold the name ``anonymous``:
    were the rule applied to them, each new one would retire the last, and the
    next build, ``check`` and every site verifier would refuse the pool. Two
    builds of one-time keys, then a third build: all admitted, the log replays
    clean, and the independent verifier accepts the site."""
    from tests.independent_verifier import verify_site

    first = submit(tp, one_time(1), one_time(2), one_time(3))
    site = tmp_path / "site"
    assert sorted(build(tp, site).admitted) == sorted(first)
    second = submit(tp, one_time(4))
    report = build(tp, site)
    assert report.admitted == second and not report.refused
    report = build(tp, site)  # a build that logs nothing replays the whole log
    assert not report.refused
    problems, _ = pool.check(tp.content)
    assert problems == []
    assert verify_site(site, tp.vkey).dream_leaves == 4
