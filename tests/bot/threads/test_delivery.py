"""A run's delivery against the real store: a run taken over by another attempt is posted once."""

from __future__ import annotations

import pytest
import sqlalchemy.exc
from slack_sdk.errors import SlackApiError
from slack_sdk.web.slack_response import SlackResponse

from bot.db.schema import FINAL_STEP
from bot.db.store import Store
from bot.slack.messages import SlackMessage
from bot.threads import delivery as delivery_module
from bot.threads.delivery import Delivery, Poster, RunTakenOver, open_delivery
from bot.vocabulary.thread import ThreadKey

THREAD = ThreadKey("T1", "C1", "1700000000.000100")


def slack_thread() -> tuple[list[str], Poster]:
    """The thread's messages, and a poster adding to them."""
    thread: list[str] = []

    async def post(payload: SlackMessage) -> str:
        thread.append(payload["text"])
        return f"1700000001.{len(thread):06d}"

    return thread, post


async def attempt(store: Store, post: Poster, run_id: int, *, resumed: bool) -> Delivery:
    """An attempt at the run: it takes the run over (its lease) and opens its delivery."""
    lease = await store.take_run(run_id)
    thread = THREAD.thread_id
    return await open_delivery(post, store, run_id, thread, retry_for=1, resumed=resumed, lease=lease)


async def test_an_attempt_whose_run_was_taken_over_posts_nothing_more_and_the_new_one_posts_the_rest(
    tmp_path,
):
    store = await Store.open(str(tmp_path / "bot.sqlite"))
    thread, post = slack_thread()
    try:
        run_id = await store.start_run(THREAD, THREAD.thread_ts)
        cut_off = await attempt(store, post, run_id, resumed=False)
        await cut_off.post(0, 0, {"text": "iteration 1"})
        # The run's job was re-queued while its process was cut off: another attempt takes it over.
        taking_over = await attempt(store, post, run_id, resumed=True)

        with pytest.raises(RunTakenOver):
            await cut_off.post(FINAL_STEP, 0, {"text": "the answer"})
        await taking_over.post(0, 0, {"text": "iteration 1"})  # in the ledger already
        await taking_over.post(FINAL_STEP, 0, {"text": "the answer"})
    finally:
        await store.close()

    assert thread == ["iteration 1", "the answer"]


async def test_a_message_an_earlier_attempt_recorded_after_the_take_over_is_not_posted_again(tmp_path):
    """The cut-off attempt posted iteration 1 just before the take-over, and the ledger got it only
    after the new attempt had read it (a database outage delays the write): the new attempt finds
    it recorded when its turn to post it comes, and the thread shows it once."""
    store = await Store.open(str(tmp_path / "bot.sqlite"))
    thread, post = slack_thread()
    try:
        run_id = await store.start_run(THREAD, THREAD.thread_ts)
        await store.take_run(run_id)  # the first attempt's lease
        ts = await post({"text": "iteration 1"})
        taking_over = await attempt(store, post, run_id, resumed=True)
        await store.record_posted(run_id, 0, 0, ts)  # the first attempt's late ledger write

        await taking_over.post(0, 0, {"text": "iteration 1"})
        await taking_over.post(FINAL_STEP, 0, {"text": "the answer"})
    finally:
        await store.close()

    assert thread == ["iteration 1", "the answer"]


async def test_a_message_whose_ledger_entry_could_not_be_written_is_not_posted_again(
    database_url, monkeypatch
):
    """Slack took iteration 1, then the database failed as its ledger entry was written (a full
    disk, say), and the attempt was cut short: the attempt that resumes the run does not post it
    again, and posts the rest."""
    monkeypatch.setattr(delivery_module, "LEDGER_RETRIES", 1)
    store = await Store.open(database_url)
    thread, post = slack_thread()
    try:
        run_id = await store.start_run(THREAD, THREAD.thread_ts)
        first = await attempt(store, post, run_id, resumed=False)

        async def disk_full(*args, **kwargs):
            raise sqlalchemy.exc.OperationalError("INSERT", {}, Exception("database or disk is full"))

        with monkeypatch.context() as failing:
            failing.setattr(store, "record_posted", disk_full)
            with pytest.raises(sqlalchemy.exc.OperationalError):
                await first.post(0, 0, {"text": "iteration 1"})

        resumed = await attempt(store, post, run_id, resumed=True)
        await resumed.post(0, 0, {"text": "iteration 1"})
        await resumed.post(1, 0, {"text": "iteration 2"})
    finally:
        await store.close()

    assert thread == ["iteration 1", "iteration 2"]


async def test_a_message_slack_would_not_take_is_posted_by_a_later_attempt(tmp_path):
    """An iteration's intent is withdrawn when Slack refuses the message for good: a later attempt
    posts it."""
    store = await Store.open(str(tmp_path / "bot.sqlite"))
    thread, post = slack_thread()
    refusing = True

    async def flaky(payload: SlackMessage) -> str:
        if refusing:
            answer = SlackResponse(
                client=None,
                http_verb="POST",
                api_url="chat.postMessage",
                req_args={},
                data={"ok": False, "error": "msg_too_long"},
                headers={},
                status_code=200,
            )
            raise SlackApiError("refused", answer)
        return await post(payload)

    try:
        run_id = await store.start_run(THREAD, THREAD.thread_ts)
        await (await attempt(store, flaky, run_id, resumed=False)).post(0, 0, {"text": "iteration 1"})
        refusing = False
        await (await attempt(store, flaky, run_id, resumed=True)).post(0, 0, {"text": "iteration 1"})
    finally:
        await store.close()

    assert thread == ["iteration 1"]
