"""`/rubric` text parsing and which Slack messages the bot treats as requests."""

from __future__ import annotations

import pytest

from bot.listeners.command_text import CommandError, ParsedCommand, parse_command
from bot.listeners.rubric_command import RUBRIC_SUBCOMMANDS
from bot.slack.conversation import (
    EDIT_CUT_NOTE,
    MAX_INPUT_CHARS,
    is_from_person,
    mentions_bot,
    message_change,
    rubric_directive,
    user_message,
)
from bot.vocabulary.workspace import Workspace

TABLE = {subcommand.name: subcommand for subcommand in RUBRIC_SUBCOMMANDS}

# -- /rubric -----------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["", "   ", "edit", "EDIT", " edit \n"])
def test_bare_command_and_edit_open_the_editor(text):
    assert parse_command(text, TABLE) == ParsedCommand("edit")


@pytest.mark.parametrize("name", ["show", "clear", "help"])
def test_simple_subcommands(name):
    assert parse_command(f" {name.upper()} ", TABLE) == ParsedCommand(name)


def test_set_keeps_a_multiline_rubric_that_starts_on_the_next_line():
    parsed = parse_command("set\n- Cites a source\n- Under 200 words\n", TABLE)

    assert parsed == ParsedCommand("set", "- Cites a source\n- Under 200 words")


def test_set_keeps_yaml_indentation():
    rubric = "dimensions:\n  - name: Clarity\n    weight: 2"

    assert parse_command(f"set {rubric}", TABLE).argument == rubric


def test_set_without_a_rubric_is_an_error():
    with pytest.raises(CommandError, match=r"needs more after it: `/rubric set <rubric>`"):
        parse_command("set   ", TABLE)


def test_unknown_subcommand_is_named_in_the_error():
    with pytest.raises(CommandError, match="`frobnicate` is not"):
        parse_command("frobnicate now", TABLE)


def test_trailing_text_on_a_subcommand_without_argument_is_an_error():
    with pytest.raises(CommandError, match="takes nothing"):
        parse_command("clear everything please", TABLE)


# -- messages ------------------------------------------------------------------------------------

BOT = "UBOT"


def event(**fields):
    return {"type": "message", "channel": "C1", "user": "U1", "ts": "1.000100", "text": "hi"} | fields


@pytest.mark.parametrize(
    "fields",
    [
        {"bot_id": "B999"},
        {"subtype": "bot_message"},
        {"subtype": "message_changed"},
        {"subtype": "message_deleted"},
        {"subtype": "channel_join"},
        {"user": BOT},
        {"user": None},
    ],
)
def test_bots_edits_deletions_and_the_bot_itself_are_ignored(fields):
    assert not is_from_person(event(**fields), BOT)


@pytest.mark.parametrize("subtype", [None, "file_share", "thread_broadcast"])
def test_people_messages_are_handled(subtype):
    assert is_from_person(event(subtype=subtype), BOT)


def test_top_level_message_starts_a_thread_under_itself():
    message = user_message(event(ts="5.5"), workspace=Workspace("T1"), bot_user_id=BOT, event_id="Ev1")

    assert message.thread_ts == "5.5"
    assert message.thread_id == "T1:C1:5.5"
    assert message.dedupe_keys == ("event:Ev1", "msg:T1:C1:5.5")


def test_reply_belongs_to_its_thread_root():
    message = user_message(
        event(ts="6.6", thread_ts="5.5"), workspace=Workspace("T1"), bot_user_id=BOT, event_id=None
    )

    assert message.thread_id == "T1:C1:5.5"
    assert message.dedupe_keys == ("msg:T1:C1:6.6",)


def test_bot_mention_is_stripped_and_slack_escaping_undone():
    text = "<@UBOT|rubric-bot> compare a &lt; b &amp;&amp; c &gt; d for <@U2>"

    message = user_message(event(text=text), workspace=Workspace("T1"), bot_user_id=BOT, event_id=None)

    assert message.text == "compare a < b && c > d for <@U2>"


def test_mentions_of_the_bot_are_recognised_but_not_of_others():
    assert mentions_bot("hey <@UBOT> there", BOT)
    assert mentions_bot("<@UBOT|rubric-bot>", BOT)
    assert not mentions_bot("hey <@UBOT2> there", BOT)


def test_rubric_directive_takes_the_rest_of_a_multiline_message():
    assert rubric_directive("Rubric:\n- Cites a source\n- Polite") == "- Cites a source\n- Polite"
    assert rubric_directive("  rubric :  - One line") == "- One line"


def test_rubric_directive_only_at_the_start():
    assert rubric_directive("what rubric: would you use?") is None
    assert rubric_directive("rubrics: are great") is None


def edit(new_text: str) -> dict[str, object]:
    """A `message_changed` event: a reply in thread 1.000000 now says `new_text`."""
    reply = {"user": "U1", "ts": "1.000100", "thread_ts": "1.000000"}
    return event(
        subtype="message_changed",
        message=reply | {"text": new_text},
        previous_message=reply | {"text": "short"},
    )


def test_an_edit_longer_than_a_request_may_be_is_cut_to_the_limit_saying_so():
    workspace = Workspace(team="T1")
    kept = message_change(edit("x" * MAX_INPUT_CHARS), workspace=workspace, bot_user_id=BOT)
    cut = message_change(edit("x" * (MAX_INPUT_CHARS + 1)), workspace=workspace, bot_user_id=BOT)

    assert kept is not None and kept.text == "x" * MAX_INPUT_CHARS
    assert cut is not None and len(cut.text) == MAX_INPUT_CHARS and cut.text.endswith(EDIT_CUT_NOTE)
    assert cut.previous_text == "short"
    assert (kept.cut_from, cut.cut_from) == (0, MAX_INPUT_CHARS + 1)  # what the thread is told it had
