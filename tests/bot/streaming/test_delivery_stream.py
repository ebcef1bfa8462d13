"""A run's answer goes into the message its stream started, on either database, even from another attempt."""

from __future__ import annotations

from bot.db.schema import FINAL_STEP
from bot.db.store import Store
from bot.slack.messages import SlackMessage
from bot.threads.delivery import open_delivery
from bot.vocabulary.thread import ThreadKey

THREAD = ThreadKey("T1", "C1", "1700000000.000100")
STREAM_TS = "1700000001.000001"


async def test_a_resumed_attempt_puts_the_answer_into_the_stream_an_earlier_one_started(database_url):
    store = await Store.open(database_url)
    posted: list[str] = []
    streamed: list[tuple[str, str]] = []

    async def post(payload: SlackMessage) -> str:
        posted.append(payload["text"])
        return f"1700000002.{len(posted):06d}"

    async def into_stream(ts: str, payload: SlackMessage) -> str:
        streamed.append((ts, payload["text"]))
        return ts

    try:
        run_id = await store.start_run(THREAD, THREAD.thread_ts)
        first = await open_delivery(post, store, run_id, THREAD.thread_id, retry_for=1, resumed=False)
        await first.stream_started(STREAM_TS, into_stream)
        await first.post(0, 0, {"text": "iteration 1"})
        # The attempt is cut short; the next one finds the stream in the ledger.
        resumed = await open_delivery(
            post, store, run_id, THREAD.thread_id, retry_for=1, resumed=True, finish_stream=into_stream
        )
        await resumed.post(0, 0, {"text": "iteration 1"})
        await resumed.post(FINAL_STEP, 0, {"text": "the answer"})
        await resumed.post(FINAL_STEP, 1, {"text": "the answer, continued"})
        assert await resumed.settle()
        await store.finish_run(run_id, "satisfied", None, resumed.unrecorded())
        ledger = {(p.step, p.part): p.message_ts for p in await store.posted_messages(run_id)}
    finally:
        await store.close()

    assert posted == ["iteration 1", "the answer, continued"]
    assert streamed == [(STREAM_TS, "the answer")]
    assert ledger[("stream", 0)] == ledger[(FINAL_STEP, 0)] == STREAM_TS


async def test_an_attempt_that_finds_another_attempts_stream_recorded_answers_into_that_one(database_url):
    """A run taken over while its first process lived: the first attempt's stream reached the ledger
    after the second opened its delivery. The second answers into the recorded stream, so the thread
    holds no streamed message left empty."""
    store = await Store.open(database_url)
    streamed: list[tuple[str, str]] = []

    async def post(payload: SlackMessage) -> str:
        raise AssertionError(f"posted as a message of its own: {payload['text']}")

    async def into_stream(ts: str, payload: SlackMessage) -> str:
        streamed.append((ts, payload["text"]))
        return ts

    try:
        run_id = await store.start_run(THREAD, THREAD.thread_ts)
        first = await open_delivery(post, store, run_id, THREAD.thread_id, retry_for=1, resumed=False)
        second = await open_delivery(
            post, store, run_id, THREAD.thread_id, retry_for=1, resumed=True, finish_stream=into_stream
        )
        assert await first.stream_started(STREAM_TS, into_stream)
        adopted = await second.stream_started("1700000003.000001", into_stream)
        await second.post(FINAL_STEP, 0, {"text": "the answer"})
    finally:
        await store.close()

    assert not adopted  # the second attempt's own stream is withdrawn by its caller
    assert second.stream_ts == STREAM_TS
    assert streamed == [(STREAM_TS, "the answer")]
