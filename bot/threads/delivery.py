"""A run's thread messages: each posted once, in order, and owed while Slack refuses them for now.

A run posts its evaluations as they come and its closing messages at the end through one
`Delivery`. What Slack takes is recorded in the `posted` ledger, so a resumed run posts only what is
missing. When Slack refuses a message for the time being (5xx, 429 beyond the client's own retries,
no connection), it and every later message of the run are owed: the run goes on, and `settle` at
its end posts them in order, retrying with a growing delay for up to `RUBRIC_BOT_DELIVERY_RETRY`
seconds after the first refusal. Only then is an answer counted undelivered.

A job's single message outside a run (a rubric's confirmation, a limit's refusal, a notice) is
posted with `post_in_time`: the same retries for the same time, without a ledger (it has one part).

An iteration's message is recorded as soon as Slack takes it (with its evaluation); the closing
messages are recorded with the run's end, in the transaction that records its status
(`Delivery.unrecorded`, `bot.db.store.Store.finish_run`), unless the run waits for Slack first.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial

from bot.db.database import describe_database_error, unavailable_error
from bot.db.evaluations import PostedEvaluation
from bot.db.ledger import PostedPart, Step
from bot.db.schema import FINAL_STEP, STREAM_STEP
from bot.db.store import Store
from bot.slack.client import FAILED_CALLS, SLACK_ERRORS, describe_error, refused_for_now
from bot.slack.messages import SlackMessage

logger = logging.getLogger(__name__)

FIRST_RETRY_SECONDS = 1.0
"""Wait after Slack first refuses a run's message; each further refusal doubles it."""

MAX_RETRY_SECONDS = 15.0
"""Longest wait between tries: once Slack is back, a run's messages follow within about this."""

LEDGER_RETRIES = 5
"""Tries to record a message Slack took when the database fails meanwhile (a second apart at
first, doubling): a message missing from the ledger would be posted again by a resumed run."""

Poster = Callable[[SlackMessage], Awaitable[str]]
"""Posts one message in the run's thread; its ts. It raises what the Slack client raises."""

StreamFinisher = Callable[[str, SlackMessage], Awaitable[str]]
"""Puts a message into the run's streamed message (given its ts) instead of posting it; the ts the
message is in. It raises what the Slack client raises for what Slack refuses for now."""


@dataclass
class RetryWindow:
    """How long Slack has been refusing one thread's messages, and how long to wait before the next try."""

    thread: str
    """The thread's id, for log lines."""
    retry_for: float
    """Seconds to keep retrying after Slack's first refusal (`RUBRIC_BOT_DELIVERY_RETRY`)."""
    _refused_since: float | None = None
    _delay: float = FIRST_RETRY_SECONDS

    def refused(self, exc: BaseException) -> None:
        """Slack refused a message for now; the first refusal is logged (and opens the window)."""
        if self._refused_since is None:
            self._refused_since = time.monotonic()
            logger.warning(
                "Slack refused a message for thread %s (%s); retrying for up to %gs",
                self.thread,
                describe_error(exc),
                self.retry_for,
            )

    @property
    def expired(self) -> bool:
        """Whether the retry period since the first refusal is over."""
        return self._refused_since is not None and time.monotonic() - self._refused_since >= self.retry_for

    async def wait(self) -> None:
        """Wait before the next try, a little longer each time."""
        await asyncio.sleep(self._delay)
        self._delay = min(self._delay * 2, MAX_RETRY_SECONDS)

    def give_up(self, count: int) -> None:
        logger.warning(
            "gave up posting %d message(s) in thread %s: Slack refused them for %gs",
            count,
            self.thread,
            self.retry_for,
        )


async def post_in_time(post_message: Poster, payload: SlackMessage, window: RetryWindow) -> str | None:
    """Post one message, retrying while Slack refuses it for now, within `window`; its ts, or None
    when Slack refused it for good or past the window (logged)."""
    while True:
        try:
            return await post_message(payload)
        except SLACK_ERRORS as exc:
            FAILED_CALLS.inc()
            if not refused_for_now(exc):
                logger.warning("could not post in thread %s: %s", window.thread, describe_error(exc))
                return None
            window.refused(exc)
        if window.expired:
            window.give_up(1)
            return None
        await window.wait()


class RunTakenOver(Exception):
    """Another attempt holds the run now (its job was re-queued while this process was cut off
    from the database): this one must post nothing more, and leave the run to that one."""


@dataclass
class _Owed:
    step: Step
    part: int
    payload: SlackMessage
    evaluation: PostedEvaluation | None


