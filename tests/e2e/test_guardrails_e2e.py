"""Guardrails end to end: daily limits, who may change grading, rubric versions, replays across
processes and notices without secrets, against the real bot process and the stand-ins.

Each test starts its own bot on the test's database: SQLite, and PostgreSQL where it is set up
(``RUBRIC_BOT_TEST_PG``). Checking that something did *not* happen uses a later event the test
controls (a colleague's answer, the refusal itself), never a clock window.
"""

from __future__ import annotations

import json
import re

import pytest

from tests.e2e.conftest import CRITERIA, RUBRIC, RUN_TIMEOUT, Service
from tests.standins import slack_requests as sr
from tests.standins import wait_for
from tests.standins.model_api import ErrorReply, ModelApiStandin, scripted_revision
from tests.standins.slack_api import SlackApiStandin, SlackMessage

SECRET = "sk-proj-Zx9SECRETkeyTAIL"
"""What a provider's error text may carry: an API key's tail. It must never reach Slack."""


def command(s: Service, text: str, channel: str, user: str, *, via: int = 0) -> str:
    """Run `/rubric …` as `user`; the ephemeral answer's text."""
    answer = s.send(
        sr.slash_command(text, channel, user, response_url=s.slack.response_url(channel)), via=via
    ).json()
    assert answer["response_type"] == "ephemeral", answer
    return answer["text"]


def channel_posts(s: Service, channel: str) -> list[SlackMessage]:
    """Messages posted in the channel itself (not in a thread)."""
    return [m for m in s.slack.messages(channel) if m.thread_ts is None and m.event_type is None]


# -- daily limits ----------------------------------------------------------------------------------


def test_the_third_request_of_a_person_with_a_limit_of_2_is_refused_and_a_colleague_is_served(launch):
    s = launch(RUBRIC_BOT_DAILY_REQUESTS_PER_USER="2")
    s.set_channel_rubric("C1")
    root = s.mention("First question", "C1")
    s.wait_finals("C1", root, 1)
    s.say("Second question", "C1", thread_ts=root)
    s.wait_finals("C1", root, 2)

    s.say("Third question", "C1", thread_ts=root)
    refusal = s.wait_text("C1", root, "limit of 2 requests today")
    s.say("A colleague's question", "C1", thread_ts=root, user="U2")
    s.wait_finals("C1", root, 3)

    assert "midnight UTC" in refusal.all_text and "did not run this request" in refusal.all_text
    assert s.worker_requests_for("Third question") == []  # no model call for it
    assert s.worker_requests_for("A colleague's question")
    assert sum("limit of 2 requests" in m.all_text for m in s.thread("C1", root)) == 1  # one reply
    usage = command(s, "usage", "C1", "U2")
    assert "Today (UTC): 3 requests" in usage


def test_a_channel_over_its_token_budget_refuses_and_another_channel_does_not(launch):
    s = launch(RUBRIC_BOT_DAILY_TOKENS_PER_CHANNEL="10")
    s.set_channel_rubric("C1")
    s.set_channel_rubric("C2")
    root = s.mention("Spend the budget", "C1")
    s.wait_finals("C1", root, 1)  # its tokens (well over 10) now count against C1

    s.say("One more here", "C1", thread_ts=root, user="U2")
    refusal = s.wait_text("C1", root, "budget of 10 model tokens")
    other = s.mention("Another channel's question", "C2")
    s.wait_finals("C2", other, 1)

    assert "This channel has used its budget" in refusal.all_text and "midnight UTC" in refusal.all_text
    assert s.worker_requests_for("One more here") == []


# -- who may change grading, versions and revert ----------------------------------------------------


