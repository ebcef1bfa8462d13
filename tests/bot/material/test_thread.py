"""A thread's earlier messages: bounded to the most recent characters; fetched page by page."""

from __future__ import annotations

from bot.config import Settings
from bot.material.thread import AuthorNames, ThreadMessage, bound_thread, earlier_messages, message_line
from bot.slack.client import build_client
from tests.standins.slack_api import BOT_ID, BOT_USER_ID, SlackApiStandin

TOKEN = "xoxb-material"


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
    thread = bound_thread(messages(3), 10_000)
    assert thread.read == 3 and thread.left_out == 0
    assert [line.rsplit(" ", 1)[1] for line in thread.text.splitlines()] == ["0", "1", "2"]
    assert "left out" not in thread.text


def test_a_long_thread_keeps_the_most_recent_messages_within_the_budget_and_counts_the_rest():
    many = messages(50)
    line = len(message_line(many[-1]))  # the latest lines are all this long
    thread = bound_thread(many, limit=line * 10 + 9)

    lines = thread.text.splitlines()
    assert lines[0] == "(40 earlier messages left out)"
    assert lines[1].endswith("message 40") and lines[-1].endswith("message 49")
    assert (thread.read, thread.left_out) == (10, 40)
    assert len("\n".join(lines[1:])) <= line * 10 + 9


def test_one_huge_latest_message_keeps_its_end_rather_than_nothing():
    huge = [*messages(2), ThreadMessage("Ben", "1700000999.000100", "a" * 500 + "THE END")]
    thread = bound_thread(huge, limit=100)
    lines = thread.text.splitlines()
    assert lines[0] == "(2 earlier messages left out)"
    assert lines[1].startswith("[… cut] ") and lines[1].endswith("THE END")
    assert thread.read == 1


async def test_fetching_reads_every_page_names_authors_once_each_and_leaves_out_the_bot_and_later_messages():
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
        client = build_client(Settings(slack_bot_token=TOKEN, slack_api_url=slack.api_url))

        found = await earlier_messages(
            client,
            AuthorNames(),
            team="T1",
            channel="C1",
            thread_ts="1700000000.000100",
            before_ts="1700000020.000100",
            bot_user_id=BOT_USER_ID,
            page_size=3,
        )

        assert [(m.author, m.text) for m in found] == [
            *[("Ana", f"point {n}") for n in range(5)],
            ("ci", "build green"),
            ("UGONE", "who am I"),  # users.info did not know them: their id
        ]
        assert len(slack.calls("conversations.replies")) == 4  # 11 messages, 3 a page
        assert [c.args["user"] for c in slack.calls("users.info")] == ["UANA", "UGONE"]


async def test_fetching_is_bounded_in_pages_and_name_lookups_however_long_the_thread():
    with SlackApiStandin(token=TOKEN) as slack:
        for n in range(6):
            slack.add_user(f"U{n}", f"Person {n}")
        slack.add_thread_messages(
            "C1",
            "1700000000.000100",
            *[{"user": f"U{n % 6}", "text": f"point {n}", "ts": f"1700000{n:03d}.000100"} for n in range(30)],
        )
        client = build_client(Settings(slack_bot_token=TOKEN, slack_api_url=slack.api_url))

        found = await earlier_messages(
            client,
            AuthorNames(),
            team="T1",
            channel="C1",
            thread_ts="1700000000.000100",
            before_ts="1700000999.000100",
            bot_user_id=BOT_USER_ID,
            page_size=5,
            max_pages=3,
            max_lookups=2,
        )

        assert len(slack.calls("conversations.replies")) == 3 and len(found) == 15  # of 30
        assert len(slack.calls("users.info")) == 2
        assert [m.author for m in found[:6]] == ["Person 0", "Person 1", "U2", "U3", "U4", "U5"]
