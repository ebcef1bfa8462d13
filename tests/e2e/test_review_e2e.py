"""Team review end to end: the real bot process, driven as Slack drives it.

Buttons are signed ``block_actions`` posts and the review form a signed ``view_submission`` into
`/slack/events`; the Slack stand-in records the modal the bot opens, the message updates that show
the tally, and the report with its chart upload; the model stand-in records what the grader is
shown. The tests share one bot process, each in its own channel.
"""

from __future__ import annotations

import io
import json
import sqlite3
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from tests.e2e.conftest import shared_bot
from tests.e2e.test_bot_e2e import CRITERIA, RUBRIC, RUN_TIMEOUT, Service, evaluations
from tests.standins import slack_requests as sr
from tests.standins import wait_for
from tests.standins.model_api import scripted_revision
from tests.standins.slack_api import BOT_USER_ID, SlackApiStandin, SlackCall, SlackMessage

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
COMMENT = "Too curt for a customer-facing answer."


@dataclass
class ReviewService(Service):
    """The shared bot with its stand-ins, plus its database file and review helpers."""

    @property
    def db_path(self) -> Path:
        return Path(self.bot.env["RUBRIC_BOT_DB"])

    def graded_thread(self, channel: str) -> tuple[str, SlackMessage]:
        """A thread with the rubric and one answered request; its root and first evaluation.

        The scripted grader fails "Cites a source" on the first iteration and passes "Is polite".
        """
        root = self.mention(f"rubric:\n{RUBRIC}", channel)
        self.wait_text(channel, root, "Rubric set")
        self.mention("Is coffee healthy?", channel, thread_ts=root)
        self.wait_finals(channel, root, 1)
        return root, evaluations(self.thread(channel, root))[0]

    def click(self, action_id: str, message: SlackMessage, root: str, user: str, **extra: Any) -> None:
        self.send(
            sr.block_actions(
                action_id, button_value(message), message.channel, message.ts, root, user, **extra
            )
        )

    def wait_message(self, message: SlackMessage, needle: str) -> SlackMessage:
        def found() -> SlackMessage | None:
            current = next(m for m in self.slack.messages(message.channel) if m.ts == message.ts)
            return current if needle in current.all_text else None

        return wait_for(found, RUN_TIMEOUT, message=lambda: f"{needle!r} on message {message.ts}")

    def open_form(self, message: SlackMessage, root: str, user: str) -> dict[str, Any]:
        trigger = f"trigger-{message.ts}-{user}-{len(self.slack.calls('views.open'))}"
        self.click("review_disagree", message, root, user, trigger_id=trigger)
        opened = wait_for(
            lambda: [c for c in self.slack.calls("views.open") if c.args.get("trigger_id") == trigger],
            RUN_TIMEOUT,
            message="views.open for the review form",
        )
        return opened[0].args["view"]

    def submit_form(self, view: dict[str, Any], values: dict[str, Any], user: str) -> Any:
        return self.send(sr.view_submission(view["callback_id"], values, view["private_metadata"], user))

    def disagree(
        self, message: SlackMessage, root: str, user: str, changes: dict[str, tuple[str, str]]
    ) -> None:
        """Open the form, change some verdicts (criterion → (verdict, comment)) and submit it."""
        view = self.open_form(message, root, user)
        assert self.submit_form(view, form_values(view, changes), user).body == ""

    def grader_requests_after(self, count: int) -> list[str]:
        return [r.all_text for r in self.model.requests("grader")[count:]]

    def stored_evaluations(self, channel: str) -> list[dict[str, Any]]:
        with closing(sqlite3.connect(self.db_path)) as db:
            rows = db.execute(
                "SELECT evaluation FROM evaluations WHERE channel = ? ORDER BY created_at", (channel,)
            ).fetchall()
        return [json.loads(row[0]) for row in rows]


def button_value(message: SlackMessage) -> str:
    actions = next(b for b in message.blocks if b["type"] == "actions")
    return actions["elements"][0]["value"]


