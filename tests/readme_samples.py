"""The sample outputs README.md shows, rendered here from the code that prints them: `rubric-bot
usage`'s text, `rubric-bot report`'s (the real command on a database made for it), an iteration's
message and a final message with its cost line, as Slack shows their text. tests/test_readme.py
checks that each README sample is exactly this; `python -m tests.readme_samples` prints them all."""

from __future__ import annotations

import asyncio
import contextlib
import io
from datetime import date
from pathlib import Path
from typing import Any

from langchain_core.messages import UsageMetadata

from bot.cli.main import main
from bot.cli.usage import usage_text
from bot.db.reviews import ReviewVerdict
from bot.db.spend import SpendCounter
from bot.db.store import Store
from bot.db.usage import UsageRow
from bot.limits.prices import run_cost
from bot.rendering.results import evaluation_message, final_messages
from bot.vocabulary.thread import ThreadKey

TEAM = "T0123ABCD"
CHANNEL = "C0123ABCD"


def usage_sample() -> str:
    rows = [
        UsageRow(date(2026, 3, 2), CHANNEL, "U0123ANNA", 12, 182_400, 0.0912, 0, TEAM),
        UsageRow(date(2026, 3, 2), CHANNEL, "U0456BORIS", 3, 41_050, 0.0207, 0, TEAM),
        UsageRow(date(2026, 3, 3), "C0789DOCS", "U0123ANNA", 5, 77_300, 0.0388, 0, TEAM),
    ]
    counters = [
        SpendCounter("deployment", "", "", "", 5, 77_300, 0.0388),
        SpendCounter("workspace", "", TEAM, "", 5, 77_300, 0.0388),
        SpendCounter("channel", "", TEAM, "C0789DOCS", 5, 77_300, 0.0388),
        SpendCounter("person", "", TEAM, "U0123ANNA", 5, 77_300, 0.0388),
    ]
    return usage_text(rows, counters, since=date(2026, 2, 2), where="every channel")


REVIEWED = [
    # (grader on "Cites a source", reviewer on it, grader on "Under 200 words", reviewer on it)
    *[("pass", "pass", "pass", "pass")] * 6,
    *[("fail", "fail", "pass", "pass")] * 3,
    ("pass", "fail", "pass", "fail"),
    ("fail", "pass", "pass", "pass"),
    ("fail", "fail", "fail", "fail"),
]
"""Twelve reviewed iterations: enough for κ on both criteria. The first six were one-click Agrees."""

SECOND_DIFFERS = {10: "Cites a source", 11: "Under 200 words"}
"""A second person reviewed every iteration, blind, agreeing with the first but on these criteria."""


def report_sample(tmp: Path) -> str:
    """What `rubric-bot report --db FILE` prints for a database holding `REVIEWED`."""
    database = str(tmp / "report-sample.sqlite")
    asyncio.run(_fill(database))
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert main(["report", "--db", database]) == 0
    return printed.getvalue().rstrip("\n")


async def _fill(database: str) -> None:
    store = await Store.open(database)
    try:
        thread = ThreadKey(TEAM, CHANNEL, "1772400000.000100")
        await store.add_thread(thread)
        for number, (cites, cites_seen, short, short_seen) in enumerate(REVIEWED):
            run = f"run-{number}"
            criteria = [
                {"name": "Cites a source", "passed": cites == "pass", "gap": "", "score": None},
                {"name": "Under 200 words", "passed": short == "pass", "gap": "", "score": None},
            ]
            evaluation = {"grading_run_id": run, "iteration": 0, "kind": "list", "criteria": criteria}
            await store.save_evaluation(thread, f"1772400001.{number:06d}", evaluation, "- Cites a source")
            verdicts = [
                ReviewVerdict("Cites a source", cites, cites_seen, ""),
                ReviewVerdict("Under 200 words", short, short_seen, ""),
            ]
            via = "agree" if number < 6 else "form"
            await store.save_review(thread, run, 0, f"U{number:04d}REVIEWER", verdicts, via=via)
            second = [_flipped(v) if v.criterion == SECOND_DIFFERS.get(number) else v for v in verdicts]
            await store.save_review(thread, run, 0, "U9999SECOND", second, via="blind")
    finally:
        await store.close()


def _flipped(verdict: ReviewVerdict) -> ReviewVerdict:
    other = "fail" if verdict.reviewer_verdict == "pass" else "pass"
    return ReviewVerdict(verdict.criterion, verdict.grader_verdict, other, "")


GRADER_USAGE = UsageMetadata(input_tokens=1_234, output_tokens=56, total_tokens=1_290)
WORKER_USAGE = UsageMetadata(input_tokens=2_480, output_tokens=410, total_tokens=2_890)


def iteration_sample() -> str:
    evaluation: Any = {
        "grading_run_id": "run-7",
        "iteration": 0,
        "max_iterations": 3,
        "kind": "list",
        "result": "needs_revision",
        "explanation": "The answer gives the facts but no source for them.",
        "criteria": [
            {"name": "Under 200 words", "passed": True, "gap": "", "score": None},
            {"name": "Cites a source", "passed": False, "gap": "No study or source is named.", "score": None},
        ],
        "score": None,
        "verdict": None,
        "usage": GRADER_USAGE,
        "grader_calls": 1,
        "answer_message_id": "ai-1",
        "best_iteration": None,
        "calibration": [],
        "unmatched": [],
    }
    return shown_text(evaluation_message(evaluation))


def final_sample() -> str:
    usage = UsageMetadata(input_tokens=3_714, output_tokens=466, total_tokens=4_180)  # worker + grader
    cost = run_cost(
        {"worker": ("openai:gpt-4o-mini", WORKER_USAGE), "grader": ("openai:gpt-4o-mini", GRADER_USAGE)}
    )
    answer = (
        "In moderation, yes: up to about 3–4 cups a day is linked with lower risk of heart disease "
        "(Poole et al., *BMJ* 2017)."
    )
    (message,) = final_messages("satisfied", answer, iterations=2, max_iterations=3, usage=usage, cost=cost)
    return shown_text(message)


def shown_text(message: dict[str, Any]) -> str:
    """A Slack message's blocks as their text reads (buttons left out), one block a paragraph."""
    texts = []
    for block in message["blocks"]:
        if block["type"] in ("section", "markdown"):
            texts.append(block["text"]["text"] if block["type"] == "section" else block["text"])
        elif block["type"] == "context":
            texts.append(" ".join(element["text"] for element in block["elements"]))
        elif block["type"] == "header":
            texts.append(block["text"]["text"])
    return "\n\n".join(texts)


def samples(tmp: Path) -> dict[str, str]:
    """Every README sample by its name (the README marks each with ``<!-- sample: NAME -->``)."""
    return {
        "usage": usage_sample(),
        "report": report_sample(tmp),
        "iteration": iteration_sample(),
        "final": final_sample(),
    }


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as directory:
        for name, text in samples(Path(directory)).items():
            print(f"<!-- sample: {name} -->\n```text\n{text}\n```\n")
