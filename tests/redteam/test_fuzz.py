"""Fuzzing the parsers a hostile input reaches (THREATS.md T41).

Every target takes untrusted bytes or text and must end in a result or in an
error of the project's family (:class:`~builder.errors.DreampoolError`), or in the
``ValueError`` a module documents for it (``strictjson.JSONError``,
``tiles.parse_tile_path``): never another exception, and never a hang. Where a
parser promises a canonical form, what it accepts must also format back to the
same bytes.

Inputs are drawn two ways: mutations of valid inputs (bit flips, cuts, deletions,
insertions of random bytes or of tokens the formats care about, duplicated runs),
which reach deep into each parser; and raw random bytes or text. Each example runs
under an alarm of :data:`TIME_LIMIT` seconds, so a hang fails the test instead of
stalling it.

CI runs :data:`CI_EXAMPLES` examples per target; ``scripts/fuzz_long.py`` runs the
same :data:`TARGETS` with as many as it is told (100,000 each by default).
"""

from __future__ import annotations

import functools
import hashlib
import re
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

from builder.content import init, pool
from builder.errors import DreampoolError, InputError, VerificationError
from builder.formats import checkpoint as cpmod
from builder.formats import dream as dreamfmt
from builder.formats import ed25519, note, policy, strictjson, tiles, tlogproof
from builder.readers import lightclient, monitor
from tests.conftest import REPO
from tests.test_lightclient import LARGE, SMALL, LogBuilder, build_standard_log, signed_dream

CI_EXAMPLES = 200
TIME_LIMIT = 10  # seconds per example; the slowest target takes milliseconds

# Tokens the formats care about: separators, signature prefixes, JSON syntax,
# encodings that strict readers refuse, directives.
TOKENS = [
    b"\n",
    b"\n\n",
    b"\r\n",
    b" ",
    b"\t",
    b"\x00",
    b"\x7f",
    b"\xff",
    b"\xc0\xaf",
    b"\xed\xa0\x80",
    b"\xef\xbb\xbf",
    "\u2014 ".encode(),
    "\u202e".encode(),
    b'"',
    b"\\",
    b"\\u0000",
    b"\\ud800",
    b"{",
    b"}",
    b"[",
    b"]",
    b",",
    b":",
    b"-",
    b"+",
    b"/",
    b"=",
    b"0",
    b"00",
    b"9" * 20,
    b"9" * 5000,
    b"1e999",
    b"-0",
    b"NaN",
    b"null",
    b"true",
    b"index ",
    b"extra ",
    b"c2sp.org/tlog-proof@v1\n",
    b"log ",
    b"witness w ",
    b"group g any w\n",
    b"quorum none\n",
    b"# ",
    b"tile/",
    b"x001/",
    b".p/",
    b"entries/",
]


# Numbers that strict readers must refuse or bound: a "number" mutation puts one in
# place of a run of digits, where a parser reads a number (JSON values, sizes,
# indexes, tile paths, group thresholds).
NUMBERS = [
    b"9" * 5000,
    b"-" + b"9" * 5000,
    b"1" * 400,
    b"1e999",
    b"-1e999",
    b"1e-999",
    b"9007199254740993",
    b"9223372036854775808",
    b"18446744073709551616",
    b"-0",
    b"0.0",
    b"1E2",
    b"01",
    b"00",
    b"NaN",
    b"Infinity",
    b"0x10",
    b"+1",
    b"1_000",
    b"\\u0031",
]
_DIGITS = re.compile(rb"[0-9]+")


class Hang(BaseException):
    """An example ran past TIME_LIMIT (a BaseException, so no parser can swallow it)."""


@contextmanager
def bounded(seconds: float) -> Iterator[None]:
    def expire(signum: int, frame: Any) -> None:
        raise Hang(f"no result after {seconds}s")

    old = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


# --- mutations ------------------------------------------------------------------------

_OP = st.one_of(
    st.tuples(st.just("flip"), st.integers(0, 1 << 20), st.integers(0, 7)),
    st.tuples(st.just("cut"), st.integers(0, 1 << 20), st.just(0)),
    st.tuples(st.just("delete"), st.integers(0, 1 << 20), st.integers(1, 80)),
    st.tuples(st.just("insert"), st.integers(0, 1 << 20), st.binary(min_size=1, max_size=24)),
    st.tuples(st.just("token"), st.integers(0, 1 << 20), st.sampled_from(TOKENS)),
    st.tuples(st.just("repeat"), st.integers(0, 1 << 20), st.integers(1, 300)),
    st.tuples(st.just("number"), st.integers(0, 1 << 20), st.sampled_from(NUMBERS)),
)


