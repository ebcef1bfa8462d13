"""Agreement a team lead can decide on, end to end on SQLite and PostgreSQL: a criterion pooled over
the rubric versions in which its text is unchanged, κ with its interval once pooled n reaches 10,
coverage per criterion, in `/rubric report` and `rubric-bot report`, through the real bot and the
Slack and model stand-ins."""

from __future__ import annotations

import re
from collections.abc import Callable

from bot.cli.main import main
from tests.e2e.conftest import CRITERIA, RUBRIC, Service, evaluations, posted_report
from tests.standins import slack_requests as sr
from tests.standins.model_api import ChatRequest, Json, answering_model, grade
from tests.standins.slack_api import SlackMessage

CITES, POLITE = CRITERIA
GAINED = f"- {POLITE}\n- {CITES}\n- Is short"
"""The rubric reordered, with a criterion added: its unchanged criteria pool across both versions."""
REWRITTEN = f"- {POLITE}\n- {CITES}\n- Is brief"
"""GAINED with its added criterion's text rewritten: that one starts afresh."""


def rubric_of(request: ChatRequest) -> list[str]:
    """The criteria of a grader request's rubric, in order."""
    section = request.last_user_text.split("<rubric-")[1].split(">", 1)[1].split("</rubric-")[0]
    return [line.split(". ", 1)[1] for line in section.strip().splitlines()]


def grader(request: ChatRequest) -> Json:
    """Fails "Cites a source" on requests that say FAIL; cannot tell "Is polite" but on ones that say
    POLITE; passes the rest."""
    criteria = rubric_of(request)
    failing = [CITES] if "FAIL" in request.all_text else []
    return grade(criteria, failing=failing, cannot_tell=[] if "POLITE" in request.all_text else [POLITE])


def answered_and_agreed(s: Service, channel: str, request: str, reviewer: str = "U1") -> SlackMessage:
    """Ask in a new thread, wait for the answer and agree with its iteration; that iteration's message."""
    root = s.mention(request, channel)
    s.wait_finals(channel, root, 1)
    [evaluation] = evaluations(s.thread(channel, root))
    s.click("review_agree", evaluation, root, reviewer)
    return s.wait_message(evaluation, "1 review")


def set_rubric(s: Service, channel: str, rubric: str) -> None:
    answer = s.send(sr.slash_command(f"set {rubric}", channel)).json()
    assert "Channel default rubric set" in answer["text"], answer


def test_a_rubric_that_gains_a_criterion_keeps_one_pooled_line_per_unchanged_criterion(
    launch: Callable[..., Service], database_url: str, capsys
):
    s = launch(RUBRIC_BOT_MAX_ITERATIONS="1")
    s.model.worker = lambda request: "Answer."
    s.model.grader = grader
    channel = "CPOOL"
    set_rubric(s, channel, RUBRIC)
    shown_under = {}
    for i in range(5):
        shown_under["v1"] = answered_and_agreed(s, channel, f"Question {i} {'FAIL' if i % 2 else ''}")
    set_rubric(s, channel, GAINED)
    for i in range(5):
        asked = f"Question {5 + i} {'FAIL' if i % 2 else ''}{' POLITE' if i == 0 else ''}"
        shown_under["v2"] = answered_and_agreed(s, channel, asked)

    # Each iteration message names the rubric version and the grader model as it answered.
    for version, message in shown_under.items():
        assert f"Rubric {version} · grader {answering_model('gpt-4o-mini')}" in message.all_text

    shown = posted_report(s, channel)

    # One line for "Cites a source", its 10 reviews pooled from v1 and v2: κ with its interval.
    assert shown.count(f"*{CITES}* (pass/fail)") == 1
    assert f"*{CITES}* (pass/fail) — 10 reviews from 10 runs" in shown
    assert "*κ 1.00 (1.00–1.00)*" in shown
    # "Is polite": the grader could tell it in 1 run of 10, so it is flagged for its coverage.
    assert f"*{POLITE}* (pass/fail) — _1 review so far; κ needs at least 10_" in shown
    assert "coverage 10% (" in shown and "of 10 ⚠️" in shown and "Coverage under 50%" in shown
    assert "*Is short · since v2 (added)* (pass/fail)" in shown
    assert "Rubric v1, v2 · grader " in shown

    set_rubric(s, channel, REWRITTEN)
    answered_and_agreed(s, channel, "Question 10")
    shown = posted_report(s, channel)
    assert "*Is brief · since v3 (text changed)* (pass/fail) — _1 review so far" in shown
    assert "*Is short · since v2 (added)* (pass/fail) — _5 reviews so far" in shown
    assert f"*{CITES}* (pass/fail) — 11 reviews from 11 runs" in shown

    assert main(["report", "--db", database_url, "--channel", channel]) == 0
    printed = capsys.readouterr().out
    [cites] = [re.split(r"\s{2,}", line) for line in printed.splitlines() if line.startswith(CITES)]
    assert cites[1:5] == ["pass/fail", "11", "11", "100%"] and cites[7:9] == ["1.00", "1.00–1.00"]
    assert "Is brief · since v3 (text changed)" in printed and "Flagged: Is polite" in printed
