"""A run's progress shown twice: the thread status and the streamed plan.

The runner calls the same hooks either way (`RunProgress`); this one passes them on to the thread
status (`bot.threads.progress` shows it), also streams each step as a task (see
`bot.streaming.plan`) and gives the run's delivery the stream's message for the answer. What it
needs of the status and of the delivery are the protocols below, which the runner's classes
satisfy as they are.

Slack is called no more than what the thread shows needs: the thread status is first set once the
stream has started (starting it takes the status off), a graded iteration's tasks wait for the
next step's (revising, or the stream's close) to go in the same call, and the status is not cleared
at the close when the last iteration's message took it off already.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

from slack_sdk.models.messages.chunk import Chunk
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.conversation import UserMessage
from bot.slack.messages import SlackMessage
from bot.streaming.plan import Plan
from bot.streaming.stream import PlanStream, finish_stream
from grading import RubricEvaluation


class RunProgress(Protocol):
    """What a thread shows of a run while it works: `start` before the run, each step as it
    begins, `stop` after it."""

    async def start(self) -> None: ...

    async def run_started(self) -> None: ...

    async def drafting(self) -> None: ...

    async def reading(self, files: Sequence[tuple[str, str | None]], thread_messages: int) -> None: ...

    async def grading(self, iteration: int, max_iterations: int) -> None: ...

    async def graded(self, evaluation: RubricEvaluation) -> None: ...

    async def revising(self, evaluation: RubricEvaluation) -> None: ...

    async def stop(self, *, posted_last: bool = False) -> None: ...


class StreamingDelivery(Protocol):
    """The run's delivery, as far as a stream needs it: where the run streams, if it does yet, and
    how its messages are posted."""

    @property
    def stream_ts(self) -> str | None: ...

    @property
    def post_message(self) -> Callable[[SlackMessage], Awaitable[str]]: ...

    async def stream_started(
        self, ts: str, finish: Callable[[str, SlackMessage], Awaitable[str]]
    ) -> bool: ...


class StreamedProgress:
    """The thread `status` plus one streamed message whose plan follows the run."""

    def __init__(
        self, status: RunProgress, client: AsyncWebClient, request: UserMessage, delivery: StreamingDelivery
    ) -> None:
        self._status = status
        self._client = client
        self._request = request
        self._delivery = delivery
        self._stream = PlanStream(client, request)
        self._plan = Plan()
        self._held: list[Chunk] = []
        """A graded iteration's tasks, sent with the next step's (see the module docstring)."""
        self._status_shown = False
        """Whether the thread status was set since the last of the run's posts took it off."""
        self._stopped = False

    async def start(self) -> None:
        """Nothing yet: the status is shown once the stream has started (`run_started`), since
        starting it would take the status off again."""

    async def run_started(self) -> None:
        """Start the stream, unless an earlier attempt at the run started one (its answer goes
        there) or the request has no one to stream to; then show the thread status."""
        try:
            await self._start_stream()
        finally:
            await self._show(self._status.start())

    async def _start_stream(self) -> None:
        if self._delivery.stream_ts is not None or not self._request.user:
            return
        ts = await self._stream.start(self._plan.start())
        if ts is None:
            return
        try:
            adopted = await self._delivery.stream_started(ts, self._finish)
        except Exception:
            # Not in the ledger, so the attempt that resumes the run starts a stream of its own:
            # an empty message left behind would be a second one in the thread.
            await self._stream.withdraw()
            raise
        if not adopted:
            await self._stream.withdraw()

    async def drafting(self) -> None:
        await self._show(self._status.drafting())

    async def stop(self, *, posted_last: bool = False) -> None:
        """As the thread status's `stop`, once: the answer put into the streamed message stopped it
        first (that was no post, which would have taken the status off)."""
        if not self._stopped:
            self._stopped = True
            await self._status.stop(posted_last=posted_last)

    async def reading(self, files: Sequence[tuple[str, str | None]], thread_messages: int) -> None:
        """The worker read `files` (name, URL) and `thread_messages` earlier messages: the draft task
        names them (the thread status has nothing to say of it)."""
        await self._stream.append(self._plan.reading(files, thread_messages))

    async def grading(self, iteration: int, max_iterations: int) -> None:
        await self._show(self._status.grading(iteration, max_iterations))
        await self._stream.append(self._plan.grading(iteration, max_iterations))

    async def graded(self, evaluation: RubricEvaluation) -> None:
        """The iteration's tasks are held; its message goes in the thread next (or is owed until
        before the answer), which takes the thread status off."""
        self._held += self._plan.graded(evaluation)
        self._status_shown = False

    async def revising(self, evaluation: RubricEvaluation) -> None:
        await self._show(self._status.revising(evaluation))
        await self._stream.append(self._take_held() + self._plan.revising(evaluation))

    async def _show(self, step: Awaitable[None]) -> None:
        """Set the thread status with `step` (one of the status's own steps)."""
        self._status_shown = True
        await step

    def _take_held(self) -> list[Chunk]:
        held, self._held = self._held, []
        return held

    async def _finish(self, ts: str, payload: SlackMessage) -> str:
        """Close the stream with the answer, the plan's open task completed; the thread status goes
        first, so the thread never shows the answer with the bot still "working"."""
        await self.stop(posted_last=not self._status_shown)
        chunks: list[Chunk] = self._take_held() + self._plan.close()
        return await finish_stream(
            self._client, self._request.channel, self._delivery.post_message, ts, payload, chunks
        )