def mutate(seed: bytes, ops: list[tuple[str, int, Any]]) -> bytes:
    data = bytearray(seed)
    for op, where, arg in ops:
        at = where % (len(data) + 1)
        if op == "flip" and data:
            data[min(at, len(data) - 1)] ^= 1 << arg
        elif op == "cut":
            del data[at:]
        elif op == "delete":
            del data[at : at + arg]
        elif op in ("insert", "token"):
            data[at:at] = arg
        elif op == "repeat":
            data[at:at] = data[at : at + arg]
        elif op == "number":
            runs = list(_DIGITS.finditer(data))
            if runs:
                run = runs[where % len(runs)]
                data[run.start() : run.end()] = arg
    return bytes(data)


def mutations(*seeds: bytes) -> st.SearchStrategy[bytes]:
    """Valid inputs, mutated 1–6 times; one draw in five is random bytes instead."""
    mutated = st.builds(mutate, st.sampled_from(seeds), st.lists(_OP, min_size=1, max_size=6))
    return st.one_of(mutated, mutated, mutated, mutated, st.binary(max_size=1024))


# What YAML cares about, for the key-file target: indicators of the constructs the
# strict reader refuses, escapes, block scalars, document markers.
YAML_TOKENS = [
    b"&a ",
    b"*a",
    b"!!str ",
    b"!x ",
    b"? ",
    b"- ",
    b"<<: ",
    b": ",
    b"---\n",
    b"...\n",
    b"%YAML 1.1\n",
    b"|\n  ",
    b">-\n  ",
    b"'",
    b"''",
    b"# ",
    b"\\e",
    b"\\ud800",
    b"\\UFFFFFFFF",
    b"\\x85",
    b"~",
    b"\r",
    "\u2028".encode(),
    b"\xc2\x85",
]
_YAML_OP = st.one_of(
    _OP,
    st.tuples(st.just("token"), st.integers(0, 1 << 20), st.sampled_from(YAML_TOKENS)),
)


def yaml_mutations(*seeds: bytes) -> st.SearchStrategy[bytes]:
    """As :func:`mutations`, with YAML's tokens as well."""
    mutated = st.builds(mutate, st.sampled_from(seeds), st.lists(_YAML_OP, min_size=1, max_size=6))
    return st.one_of(mutated, mutated, mutated, mutated, st.binary(max_size=1024))


def text_mutations(*seeds: bytes) -> st.SearchStrategy[str]:
    """As :func:`mutations`, decoded as a str parser sees it (lone surrogates kept)."""
    return st.one_of(
        mutations(*seeds).map(lambda b: b.decode("utf-8", "surrogateescape")),
        st.text(max_size=256),
    )


# --- seeds: valid inputs of every format ----------------------------------------------


@dataclass(frozen=True)
class Seeds:
    dreams: tuple[bytes, ...]
    notes: tuple[bytes, ...]  # signed checkpoints, one cosigned
    checkpoint_texts: tuple[bytes, ...]
    policies: tuple[bytes, ...]
    proofs: tuple[bytes, ...]
    records: tuple[bytes, ...]
    consistency: bytes
    bundles: tuple[bytes, ...]
    tile_paths: tuple[bytes, ...]
    log: LogBuilder
    files: dict[str, bytes]
    witness_policy: policy.Policy
    titles: tuple[str, ...]
    yaml_files: tuple[bytes, ...]  # key files of KEY_FILE_HEX, and pool.yaml files


