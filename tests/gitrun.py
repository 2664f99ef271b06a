"""git as the tests run it: no system or global configuration, a fixed author,
and none of the caller's ``GIT_*`` variables (a hook's ``GIT_DIR`` would point
every command at the wrong repository)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_AUTHOR_NAME": "T", "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "T", "GIT_COMMITTER_EMAIL": "t@example.invalid",
}  # fmt: skip


def git(cwd: Path, *args: str, stdin: bytes | None = None) -> str:
    """``git args…`` in ``cwd``; its standard output. Fails the test if git fails."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")} | ENV
    done = subprocess.run(
        ["git", *args], cwd=cwd, env=env, input=stdin, check=True, capture_output=True
    )
    return done.stdout.decode()
