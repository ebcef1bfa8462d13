"""`rubric-bot replay`: grade the team's reviewed iterations again with a candidate grader.

Reads the bot's database (reviews, evaluations and the checkpoint history beside them), replays
each reviewed iteration with the candidate (`--grader-model`, `--calibration`, `--prompt`) and
prints how the candidate agrees with the team next to the original grader. Ctrl-C stops the
replay and prints what was graded so far (a second Ctrl-C stops at once).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from langchain.chat_models import init_chat_model
from langchain_core.language_models import BaseChatModel
from sqlalchemy.exc import SQLAlchemyError
from tqdm import tqdm

from bot.agreement.comparison import Comparison, compare, comparison_json, comparison_table, render_chart
from bot.agreement.replay import (
    CALIBRATION_MODES,
    Calibration,
    Case,
    Regrade,
    Skipped,
    attach_transcripts,
    estimate_tokens,
    examples_for,
    load_cases,
    regrade,
    total_usage,
)
from bot.cli.channels import CHANNEL_HELP, channel_argument, channel_id
from bot.cli.exits import EXIT_CONFIG, EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_OK, exit_status_help
from bot.cli.subcommand import (
    SETTINGS_SOURCE,
    CliSubcommand,
    add_database_option,
    database_exists,
    days_argument,
    positive_int,
)
from bot.config import Settings, load_settings
from bot.db.database import Database, open_checkpointer
from bot.db.store import Store
from bot.provenance.grouping import provenance_counts, provenance_label
from bot.vocabulary.provenance import UNKNOWN
from grading import EVIDENCE_TOOLS, TranscriptGrader

DEFAULT_CONCURRENCY = 4
"""Cases graded at once unless `--concurrency` says otherwise: a few calls in flight keep a
replay moving without tripping a provider's rate limits."""

ORIGINAL = "original grader"
"""How the grader the cases were first graded by is named in the result."""


class UsageError(Exception):
    """An argument or setting the replay cannot run with; the message says which and why."""


@dataclass(frozen=True)
class Candidate:
    """The grader configuration to replay with."""

    model: str
    calibration: Calibration
    prompt: Path | None
    prompt_text: str | None

    @property
    def label(self) -> str:
        """E.g. ``openai:gpt-4o · calibration loo · prompt strict.txt``."""
        words = [self.model, f"calibration {self.calibration}"]
        if self.prompt is not None:
            words.append(f"prompt {self.prompt.name}")
        return " · ".join(words)


def _configure_replay(parser: argparse.ArgumentParser) -> None:
    which = parser.add_argument_group("which reviewed iterations")
    which.add_argument("--channel", type=channel_argument, help=f"{CHANNEL_HELP} (default: every channel)")
    which.add_argument("--days", type=days_argument, help="only those reviewed in the last N days")
    which.add_argument("--rubric-match", metavar="TEXT", help="only rubrics containing TEXT (ignoring case)")
    which.add_argument("--limit", type=positive_int, metavar="N", help="only the latest N of them")
    candidate = parser.add_argument_group("the candidate grader")
    candidate.add_argument(
        "--grader-model",
        metavar="PROVIDER:MODEL",
        help="a langchain model string (default: RUBRIC_BOT_GRADER_MODEL, else RUBRIC_BOT_MODEL)",
    )
    candidate.add_argument(
        "--calibration",
        choices=CALIBRATION_MODES,
        default="on",
        help="team examples shown: on = those shown at the time (default), off = none, "
        "loo = the team's other disagreements, never the case's own",
    )
    candidate.add_argument("--prompt", type=Path, metavar="FILE", help="candidate grader instructions")
    running = parser.add_argument_group("running and output")
    running.add_argument(
        "--concurrency",
        type=positive_int,
        default=DEFAULT_CONCURRENCY,
        help=f"grader calls at once (default {DEFAULT_CONCURRENCY})",
    )
    running.add_argument("--dry-run", action="store_true", help="only count the cases and estimate tokens")
    running.add_argument("--json", action="store_true", help="print the result as JSON")
    running.add_argument("--chart", type=Path, metavar="FILE", help="also write a before/after chart (PNG)")
    add_database_option(running)