@functools.cache
def seeds() -> Seeds:
    log = build_standard_log()
    titles = ("first", "second", "third", "fourth", "late")
    cosigner = cpmod.Cosigner.from_seed("witness.example/w1", hashlib.sha256(b"w1").digest())
    witnessed = LogBuilder(witnesses=(policy.PolicyWitness("w1", cosigner.verifier),), quorum="w1")
    witnessed.add_key("ada")
    witnessed.add_dream(signed_dream("ada", "first"))
    size = witnessed.sign()
    text = witnessed.checkpoints[size].split(b"\n\n")[0] + b"\n"
    witnessed.checkpoints[size] += cpmod.cosign(text.decode(), cosigner, 1_700_000_000).encode()
    files = log.site_files(LARGE)
    notes = (log.checkpoints[SMALL], log.checkpoints[LARGE], witnessed.checkpoints[size])
    rich = signed_dream("ada", "A richer dream: 版本 and **Markdown**")
    rich_body = {k: v for k, v in rich.items() if k != "sig"} | {
        "tags": ["rust", "数据库"],
        "lineage": {"parent": "0123456789abcdef", "generation": 3},
        "entries": [{"text": "t\nu", "type": "rule", "confidence": "theory", "source": "s"}],
    }
    rich = dreamfmt.sign(rich_body, hashlib.sha256(b"rich").digest())
    return Seeds(
        dreams=(strictjson.canonical(signed_dream("ada", "first")), strictjson.canonical(rich)),
        notes=notes,
        checkpoint_texts=tuple(n.split(b"\n\n")[0] + b"\n" for n in notes),
        policies=(log.policy, witnessed.policy),
        proofs=(*(log.proof(t) for t in titles), log.proof("first", LARGE)),
        records=tuple(log.record(t) for t in titles),
        consistency=files[f"log/consistency/{SMALL}"],
        bundles=tuple(d for p, d in files.items() if p.startswith("log/tile/entries/")),
        tile_paths=tuple(p.removeprefix("log/").encode() for p in files if "/tile/" in p),
        log=log,
        files=files,
        witness_policy=policy.parse_policy(witnessed.policy),
        titles=titles,
        yaml_files=_yaml_files(),
    )


_KEY_SEED = hashlib.sha256(b"key file").digest()
KEY_FILE_HEX = dreamfmt.key_id(ed25519.public_key_of(_KEY_SEED))[7:]


def _yaml_files() -> tuple[bytes, ...]:
    public = ed25519.public_key_of(_KEY_SEED)
    key_id = dreamfmt.key_id(public)
    entries = [
        pool.KeyEntry(key_id, "ada", public, "guest", "2026-11-16"),
        pool.KeyEntry(key_id, '墨子 "q" \\', public, "maintainer", "1999-02-28"),
        pool.KeyEntry(key_id, "bob", public, "member", "2026-01-31", "sha256:0123456789abcdef"),
    ]
    return (
        *(pool.format_key_entry(e) for e in entries),
        (REPO / "content" / "pool.yaml").read_bytes(),
        init.pool_yaml("example.org/dreams", 'A "quoted" pool: 数据').encode(),
    )


# --- targets ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """What to draw, and what to do with one example (raise AssertionError on a finding)."""

    strategy: Callable[[], st.SearchStrategy[Any]]
    run: Callable[[Any], None]


def _expect(call: Callable[[], Any], allowed: tuple[type[BaseException], ...]) -> Any:
    """The call's result, or None if it raised one of ``allowed``; anything else escapes."""
    try:
        return call()
    except allowed:
        return None


def _key_file(data: bytes) -> None:
    """A key file (and, the same bytes, a pool.yaml): an entry that writes back
    to itself, or problems of the project's family."""
    entry, problems = pool.read_key_file(data, "fuzz.yaml", KEY_FILE_HEX)
    assert (entry is None) == bool(problems)
    if entry is not None:
        assert pool.read_key_file(pool.format_key_entry(entry), "again", KEY_FILE_HEX) == (
            entry,
            [],
        )
    config = _expect(
        lambda: pool.read_yaml(data, "pool.yaml", max_bytes=pool.CONFIG_MAX_BYTES), (InputError,)
    )
    if config is not None:
        pool.check_config(config, "pool.yaml")


def _dream(data: bytes) -> None:
    d = _expect(lambda: dreamfmt.parse(data, "fuzz.json"), (DreampoolError,))
    if d is not None:  # whatever parses verifies again from its own bytes
        assert dreamfmt.parse(strictjson.canonical(dict(d.body)), "again").id == d.id


def _json(data: bytes) -> None:
    value = _expect(lambda: strictjson.loads(data), (strictjson.JSONError,))
    if value is not None:  # what strict JSON accepts has a canonical form that reads back
        canonical = strictjson.canonical(value)
        assert strictjson.loads(canonical, max_bytes=max(len(canonical), 1)) == value
        assert strictjson.is_canonical(canonical)


