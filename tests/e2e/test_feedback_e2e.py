"""The asker's 👍/👎 on a final answer, through the real bot over HTTP on SQLite and PostgreSQL
(`bot.feedback`): the buttons end the answer, a click is saved per person (the last counts) and
thanked privately, and the report and the export show it beside the grader's verdict, never as a
review of the grader."""

from __future__ import annotations

import json
import subprocess
import sys

from bot.feedback.buttons import THANKS, UNKNOWN_RUN, UNREADABLE_FEEDBACK
from tests.e2e.conftest import RUBRIC, RUN_TIMEOUT, Service, ephemerals, finals, responses
from tests.standins import slack_requests as sr
from tests.standins import wait_for
from tests.standins.slack_api import SlackMessage, block_texts

COMMAND_TIMEOUT = 120.0
"""Bound for a terminal command (a fresh Python process importing langchain, on a loaded machine)."""


def vote(s: Service, final: SlackMessage, root: str, user: str, *, positive: bool) -> None:
    element = final.feedback_buttons()
    assert element is not None, "the final answer has no feedback buttons"
    s.send(sr.feedback_click(element, positive, final.channel, final.ts, root, user))


def report_text(s: Service, channel: str) -> str:
    """`/rubric report` in `channel` (no reviews: answered to the caller alone), as text."""
    s.send(sr.slash_command("report", channel, response_url=s.slack.response_url(channel)))
    (answer,) = wait_for(lambda: responses(s.slack, channel), RUN_TIMEOUT, message="the report")
    return "\n".join(block_texts(answer.args["blocks"]))


def terminal(s: Service, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "bot", *args, "--db", s.bot.env["RUBRIC_BOT_DB"]],
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT,
        check=False,
        env={**s.bot.env},
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_thumbs_down_on_a_satisfied_answer_is_thanked_and_shows_in_the_report_and_the_export(launch):
    s = launch()
    root = s.mention(f"rubric:\n{RUBRIC}", "C1")
    s.wait_text("C1", root, "Rubric set")
    s.mention("Is coffee healthy?", "C1", thread_ts=root)
    (final,) = s.wait_finals("C1", root, 1)
    assert "Rubric satisfied" in final.all_text

    vote(s, final, root, "U1", positive=True)
    vote(s, final, root, "U1", positive=False)  # the last click counts
    wait_for(
        lambda: sum("recorded" in c.args.get("text", "") for c in ephemerals(s.slack, "C1")) == 2,
        RUN_TIMEOUT,
        message="both clicks thanked",
    )
    # Each click is saved before it is acked, so in order; each thanks follows its own ack, so the
    # two may come in either order: the report below says which vote counts.
    assert sorted(c.args["text"] for c in ephemerals(s.slack, "C1")) == sorted(THANKS.values())

    report = report_text(s, "C1")
    assert "Askers' 👍 on answers: 0 of 1 votes" in report
    assert "Grader passed: 1 of 1 graded runs" in report
    assert "👎 on answers the grader passed: 1 of 1 votes on them" in report
    assert "No reviews" in report  # a vote is not a review of the grader: only the caller is told

    rows = [json.loads(line) for line in terminal(s, "export").splitlines()]
    assert rows and all(
        [(v["person"], v["vote"]) for v in row["asker_feedback"]] == [("U1", "down")] for row in rows
    )
    printed = terminal(s, "report", "--channel", "C1")
    assert "👎 on answers the grader passed: 1 of 1 votes on them" in printed


def test_a_vote_on_an_answer_the_workspace_never_had_is_refused_and_saves_nothing(launch):
    s = launch()
    root = s.mention("Is tea healthy?", "C2")  # no rubric: answered, not graded
    (final,) = s.wait_finals("C2", root, 1)
    element = final.feedback_buttons()
    assert element is not None
    forged = element | {"positive_button": element["positive_button"] | {"value": "good:999999"}}
    s.send(sr.feedback_click(forged, True, "C2", final.ts, root, "U1"))
    unreadable = element | {"negative_button": element["negative_button"] | {"value": "bad:x"}}
    s.send(sr.feedback_click(unreadable, False, "C2", final.ts, root, "U1"))

    wait_for(lambda: len(ephemerals(s.slack, "C2")) == 2, RUN_TIMEOUT, message="both clicks answered")
    told = sorted(c.args["text"] for c in ephemerals(s.slack, "C2"))  # each after its own ack: any order
    assert told == sorted([UNKNOWN_RUN, UNREADABLE_FEEDBACK])
    assert "Askers' verdicts" not in report_text(s, "C2")
    assert finals(s.thread("C2", root)) == [final]
