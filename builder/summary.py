"""What ``dreampool check`` tells a GitHub Actions run: annotations and a summary.

Two outputs, both from the same :class:`~builder.errors.Problem` list:

* **Annotations**, one workflow command per problem, which GitHub shows on the
  file and line in the pull request (GitHub Docs, "Workflow commands for
  GitHub Actions", *Setting an error message*)::

      ::error file=content/keys/8a4f2e1b0c9d7e6f.yaml,line=3::/tier: must be one of …

  A command is one line, and ``:`` and ``,`` delimit its properties, so the
  values are escaped as the runner unescapes them: ``%`` → ``%25``, CR →
  ``%0D``, LF → ``%0A`` in the message, and also ``:`` → ``%3A`` and ``,`` →
  ``%2C`` in a property. A file name in the pool cannot then smuggle in a
  second command or property.

* **A job summary**, a Markdown table appended to the file named by
  ``$GITHUB_STEP_SUMMARY`` (*Adding a job summary*): every problem on one page,
  with what to do next. Table cells are escaped so that no problem text can
  add rows, links or HTML; the table stops after :data:`MAX_ROWS` rows,
  well below the 1 MiB a summary may hold.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from builder.errors import Problem

MAX_ROWS = 500

# Characters that start Markdown or HTML constructs inside a table cell.
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]<>&|~])")
_LINE_BREAKS = re.compile(r"[\r\n\u2028\u2029]+")


def escape_data(text: str) -> str:
    """A workflow command's message: ``%``, CR and LF escaped (runner's unescape order)."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A workflow command's property value: the message escapes, plus ``:`` and ``,``."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def message(problem: Problem) -> str:
    """What the problem says, without its file and line: ``/pointer: rule``."""
    return f"{problem.pointer}: {problem.rule}" if problem.pointer else problem.rule


def annotation(problem: Problem) -> str:
    """One ``::error file=…,line=…::…`` workflow command for ``problem``."""
    props = f"file={escape_property(problem.file)}"
    if problem.line:
        props += f",line={problem.line}"
    return f"::error {props}::{escape_data(message(problem))}"


def _cell(text: str) -> str:
    """Plain text for a Markdown table cell: one line, no Markdown, no HTML."""
    return _MARKDOWN_SPECIAL.sub(r"\\\1", _LINE_BREAKS.sub(" ", text))


def markdown(problems: Sequence[Problem], content: str) -> str:
    """The job summary: a heading, then a table of the problems or a line saying none."""
    where = _cell(content)
    if not problems:
        return f"### dreampool check\n\nNo problems in {where}.\n"
    lines = [
        f"### dreampool check: {len(problems)} problem(s) in {where}",
        "",
        "| file | line | problem |",
        "|---|---|---|",
    ]
    for p in problems[:MAX_ROWS]:
        line = str(p.line) if p.line else ""
        lines.append(f"| {_cell(p.file)} | {line} | {_cell(message(p))} |")
    if len(problems) > MAX_ROWS:
        lines += ["", f"… and {len(problems) - MAX_ROWS} more: run `dreampool check` locally."]
    lines += [
        "",
        "Each problem is also marked on its file in the pull request. The pool never "
        "edits signed text: to fix a dream, change the draft, sign it again with "
        "`dreampool sign`, and replace the file with `dreampool submit`.",
    ]
    return "\n".join(lines) + "\n"


def write_summary(path: Path, problems: Sequence[Problem], content: str) -> None:
    """Append the job summary to ``path`` (``$GITHUB_STEP_SUMMARY`` is appended to)."""
    with path.open("a", encoding="utf-8") as f:
        f.write(markdown(problems, content))
