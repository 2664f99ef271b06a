"""Run a Python script in a session of its own: for scenarios that can hang
(a build interrupted while a forked process of it runs), so a hang is killed
with its whole process group and reported instead of stopping the tests."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def run_isolated(script: str, *args: str, timeout: float) -> tuple[str, bool]:
    """``python -c script args`` from the repository, its output (stdout and
    stderr), and whether it hung: still running after ``timeout`` seconds,
    then killed with its process group."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-c", script, *args],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=timeout)
        return out, False
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # its own group: the script and what it forked
        out, _ = proc.communicate()
        return out, True
