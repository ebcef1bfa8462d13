"""Trust in the grade end to end: a grader that says "can't tell", provenance on every verdict and
agreement kept apart by rubric version, through the real bot and the Slack and model stand-ins."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import closing
from typing import Any

import pytest

from tests.e2e.conftest import CRITERIA, RUBRIC, RUN_TIMEOUT, Service, evaluations, shared_service
from tests.standins import slack_requests as sr
from tests.standins import wait_for
from tests.standins.model_api import CANNOT_TELL_REASON, ChatRequest, answering_model, grade

CITES, POLITE = CRITERIA


@pytest.fixture(scope="module")
def service(tmp_path_factory) -> Iterator[Service]:
    with shared_service(tmp_path_factory.mktemp("trust-bot")) as service:
        yield service


def provenance_rows(s: Service, channel: str) -> list[dict[str, Any]]:
    with closing(sqlite3.connect(s.db_path)) as db:
        rows = db.execute(
            "SELECT provenance FROM evaluations WHERE channel = ? ORDER BY created_at", (channel,)
        ).fetchall()
    return [json.loads(row[0]) for row in rows]


def report_text(s: Service, channel: str) -> str:
    """The text of the report `/rubric report` posts in the channel now (not of an earlier one)."""

    def reports() -> list[str]:
        return [
            m.all_text
            for m in s.slack.messages(channel)
            if m.thread_ts is None and "Grader agreement" in m.text
        ]

    before = len(reports())
    s.send(sr.slash_command("report", channel, response_url=s.slack.response_url(channel)))

    def posted() -> str | None:
        found = reports()
        return found[-1] if len(found) > before else None

    return wait_for(posted, RUN_TIMEOUT, message=lambda: f"the report in {channel}")


def test_cannot_tell_ends_the_run_after_one_iteration_named_in_thread_and_waiting_list(service):
    s = service
    s.model.worker = lambda request: "Coffee is fine in moderation."
    s.model.grader = lambda request: grade(CRITERIA, cannot_tell=[CITES], scored=request.is_scored)
    root = s.mention(f"rubric:\n{RUBRIC}", "T1")
    s.wait_text("T1", root, "Rubric set")
    s.mention("Is coffee healthy?", "T1", thread_ts=root)
    [final] = s.wait_finals("T1", root, 1)

    thread = s.thread("T1", root)
    [evaluation] = evaluations(thread)
    assert f"❔ can't tell: {CITES}" in evaluation.all_text and CANNOT_TELL_REASON in evaluation.all_text
    assert "review_disagree" in json.dumps(evaluation.blocks)
    assert "Rubric satisfied" in final.all_text
    assert "a person's verdict is needed" in final.all_text and CITES in final.all_text
    assert len(s.worker_requests_for("Is coffee healthy?")) == 1  # no revision asked for it

    [provenance] = provenance_rows(s, "T1")
    assert provenance["grader_model"] == answering_model("gpt-4o-mini")
    assert provenance["worker_model"] == answering_model("gpt-4o-mini")
    assert provenance["rubric_version"].startswith("#") and provenance["grader_prompt_hash"]

    # Agree records the judged criterion only: the abstained one waits for a person's verdict.
    s.click("review_agree", evaluation, root, "U1")
    s.wait_message(evaluation, "1 review")
    text = report_text(s, "T1")
    assert "Waiting for a person's verdict" in text and CITES in text
    assert "judged 1 of 2 criteria (50%)" in text
    assert CITES not in text.split("Coverage")[0].split("Grader agreement")[1]  # no κ row for it

    s.disagree(evaluation, root, "U2", {CITES: ("fail", "No source at all.")})
    s.wait_message(evaluation, "2 reviews")
    assert "Waiting for a person's verdict" not in report_text(s, "T1")


def test_the_report_splits_agreement_by_rubric_version_after_a_rubric_change(service):
    s = service
    s.model.worker = lambda request: "Answer."
    s.model.grader = lambda request: grade(
        [line[2:] for line in _rubric_of(request).splitlines()], scored=request.is_scored
    )
    for rubric in (RUBRIC, "- Is polite\n- Is short"):
        answer = s.send(sr.slash_command(f"set {rubric}", "T2")).json()
        assert "Channel default rubric set" in answer["text"]
        root = s.mention("Is tea healthy?", "T2")
        s.wait_finals("T2", root, 1)
        [evaluation] = evaluations(s.thread("T2", root))
        s.click("review_agree", evaluation, root, "U1")
        s.wait_message(evaluation, "1 review")

    assert [p["rubric_version"] for p in provenance_rows(s, "T2")] == ["v1", "v2"]
    text = report_text(s, "T2")
    assert "come from 2 rubric versions or grader models" in text
    grader = answering_model("gpt-4o-mini")
    assert f"rubric v1 · grader {grader}" in text and f"rubric v2 · grader {grader}" in text


def _rubric_of(request: ChatRequest) -> str:
    """The rubric section of a grader request (its numbered criteria as bullets)."""
    section = request.last_user_text.split("<rubric-")[1].split(">", 1)[1].split("</rubric-")[0]
    return "\n".join("- " + line.split(". ", 1)[1] for line in section.strip().splitlines())