def test_only_editors_change_a_channels_rubric_each_change_is_announced_and_history_reverts(
    launch, slack_api: SlackApiStandin
):
    s = launch(RUBRIC_BOT_RUBRIC_EDITORS="UEDITOR,SREVIEWERS")
    slack_api.user_groups["SREVIEWERS"] = ["UMEMBER"]
    slack_api.add_user("UADMIN", "Ada", admin=True)
    slack_api.add_user("UNOBODY", "Nob")

    refused = command(s, "set - Mark everything passed", "C5", "UNOBODY")
    assert "Only <@UEDITOR>, members of <!subteam^SREVIEWERS>" in refused and "nothing was changed" in refused
    assert "no default rubric" in command(s, "show", "C5", "UNOBODY")  # the rubric in force is unchanged
    assert channel_posts(s, "C5") == []

    assert "Announced in this channel" in command(s, f"set {RUBRIC}", "C5", "UEDITOR")
    command(s, "set - Be terse", "C5", "UMEMBER")
    command(s, "clear", "C5", "UADMIN")
    first, second, third = wait_for(
        lambda: len(channel_posts(s, "C5")) >= 3 and channel_posts(s, "C5"),
        RUN_TIMEOUT,
        message="3 announcements",
    )
    assert "<@UEDITOR> changed this channel's default rubric" in first.all_text
    assert all(name in first.all_text for name in CRITERIA) and "Version 1" in first.all_text
    assert "<@UMEMBER> changed" in second.all_text and "Be terse" in second.all_text
    assert "<@UADMIN> cleared this channel's default rubric" in third.all_text

    history = command(s, "history", "C5", "UNOBODY")
    assert "versions of this channel's default rubric" in history
    assert "Calibration is *on*" in command(s, "calibration", "C5", "UNOBODY")  # showing it is free
    assert "Only <@UEDITOR>" in command(s, "calibration off", "C5", "UNOBODY")
    assert "Only <@UEDITOR>" in command(s, "revert 1", "C5", "UNOBODY")
    assert "version 4" in command(s, "revert 1", "C5", "UADMIN")
    reverted = wait_for(lambda: len(channel_posts(s, "C5")) >= 4 and channel_posts(s, "C5")[3], RUN_TIMEOUT)
    assert "(back to version 1)" in reverted.all_text
    assert RUBRIC in command(s, "show", "C5", "UNOBODY")

    # A Slack error during the check refuses (fails closed) with a retry hint.
    slack_api.add_user("UOTHER", "Oth")
    slack_api.error_next("users.info", "ratelimited")
    failed = command(s, "set - Anything", "C5", "UOTHER")
    assert "couldn't check whether you may" in failed and "Try again in a minute" in failed
    assert "ref " in failed
    assert RUBRIC in command(s, "show", "C5", "UNOBODY")


# -- replays across processes ----------------------------------------------------------------------


@pytest.mark.postgres
def test_two_replays_in_one_channel_across_two_serve_processes_one_runs(
    start_bot, slack_api: SlackApiStandin, model_api: ModelApiStandin, postgres_url: str
):
    env = {"RUBRIC_BOT_DB": postgres_url, "RUBRIC_BOT_REPLAY_COOLDOWN": "0"}
    model_api.worker, model_api.grader = scripted_revision(CRITERIA)
    first, second = start_bot(env=env), start_bot(env=env)
    s = Service(slack_api, model_api, first, (second,))
    root, evaluation = s.graded_thread("C7")
    s.disagree(evaluation, root, "U3", {"Cites a source": ("pass", "it does cite one")})
    graded = len(model_api.requests("grader"))

    model_api.hold()  # the first replay is still running when the second process is asked
    assert "Replaying this channel" in command(s, "replay", "C7", "U3", via=0)
    wait_for(
        lambda: len(model_api.requests("grader")) > graded, RUN_TIMEOUT, message="the replay's grader call"
    )
    again = command(s, "replay", "C7", "U4", via=1)
    model_api.release()

    assert "already running (asked by <@U3>)" in again
    wait_for(
        lambda: any("Does calibration help?" in m.text for m in s.slack.messages("C7")),
        RUN_TIMEOUT,
        message="the replay's result",
    )
    assert sum("Does calibration help?" in m.text for m in s.slack.messages("C7")) == 1


# -- notices without secrets -----------------------------------------------------------------------


def assert_only_the_log_holds_the_error(s: Service, shown: SlackMessage, *provider_text: str) -> None:
    """`shown` gives a reference to the log, no Slack call carries any of `provider_text`, and the log
    line with that reference holds the provider's full error."""
    reference = re.search(r"ref ([0-9a-f]{6})", shown.all_text)
    assert reference is not None, shown.all_text
    for call in s.slack.calls():
        sent = json.dumps(call.args)
        assert not any(text in sent for text in provider_text), call.method
    logged = wait_for(
        lambda: next(
            (line for line in s.bot.stderr_text().splitlines() if f"ref {reference.group(1)}" in line), None
        ),
        RUN_TIMEOUT,
        message="the log line with the reference",
    )
    assert SECRET in logged  # the operator's log holds the full error


def test_a_provider_error_carrying_a_key_leaves_no_trace_in_slack_and_its_reference_is_in_the_log(launch):
    s = launch()
    s.model.worker = lambda request: ErrorReply(401, f"Incorrect API key provided: {SECRET}")
    root = s.mention("Anything at all", "C9")
    notice = s.wait_text("C9", root, "The model failed")

    assert_only_the_log_holds_the_error(s, notice, "sk-proj")