def _split_note(data: bytes) -> None:
    _expect(lambda: note.split_note(data), (DreampoolError,))


def _open_note(data: bytes) -> None:
    log = seeds().log
    opened = _expect(lambda: note.open_note(data, [log.signer.verifier]), (DreampoolError,))
    if opened is not None:  # a note that opens was signed: its text is a signed text
        assert opened.signatures


def _checkpoint(text: str) -> None:
    cp = _expect(lambda: cpmod.parse_checkpoint(text), (DreampoolError,))
    if cp is not None:  # tlog-checkpoint parsing is canonical
        assert cpmod.format_checkpoint(cp) == text


def _verify_checkpoint(data: bytes) -> None:
    for pinned in (policy.parse_policy(seeds().log.policy), seeds().witness_policy):
        _expect(lambda pinned=pinned: policy.verify_checkpoint(pinned, data), (DreampoolError,))


def _policy(data: bytes) -> None:
    parsed = _expect(lambda: policy.parse_policy(data), (DreampoolError,))
    if parsed is not None:  # a parsed policy formats to a policy that parses the same
        assert policy.parse_policy(policy.format_policy(parsed)) == parsed


def _tlog_proof(data: bytes) -> None:
    proof = _expect(lambda: tlogproof.parse_tlog_proof(data), (DreampoolError,))
    if proof is not None:  # one spelling per proof
        assert tlogproof.format_tlog_proof(proof) == data


def _light_client(example: tuple[int, bytes]) -> None:
    """verify_proof of dream "first" with one of its five inputs mutated: a labelled
    VerificationError, or (a mutation that changes nothing that matters, such as
    the record's whitespace) the honest result."""
    which, data = example
    s = seeds()
    args: list[bytes] = [
        s.log.proof("first"),
        s.log.record("first"),
        s.log.policy,
        s.log.checkpoints[LARGE],
        s.consistency,
    ]
    args[which] = data
    try:
        result = lightclient.verify_proof(
            args[0], args[1], args[2], newer=args[3], consistency=args[4]
        )
    except VerificationError as exc:
        assert exc.step in (1, 2, 3, 4, 5), exc.step
        return
    honest = lightclient.verify_proof(s.log.proof("first"), s.log.record("first"), s.log.policy)
    assert (result.id, result.index, result.leaf_data) == (
        honest.id,
        honest.index,
        honest.leaf_data,
    )


def _consistency_file(data: bytes) -> None:
    hashes = _expect(lambda: lightclient.parse_consistency_proof(data), (VerificationError,))
    if hashes is not None:
        assert all(len(h) == 32 for h in hashes)


class _FuzzSite:
    """A site whose checkpoint, consistency file or one tile is the example."""

    def __init__(self, files: dict[str, bytes]) -> None:
        self.files = files

    def fetch(self, path: str, limit: int) -> bytes:
        if path not in self.files:
            raise monitor.NotFoundError(f"{path}: no such file")
        data = self.files[path]
        if len(data) > limit:
            raise monitor.SiteError(f"{path} is over {limit} bytes")
        return data

    def describe(self, path: str) -> str:
        return path


def _monitor(example: tuple[int, bytes]) -> None:
    which, data = example
    s = seeds()
    files = dict(s.files)
    path = (
        "log/checkpoint",
        f"log/consistency/{SMALL}",
        "log/tile/0/000",
        "log/tile/1/000.p/1",
        "log/tile/0/001.p/12",
    )[which % 5]
    files[path] = data
    pinned = policy.parse_policy(s.log.policy)
    verdict = _expect(
        lambda: monitor.check_site(pinned, s.log.checkpoints[SMALL], _FuzzSite(files)),
        (DreampoolError,),
    )
    if verdict is not None and path == "log/checkpoint":
        assert verdict.status in ("consistent", "fork", "rollback")


def _entry_bundle(data: bytes) -> None:
    entries = _expect(lambda: tiles.decode_entry_bundle(data), (DreampoolError,))
    if entries is not None:
        assert tiles.encode_entry_bundle(entries) == data


def _tile_path(text: str) -> None:
    ref = _expect(lambda: tiles.parse_tile_path(text), (ValueError,))
    if ref is not None:
        assert ref.path == text


