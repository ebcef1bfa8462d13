"""Team review end to end: the real bot process, driven as Slack drives it.

Buttons are signed ``block_actions`` posts and the review form a signed ``view_submission`` into
`/slack/events`; the Slack stand-in records the modal the bot opens, the message updates that show
the tally, and the report with its chart upload; the model stand-in records what the grader is
shown. The tests share one bot process, each in its own channel.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from typing import Any

import pytest
from PIL import Image

from tests.bot.agreement.chart_reading import PNG_SIGNATURE
from tests.e2e.conftest import (
    CRITERIA,
    RUN_TIMEOUT,
    Service,
    button_value,
    ephemerals,
    form_inputs,
    form_values,
    responses,
    shared_service,
)
from tests.standins import slack_requests as sr
from tests.standins import wait_for
from tests.standins.model_api import scripted_revision
from tests.standins.slack_api import BOT_USER_ID, SlackCall

COMMENT = "Too curt for a customer-facing answer."


def preset(view: dict[str, Any]) -> dict[str, tuple[str, str | None]]:
    """Criterion → (pre-selected verdict, pre-filled comment) of an opened review form."""
    return {
        label: (verdict["element"]["initial_option"]["value"], comment["element"].get("initial_value"))
        for label, verdict, comment in form_inputs(view)
    }


@pytest.fixture(scope="module")
def service(tmp_path_factory) -> Iterator[Service]:
    with shared_service(tmp_path_factory.mktemp("review-bot")) as service:
        yield service


@pytest.fixture
def s(service: Service) -> Service:
    service.model.worker, service.model.grader = scripted_revision(CRITERIA)
    return service


# -- Agree ---------------------------------------------------------------------------------------


def test_agree_records_each_reviewers_latest_review_and_the_message_shows_the_tally(s):
    root, first = s.graded_thread("R1")
    assert "review" not in first.all_text.lower()  # no tally before the first review

    s.click("review_agree", first, root, "U1")
    s.wait_message(first, "1 review · no disagreements")
    s.click("review_agree", first, root, "U2")
    s.wait_message(first, "2 reviews · no disagreements")
    # U2 changes their mind in the form, then agrees again: their latest review replaces the rest.
    s.disagree(first, root, "U2", {"Is polite": ("fail", "")})
    s.wait_message(first, "2 reviews · 1 disagreement on Is polite")
    s.click("review_agree", first, root, "U2")
    updated = s.wait_message(first, "2 reviews · no disagreements")

    assert "Cites a source" in updated.all_text and button_value(updated) == button_value(first)


def test_a_click_on_an_unknown_iteration_is_explained_to_the_clicker_only(s):
    root, first = s.graded_thread("R2")
    forged = sr.block_actions(
        "review_agree", json.dumps({"r": "no-such-run", "i": 0}), "R2", first.ts, root, "U3"
    )
    s.send(forged)

    (told,) = wait_for(lambda: ephemerals(s.slack, "R2"), RUN_TIMEOUT, message="an ephemeral answer")
    assert told.args["user"] == "U3" and "no record" in told.args["text"]

    # A form about an iteration the bot has no record of is replaced by a notice, not closed.
    about = {"grading_run_id": "no-such-run", "iteration": 0, "channel": "R2"}
    metadata = json.dumps(about | {"message_ts": first.ts, "thread_ts": root})
    answer = s.send(sr.view_submission("review_submit", {}, metadata, "U3")).json()
    assert answer["response_action"] == "update" and "no record" in json.dumps(answer["view"])
    assert [m.edits for m in s.thread("R2", root) if m.ts == first.ts] == [0]


# -- Disagree… -------------------------------------------------------------------------------------


def test_disagree_opens_the_form_preset_validates_it_and_saves_the_reviewers_verdicts(s):
    root, first = s.graded_thread("R3")

    view = s.open_form(first, root, "U1")
    assert view["callback_id"] == "review_submit"
    assert preset(view) == {"Cites a source": ("fail", None), "Is polite": ("pass", None)}

    incomplete = form_values(view, {"Is polite": ("fail", COMMENT)})
    polite_block = next(v["block_id"] for label, v, _ in form_inputs(view) if label == "Is polite")
    del incomplete[polite_block]
    rejected = s.submit_form(view, incomplete, "U1").json()
    assert rejected["response_action"] == "errors"
    assert list(rejected["errors"]) == [polite_block] and "Is polite" in rejected["errors"][polite_block]

    accepted = s.submit_form(view, form_values(view, {"Is polite": ("fail", COMMENT)}), "U1")
    assert accepted.body == ""  # closes the form
    s.wait_message(first, "1 review · 1 disagreement on Is polite")

    # Opening the form again starts from this reviewer's own review, comment included.
    again = s.open_form(first, root, "U1")
    assert preset(again) == {"Cites a source": ("fail", None), "Is polite": ("fail", COMMENT)}
    # Someone else starts from the grader's verdicts.
    assert preset(s.open_form(first, root, "U2"))["Is polite"] == ("pass", None)


def test_a_slack_call_failing_in_a_listener_is_logged_with_slacks_error_code(s):
    root, first = s.graded_thread("R9")
    trigger = sr.new_trigger_id()

    # The same click twice (a replayed payload): its trigger opens one form, Slack refuses the other.
    s.click("review_disagree", first, root, "U1", trigger_id=trigger)
    s.click("review_disagree", first, root, "U1", trigger_id=trigger)

    logged = "could not open the review form: exchanged_trigger_id"
    wait_for(lambda: logged in s.bot.stderr_text(), RUN_TIMEOUT, message="the failure in the bot's log")
    assert "Traceback" not in s.bot.stderr_text()
    assert "didn't call ack()" not in s.bot.stderr_text()  # the click was answered at once


# -- calibration -----------------------------------------------------------------------------------


def test_agreed_disagreements_reach_the_graders_prompt_until_calibration_is_switched_off(s):
    root, first = s.graded_thread("R4")
    assert [e["calibration"] for e in s.stored_evaluations("R4")] == [[], []]  # nothing to learn yet
    s.disagree(first, root, "U1", {"Is polite": ("fail", "LONE: " + COMMENT)})
    s.wait_message(first, "1 disagreement on Is polite")
    # With no editors named, one person's disagreement never calibrates on its own.
    before_lone = len(s.model.requests("grader"))
    s.say("And is coffee healthy?", "R4", thread_ts=root)
    s.wait_finals("R4", root, 2)
    assert not any("LONE" in text for text in s.grader_requests_after(before_lone))

    s.disagree(first, root, "U2", {"Is polite": ("fail", COMMENT)})
    s.wait_message(first, "2 disagreements on Is polite")
    before_review = len(s.model.requests("grader"))
    s.say("And is tea healthy?", "R4", thread_ts=root)
    s.wait_finals("R4", root, 3)
    calibrated = s.grader_requests_after(before_review)
    assert calibrated and all(COMMENT in text and "“Is polite”" in text for text in calibrated)
    recorded = s.stored_evaluations("R4")[-1]["calibration"]
    assert recorded == [
        {
            "criterion": "Is polite",
            "grader_verdict": "pass",
            "team_verdict": "fail",
            "comment": COMMENT,
            "made_by": "U2 and U1, agreeing",  # with no editors named, two people must agree
            "id": recorded[0]["id"],
        }
    ]

    assert "*on*" in s.send(sr.slash_command("calibration", "R4")).json()["text"]
    assert "*off*" in s.send(sr.slash_command("calibration off", "R4")).json()["text"]
    assert "*off*" in s.send(sr.slash_command("calibration", "R4")).json()["text"]
    switched_off = len(s.model.requests("grader"))
    s.say("And is mate healthy?", "R4", thread_ts=root)
    s.wait_finals("R4", root, 4)

    plain = s.grader_requests_after(switched_off)
    assert plain and not any(COMMENT in text for text in plain)
    assert s.stored_evaluations("R4")[-1]["calibration"] == []


# -- the report --------------------------------------------------------------------------------------


def test_report_posts_the_agreement_message_and_uploads_its_chart(s):
    root, first = s.graded_thread("R5")
    s.click("review_agree", first, root, "U1")
    s.disagree(first, root, "U2", {"Is polite": ("fail", COMMENT)})
    s.wait_message(first, "2 reviews · 1 disagreement on Is polite")

    answer = s.send(sr.slash_command("report 7", "R5")).json()
    assert answer["response_type"] == "ephemeral" and "Working" in answer["text"]

    upload = wait_for(
        lambda: next((u for u in s.slack.uploads() if u.channel == "R5" and u.completed), None),
        RUN_TIMEOUT,
        message=lambda: f"the chart upload; bot log:\n{s.bot.stderr_text()[-3000:]}",
    )
    (report,) = [m for m in s.slack.messages("R5") if m.thread_ts is None and "Grader agreement" in m.text]
    assert "last 7 days" in report.all_text
    assert "Is polite" in report.all_text and "2 reviews so far; κ needs at least 10" in report.all_text
    assert "agree 50%" in report.all_text  # one of two reviewers matched the grader on Is polite
    assert upload.data is not None and upload.data.startswith(PNG_SIGNATURE)
    width, height = Image.open(io.BytesIO(upload.data)).size
    assert width >= 600 and height >= 200
    assert upload.title == "Grader agreement, last 7 days"
    (completion,) = [
        c for c in s.slack.calls("files.completeUploadExternal") if c.args.get("channel_id") == "R5"
    ]
    assert "0.6" in completion.args["initial_comment"]


def test_report_without_reviews_or_with_a_bad_period_answers_only_the_caller(s):
    bad = s.send(sr.slash_command("report soon", "R6")).json()
    assert "`soon` is not a number of days" in bad["text"] and "/rubric report" in bad["text"]

    s.send(sr.slash_command("report", "R6", response_url=s.slack.response_url("R6")))
    (told,) = wait_for(lambda: responses(s.slack, "R6"), RUN_TIMEOUT, message="the no-reviews answer")
    assert told.args["response_type"] == "ephemeral" and "No reviews" in json.dumps(told.args["blocks"])
    assert s.slack.messages("R6") == []
    assert not any(u.channel == "R6" for u in s.slack.uploads())


def test_a_report_slack_refuses_to_post_is_explained_to_the_caller(s):
    root, first = s.graded_thread("R8")
    s.click("review_agree", first, root, "U1")
    s.wait_message(first, "1 review")
    s.slack.error_next("chat.postMessage", "not_in_channel")

    s.send(sr.slash_command("report", "R8", response_url=s.slack.response_url("R8")))

    (told,) = wait_for(lambda: responses(s.slack, "R8"), RUN_TIMEOUT, message="the failure answer")
    assert told.args["response_type"] == "ephemeral"
    assert "not_in_channel" in told.args["text"] and "/invite @rubric-bot" in told.args["text"]


# -- the Home tab ------------------------------------------------------------------------------------


def test_the_home_tab_shows_each_shared_channels_rubric_runs_and_agreement_with_its_chart(s):
    for channel, members in {"H1": (BOT_USER_ID, "U5"), "H2": (BOT_USER_ID, "U5"), "H3": ("U5",)}.items():
        s.slack.join(channel, *members)
    s.slack.join("H4", BOT_USER_ID)  # the viewer is not in H4, and the bot is not in H3
    assert (
        "Channel default rubric set"
        in s.send(sr.slash_command("set - Answers in French", "H2")).json()["text"]
    )
    root, first = s.graded_thread("H1")
    s.disagree(first, root, "U1", {"Is polite": ("fail", COMMENT)})
    s.wait_message(first, "1 review · 1 disagreement on Is polite")

    s.send(sr.event_callback(sr.app_home_opened("U5", tab="messages")))  # not the Home tab: ignored
    s.send(sr.event_callback(sr.app_home_opened("U5")))

    def published() -> list[SlackCall]:
        return [c for c in s.slack.calls("views.publish") if c.args.get("user_id") == "U5" and c.ok]

    first_view, charted = wait_for(
        lambda: (calls := published()) and len(calls) == 2 and calls,
        RUN_TIMEOUT,
        message=lambda: f"the Home tab twice; bot log:\n{s.bot.stderr_text()[-3000:]}",
    )
    view = s.slack.home("U5")
    assert view is not None and view["type"] == "home" and view["blocks"] == charted.args["view"]["blocks"]
    text = json.dumps(view["blocks"], ensure_ascii=False)
    # Only the channels the viewer shares with the bot, the busiest first.
    assert text.index("<#H1>") < text.index("<#H2>") and "H3" not in text and "H4" not in text
    assert "- Answers in French" in text  # H2's default rubric; H1 has none
    assert "Rubric satisfied" in text  # H1's graded request
    assert "Is polite" in text and "1 review so far" in text  # H1's agreement report
    # Published first without the chart, then with it: an image of the bot's own private upload.
    assert not any(b["type"] == "image" for b in first_view.args["view"]["blocks"])
    (image,) = [b for b in view["blocks"] if b["type"] == "image"]
    (upload,) = [u for u in s.slack.uploads() if u.file_id == image["slack_file"]["id"]]
    assert upload.completed and upload.channel is None and upload.data.startswith(PNG_SIGNATURE)
    assert "Grader agreement" in image["title"]["text"]


def test_help_lists_report_and_calibration(s):
    text = s.send(sr.slash_command("help", "R7")).json()["text"]

    assert "/rubric report [days]" in text and "/rubric calibration [on|off|drop N]" in text
