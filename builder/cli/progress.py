"""A one-line progress bar on stderr for long builds, and nothing anywhere else.

::

    with Progress(len(pages), "pages", enabled=progress_enabled(args.quiet)) as p:
        for page in pages:
            ...
            p.advance()

draws ``pages [##########----------]  50%  120/240  85.3/s`` in place with
``\\r``. A bar is drawn only on an interactive terminal: in CI logs, pipes and
files, carriage returns pile up into one unreadable line, so there it is
silent. Redraws are limited to about ten a second, which keeps the cost of a
fast loop to a clock read per item.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import TextIO

BAR_WIDTH = 24
MIN_INTERVAL = 0.1  # seconds between redraws


def progress_enabled(
    quiet: bool, stream: TextIO | None = None, environ: Mapping[str, str] | None = None
) -> bool:
    """Whether to draw: not quiet, ``stream`` (stderr) is a terminal, and not in CI.

    CI is detected by a non-empty ``CI`` variable, which GitHub Actions,
    GitLab, Travis and most other services set.
    """
    stream = sys.stderr if stream is None else stream
    environ = os.environ if environ is None else environ
    if quiet or environ.get("CI"):
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


class Progress:
    """Counts ``total`` steps of ``label``; a context manager that ends the line."""

    def __init__(
        self,
        total: int,
        label: str,
        *,
        enabled: bool | None = None,
        stream: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stream = sys.stderr if stream is None else stream
        self.enabled = progress_enabled(False, self.stream) if enabled is None else enabled
        self.total = max(total, 0)
        self.label = label
        self.count = 0
        self._clock = clock
        self._start = clock()
        self._last_draw: float | None = None
        self._width = 0  # length of the last line drawn, to blank its leftovers

    def __enter__(self) -> Progress:
        self._start = self._clock()
        if self.enabled:
            self._draw(self._start)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        # Also on an exception: the error message then starts on a line of its own.
        self.close()

    def advance(self, n: int = 1) -> None:
        self.count += n
        if not self.enabled:
            return
        now = self._clock()
        if self._last_draw is None or now - self._last_draw >= MIN_INTERVAL:
            self._draw(now)

    def close(self) -> None:
        """Draw the final state and end the line; idempotent."""
        if self.enabled:
            self._draw(self._clock())
            self.stream.write("\n")
            self.stream.flush()
            self.enabled = False

    def line(self, now: float) -> str:
        """The bar as it reads at time ``now``."""
        done = min(self.count, self.total)
        fraction = done / self.total if self.total else 1.0
        filled = int(fraction * BAR_WIDTH)
        bar = "#" * filled + "-" * (BAR_WIDTH - filled)
        elapsed = now - self._start
        rate = f"{self.count / elapsed:.1f}/s" if elapsed > 0 else "-/s"
        return f"{self.label} [{bar}] {fraction * 100:3.0f}%  {self.count}/{self.total}  {rate}"

    def _draw(self, now: float) -> None:
        text = self.line(now)
        self.stream.write("\r" + text + " " * max(self._width - len(text), 0))
        self.stream.flush()
        self._width = len(text)
        self._last_draw = now