@dataclass
class Delivery:
    """What one run has put in its thread and what it still owes it (see the module docstring).

    With a `lease` (see `bot.db.store.Store.take_run`), each message is posted only while the
    lease is still the run's, else `RunTakenOver` is raised: the attempt that took the run over
    posts it instead, unless the ledger shows it posted by then. An iteration's message is recorded
    in the ledger before it is posted (`_intend`), its ts once Slack took it: one whose ts could not
    be recorded is not posted again by a later attempt. (A take-over between one attempt's check
    and the other's is the one window in which a message can appear twice; a crash between an
    intent and the post, one in which an iteration's message can be missing.)
    """

    post_message: Poster
    store: Store
    run_id: int
    window: RetryWindow
    posted: dict[tuple[Step, int], str]
    """Slack ts of each part already in the thread, by (step, part)."""
    lease: str | None = None
    """The attempt's hold on the run, checked before each post; None where no other process can
    take the run over (the embedded queue)."""
    finish_stream: StreamFinisher | None = None
    """Where the run streams its progress (`bot.streaming`): puts the first closing message into
    the streamed message, so the answer ends the stream instead of following it."""
    _owed: list[_Owed] = field(default_factory=list)
    _unrecorded: list[PostedPart] = field(default_factory=list)
    _intended: set[tuple[Step, int]] = field(default_factory=set)
    """The iteration messages this attempt recorded its intent to post (see `_intend`)."""
    _final_lost: bool = False

    @property
    def thread(self) -> str:
        """The thread's id, for log lines."""
        return self.window.thread

    @property
    def stream_ts(self) -> str | None:
        """The ts of the run's streamed message, if this or an earlier attempt started one."""
        return self.posted.get((STREAM_STEP, 0))

    def closing_poster(self) -> Poster:
        """Posts a message that ends the run outside the ledger (a notice that it was cut short):
        into the run's streamed message where it has one, so the stream does not hang open."""
        stream_ts, finish = self.stream_ts, self.finish_stream
        if stream_ts is None or finish is None:
            return self.post_message
        return partial(finish, stream_ts)

    async def stream_started(self, ts: str, finish: StreamFinisher) -> bool:
        """The run streams in message `ts` (recorded at once: a resumed run answers there), and
        `finish` puts the answer into it; False when the ledger holds another attempt's stream (a run
        taken over while its first process lived): this attempt adopts that one, so its answer
        closes it and no empty streamed message stays in the thread."""
        recorded: list[bool] = []

        async def write() -> None:
            recorded.append(await self.store.record_posted(self.run_id, STREAM_STEP, 0, ts))

        await record_retrying(write, self.thread)
        if not recorded[-1]:
            await self._adopt_recorded_stream()
            return False
        self.posted[(STREAM_STEP, 0)] = ts
        self.finish_stream = finish
        return True

    async def _adopt_recorded_stream(self) -> None:
        """Take the streamed message the ledger holds for the run as this attempt's."""
        for message in await self.store.posted_messages(self.run_id):
            if (message.step, message.part) == (STREAM_STEP, 0):
                self.posted[(STREAM_STEP, 0)] = message.message_ts

    async def post(
        self, step: Step, part: int, payload: SlackMessage, evaluation: PostedEvaluation | None = None
    ) -> None:
        """Post part `part` of `step` unless it is in the thread already (or owe it, if Slack is
        refusing); the `evaluation` it shows is recorded with it, in one transaction."""
        if (step, part) in self.posted or any((owed.step, owed.part) == (step, part) for owed in self._owed):
            return
        self._owed.append(_Owed(step, part, payload, evaluation))
        await self._post_owed()

    async def settle(self) -> bool:
        """Post everything owed, waiting for Slack within the retry period; whether every closing
        message of the run is in the thread."""
        while self._owed and not self.window.expired:
            # Nothing Slack took waits out of the ledger while the run waits for Slack.
            for posted in self.unrecorded():
                await self._record(posted)
            await self.window.wait()
            await self._post_owed()
        if self._owed:
            self.window.give_up(len(self._owed))
            for owed in self._owed:
                await self._lose(owed)
            self._owed.clear()
        return not self._final_lost

    def unrecorded(self) -> list[PostedPart]:
        """The closing messages Slack took that are not in the ledger yet, for the run's end to
        record (see `bot.db.store.Store.finish_run`); from now on they are the caller's to record."""
        taken, self._unrecorded = self._unrecorded, []
        return taken

    async def _lose(self, owed: _Owed) -> None:
        """A message Slack did not take: its intent withdrawn, so that a later attempt posts it."""
        self._final_lost = self._final_lost or owed.step == FINAL_STEP
        if (owed.step, owed.part) in self._intended:
            self._intended.discard((owed.step, owed.part))
            await self.store.withdraw_post(self.run_id, owed.step, owed.part)

    async def _post_owed(self) -> None:
        """Post owed messages in order until Slack refuses one for now (it stays owed, with those
        after it); one Slack refuses for good is dropped, logged."""
        while self._owed:
            owed = self._owed[0]
            if self.lease is not None and await self._posted_by_another_attempt(owed, self.lease):
                self._owed.pop(0)
                continue
            if not await self._intend(owed):
                self._owed.pop(0)
                continue
            try:
                ts = await self._send(owed)
            except SLACK_ERRORS as exc:
                FAILED_CALLS.inc()
                if refused_for_now(exc):
                    self.window.refused(exc)
                    return
                logger.warning("could not post in thread %s: %s", self.thread, describe_error(exc))
                await self._lose(owed)
            else:
                self.posted[(owed.step, owed.part)] = ts
                posted = PostedPart(owed.step, owed.part, ts)
                if owed.step == FINAL_STEP:
                    self._unrecorded.append(posted)
                else:
                    await self._record(posted, owed.evaluation)
            self._owed.pop(0)

    async def _intend(self, owed: _Owed) -> bool:
        """Record in the ledger that this attempt is about to post `owed`, an iteration's message,
        before it does (the closing messages are recorded with the run's end); False if an attempt
        recorded it before: it is in the thread, or may be (posted, its ts never recorded: the
        database failed meanwhile, a full disk say), and is not posted again."""
        key = (owed.step, owed.part)
        if owed.step == FINAL_STEP or key in self._intended:
            return True
        recorded: list[str | None] = []

        async def write() -> None:
            recorded.append(await self.store.intend_post(self.run_id, owed.step, owed.part))

        await record_retrying(write, self.thread)
        if recorded[-1] is not None:
            self.posted[key] = recorded[-1]
            return False
        self._intended.add(key)
        return True

    async def _posted_by_another_attempt(self, owed: _Owed, lease: str) -> bool:
        """Whether the attempt this one took the run from recorded `owed` after this one read the
        ledger (it posted it just before the take-over, and the ledger got it late, as a database
        outage makes it); `RunTakenOver` if another attempt has taken the run from this one."""
        standing = await self.store.post_standing(self.run_id, lease, owed.step, owed.part)
        if not standing.holds_run:
            raise RunTakenOver(f"run {self.run_id} in thread {self.thread} was taken over")
        if standing.recorded_ts is None or (owed.step, owed.part) in self._intended:
            return False  # not recorded, or recorded by this attempt's own intent
        self.posted[(owed.step, owed.part)] = standing.recorded_ts
        return True

    async def _send(self, owed: _Owed) -> str:
        """Post an owed message, or put the first closing one into the run's streamed message."""
        stream_ts = self.stream_ts
        if (owed.step, owed.part) == (FINAL_STEP, 0) and stream_ts is not None and self.finish_stream:
            return await self.finish_stream(stream_ts, owed.payload)
        return await self.post_message(owed.payload)

    async def _record(self, posted: PostedPart, evaluation: PostedEvaluation | None = None) -> None:
        """Put a posted message in the ledger (with the evaluation it shows)."""
        await record_retrying(
            lambda: self.store.record_posted(
                self.run_id, posted.step, posted.part, posted.message_ts, evaluation
            ),
            self.thread,
        )


