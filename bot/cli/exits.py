"""`rubric-bot`'s exit codes: one table for every subcommand, so scripts and CI jobs can gate on them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

EXIT_OK = 0
"""Exit code when a subcommand did what it was asked (for `grade`: the rubric is satisfied)."""

EXIT_FAILURE = 1
"""Exit code when the work itself failed: a model error in `grade`, a database error, a chart
that cannot be written, a port that is taken."""

EXIT_CONFIG = 2
"""Exit code for unusable configuration or arguments (argparse uses 2 for usage errors too)."""

GRADE_EXIT_CODES: Mapping[str, int] = {
    "satisfied": EXIT_OK,
    "max_iterations_reached": 3,
    "grader_error": 4,
    "failed": 5,
}
"""`grade`'s exit code per final grading status, so a script or CI job can gate on the outcome."""

EXIT_INTERRUPTED = 130
"""Exit code after Ctrl-C (128 + SIGINT), as `replay` exits once its partial result is printed."""

EXIT_BROKEN_PIPE = 141
"""Exit code when the reader of our output went away (`| head -1`): 128 + SIGPIPE, as the shell
reports for tools that SIGPIPE ended."""


def exit_status_help(meanings: Iterable[tuple[int, str]]) -> str:
    """The "exit status:" table a subcommand's `--help` ends with, one code and its meaning a line."""
    return "exit status:\n" + "".join(f"  {code}  {meaning}\n" for code, meaning in meanings)
