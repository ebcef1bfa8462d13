"""Who may change grading: configured users and user groups, the workspace's admins and owners,
cached lookups, and a Slack error that refuses (fail closed); against the Slack stand-in."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from slack_sdk.web.async_client import AsyncWebClient

from bot.governance.editors import RubricEditors, is_workspace_admin
from bot.vocabulary.workspace import Workspace
from tests.standins.slack_api import SlackApiStandin

TOKEN = "xoxb-editors"


@pytest.fixture
def slack() -> Iterator[SlackApiStandin]:
    with SlackApiStandin(token=TOKEN) as api:
        api.add_user("UADMIN", "Ada", admin=True)
        api.add_user("UOWNER", "Owen", owner=True)
        api.add_user("UPLAIN", "Pia")
        api.user_groups["SLEADS"] = ["ULEAD"]
        yield api


@pytest.fixture
def client(slack: SlackApiStandin) -> AsyncWebClient:
    return AsyncWebClient(token=TOKEN, base_url=slack.api_url)


async def test_admins_and_owners_are_workspace_admins_and_others_are_not(client):
    assert await is_workspace_admin(client, "UADMIN")
    assert await is_workspace_admin(client, "UOWNER")
    assert not await is_workspace_admin(client, "UPLAIN")


async def test_listed_users_group_members_and_admins_may_edit_and_nobody_else(client, slack):
    editors = RubricEditors(["UEDITOR", "SLEADS"])

    for user in ("UEDITOR", "ULEAD", "UADMIN", "UOWNER"):
        assert await editors.may_edit(client, Workspace("T1"), user), user
    assert not await editors.may_edit(client, Workspace("T1"), "UPLAIN")
    refusal = await editors.refusal(client, Workspace("T1"), "UPLAIN")
    assert refusal is not None and "<@UEDITOR>, members of <!subteam^SLEADS>" in refusal
    assert "admins and owners" in refusal


async def test_lookups_are_cached_per_workspace(client, slack):
    editors = RubricEditors(["SLEADS"])
    for _ in range(3):
        assert not await editors.may_edit(client, Workspace("T1"), "UPLAIN")
    assert len(slack.calls("users.info")) == 1 and len(slack.calls("usergroups.users.list")) == 1

    await editors.may_edit(client, Workspace("T2"), "UPLAIN")  # another workspace asks Slack itself
    assert len(slack.calls("users.info")) == 2


async def test_without_editors_anyone_may_and_slack_is_not_asked(client, slack):
    editors = RubricEditors([])
    assert not (await editors.editors_of(Workspace("T1"))).restricted
    assert await editors.refusal(client, Workspace("T1"), "UPLAIN") is None
    assert slack.calls("users.info") == []


async def test_a_slack_error_during_the_check_refuses_with_a_retry_hint(client, slack, caplog):
    slack.error_next("users.info", "ratelimited")
    refusal = await RubricEditors(["UEDITOR"]).refusal(client, Workspace("T1"), "UADMIN")

    assert (
        refusal is not None and "Try again in a minute" in refusal and "Slack answered ratelimited" in refusal
    )
    reference = refusal.split("ref ")[1].rstrip(".")
    assert any(f"ref {reference}" in record.getMessage() for record in caplog.records)