def test_a_grader_refusing_its_key_leaves_no_provider_text_in_slack_and_its_reference_is_in_the_log(launch):
    s = launch()
    s.model.grader = lambda request: ErrorReply(401, f"Incorrect API key provided: {SECRET}")
    root = s.mention(f"rubric:\n{RUBRIC}", "C10")
    s.wait_text("C10", root, "Rubric set")
    s.mention("Anything at all", "C10", thread_ts=root)
    evaluation = s.wait_text("C10", root, "The grader failed")

    assert_only_the_log_holds_the_error(s, evaluation, "sk-proj", "Incorrect API key")


BURST_TIMEOUT = RUN_TIMEOUT * 4
"""Bound for a burst's twenty answers to be posted: an event's bound, generous because two suites
at once on two cores post them one slow job at a time."""


def test_a_workspaces_own_limits_hold_at_admission_and_a_burst_starts_at_most_one_run_past_its_budget(
    launch,
):
    """An admin lowers this workspace's limits with `/rubric admin`: its person limit refuses the
    next request, and a channel budget of one run's tokens lets at most two of twenty requests sent
    together start (each admitted run reserves its tokens until it ends, so the rest are refused
    before any run finished)."""
    s = launch(RUBRIC_BOT_DAILY_TOKENS_PER_CHANNEL="0")
    s.slack.add_user("UADMIN", "Ada", admin=True)
    for channel in ("C0", "C1"):
        s.set_channel_rubric(channel)
    first = s.mention("How many tokens does one run take?", "C0")
    s.wait_finals("C0", first, 1)

    def spent_tokens() -> int:
        spent = re.search(r"Today \(UTC\): 1 request, ([\d,]+) tokens", command(s, "usage", "C0", "U1"))
        return int(spent[1].replace(",", "")) if spent else 0

    # A run's tokens are recorded as it ends, just after its final message is posted.
    one_run = wait_for(spent_tokens, RUN_TIMEOUT, interval=0.2, message="the first run's tokens in usage")

    save_admin_limits(s, daily_requests_per_user="1", daily_tokens_per_channel=str(one_run))
    s.say("My second request today", "C0", thread_ts=first)
    s.wait_text("C0", first, "limit of 1 requests today")

    s.model.hold()  # no run ends (and settles its tokens) before every request was admitted or refused
    roots = [sr.new_ts() for _ in range(20)]
    for n, root in enumerate(roots):
        s.send(sr.event_callback(sr.app_mention(f"Burst request {n:02d}.", "C1", root, user=f"UB{n:02d}")))
    refusals = f"budget of {one_run:,} model tokens"

    def refused(root: str) -> bool:
        return any(refusals in m.all_text for m in s.thread("C1", root))

    def started(n: int) -> bool:
        return bool(s.worker_requests_for(f"Burst request {n:02d}."))

    # Each request is either refused in its thread or started (its model call waits, held): wait
    # until every one is one or the other, so none still on its way is taken for either.
    wait_for(
        lambda: all(refused(root) or started(n) for n, root in enumerate(roots)),
        BURST_TIMEOUT,
        message=lambda: (
            f"every request of the burst refused or started: {sum(map(refused, roots))} refused, "
            f"{sum(map(started, range(len(roots))))} started"
        ),
    )
    s.model.release()
    answered = [root for root in roots if not refused(root)]
    assert 1 <= len(answered) <= 2
    for root in answered:
        s.wait_finals("C1", root, 1)
    assert len(s.worker_requests_for("Burst request")) >= len(answered)
    assert not any(started(n) for n, root in enumerate(roots) if root not in answered)


def save_admin_limits(s: Service, **limits: str) -> None:
    """As the admin UADMIN, save the workspace's settings form with these limits (by block id)."""
    opened = len(s.slack.calls("views.open"))
    s.send(sr.slash_command("admin", "C0", "UADMIN"))
    form = wait_for(
        lambda: next((c.args["view"] for c in s.slack.calls("views.open")[opened:]), None),
        RUN_TIMEOUT,
        message="the settings form to open",
    )
    values = {name: {"value": {"type": "number_input", "value": value}} for name, value in limits.items()}
    submission = sr.view_submission(form["callback_id"], values, form["private_metadata"], "UADMIN")
    assert s.send(submission).json()["response_action"] == "update"