def form_inputs(view: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(criterion label, verdict block, comment block) for each criterion of a review form."""
    inputs = [b for b in view["blocks"] if b["type"] == "input"]
    for verdict, comment in zip(inputs[::2], inputs[1::2], strict=True):
        yield verdict["label"]["text"], verdict, comment


def form_values(view: dict[str, Any], changes: dict[str, tuple[str, str]]) -> dict[str, Any]:
    """The form's state as Slack submits it: the pre-set verdicts, with `changes` applied."""
    values: dict[str, Any] = {}
    for label, verdict, comment in form_inputs(view):
        chosen, text = changes.get(label, (verdict["element"]["initial_option"]["value"], None))
        option = next(o for o in verdict["element"]["options"] if o["value"] == chosen)
        values[verdict["block_id"]] = {
            verdict["element"]["action_id"]: {"type": "static_select", "selected_option": option}
        }
        values.update(sr.text_input(comment["block_id"], comment["element"]["action_id"], text))
    return values


def preset(view: dict[str, Any]) -> dict[str, tuple[str, str | None]]:
    """Criterion → (pre-selected verdict, pre-filled comment) of an opened review form."""
    return {
        label: (verdict["element"]["initial_option"]["value"], comment["element"].get("initial_value"))
        for label, verdict, comment in form_inputs(view)
    }


@pytest.fixture(scope="module")
def service(tmp_path_factory) -> Iterator[ReviewService]:
    with shared_bot(tmp_path_factory.mktemp("review-bot")) as (slack, model, process):
        yield ReviewService(slack, model, process)


@pytest.fixture
def s(service: ReviewService) -> ReviewService:
    service.model.worker, service.model.grader = scripted_revision(CRITERIA)
    return service


def ephemerals(slack: SlackApiStandin, channel: str) -> list[SlackCall]:
    return [c for c in slack.calls("chat.postEphemeral") if c.args.get("channel") == channel]


def responses(slack: SlackApiStandin, name: str) -> list[SlackCall]:
    """Answers posted to the response_url named `name` (see SlackApiStandin.response_url)."""
    return [c for c in slack.calls("response_url") if c.args.get("name") == name]


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
    s.slack.error_next("views.open", "expired_trigger_id")

    s.click("review_disagree", first, root, "U1", trigger_id="trigger-too-late")

    logged = "could not open the review form: expired_trigger_id"
    wait_for(lambda: logged in s.bot.stderr_text(), RUN_TIMEOUT, message="the failure in the bot's log")
    assert "Traceback" not in s.bot.stderr_text()
    assert "didn't call ack()" not in s.bot.stderr_text()  # the click was answered at once


# -- calibration -----------------------------------------------------------------------------------


def test_disagreements_reach_the_graders_prompt_until_calibration_is_switched_off(s):
    root, first = s.graded_thread("R4")
    before_review = len(s.model.requests("grader"))
    assert [e["calibration"] for e in s.stored_evaluations("R4")] == [[], []]  # nothing to learn yet
    s.disagree(first, root, "U1", {"Is polite": ("fail", COMMENT)})
    s.wait_message(first, "1 disagreement on Is polite")

    s.say("And is tea healthy?", "R4", thread_ts=root)
    s.wait_finals("R4", root, 2)
    calibrated = s.grader_requests_after(before_review)
    assert calibrated and all(COMMENT in text and "“Is polite”" in text for text in calibrated)
    recorded = s.stored_evaluations("R4")[-1]["calibration"]
    assert recorded == [
        {"criterion": "Is polite", "grader_verdict": "pass", "team_verdict": "fail", "comment": COMMENT}
    ]

    assert "*on*" in s.send(sr.slash_command("calibration", "R4")).json()["text"]
    assert "*off*" in s.send(sr.slash_command("calibration off", "R4")).json()["text"]
    assert "*off*" in s.send(sr.slash_command("calibration", "R4")).json()["text"]
    switched_off = len(s.model.requests("grader"))
    s.say("And is mate healthy?", "R4", thread_ts=root)
    s.wait_finals("R4", root, 3)

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

    assert "/rubric report [days]" in text and "/rubric calibration on|off" in text
