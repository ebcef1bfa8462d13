"""A network partition between the bot and PostgreSQL, end to end: the bot's database connections go
through a TCP relay that stops passing bytes (no reset, no refusal: a dropped route), while Slack
sends an event. The event is answered 503 within Slack's 3 s, as when the database is down, and
Slack's delivery of it once the packets pass again is taken: every thread is answered once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from sqlalchemy.engine import make_url

from tests.e2e.conftest import CRITERIA, SIGNING_SECRET, BotProcess, Service, finals, run_messages
from tests.standins import slack_requests as sr
from tests.standins.model_api import ModelApiStandin, scripted_revision
from tests.standins.slack_api import SlackApiStandin
from tests.standins.tcp_link import TcpLink, via_link

pytestmark = pytest.mark.postgres

SLACK_WAITS = 3.0
"""Seconds Slack waits for an answer to an event before it gives up on it (and delivers it again)."""

UNAVAILABLE = 503
"""What the bot answers an event its database could not take."""


@pytest.fixture
def link(postgres_url: str) -> Iterator[TcpLink]:
    server = make_url(postgres_url)
    with TcpLink(server.host or "127.0.0.1", server.port or 5432) as relay:
        yield relay


def test_an_event_sent_while_the_databases_packets_are_held_is_answered_503_then_once(
    start_bot: Callable[..., BotProcess],
    slack_api: SlackApiStandin,
    model_api: ModelApiStandin,
    postgres_url: str,
    link: TcpLink,
):
    model_api.worker, model_api.grader = scripted_revision(CRITERIA)
    bot = start_bot(env={"RUBRIC_BOT_DB": via_link(postgres_url, link)})
    s = Service(slack_api, model_api, bot)
    s.set_channel_rubric("C1")
    before = s.mention("Question before", "C1")
    s.wait_finals("C1", before, 1)

    link.hold()
    ts = sr.new_ts()
    held = sr.event_callback(sr.app_mention("Question in the partition", "C1", ts))
    as_slack = sr.SlackSender(bot.url, SIGNING_SECRET, timeout=SLACK_WAITS)
    try:
        assert as_slack.send(held).status == UNAVAILABLE
    finally:
        link.release()
        as_slack.close()

    # Slack delivers it again (up to 3 times) until it is taken.
    statuses = []
    for retry in (1, 2, 3):
        statuses.append(bot.sender.send(held, retry_num=retry).status)
        if statuses[-1] == 200:
            break
    assert statuses[-1] == 200, statuses
    s.wait_finals("C1", ts, 1)
    for root in (before, ts):
        thread = s.thread("C1", root)
        assert sorted(str(m.event_type) for m in thread) == sorted(run_messages(2)), [
            m.all_text for m in thread
        ]
        assert len(finals(thread)) == 1
