"""`/rubric admin` through the bot's real Bolt app (signed requests in, the Slack stand-in out, a real
SQLite store): an admin sees the settings in force and changes them, anyone else is refused and
changes nothing, and a choice the deployment does not permit is refused on its input."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_sdk.web.async_client import AsyncWebClient

from bot.app import create_app
from bot.config import Settings
from bot.db.store import Store
from bot.governance.editors import RubricEditors
from bot.listeners.context import Services
from bot.vocabulary.workspace import Workspace
from bot.workspaces.clients import WorkspaceClients
from bot.workspaces.settings import Deployment, WorkspaceOverrides
from tests.standins import slack_requests as sr
from tests.standins.slack_api import TEAM_ID, SlackApiStandin
from tests.standins.triggers import PATIENT_TRIGGER_EXPIRY_SECONDS

TOKEN = "xoxb-admin-tests"
SECRET = "admin-tests-secret"
WAIT_SECONDS = 30.0
"""Bound on waiting for a Slack call the listener makes after its ack (an event, not a clock window)."""


@pytest.fixture
def slack() -> Iterator[SlackApiStandin]:
    with SlackApiStandin(token=TOKEN, trigger_expiry=PATIENT_TRIGGER_EXPIRY_SECONDS) as api:
        api.add_user("UADMIN", "Ada", admin=True)
        api.add_user("UOWNER", "Owen", owner=True)
        api.add_user("UPLAIN", "Pia")
        api.add_user("U0OPS", "Ops")
        api.user_groups["S0LEADS"] = ["U0LEAD"]
        yield api


@dataclass
class Bot:
    """The bot's Bolt app on a real store, talking to the Slack stand-in."""

    app: Any
    store: Store
    slack: SlackApiStandin
    workspaces: WorkspaceOverrides
    triggers: dict[str, str] = field(default_factory=dict)
    """The trigger id of each user's latest command, by user."""

    async def send(self, payload: dict[str, Any]) -> Any:
        body, content_type = sr.encode(payload)
        headers = {**sr.sign(body, SECRET), "Content-Type": content_type}
        response = await self.app.async_dispatch(AsyncBoltRequest(body=body.decode(), headers=headers))
        assert response.status == 200, (response.status, response.body)
        return json.loads(response.body) if response.body else None

    async def command(self, text: str, user: str) -> dict[str, Any]:
        self.triggers[user] = sr.new_trigger_id()
        answer = await self.send(sr.slash_command(text, "C1", user, trigger_id=self.triggers[user]))
        assert answer["response_type"] == "ephemeral", answer
        return answer

    async def opened_form(self, user: str) -> dict[str, Any]:
        calls = await self.wait_calls("views.open", lambda c: c.args["trigger_id"] == self.triggers[user])
        return calls[0].args["view"]

    async def submit(self, form: dict[str, Any], values: dict[str, Any], user: str) -> Any:
        submission = sr.view_submission(form["callback_id"], values, form["private_metadata"], user)
        return await self.send(submission)

    async def wait_calls(self, method: str, matching: Any = lambda call: True) -> list[Any]:
        async with asyncio.timeout(WAIT_SECONDS):
            while not (found := [c for c in self.slack.calls(method) if matching(c)]):
                await asyncio.sleep(0.02)
        return found


@pytest.fixture
async def bot(slack: SlackApiStandin, tmp_path: Path) -> AsyncIterator[Bot]:
    settings = Settings(
        slack_signing_secret=SECRET,
        worker_model="openai:gpt-4o-mini",
        allowed_models_override=("openai:gpt-4o-mini", "openai:gpt-4.1"),
        daily_requests_per_user=100,
        rubric_editors=("U0OPS",),
    )
    store = await Store.open(str(tmp_path / "bot.sqlite"))
    client = AsyncWebClient(token=TOKEN, base_url=slack.api_url)
    workspaces = WorkspaceOverrides(Deployment.from_settings(settings), store)
    editors = RubricEditors(settings.rubric_editors, workspace_editors=workspaces.rubric_editors)
    # `/rubric admin` uses neither the runner, nor replays, nor the checkpointer.
    services = Services(settings, store, None, None, editors, None, workspaces)  # type: ignore[arg-type]
    yield Bot(create_app(settings, services, WorkspaceClients(client)), store, slack, workspaces)
    await store.close()


def select(option_value: str, form: dict[str, Any], block_id: str) -> dict[str, Any]:
    block = next(b for b in form["blocks"] if b.get("block_id") == block_id)
    option = next(o for o in block["element"]["options"] if o["value"] == option_value)
    return {block_id: {"value": {"type": "static_select", "selected_option": option}}}


def number(block_id: str, value: str) -> dict[str, Any]:
    return {block_id: {"value": {"type": "number_input", "value": value}}}


def form_values(form: dict[str, Any], *inputs: dict[str, Any], worker: str = "deployment") -> dict[str, Any]:
    """A submitted form: the menus at the given choices (the grader at the deployment's), and `inputs`."""
    values = select(worker, form, "worker_model") | select("deployment", form, "grader_model")
    for value in inputs:
        values |= value
    return values


