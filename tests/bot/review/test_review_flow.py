"""The review wiring below the listeners: `/rubric report|calibration` parsing, the store's channel
queries, and calibration from the team's disagreements into the grader's prompt.

Calibration runs through the real agent (langchain + RubricMiddleware) with scripted models, the
real SQLite store, and the runner posting to the local Slack stand-in.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from bot.agent.turn import run_turn
from bot.agent.worker import ThreadContext, agent_config, build_agent
from bot.db.reviews import ReviewRow, ReviewVerdict
from bot.db.store import Store
from bot.listeners.command_text import (
    MAX_REPORT_DAYS,
    CommandError,
    ParsedCommand,
    calibration_drop,
    calibration_switch,
    parse_command,
    report_days,
)
from bot.listeners.rubric_command import RUBRIC_SUBCOMMANDS
from bot.rendering.errors import help_text
from bot.review.calibration import (
    CALIBRATION_EXAMPLES,
    TeamExample,
    Trust,
    calibration_source,
    team_examples,
    trust_now,
)
from bot.vocabulary.thread import ThreadKey
from bot.vocabulary.workspace import Workspace
from grading import CalibrationExample, RubricEvaluation
from tests.bot.threads.runner_harness import Harness, open_harness
from tests.grading.scripted import ScriptedChatModel, grade_call, payload_of

T1 = Workspace("T1")

ROOT = Path(__file__).resolve().parents[3]
RUBRIC = "- Names the capital\n- Mentions the river"
EVENT_TIMEOUT = 10.0  # bound for a run to finish; the scripted models answer at once


# -- /rubric report and /rubric calibration ---------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("report", ParsedCommand("report")),
        ("REPORT 30", ParsedCommand("report", "30")),
        ("calibration", ParsedCommand("calibration")),
        ("calibration Off", ParsedCommand("calibration", "Off")),
    ],
)
def test_report_and_calibration_take_an_optional_word(text, parsed):
    assert parse_command(text, {s.name: s for s in RUBRIC_SUBCOMMANDS}) == parsed


def test_report_days_are_a_bounded_whole_number_or_all_time():
    assert report_days("") is None
    assert report_days(" 7 ") == 7
    assert report_days(str(MAX_REPORT_DAYS)) == MAX_REPORT_DAYS
    for bad in ("0", "-3", "1.5", "week", str(MAX_REPORT_DAYS + 1)):
        with pytest.raises(CommandError, match="not a number of days"):
            report_days(bad)


def test_calibration_switch_reads_on_and_off():
    assert calibration_switch("") is None
    assert calibration_switch("ON") is True
    assert calibration_switch("off") is False
    with pytest.raises(CommandError, match="`on`, `off` or `drop N`, not `maybe`"):
        calibration_switch("maybe")


def test_calibration_drop_reads_the_examples_number():
    assert calibration_drop("drop 12") == 12
    assert calibration_drop("DROP  3") == 3
    assert calibration_drop("on") is None and calibration_drop("") is None
    for wrong in ("drop", "drop x", "drop 0"):
        with pytest.raises(CommandError, match="needs an example's number"):
            calibration_drop(wrong)


def test_help_and_the_manifest_name_every_subcommand_of_the_table():
    text = help_text([(s.usage, s.help) for s in RUBRIC_SUBCOMMANDS])
    manifest = yaml.safe_load((ROOT / "manifest.yml").read_text())
    (command,) = manifest["features"]["slash_commands"]

    assert "/rubric report [days]" in text and "/rubric calibration [on|off|drop N]" in text
    alternatives = command["usage_hint"].removeprefix("[").removesuffix("]").split(" | ")
    hinted = {alternative.split()[0] for alternative in alternatives}
    assert hinted == {s.name for s in RUBRIC_SUBCOMMANDS}
    assert "files:write" in manifest["oauth_config"]["scopes"]["bot"]  # the chart upload


# -- the store's channel queries ---------------------------------------------------------------------


@pytest.fixture
async def store(tmp_path):
    opened = await Store.open(str(tmp_path / "bot.sqlite"))
    yield opened
    await opened.close()


def evaluation(run: str, iteration: int = 0, *, passed: bool = True) -> dict[str, Any]:
    criteria = [{"name": "Names the capital", "passed": passed, "gap": "", "score": None}]
    return {"grading_run_id": run, "iteration": iteration, "kind": "list", "criteria": criteria}


async def test_evaluations_in_channel_by_team_channel_and_period(store):
    await store.save_evaluation(ThreadKey("T1", "C1", "1.0"), "1.1", evaluation("a"), RUBRIC)
    await store.save_evaluation(ThreadKey("T1", "C1", "1.0"), "1.2", evaluation("a", 1), RUBRIC)
    await store.save_evaluation(ThreadKey("T1", "C2", "2.0"), "2.1", evaluation("b"), RUBRIC)
    await store.save_evaluation(ThreadKey("T2", "C1", "3.0"), "3.1", evaluation("c"), RUBRIC)

    def runs(found: list[dict[str, Any]]) -> list[tuple[str, int]]:
        return [(e["grading_run_id"], e["iteration"]) for e in found]

    assert runs(await store.evaluations_in_channel(T1, "C1")) == [("a", 0), ("a", 1)]
    assert runs(await store.evaluations_in_channel(None, "C1")) == [("a", 0), ("a", 1), ("c", 0)]
    assert len(await store.evaluations_in_channel(None, None)) == 4
    later = datetime.now(UTC) + timedelta(minutes=1)
    assert await store.evaluations_in_channel(T1, "C1", since=later) == []


async def test_reviews_in_channel_can_span_teams_and_channels(store):
    verdict = [ReviewVerdict("Names the capital", "pass", "fail")]
    await store.save_review(ThreadKey("T1", "C1", "1.0"), "a", 0, "U1", verdict)
    await store.save_review(ThreadKey("T2", "C2", "2.0"), "b", 0, "U1", verdict)

    assert [r.grading_run_id for r in await store.reviews_in_channel(None, None)] == ["a", "b"]
    assert [r.grading_run_id for r in await store.reviews_in_channel(None, "C2")] == ["b"]


# -- calibration examples ------------------------------------------------------------------------------


@dataclass(frozen=True)
class NamedEditors:
    """`EditorsNow` naming `users` in every workspace (none: editors are not named)."""

    users: frozenset[str] = frozenset()

    async def restricted(self, workspace: Workspace) -> bool:
        return bool(self.users)

    async def is_editor(self, workspace: Workspace, user: str) -> bool:
        return user in self.users


def review_row(
    criterion: str,
    grader: str,
    reviewer: str,
    comment: str,
    *,
    by: str = "U1",
    review_id: int = 1,
    run: str = "run",
    editor: bool = False,
) -> ReviewRow:
    return ReviewRow(
        "T1",
        "C1",
        "1.0",
        run,
        0,
        criterion,
        grader,
        reviewer,
        comment,
        by,
        datetime.now(UTC),
        review_id=review_id,
        editor=editor,
    )


EDITORS = Trust(restricted=True, editors={"UED"})
"""One editor named: UED."""


def test_calibration_examples_say_scores_out_of_five_and_who_made_them():
    rows = [
        review_row("Mentions the river", "pass", "fail", "The Seine is only implied.", by="UED", review_id=7),
        review_row("Clarity", "4", "2", "", by="UED", review_id=8),
    ]

    assert [example.for_grader() for example in team_examples(rows, EDITORS)] == [
        CalibrationExample(
            criterion="Mentions the river",
            grader_verdict="pass",
            team_verdict="fail",
            comment="The Seine is only implied.",
            made_by="UED, a rubric editor",
            id="7",
        ),
        CalibrationExample(
            criterion="Clarity",
            grader_verdict="4/5",
            team_verdict="2/5",
            comment="",
            made_by="UED, a rubric editor",
            id="8",
        ),
    ]


def test_with_no_editors_named_a_lone_disagreement_never_calibrates_and_a_second_persons_agreement_does():
    lone = [review_row("Clarity", "pass", "fail", "Rambles.", by="U1", run="a", editor=True)]
    seconded = [
        review_row("Clarity", "pass", "fail", "", by="U2", run="b", review_id=9),
        review_row("Clarity", "pass", "fail", "Rambles.", by="U1", run="b", review_id=3),
    ]
    unnamed = Trust(restricted=False)

    assert team_examples(lone, unnamed) == []  # saved as an editor's: no matter, none are named now
    (example,) = team_examples(seconded, unnamed)
    assert example == TeamExample(seconded[0], ("U2", "U1"))
    assert example.for_grader()["made_by"] == "U2 and U1, agreeing"


def test_with_editors_named_a_non_editor_pair_does_not_calibrate_but_an_editors_second_or_three_people_do():
    pair = [review_row("Clarity", "pass", "fail", "", by=u, run="a") for u in ("U1", "U2")]
    three = [review_row("Clarity", "pass", "fail", "", by=u, run="b") for u in ("U1", "U2", "U3")]
    with_editor = [review_row("Clarity", "pass", "fail", "", by=u, run="c") for u in ("U4", "UED")]

    assert team_examples(pair, EDITORS) == []
    assert [e.reviewers for e in team_examples(three, EDITORS)] == [("U1", "U2", "U3")]
    assert [e.reviewers for e in team_examples(with_editor, EDITORS)] == [("UED", "U4")]


def test_the_editors_comment_is_kept_when_others_second_it():
    rows = [
        review_row("Clarity", "pass", "fail", "me too", by="U4", run="a", review_id=9),
        review_row("Clarity", "pass", "fail", "Rambles: cut the intro.", by="UED", run="a", review_id=3),
    ]

    (example,) = team_examples(rows, EDITORS)

    assert example.for_grader()["comment"] == "Rambles: cut the intro." and example.review.review_id == 3
    assert example.for_grader()["made_by"] == "UED and U4, agreeing (UED a rubric editor)"


def test_a_person_makes_at_most_one_example_per_criterion_in_force():
    # The editor re-saved disagreements on five cases of one criterion: only the newest is in force.
    rows = [review_row("Clarity", "pass", "fail", f"take {n}", by="UED", run=f"r{n}") for n in range(5)]
    rows.append(review_row("Tone", "pass", "fail", "curt", by="UED", run="r9"))

    examples = team_examples(rows, EDITORS)

    assert [(e.review.criterion, e.review.comment) for e in examples] == [
        ("Clarity", "take 0"),
        ("Tone", "curt"),
    ]


async def test_editor_status_is_asked_when_the_examples_are_used_not_as_the_review_was_saved():
    rows = [review_row("Clarity", "pass", "fail", "", by="UOLD", editor=True)]

    assert team_examples(rows, await trust_now(NamedEditors(frozenset({"UED"})), T1, rows)) == []
    assert len(team_examples(rows, await trust_now(NamedEditors(frozenset({"UOLD"})), T1, rows))) == 1


def river_grader(messages: list[Any]) -> Any:
    criteria = [
        {"name": "Names the capital", "passed": True},
        {"name": "Mentions the river", "passed": True},
    ]
    return grade_call("RubricGrade", {"result": "satisfied", "explanation": "Fine.", "criteria": criteria})


async def test_the_calibration_source_reads_the_runs_channel_from_its_thread_context(tmp_path):
    store = await Store.open(str(tmp_path / "bot.sqlite"))
    await disagree(store, "run-1", "Name it.")  # a review in T1's channel C1
    grader = ScriptedChatModel(script=river_grader)
    agent = build_agent(
        ScriptedChatModel(script=lambda messages: "Paris, on the Seine."),
        grader,
        max_iterations=2,
        checkpointer=InMemorySaver(),
        calibration=calibration_source(store, NamedEditors(frozenset({"U2"}))),
    )
    seen: list[RubricEvaluation] = []

    async def record(evaluation: RubricEvaluation) -> None:
        seen.append(evaluation)

    inputs = {"messages": [HumanMessage("Capital of France?")], "rubric": RUBRIC}
    await run_turn(
        agent, inputs, agent_config("in C1"), record, context=ThreadContext(workspace=T1, channel="C1")
    )
    await run_turn(
        agent, inputs, agent_config("in C2"), record, context=ThreadContext(workspace=T1, channel="C2")
    )
    await run_turn(agent, inputs, agent_config("no context"), record)
    await store.close()

    calibrated, elsewhere, without = (payload_of(call) for call in grader.calls)
    assert (
        "Example #1 (by U2, a rubric editor): for criterion “Mentions the river” the team judged fail "
        "where the grader said pass" in calibrated
    )
    assert "Name it." in calibrated
    assert "calibration" not in elsewhere.lower() and "calibration" not in without.lower()
    (shown,) = seen[0]["calibration"]
    assert shown == CalibrationExample(
        criterion="Mentions the river",
        grader_verdict="pass",
        team_verdict="fail",
        comment="Name it.",
        made_by="U2, a rubric editor",
        id=shown["id"],
    )
    assert [e["calibration"] for e in seen[1:]] == [[], []]


# -- calibration through the runner -----------------------------------------------------------------


@pytest.fixture
async def harness(tmp_path) -> AsyncIterator[Harness]:
    async with open_harness(tmp_path) as opened:
        yield opened


async def ask(harness: Harness) -> None:
    assert harness.runner is not None
    await harness.runner.submit_request(harness.message("Capital of France?"))
    await asyncio.wait_for(harness.settle(), EVENT_TIMEOUT)


async def disagree(
    store: Store, run: str, comment: str, rubric: str = RUBRIC, *, reviewer: str = "U2", editor: bool = True
) -> None:
    """A stored evaluation graded against `rubric`, and a reviewer (an editor unless said otherwise)
    overruling its river verdict."""
    await store.save_evaluation(ThreadKey("T1", "C1", "1.0"), f"{run}.ts", evaluation(run), rubric)
    verdicts = [ReviewVerdict("Mentions the river", "pass", "fail", comment)]
    await store.save_review(ThreadKey("T1", "C1", "1.0"), run, 0, reviewer, verdicts, editor=editor)


async def test_the_grader_sees_the_latest_disagreements_with_its_rubric_until_switched_off(harness):
    store = harness.store
    harness.use(
        lambda messages: "Paris, on the Seine.",
        river_grader,
        max_iterations=2,
        calibration=calibration_source(store, NamedEditors(frozenset(f"U{10 + n}" for n in range(10)))),
    )
    grader = harness.grader
    assert grader is not None
    await store.set_channel_rubric(T1, "C1", RUBRIC, "U9")
    extra = 2
    # Each by another editor: a person makes at most one example per criterion in force.
    for number in range(CALIBRATION_EXAMPLES + extra):
        await disagree(store, f"run-{number}", f"comment {number}", reviewer=f"U{10 + number}")
    await disagree(store, "other-rubric", "about another rubric", rubric="- Something else")

    await ask(harness)
    prompt = payload_of(grader.calls[-1])
    shown = [n for n in range(CALIBRATION_EXAMPLES + extra) if f"comment {n}" in prompt]
    assert shown == list(range(extra, CALIBRATION_EXAMPLES + extra))  # the newest ones, bounded
    assert "about another rubric" not in prompt
    recorded = (await store.evaluations_in_channel(T1, "C1"))[-1]["calibration"]
    assert len(recorded) == CALIBRATION_EXAMPLES

    await store.set_calibration(T1, "C1", False)
    await ask(harness)
    assert "comment" not in payload_of(grader.calls[-1])
    assert (await store.evaluations_in_channel(T1, "C1"))[-1]["calibration"] == []