def _verifier_key(text: str) -> None:
    _expect(lambda: note.parse_verifier_key(text), (DreampoolError,))
    _expect(lambda: cpmod.parse_cosigner_key(text), (DreampoolError,))


def _five_inputs(*seed_sets: tuple[bytes, ...]) -> st.SearchStrategy[tuple[int, bytes]]:
    return st.integers(0, len(seed_sets) - 1).flatmap(
        lambda i: st.tuples(st.just(i), mutations(*seed_sets[i]))
    )


def _light_client_strategy() -> st.SearchStrategy[tuple[int, bytes]]:
    s = seeds()
    return _five_inputs(s.proofs, s.records, s.policies, s.notes, (s.consistency, b""))


def _monitor_strategy() -> st.SearchStrategy[tuple[int, bytes]]:
    s = seeds()
    files = s.files
    return _five_inputs(
        s.notes,
        (s.consistency,),
        (files["log/tile/0/000"],),
        (files["log/tile/1/000.p/1"],),
        (files["log/tile/0/001.p/12"],),
    )


TARGETS: dict[str, Target] = {
    "dream.parse": Target(lambda: mutations(*seeds().dreams), _dream),
    "strictjson.loads": Target(lambda: mutations(*seeds().dreams, *seeds().records), _json),
    "note.split_note": Target(lambda: mutations(*seeds().notes), _split_note),
    "note.open_note": Target(lambda: mutations(*seeds().notes), _open_note),
    "note.parse_verifier_key": Target(
        lambda: text_mutations(*(w for p in seeds().policies for w in p.split() if b"+" in w)),
        _verifier_key,
    ),
    "checkpoint.parse_checkpoint": Target(
        lambda: text_mutations(*seeds().checkpoint_texts), _checkpoint
    ),
    "policy.verify_checkpoint": Target(lambda: mutations(*seeds().notes), _verify_checkpoint),
    "policy.parse_policy": Target(lambda: mutations(*seeds().policies), _policy),
    "tlogproof.parse_tlog_proof": Target(lambda: mutations(*seeds().proofs), _tlog_proof),
    "lightclient.verify_proof": Target(_light_client_strategy, _light_client),
    "lightclient.parse_consistency_proof": Target(
        lambda: mutations(seeds().consistency), _consistency_file
    ),
    "monitor.check_site": Target(_monitor_strategy, _monitor),
    "tiles.decode_entry_bundle": Target(lambda: mutations(*seeds().bundles), _entry_bundle),
    "tiles.parse_tile_path": Target(lambda: text_mutations(*seeds().tile_paths), _tile_path),
    "pool.read_key_file": Target(lambda: yaml_mutations(*seeds().yaml_files), _key_file),
}


def fuzz(name: str, max_examples: int, *, seed: int | None = None) -> int:
    """Run one target for ``max_examples`` examples; return how many ran. A finding
    raises (Hypothesis shrinks it first); a hang raises :class:`Hang`."""
    target = TARGETS[name]
    ran = 0

    @settings(
        max_examples=max_examples,
        deadline=None,  # the alarm bounds each example; timing noise must not fail CI
        database=None,
        suppress_health_check=list(HealthCheck),
        derandomize=seed is None,
    )
    @given(target.strategy())
    def check(example: Any) -> None:
        nonlocal ran
        ran += 1
        with bounded(TIME_LIMIT):
            target.run(example)

    if seed is not None:
        check = hypothesis_seed(seed)(check)
    check()
    return ran


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_fuzz_target_ends_in_a_result_or_a_project_error(name: str) -> None:
    """T41: CI_EXAMPLES examples per target (``scripts/fuzz_long.py`` for the long run)."""
    assert fuzz(name, CI_EXAMPLES) > 0


def test_the_mutations_reach_past_the_first_check() -> None:
    """T41 (the fuzzer's own check): mutated inputs are not all refused at once. Some
    still parse, so the strategies explore the parsers' later stages too."""
    s = seeds()
    parsed = 0
    for seed_bytes in s.proofs:
        for at in range(0, len(seed_bytes), 7):
            data = mutate(seed_bytes, [("flip", at, 0)])
            parsed += (
                _expect(lambda data=data: tlogproof.parse_tlog_proof(data), (DreampoolError,))
                is not None
            )
    assert parsed > 0