async def test_someone_who_is_not_an_admin_is_refused_and_no_form_opens(bot):
    answer = await bot.command("admin", "UPLAIN")

    assert "Only the workspace's admins and owners may change its settings" in answer["text"]
    assert "nothing was changed" in answer["text"]
    assert bot.slack.calls("views.open") == []
    assert await bot.store.workspace_settings(Workspace(TEAM_ID)) is None


async def test_an_admin_sees_each_setting_with_its_source_and_gets_the_form(bot):
    answer = await bot.command("admin", "UOWNER")
    form = await bot.opened_form("UOWNER")

    text = answer["text"]
    assert "Worker model: `openai:gpt-4o-mini` — deployment default" in text
    assert "Requests per person per day: 100 — deployment default" in text
    assert "Model tokens per channel per day: no limit — deployment default" in text
    assert "Rubric editors: <@U0OPS> — deployment default" in text
    worker = next(b for b in form["blocks"] if b.get("block_id") == "worker_model")
    assert [o["value"] for o in worker["element"]["options"]] == [
        "deployment",
        "openai:gpt-4o-mini",
        "openai:gpt-4.1",
    ]
    groups = next(b for b in form["blocks"] if b.get("block_id") == "rubric_editor_groups")
    assert groups["element"]["options"][0]["value"] == "S0LEADS"


async def test_an_admins_choices_are_saved_announced_and_shown_as_the_workspaces(bot, caplog):
    await bot.command("admin", "UADMIN")
    form = await bot.opened_form("UADMIN")
    values = form_values(
        form,
        number("daily_requests_per_user", "20"),
        {"rubric_editors": {"value": {"type": "multi_users_select", "selected_users": ["U0ADA"]}}},
        worker="openai:gpt-4.1",
    )

    with caplog.at_level(logging.INFO):
        answer = await bot.submit(form, values, "UADMIN")

    assert answer["response_action"] == "update"
    shown_in_form = json.dumps(answer["view"], ensure_ascii=False)
    assert "worker model: `openai:gpt-4o-mini` → `openai:gpt-4.1`" in shown_in_form
    confirmation = (await bot.wait_calls("chat.postEphemeral"))[0].args
    assert confirmation["user"] == "UADMIN" and confirmation["channel"] == "C1"
    assert "Saved. From the next request on" in confirmation["text"]
    assert "requests per person per day: 100 → 20 (set for this workspace)" in confirmation["text"]
    assert any("UADMIN saved its settings" in r.getMessage() for r in caplog.records)
    effective = await bot.workspaces.effective(Workspace(TEAM_ID))
    assert effective.models.worker == "openai:gpt-4.1" and effective.limits.requests_per_user == 20
    assert effective.stored is not None and effective.stored.updated_by == "UADMIN"

    shown = (await bot.command("admin", "UADMIN"))["text"]
    assert "Worker model: `openai:gpt-4.1` — set for this workspace" in shown
    assert "Grader model: `openai:gpt-4o-mini` — deployment default" in shown
    assert "Rubric editors: <@U0ADA> — set for this workspace" in shown
    usage = (await bot.command("usage", "UPLAIN"))["blocks"]
    assert "20 requests per person" in json.dumps(usage)
    # The workspace's editors now decide who changes grading: the deployment's editor no longer may.
    assert "Only <@U0ADA>" in (await bot.command("clear", "U0OPS"))["text"]
    assert (await bot.command("clear", "U0ADA"))["text"] == "This channel had no default rubric."


async def test_a_disallowed_model_and_a_limit_above_the_ceiling_are_refused_on_their_inputs(bot):
    await bot.command("admin", "UADMIN")
    form = await bot.opened_form("UADMIN")
    offered_nowhere = {"type": "static_select", "selected_option": {"value": "openai:o1"}}
    not_offered = {"worker_model": {"value": offered_nowhere}}
    values = form_values(form, number("daily_requests_per_user", "500")) | not_offered

    answer = await bot.submit(form, values, "UADMIN")

    assert answer["response_action"] == "errors"
    assert "openai:o1 is not among the models this deployment allows" in answer["errors"]["worker_model"]
    assert "500 is above the deployment's limit, 100" in answer["errors"]["daily_requests_per_user"]
    assert await bot.store.workspace_settings(Workspace(TEAM_ID)) is None
    assert bot.slack.calls("chat.postEphemeral") == []


async def test_a_form_submitted_by_someone_not_an_admin_changes_nothing(bot):
    await bot.command("admin", "UADMIN")
    form = await bot.opened_form("UADMIN")

    answer = await bot.submit(form, form_values(form, worker="openai:gpt-4.1"), "UPLAIN")

    assert answer["response_action"] == "errors"
    assert "Only the workspace's admins and owners" in answer["errors"]["worker_model"]
    assert await bot.store.workspace_settings(Workspace(TEAM_ID)) is None


async def test_when_slack_cannot_say_who_is_an_admin_the_command_refuses(bot):
    bot.slack.error_next("users.info", "ratelimited")

    answer = await bot.command("admin", "UADMIN")

    assert "couldn't check whether you are an admin" in answer["text"] and "ref " in answer["text"]
    assert bot.slack.calls("views.open") == []
