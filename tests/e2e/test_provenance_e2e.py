"""Trust in the grade end to end: a grader that says "can't tell", provenance on every verdict and
coverage per criterion, through the real bot and the Slack and model stand-ins."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import closing
from typing import Any

import pytest

from tests.e2e.conftest import CRITERIA, RUBRIC, Service, evaluations, posted_report, shared_service
from tests.standins.model_api import CANNOT_TELL_REASON, answering_model, grade

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
    text = posted_report(s, "T1")
    assert "Waiting for a person's verdict" in text and CITES in text
    assert "judged 1 of 2 criteria (50%)" in text
    # Its line: no reviews of a judged verdict (nothing to agree with), and the grader judged 0 of 1.
    assert f"*{CITES}* (pass/fail) — _no reviews yet_ · judged 0 of 1" in text

    s.disagree(evaluation, root, "U2", {CITES: ("fail", "No source at all.")})
    s.wait_message(evaluation, "2 reviews")
    assert "Waiting for a person's verdict" not in posted_report(s, "T1")
