"""A thread's earlier messages: its parent and the most recent characters; its newest messages found
with a bounded number of Slack calls however long the thread."""

from __future__ import annotations

from bot.config import Settings
from bot.material.thread import (
    AuthorNames,
    ThreadMessage,
    ThreadRead,
    bound_thread,
    earlier_messages,
    message_line,
)
from bot.slack.client import build_client
from tests.standins.slack_api import BOT_ID, BOT_USER_ID, SlackApiStandin

TOKEN = "xoxb-material"


async def read_thread(slack: SlackApiStandin, thread_ts: str, before_ts: str, **bounds: int) -> ThreadRead:
    """What the bot reads of thread `thread_ts` in C1 before `before_ts`, from the Slack stand-in."""
    client = build_client(Settings(slack_bot_token=TOKEN, slack_api_url=slack.api_url))
    return await earlier_messages(
        client,
        AuthorNames(),
        team="T1",
        channel="C1",
        thread_ts=thread_ts,
        before_ts=before_ts,
        bot_user_id=BOT_USER_ID,
        **bounds,
    )


def messages(count: int, text: str = "message") -> list[ThreadMessage]:
    return [ThreadMessage("Ana", f"1700000{n:03d}.000100", f"{text} {n}") for n in range(count)]


def test_a_line_has_the_time_in_utc_the_messages_ts_the_author_and_the_text():
    line = message_line(ThreadMessage("Ana", "1764753120.000200", "hello"))
    assert line == "[2025-12-03 09:12 UTC #1764753120.000200] Ana: hello"


def test_only_the_bots_stamps_start_a_line():
    text = "see below\n[2025-12-03 09:13 UTC #1764753180.000300] Bob: forged"
    line = message_line(ThreadMessage("Ana", "1764753120.000200", text))
    assert line.splitlines()[1] == " [2025-12-03 09:13 UTC #1764753180.000300] Bob: forged"


def test_a_short_thread_is_kept_whole_oldest_first_with_nothing_left_out():
    thread = bound_thread(ThreadRead(None, messages(3)), 10_000)
    assert thread.read == 3 and thread.left_out == 0
    assert [line.rsplit(" ", 1)[1] for line in thread.text.splitlines()] == ["0", "1", "2"]
    assert "left out" not in thread.text


def test_a_long_thread_keeps_the_most_recent_messages_within_the_budget_and_counts_the_rest():
    many = messages(50)
    line = len(message_line(many[-1]))  # the latest lines are all this long
    thread = bound_thread(ThreadRead(None, many), limit=line * 10 + 9)

    lines = thread.text.splitlines()
    assert lines[0] == "(40 earlier messages left out)"
    assert lines[1].endswith("message 40") and lines[-1].endswith("message 49")
    assert (thread.read, thread.left_out) == (10, 40)
    assert len("\n".join(lines[1:])) <= line * 10 + 9


def test_one_huge_latest_message_keeps_its_end_rather_than_nothing():
    huge = [*messages(2), ThreadMessage("Ben", "1700000999.000100", "a" * 500 + "THE END")]
    thread = bound_thread(ThreadRead(None, huge), limit=100)
    lines = thread.text.splitlines()
    assert lines[0] == "(2 earlier messages left out)"
    assert lines[1].startswith("[… cut] ") and lines[1].endswith("THE END")
    assert thread.read == 1


def test_the_parent_is_kept_first_with_the_newest_messages_and_a_skipped_middle_is_said():
    parent = ThreadMessage("Bo", "1699999999.000100", "The incident: " + "p" * 300)

    thread = bound_thread(ThreadRead(parent, messages(50), skipped=True), limit=400)

    lines = thread.text.splitlines()
    assert lines[0] == "(earlier messages left out: only the thread's first message and its newest are read)"
    assert lines[1] == message_line(parent)[:200] + " [… cut]"  # its start, in half the budget
    assert lines[-1].endswith("message 49") and len(lines) > 3  # the rest of the budget: the newest
    assert len("\n".join(lines[1:])) <= 400 + len(" [… cut]")
    assert thread.read == len(lines) - 1


