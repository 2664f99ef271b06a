"""Trust policies (builder.formats.policy) against c2sp.org/tlog-policy.

The quorum logic is checked exhaustively against a naive evaluation written
from the spec's example (two groups of three witnesses, 2-of-3 and any-of-3,
both required).
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from builder.errors import DreampoolError, VerificationError
from builder.formats.checkpoint import (
    Checkpoint,
    Cosigner,
    cosign,
    format_checkpoint,
    sign_checkpoint,
)
from builder.formats.note import Signer
from builder.formats.policy import (
    Policy,
    PolicyError,
    PolicyGroup,
    PolicyLog,
    PolicyWitness,
    check_quorum,
    format_policy,
    parse_policy,
    verify_checkpoint,
)

ORIGIN = "example.org/dreams"
LOG = Signer.from_seed(ORIGIN, bytes([1]) * 32)
LOG_URL = "https://example.org/dreams/log/"
WITNESSES = {
    name: Cosigner.from_seed(f"{name.lower()}.witness.example", bytes([i + 10]) * 32)
    for i, name in enumerate(["X1", "X2", "X3", "Y1", "Y2", "Y3"])
}
ROOT = bytes(range(32))
CP = Checkpoint(ORIGIN, 9, ROOT)


def _w(name: str) -> str:
    return WITNESSES[name].verifier.vkey


SPEC_EXAMPLE = f"""log {LOG.verifier.vkey}

witness X1 {_w("X1")}
witness X2 {_w("X2")}
witness X3 {_w("X3")}
group X-witnesses 2 X1 X2 X3

witness Y1 {_w("Y1")}
witness Y2 {_w("Y2")}
witness Y3 {_w("Y3")}
group Y-witnesses any Y1 Y2 Y3

