"""`/rubric admin` end to end: the real bot process, the Slack stand-in and the model stand-in, which
records the model each request asked for. An admin's choice of worker model answers the next
request; someone who is not an admin is refused and changes nothing."""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.conftest import CRITERIA, RUN_TIMEOUT, Service
from tests.standins import slack_requests as sr
from tests.standins import wait_for
from tests.standins.model_api import scripted_revision

ALLOWED = "openai:gpt-4o-mini,openai:gpt-4.1"
"""The models the operator lets workspaces choose; the deployment's own is the first."""


def admin_command(s: Service, user: str, *, via: int = 0, trigger_id: str | None = None) -> str:
    """Run `/rubric admin` as `user` (with `trigger_id`, or a new one); the ephemeral answer's text."""
    answer = s.send(sr.slash_command("admin", "C1", user, trigger_id=trigger_id), via=via).json()
    assert answer["response_type"] == "ephemeral", answer
    return answer["text"]


def choose(form: dict[str, Any], block_id: str, value: str) -> dict[str, Any]:
    block = next(b for b in form["blocks"] if b.get("block_id") == block_id)
    option = next(o for o in block["element"]["options"] if o["value"] == value)
    return {block_id: {"value": {"type": "static_select", "selected_option": option}}}


def choose_models(
    s: Service, user: str, *, worker: str = "deployment", grader: str = "deployment", via: int = 0
) -> None:
    """As `user`, run `/rubric admin` and save the form with these models ("deployment": the
    deployment's own)."""
    opened = len(s.slack.calls("views.open"))
    admin_command(s, user, via=via)
    form = wait_for(
        lambda: next((c.args["view"] for c in s.slack.calls("views.open")[opened:]), None),
        RUN_TIMEOUT,
        message="the settings form to open",
    )
    values = choose(form, "worker_model", worker) | choose(form, "grader_model", grader)
    submission = sr.view_submission(form["callback_id"], values, form["private_metadata"], user)
    assert s.send(submission, via=via).json()["response_action"] == "update"


def test_an_admins_model_choice_answers_the_next_request_and_someone_else_is_refused(
    start_bot, slack_api, model_api
):
    model_api.worker, model_api.grader = scripted_revision(CRITERIA)
    s = Service(slack_api, model_api, start_bot(env={"RUBRIC_BOT_ALLOWED_MODELS": ALLOWED}))
    slack_api.add_user("UADMIN", "Ada", admin=True)
    slack_api.add_user("UPLAIN", "Pia")
    s.set_channel_rubric("C1")
    before = s.mention("Asked before the change", "C1")
    s.wait_finals("C1", before, 1)

    plains = sr.new_trigger_id()
    refused = admin_command(s, "UPLAIN", trigger_id=plains)
    assert "Only the workspace's admins and owners may change its settings" in refused
    assert "Worker model: `openai:gpt-4o-mini` — deployment default" in admin_command(s, "UADMIN")
    choose_models(s, "UADMIN", worker="openai:gpt-4.1")
    after = s.mention("Asked after the change", "C1")
    s.wait_finals("C1", after, 1)

    opened = slack_api.calls("views.open")
    assert [c.ok for c in opened] == [True, True] and plains not in {c.args["trigger_id"] for c in opened}
    assert {r.model for r in s.worker_requests_for("Asked before the change")} == {"gpt-4o-mini"}
    assert {r.model for r in s.worker_requests_for("Asked after the change")} == {"gpt-4.1"}
    graded_after = [r for r in model_api.requests("grader") if "Asked after the change" in r.all_text]
    assert graded_after and {r.model for r in graded_after} == {"gpt-4o-mini"}  # still the deployment's
    confirmation = wait_for(
        lambda: next((c.args for c in slack_api.calls("chat.postEphemeral")), None),
        RUN_TIMEOUT,
        message="the ephemeral confirmation",
    )
    assert confirmation["user"] == "UADMIN" and "`openai:gpt-4.1`" in confirmation["text"]
    assert "UADMIN saved its settings" in s.bot.stderr_text()


def test_an_admins_grader_choice_grades_the_next_request_and_the_worker_stays(
    start_bot, slack_api, model_api
):
    model_api.worker, model_api.grader = scripted_revision(CRITERIA)
    s = Service(slack_api, model_api, start_bot(env={"RUBRIC_BOT_ALLOWED_MODELS": ALLOWED}))
    slack_api.add_user("UADMIN", "Ada", admin=True)
    s.set_channel_rubric("C1")

    choose_models(s, "UADMIN", grader="openai:gpt-4.1")
    root = s.mention("Graded by the chosen model", "C1")
    s.wait_finals("C1", root, 1)

    graded = [r for r in model_api.requests("grader") if "Graded by the chosen model" in r.all_text]
    assert graded and {r.model for r in graded} == {"gpt-4.1"}
    assert {r.model for r in s.worker_requests_for("Graded by the chosen model")} == {"gpt-4o-mini"}


def test_an_admins_grader_samples_ask_the_grader_that_many_times_from_the_next_request(
    start_bot, slack_api, model_api
):
    model_api.worker, model_api.grader = scripted_revision(CRITERIA)
    s = Service(slack_api, model_api, start_bot())
    slack_api.add_user("UADMIN", "Ada", admin=True)
    s.set_channel_rubric("C1")
    assert "Grader samples per iteration: 1 — deployment default" in admin_command(s, "UADMIN")

    opened = len(s.slack.calls("views.open"))
    admin_command(s, "UADMIN")
    form = wait_for(
        lambda: next((c.args["view"] for c in s.slack.calls("views.open")[opened:]), None),
        RUN_TIMEOUT,
        message="the settings form to open",
    )
    refused = sr.view_submission(
        form["callback_id"],
        {"grader_samples": {"value": {"type": "number_input", "value": "12"}}},
        form["private_metadata"],
        "UADMIN",
    )
    errors = s.send(refused).json()
    assert errors["response_action"] == "errors" and "from 1 to 9" in errors["errors"]["grader_samples"]
    chosen = sr.view_submission(
        form["callback_id"],
        {"grader_samples": {"value": {"type": "number_input", "value": "3"}}},
        form["private_metadata"],
        "UADMIN",
    )
    assert s.send(chosen).json()["response_action"] == "update"
    root = s.mention("Graded three times", "C1")
    s.wait_finals("C1", root, 1)

    graded = [r for r in model_api.requests("grader") if "Graded three times" in r.all_text]
    assert len(graded) == 3 * 2  # the scripted run needs two iterations, each asked three times
    assert "Grader samples per iteration: 3 — set for this workspace" in admin_command(s, "UADMIN")


@pytest.mark.postgres
def test_a_choice_saved_through_one_serve_process_applies_to_a_request_another_takes(
    start_bot, slack_api, model_api, postgres_url
):
    model_api.worker, model_api.grader = scripted_revision(CRITERIA)
    env = {"RUBRIC_BOT_ALLOWED_MODELS": ALLOWED, "RUBRIC_BOT_DB": postgres_url}
    s = Service(slack_api, model_api, start_bot(env=env), (start_bot(env=env),))
    slack_api.add_user("UADMIN", "Ada", admin=True)

    choose_models(s, "UADMIN", worker="openai:gpt-4.1", via=0)
    root = s.mention("Asked through the other process", "C1", via=1)
    s.wait_finals("C1", root, 1)

    assert {r.model for r in s.worker_requests_for("Asked through the other process")} == {"gpt-4.1"}