def run(args: argparse.Namespace) -> int:
    """Run `rubric-bot replay`; the exit code."""
    try:
        settings = load_settings()
        args.channel = channel_id(args.channel, settings)
        db, candidate = _inputs(args, settings)
        model = None if args.dry_run else _model(candidate.model, settings.model_timeout)
    except UsageError as exc:
        print(f"rubric-bot replay: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    try:
        if args.dry_run:
            print(asyncio.run(_dry_run(db, candidate, args)))
            return EXIT_OK
        assert model is not None
        comparison = asyncio.run(_replay(db, candidate, model, args))
    except SQLAlchemyError as exc:
        reason = getattr(exc, "orig", None) or exc
        print(f"rubric-bot replay: {db} is not a rubric-bot database ({reason})", file=sys.stderr)
        return EXIT_CONFIG
    if args.json:
        print(json.dumps(comparison_json(comparison), indent=2))
    else:
        print(comparison_table(comparison))
    if args.chart:
        try:
            render_chart(comparison, args.chart)
        except OSError as exc:
            print(f"rubric-bot replay: cannot write {args.chart}: {exc.strerror}", file=sys.stderr)
            return EXIT_FAILURE
        print(f"Chart written to {args.chart}", file=sys.stderr)
    return EXIT_INTERRUPTED if comparison.interrupted else EXIT_OK


def _inputs(args: argparse.Namespace, settings: Settings) -> tuple[Database, Candidate]:
    db = args.db or settings.database
    if not database_exists(db):
        raise UsageError(f"no database at {db} (set RUBRIC_BOT_DB or pass --db)")
    model = args.grader_model or settings.grader_model_override or settings.worker_model
    if not model:
        raise UsageError(
            "no grader model: pass --grader-model, or set RUBRIC_BOT_GRADER_MODEL or RUBRIC_BOT_MODEL"
        )
    prompt_text = None
    if args.prompt is not None:
        try:
            prompt_text = args.prompt.read_text(encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"cannot read {args.prompt}: {exc.strerror}") from None
        if not prompt_text.strip():
            raise UsageError(f"{args.prompt} is empty; a grader prompt needs instructions")
    return db, Candidate(model, args.calibration, args.prompt, prompt_text)


def _model(spec: str, timeout: float) -> BaseChatModel:
    try:
        return init_chat_model(spec, timeout=timeout)
    except Exception as exc:  # provider packages raise many types for a bad name or a missing key
        raise UsageError(f"the grader model {spec!r} cannot be used ({type(exc).__name__}: {exc})") from None


async def _cases(store: Store, db: Database, args: argparse.Namespace) -> tuple[list[Case], list[Skipped]]:
    reviewed = await load_cases(
        store, channel=args.channel, days=args.days, rubric_match=args.rubric_match, limit=args.limit
    )
    async with open_checkpointer(db) as checkpointer:
        return await attach_transcripts(checkpointer, reviewed)


async def _dry_run(db: Database, candidate: Candidate, args: argparse.Namespace) -> str:
    store = await Store.open(db, read_only=True)
    try:
        cases, skipped = await _cases(store, db, args)
        tokens = 0
        for case in cases:
            examples = await examples_for(store, case, candidate.calibration)
            tokens += estimate_tokens(case, examples, candidate.prompt_text)
    finally:
        await store.close()
    with_material = sum(case.shares_material for case in cases)
    if args.json:
        counts = {"cases": len(cases), "skipped": len(skipped), "with_material": with_material}
        return json.dumps(counts | {"estimated_tokens": tokens})
    skipped_words = f" ({len(skipped)} more skipped: no checkpoint history)" if skipped else ""
    material_words = (
        f" {with_material} of them hold material people shared (earlier thread messages or attached "
        "files), which the candidate is shown as the original grader was."
        if with_material
        else ""
    )
    return (
        f"Would replay {len(cases)} reviewed iteration(s){skipped_words} with {candidate.label}: "
        f"roughly {tokens:,} tokens, more if the grader calls evidence tools or is re-asked.{material_words}"
    )


async def _replay(
    db: Database, candidate: Candidate, model: BaseChatModel, args: argparse.Namespace
) -> Comparison:
    # Read-only: a replay grades again but never changes the bot's records.
    store = await Store.open(db, read_only=True)
    try:
        cases, skipped = await _cases(store, db, args)
        grader = TranscriptGrader(model, system_prompt=candidate.prompt_text, tools=EVIDENCE_TOOLS)
        done: list[Regrade] = []
        interrupted = await _regrade_with_progress(cases, grader, candidate, store, args.concurrency, done)
    finally:
        await store.close()
    graded = [r for r in done if r.error is None]
    return await asyncio.to_thread(
        compare,
        cases,
        {case.key: case.original_verdicts for case in cases},
        {r.case.key: r.verdicts for r in graded},
        labels=(ORIGINAL, candidate.label),
        planned=len(cases),
        skipped=skipped,
        failed=[r for r in done if r.error is not None],
        usage=total_usage(done),
        interrupted=interrupted,
        provenance=(
            provenance_counts(provenance_label(case.record.provenance) for case in cases),
            provenance_counts(
                f"grader {r.evaluation.get('provenance', {}).get('grader_model', UNKNOWN)}" for r in graded
            ),
        ),
    )


async def _regrade_with_progress(
    cases: Sequence[Case],
    grader: TranscriptGrader,
    candidate: Candidate,
    store: Store,
    concurrency: int,
    done: list[Regrade],
) -> bool:
    """Regrade the cases into ``done`` with a progress bar on stderr; True if Ctrl-C stopped it."""
    with tqdm(total=len(cases), unit="case", desc="replay", file=sys.stderr) as bar:

        def graded(result: Regrade) -> None:
            done.append(result)
            usage = total_usage(done)
            bar.set_postfix_str(f"{usage['input_tokens'] + usage['output_tokens']:,} tokens", refresh=False)
            bar.update(1)

        try:
            await regrade(
                cases, grader, candidate.calibration, store, concurrency=concurrency, on_graded=graded
            )
        except asyncio.CancelledError:
            # Ctrl-C: asyncio cancelled this task; keep what was graded and report it.
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
            return True
    return False


REPLAY = CliSubcommand(
    "replay",
    "grade the team's reviewed iterations again with a candidate grader and compare (Ctrl-C stops)",
    _configure_replay,
    run,
    description=(
        "Grade the team's reviewed iterations again, each rebuilt as its grader saw it (rubric, "
        "transcript from the checkpoint history, evidence tools), with a candidate grader model, "
        "calibration or prompt, and print how it agrees with the team next to the original grader: "
        "agreement and Cohen's kappa per criterion and overall, a bootstrap 95% interval on each "
        "difference, and the verdicts that flipped. Ctrl-C stops and prints what was graded. It reads "
        f"the database (--db, else RUBRIC_BOT_DB {SETTINGS_SOURCE}) and the grader model "
        "(--grader-model, else RUBRIC_BOT_GRADER_MODEL or RUBRIC_BOT_MODEL, with the provider's API "
        "key); no Slack settings."
    ),
    epilog=exit_status_help(
        [
            (EXIT_OK, "the replay finished"),
            (EXIT_FAILURE, "the chart could not be written"),
            (EXIT_CONFIG, "bad arguments or settings"),
            (EXIT_INTERRUPTED, "stopped by Ctrl-C (the partial result is printed)"),
        ]
    ),
)
"""`rubric-bot replay`."""
