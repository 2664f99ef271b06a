"""``python -m builder`` is the ``dreampool`` command."""

from __future__ import annotations

from builder.cli.main import run

run()