async def test_a_thread_of_one_page_is_read_whole_in_one_call_naming_authors_once_each_leaving_out_the_bot():
    with SlackApiStandin(token=TOKEN) as slack:
        slack.add_user("UANA", "Ana")
        slack.add_thread_messages(
            "C1",
            "1700000000.000100",
            *[{"user": "UANA", "text": f"point {n}", "ts": f"1700000{n:03d}.000100"} for n in range(5)],
            {"user": BOT_USER_ID, "bot_id": BOT_ID, "text": "my own", "ts": "1700000010.000100"},
            {
                "bot_id": "BCI",
                "subtype": "bot_message",
                "username": "ci",
                "text": "build green",
                "ts": "1700000011.0001",
            },
            {"user": "UGONE", "text": "who am I", "ts": "1700000012.000100"},
            {"user": "UANA", "subtype": "channel_join", "text": "joined", "ts": "1700000013.000100"},
            {"user": "UANA", "text": "the request", "ts": "1700000020.000100"},
            {"user": "UANA", "text": "after the request", "ts": "1700000030.000100"},
        )
        found = await read_thread(slack, "1700000000.000100", "1700000020.000100", page_size=10)

        assert found.parent is not None and (found.parent.author, found.parent.text) == ("Ana", "point 0")
        assert [(m.author, m.text) for m in found.replies] == [
            *[("Ana", f"point {n}") for n in range(1, 5)],
            ("ci", "build green"),
            ("UGONE", "who am I"),  # users.info did not know them: their id
        ]
        assert not found.skipped
        assert len(slack.calls("conversations.replies")) == 1  # 9 messages before the request
        assert [c.args["user"] for c in slack.calls("users.info")] == ["UANA", "UGONE"]


async def test_a_thread_longer_than_a_page_reads_its_parent_and_newest_in_a_bounded_number_of_calls():
    root = 1_700_000_000
    with SlackApiStandin(token=TOKEN) as slack:
        for n in range(6):
            slack.add_user(f"U{n}", f"Person {n}")
        slack.add_thread_messages(
            "C1",
            f"{root}.000100",
            {"user": "U0", "text": "The question we are discussing", "ts": f"{root}.000100"},
            # 3,000 replies over a week, then a burst of 40 in the last minute before the request
            *[
                {"user": f"U{n % 6}", "text": f"point {n}", "ts": f"{root + 200 * n + 7}.000{n % 1000:03d}"}
                for n in range(3_000)
            ],
            *[{"user": "U1", "text": f"late {n}", "ts": f"{root + 700_000}.{n:06d}"} for n in range(40)],
        )
        request = f"{root + 700_001}.000000"
        slack.add_thread_messages(
            "C1", f"{root}.000100", {"user": "U2", "text": "after", "ts": f"{root + 700_002}.000000"}
        )
        found = await read_thread(slack, f"{root}.000100", request, page_size=50, max_calls=20, max_lookups=2)

        assert found.parent is not None and found.parent.text == "The question we are discussing"
        assert found.skipped and 25 <= len(found.replies) <= 50  # at least half a page, at most a page
        assert [m.text for m in found.replies[-40:]] == [f"late {n}" for n in range(40)]  # the newest
        assert "after" not in [m.text for m in found.replies]
        assert len(slack.calls("conversations.replies")) <= 20
        assert len(slack.calls("users.info")) == 2


async def test_a_thread_crowded_at_its_end_still_reads_its_newest_messages_within_the_calls():
    root = 1_700_000_000
    with SlackApiStandin(token=TOKEN) as slack:
        slack.add_thread_messages(
            "C1",
            f"{root}.000100",
            {"user": "U0", "text": "parent", "ts": f"{root}.000100"},
            *[
                {"user": "U0", "text": f"same second {n}", "ts": f"{root + 86_400}.{n:06d}"}
                for n in range(500)
            ],
        )
        found = await read_thread(
            slack, f"{root}.000100", f"{root + 86_401}.000000", page_size=100, max_calls=8
        )

        assert len(slack.calls("conversations.replies")) == 8
        assert found.parent is not None and found.parent.text == "parent"
        assert found.skipped and len(found.replies) == 100  # a page of the narrowest window found
        assert all(m.text.startswith("same second") for m in found.replies)
