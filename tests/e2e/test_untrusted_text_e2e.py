"""Hostile rubrics and who may change them, end to end: nested YAML, fences, mentions and links.

One bot per database (SQLite, and PostgreSQL where it is set up) with rubric editors configured.
A rubric nested thousands of levels deep is one clear line wherever a rubric is given (`/rubric
set`, the editor form, a thread's `rubric:`); `/rubric show` keeps a rubric's fences and mentions
inside its code block; people who are not editors are refused by `/rubric edit`, the editor form
and `/rubric replay`; and nothing the bot posts asks Slack to fetch its links.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from bot.rendering.rubrics import MODAL_BLOCK_ID, MODAL_CALLBACK_ID, MODAL_INPUT_ACTION_ID, rubric_modal
from grading.rubric import MAX_YAML_DEPTH
from tests.e2e.conftest import CRITERIA, RUBRIC, RUN_TIMEOUT, BotProcess, Service
from tests.standins import slack_requests as sr
from tests.standins import wait_for
from tests.standins.model_api import ModelApiStandin, scripted_revision
from tests.standins.slack_api import SlackApiStandin

NESTED = "[" * 1000 + "]" * 1000
"""A 2,000-character rubric nested 1,000 levels deep: PyYAML's recursion would overflow the stack."""

DEPTH_WORDS = f"nests more than {MAX_YAML_DEPTH} levels deep"
"""What a rubric nested too deep is told."""

EDITOR, NOBODY = "UEDITOR", "UNOBODY"
"""The channel's one rubric editor, and a member who is not one."""

REFUSED = f"Only <@{EDITOR}>, the workspace's admins and owners may change how this channel is graded"
"""What a member who is not an editor is told."""


@pytest.fixture
def service(
    start_bot: Callable[..., BotProcess],
    slack_api: SlackApiStandin,
    model_api: ModelApiStandin,
    database_url: str,
) -> Service:
    model_api.worker, model_api.grader = scripted_revision(CRITERIA)
    slack_api.add_user(NOBODY, "Nob")
    env = {"RUBRIC_BOT_DB": database_url, "RUBRIC_BOT_RUBRIC_EDITORS": EDITOR}
    return Service(slack_api, model_api, start_bot(env=env))


def command(s: Service, text: str, channel: str, user: str, **fields: str) -> str:
    """Run `/rubric …` as `user`; the ephemeral answer's text."""
    answer = s.send(sr.slash_command(text, channel, user, **fields)).json()
    assert answer["response_type"] == "ephemeral", answer
    return answer["text"]


def submit_editor(s: Service, channel: str, user: str, text: str) -> dict[str, object] | None:
    """Submit the channel-rubric editor with `text` as `user`: the errors shown on it, None if saved."""
    values = sr.text_input(MODAL_BLOCK_ID, MODAL_INPUT_ACTION_ID, text)
    metadata = rubric_modal(None, channel_id=channel)["private_metadata"]
    response = s.send(sr.view_submission(MODAL_CALLBACK_ID, values, metadata, user))
    return response.json()["errors"] if response.body else None


def test_a_rubric_nested_too_deep_is_one_clear_line_wherever_it_is_given(service):
    s = service
    for user in (NOBODY, EDITOR):  # parsed before the editors check: anyone gets the same answer
        answer = command(s, f"set {NESTED}", "C1", user)
        assert "didn't parse" in answer and DEPTH_WORDS in answer
    errors = submit_editor(s, "C1", EDITOR, NESTED)
    assert errors is not None and DEPTH_WORDS in str(errors[MODAL_BLOCK_ID])

    root = s.mention(f"rubric:\n{NESTED}", "C1")
    told = s.wait_text("C1", root, "didn't parse")
    assert DEPTH_WORDS in told.all_text
    s.mention("Is coffee healthy?", "C1", thread_ts=root)  # the thread goes on, ungraded
    s.wait_thread("C1", root, lambda messages: any("wasn't graded" in m.all_text for m in messages))
    assert not any("cut short" in m.all_text for m in s.thread("C1", root))
    assert "no default rubric" in command(s, "show", "C1", NOBODY)
    assert "Traceback" not in s.bot.stderr_text() and "RecursionError" not in s.bot.stderr_text()


def test_show_keeps_a_rubrics_fences_and_mentions_inside_its_code_block(service):
    s = service
    rubric = "- Quotes commands in ```code``` blocks\n- Says <!channel> and <!here> only when asked"
    assert "Announced in this channel" in command(s, f"set {rubric}", "C2", EDITOR)

    shown = command(s, "show", "C2", NOBODY)
    assert shown.count("```") == 2 and shown.endswith("```")  # the rubric's own fence is broken up
    assert "Quotes commands in `\u200b``code`\u200b`` blocks" in shown
    assert "<!channel>" not in shown and "&lt;!channel&gt;" in shown


def test_only_editors_open_save_or_replay_the_channels_grading(service):
    s = service
    nobodys, editors = sr.new_trigger_id(), sr.new_trigger_id()
    refused = command(s, "edit", "C3", NOBODY, trigger_id=nobodys)
    assert REFUSED in refused
    errors = submit_editor(s, "C3", NOBODY, "- Mark everything passed")
    assert errors is not None and REFUSED in str(errors[MODAL_BLOCK_ID])
    assert REFUSED in command(s, "replay", "C3", NOBODY)

    assert "no default rubric" in command(s, "show", "C3", NOBODY)  # nothing was saved
    s.send(sr.slash_command("edit", "C3", EDITOR, trigger_id=editors))  # acked with no text
    wait_for(
        lambda: [c for c in s.slack.calls("views.open") if c.args.get("trigger_id") == editors],
        RUN_TIMEOUT,
        message="the editor's form to open",
    )
    assert not [c for c in s.slack.calls("views.open") if c.args.get("trigger_id") == nobodys]
    assert submit_editor(s, "C3", EDITOR, RUBRIC) is None
    assert "Cites a source" in command(s, "show", "C3", NOBODY)


def test_nothing_the_bot_posts_unfurls_its_links(service):
    s = service
    s.model.worker = lambda request: "See https://attacker.example/track?who=you for details."
    root = s.mention("Where can I read more?", "C4")
    s.wait_thread("C4", root, lambda messages: any("attacker.example" in m.all_text for m in messages))
    command(s, f"set {RUBRIC}", "C4", EDITOR)  # an announcement in the channel
    wait_for(
        lambda: any(c.args.get("thread_ts") is None for c in s.slack.calls("chat.postMessage")),
        RUN_TIMEOUT,
        message="the announcement",
    )

    posts = s.slack.calls("chat.postMessage")
    assert posts and all(
        c.args.get("unfurl_links") is False and c.args.get("unfurl_media") is False for c in posts
    ), [(c.args.get("unfurl_links"), c.args.get("unfurl_media")) for c in posts]


def test_a_message_holding_a_nul_and_a_lone_surrogate_is_answered_with_its_text_readable(service):
    """Slack's JSON may carry ``\\u0000`` and half a surrogate pair, which no database of the bot's
    (nor PostgreSQL's ``jsonb`` job arguments) takes: the request is claimed, answered and graded
    like any other, the worker reading it without the NUL and with U+FFFD for the half pair."""
    s = service
    assert "Channel default rubric set" in command(s, f"set {RUBRIC}", "C7", EDITOR)
    root = s.mention("Is coffee\u0000 healthy? \ud83d", "C7")
    s.wait_finals("C7", root, 1)
    asked = s.worker_requests_for("Is coffee healthy? \ufffd")
    assert asked and not any("\x00" in request.all_text for request in asked)
    assert "Traceback" not in s.bot.stderr_text()
