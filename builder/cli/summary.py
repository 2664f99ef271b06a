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
  second command or property. Before that, every control, bidi or invisible
  character is spelled as an escape (:func:`~builder.errors.printable`), so no
  terminal escape reaches the log and CR or LF never reach the runner at all.

* **A job summary**, a Markdown table appended to the file named by
  ``$GITHUB_STEP_SUMMARY`` (*Adding a job summary*): every problem on one page,
  with what to do next. Each cell's text (escaped by ``printable`` first) is
  one code span, fenced by more backticks than any run inside it, with ``|``
  written ``\\|`` (GFM tables take that inside code spans too, and the table
  parser unescapes every ``\\|`` before the span is read). Inside a code span
  nothing is Markdown or HTML, and GitHub neither autolinks a URL nor
  notifies an ``@mention``, so no problem text can add rows, links, markup,
  or ping anyone; the table stops after :data:`MAX_ROWS` rows, well below the
  1 MiB a summary may hold.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from builder.errors import Problem, printable

MAX_ROWS = 500

_BACKTICKS = re.compile(r"`+")
# Characters that start Markdown or HTML constructs in running text.
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]<>&|~])")


def escape_data(text: str) -> str:
    """A workflow command's message: ``%``, CR and LF escaped (runner's unescape order)."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A workflow command's property value: the message escapes, plus ``:`` and ``,``."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def message(problem: Problem) -> str:
    """What the problem says, without its file and line: ``/pointer: rule``."""
    return f"{problem.pointer}: {problem.rule}" if problem.pointer else problem.rule


def annotation(problem: Problem, *, level: str = "error") -> str:
    """One ``::error file=…,line=…::…`` workflow command for ``problem``
    (``level`` ``"warning"``: ``::warning``, which does not fail the check)."""
    if level not in ("error", "warning"):
        raise ValueError(f"level must be error or warning, is {level!r}")
    props = f"file={escape_property(printable(problem.file))}"
    if problem.line:
        props += f",line={problem.line}"
    return f"::{level} {props}::{escape_data(printable(message(problem)))}"


def _cell(text: str) -> str:
    """Inert text for a Markdown table cell: one code span on one line."""
    text = printable(text)  # no line break, control or invisible character is left
    if not text:
        return ""
    longest = max((len(run) for run in _BACKTICKS.findall(text)), default=0)
    fence = "`" * (longest + 1)
    # One space inside each fence: CommonMark strips one from each side when both
    # are there, so a text that starts or ends with a backtick stays as it is.
    return f"{fence} {text} {fence}".replace("|", "\\|")


def markdown(problems: Sequence[Problem], content: str) -> str:
    """The job summary: a heading, then a table of the problems or a line saying none."""
    # The folder checked is the operator's --content argument, not pool input:
    # plain text in the heading, escaped.
    where = _MARKDOWN_SPECIAL.sub(r"\\\1", printable(content))
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
