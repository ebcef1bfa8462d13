"""`rubric-bot grade`: answer one request and grade it against a rubric file, in the terminal."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import TextIO

from langchain_core.language_models import BaseChatModel
from langgraph.checkpoint.memory import InMemorySaver

from bot.agent.models import init_models
from bot.agent.turn import TurnOutcome, run_turn
from bot.agent.worker import agent_config, build_agent
from bot.cli.exits import EXIT_CONFIG, EXIT_FAILURE, GRADE_EXIT_CODES, exit_status_help
from bot.cli.subcommand import SETTINGS_SOURCE, CliSubcommand, fail
from bot.config import load_settings
from bot.material.reader import NOTHING, Material, conversation_messages, read_local_files
from bot.rendering.results import STATUS_WORDS, flagged_words, grader_effort_words, usage_words
from grading import DEFAULT_MAX_GRADER_CALLS, CriterionResult, RubricError, RubricEvaluation, parse_rubric

CLI_REQUEST_ID = "cli-request"
"""The id of the request's message in the terminal's one-off conversation."""

STDIN_ARGUMENT = "-"
"""The `grade` request argument that means "read the request from standard input"."""


def _configure_grade(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rubric", type=Path, required=True, help="file holding the rubric")
    request = parser.add_mutually_exclusive_group(required=True)
    request.add_argument(
        "request", nargs="?", help=f"the request to answer and grade; {STDIN_ARGUMENT} reads it from stdin"
    )
    request.add_argument("--file", type=Path, metavar="PATH", help="read the request from PATH")
    parser.add_argument(
        "--attach",
        type=Path,
        nargs="+",
        action="extend",
        default=[],
        metavar="FILE",
        help="attach files to the request, read as the bot reads files shared in Slack (text, PDF)",
    )


def _run_grade(args: argparse.Namespace) -> int:
    try:
        rubric_text = args.rubric.read_text(encoding="utf-8")
        parse_rubric(rubric_text)
        request = _request_text(args)
    except OSError as exc:
        fail(f"cannot read {exc.filename}: {exc.strerror}")
        return EXIT_CONFIG
    except RubricError as exc:
        fail(f"{args.rubric} is not a valid rubric: {exc}")
        return EXIT_CONFIG
    if not request.strip():
        fail("the request is empty: give it as an argument, with --file PATH, or on stdin with -")
        return EXIT_CONFIG
    settings = load_settings(["RUBRIC_BOT_MODEL"])
    try:
        material = read_local_files(args.attach, settings.max_file_bytes)
    except OSError as exc:
        fail(f"cannot read {exc.filename}: {exc.strerror}")
        return EXIT_CONFIG
    worker, grader = init_models(settings)
    try:
        outcome = asyncio.run(
            grade(
                rubric_text,
                request,
                material=material,
                worker=worker,
                grader=grader,
                max_iterations=settings.max_iterations,
                max_grader_calls=settings.max_grader_calls,
            )
        )
    except BrokenPipeError:
        raise  # main() ends quietly
    except Exception as exc:  # a model failure is reported, not dumped
        fail(f"the run failed: {type(exc).__name__}: {exc}")
        return EXIT_FAILURE
    return GRADE_EXIT_CODES.get(outcome.status or "", EXIT_FAILURE)


def _request_text(args: argparse.Namespace) -> str:
    """The request from the argument, standard input (`-`) or `--file` (OSError if unreadable)."""
    if args.file is not None:
        return args.file.read_text(encoding="utf-8")
    if args.request == STDIN_ARGUMENT:
        return sys.stdin.read()
    return str(args.request)


async def grade(
    rubric_text: str,
    request: str,
    *,
    material: Material = NOTHING,
    worker: BaseChatModel,
    grader: BaseChatModel,
    max_iterations: int,
    max_grader_calls: int = DEFAULT_MAX_GRADER_CALLS,
    out: TextIO | None = None,
) -> TurnOutcome:
    """Run the revise-and-grade loop once in the terminal, printing what of `material` (attached
    files) was read and each iteration's criteria."""
    stream = out or sys.stdout
    if material.files or material.unread:
        print(format_material(material), file=stream, flush=True)
    agent = build_agent(
        worker,
        grader,
        max_iterations=max_iterations,
        max_grader_calls=max_grader_calls,
        checkpointer=InMemorySaver(),
    )

    async def show(evaluation: RubricEvaluation) -> None:
        print(format_evaluation(evaluation), file=stream, flush=True)

    outcome = await run_turn(
        agent,
        {"messages": conversation_messages(request, material, CLI_REQUEST_ID), "rubric": rubric_text},
        agent_config("cli"),
        show,
    )
    print(format_outcome(outcome), file=stream)
    return outcome


