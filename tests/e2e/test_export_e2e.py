"""`rubric-bot export` end to end: a run and a review through the real bot and the Slack and model
stand-ins, then the dataset the terminal command writes from the bot's database."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import stat
import subprocess
import sys
from collections.abc import Iterator
from contextlib import closing

import pytest

from bot.db.store import Store
from bot.vocabulary.thread import MessageChange
from tests.e2e.conftest import CRITERIA, RUBRIC, Service, evaluations, shared_service
from tests.standins import slack_requests as sr
from tests.standins import wait_for
from tests.standins.model_api import (
    CANNOT_TELL_REASON,
    FAILING_SCORE,
    PASSING_SCORE,
    answering_model,
    grade,
)
from tests.standins.slack_api import TEAM_ID

CITES, POLITE = CRITERIA
EXPORT_TIMEOUT = 120.0
"""Bound for the export command (a fresh Python process importing langchain, on a loaded machine)."""

EXPORT_KEYS = {
    "workspace",
    "channel",
    "thread_ts",
    "run_id",
    "iteration",
    "criterion",
    "request",
    "answer",
    "grader_verdict",
    "grader_reason",
    "confidence",
    "samples",
    "escalated",
    "rubric_version",
    "grader_model",
    "grader_prompt_hash",
    "worker_model",
    "calibration_examples",
    "reviews",
    "audit",
    "cost",
    "asker_feedback",
}
"""The keys every exported row has (the issue's list)."""


@pytest.fixture(scope="module")
def service(tmp_path_factory) -> Iterator[Service]:
    with shared_service(tmp_path_factory.mktemp("export-bot")) as service:
        yield service


def export(s: Service, *args: str) -> list[dict]:
    done = subprocess.run(
        [sys.executable, "-m", "bot", "export", "--db", str(s.db_path), *args],
        capture_output=True,
        text=True,
        timeout=EXPORT_TIMEOUT,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def answered_thread(s: Service, channel: str, request: str) -> tuple[str, object]:
    root = s.mention(f"rubric:\n{RUBRIC}", channel)
    s.wait_text(channel, root, "Rubric set")
    s.mention(request, channel, thread_ts=root)
    s.wait_finals(channel, root, 1)
    [evaluation] = evaluations(s.thread(channel, root))
    return root, evaluation


def test_export_writes_the_reviewed_cases_with_every_key_and_their_provenance(service, tmp_path):
    s = service
    s.model.worker = lambda request: "Tea is fine ☕."
    s.model.grader = lambda request: grade(CRITERIA, cannot_tell=[CITES], scored=request.is_scored)
    root, evaluation = answered_thread(s, "CEXP1", "Is tea healthy?")
    s.disagree(evaluation, root, "U3", {CITES: ("fail", "Cite a study — «bitte».")})
    s.wait_message(evaluation, "1 review")
    answered_thread(s, "CEXP1", "Is water wet?")  # graded, never reviewed
    usd, token_usage = recorded_cost(s, "CEXP1", root)

    everything = export(s, "--channel", "CEXP1")
    out = tmp_path / "cases.jsonl"
    rows = export(s, "--channel", "CEXP1", "--reviewed-only", "--output", str(out))
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]

    assert len(everything) == 4 and {row["request"].splitlines()[-1] for row in everything} == {
        "Is tea healthy?",
        "Is water wet?",
    }
    assert all(set(row) == EXPORT_KEYS for row in everything)
    assert {row["criterion"] for row in rows} == set(CRITERIA)  # the form reviews every criterion
    [cites] = [row for row in rows if row["criterion"] == CITES]
    assert cites["criterion"] == CITES and cites["channel"] == "CEXP1" and cites["thread_ts"] == root
    assert cites["grader_verdict"] == "cannot_tell" and cites["grader_reason"] == CANNOT_TELL_REASON
    assert cites["request"].endswith("Is tea healthy?") and cites["answer"] == "Tea is fine ☕."
    assert cites["grader_model"] == answering_model("gpt-4o-mini")
    assert cites["worker_model"] == answering_model("gpt-4o-mini")
    assert cites["rubric_version"].startswith("#") and cites["grader_prompt_hash"]
    assert cites["audit"] is None and cites["calibration_examples"] == []
    # The run's cost as its end recorded it, with the tokens per role it was priced from.
    assert cites["cost"]["usd"] == pytest.approx(usd) and cites["cost"]["usd"] > 0
    assert cites["cost"]["unpriced"] == []
    for role, tokens in cites["cost"]["tokens"].items():
        assert tokens == {key: token_usage[role][key] for key in tokens}
    assert cites["cost"]["tokens"]["grader"]["input_tokens"] > 0
    [review] = cites["reviews"]
    assert (review["reviewer"], review["verdict"], review["comment"]) == (
        "U3",
        "fail",
        "Cite a study — «bitte».",
    )


def recorded_cost(s: Service, channel: str, root: str) -> tuple[float, dict]:
    """The recorded cost and tokens per role of the run answering in the thread `root`, once its end
    is recorded (just after its final message is posted)."""

    def recorded() -> tuple[float, str] | None:
        with closing(sqlite3.connect(s.db_path)) as db:
            return db.execute(
                "SELECT cost_usd, token_usage FROM runs "
                "WHERE channel = ? AND thread_ts = ? AND cost_usd IS NOT NULL",
                (channel, root),
            ).fetchone()

    usd, token_usage = wait_for(recorded, EXPORT_TIMEOUT, message=f"the cost of the run in {channel}")
    return usd, json.loads(token_usage)


def test_a_deleted_request_is_never_exported(service):
    s = service
    s.model.worker = lambda request: "Secret plans."
    s.model.grader = lambda request: grade(CRITERIA, scored=request.is_scored)
    root = s.mention(f"rubric:\n{RUBRIC}", "CEXP2")
    s.wait_text("CEXP2", root, "Rubric set")
    asked = "Share the secret plans"
    request = s.mention(asked, "CEXP2", thread_ts=root)
    s.wait_finals("CEXP2", root, 1)
    assert {row["request"].splitlines()[-1] for row in export(s, "--channel", "CEXP2")} == {asked}

    s.send(sr.event_callback(sr.message_deleted("CEXP2", request, root, previous_text=asked)))

    wait_for(
        lambda: export(s, "--channel", "CEXP2") == [],
        2 * EXPORT_TIMEOUT,
        message="the export to leave the deleted request out",
    )


SCORED_RUBRIC = """dimensions:
  - name: Cites a source
    anchors: {5: Cites one., 3: Vaguely., 1: None.}
  - name: Is polite
    anchors: {5: Polite., 3: Curt., 1: Rude.}
aggregation: min
pass_score: 3
"""
"""A scored rubric with CRITERIA as its dimensions."""


def test_a_scored_dimension_exports_the_graders_score_as_its_reviews_do(service):
    s = service
    s.model.worker = lambda request: "Tea is fine."
    s.model.grader = lambda request: grade(CRITERIA, failing=[CITES], scored=request.is_scored)
    root = s.mention(f"rubric:\n{SCORED_RUBRIC}", "CEXP3")
    s.wait_text("CEXP3", root, "Rubric set")
    s.mention("Is tea healthy?", "CEXP3", thread_ts=root)
    s.wait_finals("CEXP3", root, 1)
    first = evaluations(s.thread("CEXP3", root))[0]
    s.disagree(first, root, "U3", {CITES: ("3", "")})
    s.wait_message(first, "1 review")

    rows = [row for row in export(s, "--channel", "CEXP3") if row["iteration"] == 0]

    verdicts = {row["criterion"]: row["grader_verdict"] for row in rows}
    assert verdicts == {CITES: str(FAILING_SCORE), POLITE: str(PASSING_SCORE)}
    [cites] = [row for row in rows if row["criterion"] == CITES]
    assert [review["verdict"] for review in cites["reviews"]] == ["3"]


def test_a_deletion_slack_reported_but_not_yet_applied_is_not_exported(service):
    s = service
    s.model.worker = lambda request: "The launch date."
    s.model.grader = lambda request: grade(CRITERIA, scored=request.is_scored)
    asked = "When do we launch?"
    root = s.mention(f"rubric:\n{RUBRIC}", "CEXP4")
    s.wait_text("CEXP4", root, "Rubric set")
    request = s.mention(asked, "CEXP4", thread_ts=root)
    s.wait_finals("CEXP4", root, 1)
    assert {row["request"].splitlines()[-1] for row in export(s, "--channel", "CEXP4")} == {asked}

    # The deletion as the bot keeps it when Slack reports it, before a job applies it (or when the
    # process stopped before it could).
    deleted = MessageChange(team=TEAM_ID, channel="CEXP4", thread_ts=root, ts=request, text=asked)
    asyncio.run(_keep_deletion(str(s.db_path), deleted))

    assert export(s, "--channel", "CEXP4") == []


async def _keep_deletion(database: str, deleted: MessageChange) -> None:
    store = await Store.open(database, upgraded=True)
    try:
        await store.record_change("forget", deleted)
    finally:
        await store.close()


def test_an_export_file_is_its_owners_alone(service, tmp_path):
    s = service
    s.model.worker = lambda request: "An answer for the file."
    s.model.grader = lambda request: grade(CRITERIA, scored=request.is_scored)
    answered_thread(s, "CEXP5", "Write it to a file")
    out = tmp_path / "cases.jsonl"
    out.write_text("left from before\n")
    out.chmod(0o644)  # a file that was there, readable by anyone

    assert export(s, "--channel", "CEXP5", "--output", str(out)) == []  # all of it to the file
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert rows and {row["channel"] for row in rows} == {"CEXP5"}
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
