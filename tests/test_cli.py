"""The ``dreampool`` command line as a reader meets it: usage errors and help."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from builder.cli import main as cli


def parsers(
    parser: argparse.ArgumentParser, name: str = "dreampool"
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """Every parser of the command line, nested commands (``import memos``) included."""
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for command, sub in action.choices.items():
                yield from parsers(sub, f"{name} {command}")


@pytest.mark.parametrize(
    ("argv", "usage"),
    [
        (["build", "--bogus"], "usage: dreampool build "),
        (["check", "--content", "c", "--bogus", "x"], "usage: dreampool check "),
        (["import", "memos", "diary.json", "--bogus"], "usage: dreampool import memos "),
        (["build", "build"], "usage: dreampool build "),
        # Before the command, only the top-level options are read.
        (["--bogus", "build"], "usage: dreampool [-h]"),
    ],
)
def test_a_mistyped_argument_is_reported_with_its_commands_usage(
    run: Any, argv: list[str], usage: str
) -> None:
    result = run(*argv)
    assert result.code == 2
    assert result.err.startswith(usage), result.err
    prog = usage.removeprefix("usage: ").removesuffix(" ").removesuffix(" [-h]")
    assert f"\n{prog}: error: unrecognized arguments: " in result.err, result.err


def test_a_missing_argument_names_the_command_too(run: Any) -> None:
    result = run("init", "pool")
    assert result.code == 2 and result.err.startswith("usage: dreampool init ")


def test_every_option_and_positional_has_help() -> None:
    """`dreampool COMMAND --help` explains each argument it lists."""
    missing = []
    for name, parser in parsers(cli.build_parser()):
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            if not action.help or action.help == argparse.SUPPRESS:
                missing.append(f"{name} {'/'.join(action.option_strings) or action.metavar}")
    assert missing == []
    assert len(list(parsers(cli.build_parser()))) > 10


@pytest.mark.parametrize("origin", ["https://dreams.example/pool", "http://x.example", "a b", "a+"])
def test_log_keygen_refuses_an_origin_init_would_refuse(run: Any, home: Path, origin: str) -> None:
    """The origin is the key's name and the log's for good: log-keygen holds it to
    the rule pool.yaml is read with, a scheme-less URL prefix, and writes no key."""
    result = run("log-keygen", "--origin", origin)
    assert result.code == 1, result
    assert "dreampool: error: --origin: must be a scheme-less URL prefix" in result.err
    assert result.out == ""
    assert not list(home.rglob("*.key"))


def test_log_keygen_writes_a_key_for_a_scheme_less_origin(run: Any, home: Path) -> None:
    result = run("log-keygen", "--origin", "dreams.example:8443/pool")
    assert result.code == 0, result
    assert result.out.startswith("dreams.example:8443/pool+")
    assert len(list(home.rglob("log-*.key"))) == 1
