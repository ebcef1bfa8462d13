"""A run's delivery against the real store: a run taken over by another attempt is posted once."""

from __future__ import annotations

import pytest

from bot.db.schema import FINAL_STEP
from bot.db.store import Store
from bot.slack.messages import SlackMessage
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