async def record_retrying(write: Callable[[], Awaitable[object]], thread: str) -> None:
    """Run `write`, which records messages posted in `thread`, retrying a moment if the database
    fails meanwhile: a message missing from the ledger would be posted again by a resumed run."""
    delay = FIRST_RETRY_SECONDS
    for number in range(LEDGER_RETRIES):
        try:
            await write()
            return
        except Exception as exc:
            failure = unavailable_error(exc)
            if failure is None or number + 1 == LEDGER_RETRIES:
                raise
            logger.warning(
                "could not record a message posted in thread %s (%s); trying again in %gs",
                thread,
                describe_database_error(failure),
                delay,
            )
        await asyncio.sleep(delay)
        delay *= 2


async def open_delivery(
    post_message: Poster,
    store: Store,
    run_id: int,
    thread: str,
    *,
    retry_for: float,
    resumed: bool,
    lease: str | None = None,
    finish_stream: StreamFinisher | None = None,
) -> Delivery:
    """The run's delivery, knowing what an earlier attempt posted (only a resumed run can have),
    posting while `lease` holds the run (if given); `finish_stream` puts the answer into a stream
    an earlier attempt started."""
    posted = await store.posted_messages(run_id) if resumed else []
    done = {(p.step, p.part): p.message_ts for p in posted}
    return Delivery(post_message, store, run_id, RetryWindow(thread, retry_for), done, lease, finish_stream)