group X-and-Y all X-witnesses Y-witnesses
quorum X-and-Y
"""


def test_pool_policy_without_witnesses() -> None:
    text = f"log {LOG.verifier.vkey} {LOG_URL}\nquorum none\n"
    policy = parse_policy(text)
    assert policy == Policy((PolicyLog(LOG.verifier, LOG_URL),), (), (), "none")
    assert format_policy(policy) == text
    assert parse_policy(text.encode()) == policy
    check_quorum(policy, [])


def test_spec_example_structure() -> None:
    policy = parse_policy(SPEC_EXAMPLE)
    assert [w.name for w in policy.witnesses] == ["X1", "X2", "X3", "Y1", "Y2", "Y3"]
    assert [(g.name, g.threshold, g.required) for g in policy.groups] == [
        ("X-witnesses", 2, 2),
        ("Y-witnesses", "any", 1),
        ("X-and-Y", "all", 2),
    ]
    assert policy.quorum == "X-and-Y"
    canonical = format_policy(policy)
    assert parse_policy(canonical) == policy
    assert format_policy(parse_policy(canonical)) == canonical


def test_spec_example_quorum_exhaustive() -> None:
    policy = parse_policy(SPEC_EXAMPLE)
    names = list(WITNESSES)
    for n in range(len(names) + 1):
        for subset in itertools.combinations(names, n):
            xs = sum(1 for s in subset if s.startswith("X"))
            ys = sum(1 for s in subset if s.startswith("Y"))
            want = xs >= 2 and ys >= 1  # naive reading of the spec's example
            key_names = [WITNESSES[s].name for s in subset]
            if want:
                check_quorum(policy, key_names)
            else:
                with pytest.raises(VerificationError) as info:
                    check_quorum(policy, key_names)
                assert info.value.step == 1


def test_quorum_single_witness_and_unknown_names() -> None:
    policy = parse_policy(f"log {LOG.verifier.vkey}\nwitness w {_w('X1')}\nquorum w\n")
    check_quorum(policy, [WITNESSES["X1"].name])
    with pytest.raises(VerificationError, match="0 of 1"):
        check_quorum(policy, ["someone.else", "w"])  # "w" is a policy name, not a key name


def test_whitespace_comments_and_blank_lines() -> None:
    text = (
        "# a comment\n"
        "   \t\n"
        f"\t log \t{LOG.verifier.vkey}   {LOG_URL}  \n"
        "  # indented comment\n"
        f"witness  w1\t{_w('X1')}\n"
        "quorum\tw1 \n"
    )
    policy = parse_policy(text)
    assert format_policy(policy) == (
        f"log {LOG.verifier.vkey} {LOG_URL}\nwitness w1 {_w('X1')}\nquorum w1\n"
    )


def test_quorum_line_may_come_before_later_definitions() -> None:
    text = f"witness w1 {_w('X1')}\nquorum w1\nlog {LOG.verifier.vkey}\n"
    assert parse_policy(text).logs[0].verifier == LOG.verifier


_L = f"log {LOG.verifier.vkey}\n"


@pytest.mark.parametrize(
    ("text", "line"),
    [
        (_L + "quorum none\nfrobnicate x\n", 3),
        (_L + "Quorum none\n", 2),
        (_L + "quorum none\nquorum none\n", 3),
        (_L + "quorum w1\n", 2),
        (_L + "quorum\n", 2),
        (_L + "quorum a b\n", 2),
        (_L + f"quorum w1\nwitness w1 {_w('X1')}\n", 2),
        (_L + f"witness none {_w('X1')}\nquorum none\n", 2),
        (_L + f"witness w1 {_w('X1')}\nwitness w1 {_w('X2')}\nquorum none\n", 3),
        (_L + f"witness w1 {_w('X1')}\nwitness w2 {_w('X1')}\nquorum none\n", 3),
        (_L + f"witness w1 {_w('X1')} url extra\nquorum none\n", 2),
        (_L + f"witness w1 {_w('X1')} #comment\nquorum none\n", 2),
        (_L + f"witness w1\t{LOG.verifier.vkey}\nquorum none\n", 2),  # type 0x01
        (f"log {_w('X1')}\nquorum none\n", 1),  # type 0x04
        (_L + _L + "quorum none\n", 2),  # duplicate log
        (f"log {LOG.verifier.vkey} a b\nquorum none\n", 1),
        ("log\nquorum none\n", 1),
        ("log not-a-vkey\nquorum none\n", 1),
        (_L + f"witness w1 {_w('X1')}\ngroup g 1 w2\nquorum none\n", 3),
        (_L + f"witness w1 {_w('X1')}\ngroup g 1 none\nquorum none\n", 3),
        (_L + f"witness w1 {_w('X1')}\ngroup g 2 w1\nquorum none\n", 3),
        (_L + f"witness w1 {_w('X1')}\ngroup g 0 w1\nquorum none\n", 3),
        (_L + f"witness w1 {_w('X1')}\ngroup g 01 w1\nquorum none\n", 3),
        (_L + f"witness w1 {_w('X1')}\ngroup g -1 w1\nquorum none\n", 3),
        (_L + f"witness w1 {_w('X1')}\ngroup g most w1\nquorum none\n", 3),
        (_L + f"witness w1 {_w('X1')}\ngroup g any\nquorum none\n", 3),
        (_L + f"witness w1 {_w('X1')}\ngroup g any w1 w1\nquorum none\n", 3),
        (_L + f"witness w1 {_w('X1')}\ngroup w1 any w1\nquorum none\n", 3),
        (_L + f"witness w1 {_w('X1')}\ngroup g any g\nquorum none\n", 3),
        (_L + "quorum none\r\n", 2),
        (_L + "quorum none\x00\n", 2),
        (_L + "quorum none\x7f\n", 2),
    ],
)
def test_parse_refuses_with_line_number(text: str, line: int) -> None:
    with pytest.raises(PolicyError, match=f"^policy line {line}: "):
        parse_policy(text)


def test_parse_refuses_file_level() -> None:
    with pytest.raises(PolicyError, match="no quorum line"):
        parse_policy(_L)
    with pytest.raises(PolicyError, match="no quorum line"):
        parse_policy("")
    with pytest.raises(PolicyError, match="no newline"):
        parse_policy(_L + "quorum none")
    with pytest.raises(PolicyError, match="line 2: line is not valid UTF-8"):
        parse_policy(_L.encode() + b"# caf\xe9\nquorum none\n")
    with pytest.raises(PolicyError, match="bytes, want at most"):
        parse_policy(_L + "#" * 70000 + "\nquorum none\n")
    assert parse_policy(_L + "# café\nquorum none\n").quorum == "none"


def test_constructor_checks_rules() -> None:
    w1 = PolicyWitness("w1", WITNESSES["X1"].verifier)
    with pytest.raises(PolicyError, match="quorum"):
        Policy((), (w1,), (), "w2")
    with pytest.raises(PolicyError, match="already defined"):
        Policy((), (w1, PolicyWitness("w1", WITNESSES["X2"].verifier)), (), "none")
    with pytest.raises(PolicyError, match="between 1 and 1"):
        Policy((), (w1,), (PolicyGroup("g", 2, ("w1",)),), "g")
    with pytest.raises(PolicyError, match="whitespace"):
        Policy((), (PolicyWitness("a b", WITNESSES["X1"].verifier),), (), "none")
    policy = Policy((PolicyLog(LOG.verifier),), (w1,), (PolicyGroup("g", "all", ("w1",)),), "g")
    assert parse_policy(format_policy(policy)) == policy


# ---------------------------------------------------------------------------
# verify_checkpoint: docs/protocol.md §5 step 1


def _cosigned(*names: str) -> bytes:
    data = sign_checkpoint(CP, LOG)
    for name in names:
        data += cosign(format_checkpoint(CP), WITNESSES[name], 1700000000).encode()
    return data


def test_verify_checkpoint_with_quorum() -> None:
    policy = parse_policy(SPEC_EXAMPLE)
    cp, names = verify_checkpoint(policy, _cosigned("X1", "X3", "Y2"))
    assert cp == CP
    assert names == tuple(WITNESSES[n].name for n in ("X1", "X3", "Y2"))
    with pytest.raises(VerificationError, match="quorum X-and-Y is not met") as info:
        verify_checkpoint(policy, _cosigned("X1", "Y1", "Y2"))
    assert info.value.step == 1


def test_verify_checkpoint_wrong_log() -> None:
    other = Signer.from_seed("other.example/log", bytes([2]) * 32)
    policy = parse_policy(f"log {other.verifier.vkey}\nquorum none\n")
    with pytest.raises(VerificationError, match="no signature by a log of the policy"):
        verify_checkpoint(policy, _cosigned())
    # A log key with the right name but another key is no better.
    impostor = Signer.from_seed(ORIGIN, bytes([2]) * 32)
    policy = parse_policy(f"log {impostor.verifier.vkey}\nquorum none\n")
    with pytest.raises(VerificationError):
        verify_checkpoint(policy, _cosigned())
    policy = parse_policy(f"log {LOG.verifier.vkey}\nquorum none\n")
    assert verify_checkpoint(policy, _cosigned("X1")) == (CP, ())


# ---------------------------------------------------------------------------
# Properties


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.binary(max_size=300), st.text(max_size=300)))
def test_parse_arbitrary_input_only_raises_dreampool_errors(data: bytes | str) -> None:
    try:
        policy = parse_policy(data)
    except DreampoolError:
        return
    assert parse_policy(format_policy(policy)) == policy


_LINES = [
    f"log {LOG.verifier.vkey}",
    f"log {LOG.verifier.vkey} {LOG_URL}",
    *(f"witness {n} {_w(n)}" for n in WITNESSES),
    "group gx 2 X1 X2 X3",
    "group gy any Y1 Y2",
    "group gz all gx gy",
    "group g1 1 X1",
    "quorum none",
    "quorum gz",
    "quorum X1",
    "# comment",
    "",
    "bogus line",
]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_LINES), max_size=14))
def test_parse_line_soups(lines: list[str]) -> None:
    text = "".join(line + "\n" for line in lines)
    try:
        policy = parse_policy(text)
    except PolicyError as e:
        assert e.message.startswith("policy")
        return
    assert parse_policy(format_policy(policy)) == policy
    check_quorum(policy, [w.name for w in WITNESSES.values()])  # everyone cosigned