def format_material(material: Material) -> str:
    """Which attached files were read, and which were not and why, one line each."""
    lines = [f"Read: {file.name} ({len(file.text):,} characters)" for file in material.files]
    lines += [f"Not read: {item.name}: {item.reason}" for item in material.unread]
    return "\n".join(lines) + "\n"


def format_evaluation(evaluation: RubricEvaluation) -> str:
    """One grader iteration as a plain-text table: result, criterion, gap.

    Items the grader returned that match no criterion follow the table's criteria, under
    "the grader also flagged"; a failing one is also named in the title line.
    """
    position = f"{evaluation['iteration'] + 1}/{evaluation['max_iterations']}"
    title = f"Iteration {position}: {run_status_words(evaluation['result'])}"
    if evaluation["score"] is not None:
        title += f" (score {evaluation['score']:g}/5, {evaluation['verdict']})"
    if flagged := flagged_words(evaluation):
        title += f"; {flagged}"
    rows = [("result", "criterion", "gap")] + [_table_row(c) for c in evaluation["criteria"]]
    flagged_rows = [_table_row(item) for item in evaluation["unmatched"]]
    widths = [max(len(row[column]) for row in rows + flagged_rows) for column in range(2)]
    table = [
        f"  {mark:<{widths[0]}}  {name:<{widths[1]}}  {gap}".rstrip()
        for mark, name, gap in rows + flagged_rows
    ]
    lines = [title, table[0], f"  {'-' * widths[0]}  {'-' * widths[1]}  ---", *table[1 : len(rows)]]
    if flagged_rows:
        lines.append("  the grader also flagged (not in the rubric, so not part of the verdict):")
        lines += table[len(rows) :]
    if evaluation["explanation"]:
        lines.append(f"  explanation: {evaluation['explanation']}")
    if evaluation["grader_calls"] or evaluation["usage"]:
        lines.append(f"  {grader_effort_words(evaluation).lower()}")
    return "\n".join(lines) + "\n"


def _table_row(criterion: CriterionResult) -> tuple[str, str, str]:
    mark = "pass" if criterion["passed"] else "FAIL"
    if criterion["score"] is not None:
        mark += f" {criterion['score']}/5"
    return mark, criterion["name"], " ".join(criterion["gap"].split())


def run_status_words(status: str) -> str:
    """A grading status in the same words the thread shows, for the terminal."""
    return STATUS_WORDS[status][1].lower() if status in STATUS_WORDS else status


def format_outcome(outcome: TurnOutcome) -> str:
    """The final status line(s) and the answer."""
    status = run_status_words(outcome.status) if outcome.status else "no rubric"
    if outcome.iterations is not None and outcome.max_iterations is not None:
        status += f" ({outcome.iterations}/{outcome.max_iterations})"
    lines = [f"Final status: {status}"]
    if outcome.best_iteration is not None:
        lines.append(f"Showing the best answer (iteration {outcome.best_iteration + 1}).")
    if outcome.usage:
        lines.append(f"Tokens: {usage_words(outcome.usage)}")
    return "\n".join([*lines, "", outcome.answer])


GRADE = CliSubcommand(
    "grade",
    "answer a request and grade it against a rubric, in the terminal",
    _configure_grade,
    _run_grade,
    description=(
        "Answer one request with the worker model and grade the answer against a rubric file, "
        "revising until the rubric is satisfied or RUBRIC_BOT_MAX_ITERATIONS (default 3) is "
        "reached; each iteration's criteria and the final answer are printed. The rubric is a list "
        "of pass/fail criteria, one per line (-, * or 1. bullets), or YAML with scored dimensions "
        "(see the README). The request is the argument, standard input with -, or --file PATH; "
        "--attach adds files to it, read as the bot reads files shared in Slack (RUBRIC_BOT_MAX_FILE_BYTES). "
        "It reads RUBRIC_BOT_MODEL with the provider's API key (e.g. OPENAI_API_KEY), "
        f"RUBRIC_BOT_GRADER_MODEL and RUBRIC_BOT_MAX_ITERATIONS, {SETTINGS_SOURCE}; "
        "no Slack settings."
    ),
    epilog=exit_status_help(
        [
            (GRADE_EXIT_CODES["satisfied"], "the rubric is satisfied"),
            (EXIT_FAILURE, "the run failed (e.g. a model API error)"),
            (EXIT_CONFIG, "bad arguments, settings, rubric or request"),
            (GRADE_EXIT_CODES["max_iterations_reached"], "not satisfied within the iterations"),
            (GRADE_EXIT_CODES["grader_error"], "grader error: the answer could not be graded"),
            (GRADE_EXIT_CODES["failed"], "the grading failed (the rubric could not be used)"),
        ]
    ),
)
"""`rubric-bot grade`."""
