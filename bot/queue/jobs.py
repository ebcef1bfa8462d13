"""Background jobs per Slack thread: one at a time per thread, in arrival order, many threads at once.

Listeners ack at once and submit a job (a `JobPayload`: one pydantic model per kind of job) under
the thread's key. Two queues do that behind one small protocol, `JobQueue`:

- `ThreadScheduler` (`bot.queue.scheduler`), the embedded default (SQLite): asyncio tasks in this
  process. Jobs live in memory, so a stopping process abandons what it has not reached (the thread
  is told).
- `DurableQueue` (`bot.queue.durable`, PostgreSQL): procrastinate jobs whose lock is the
  thread key, so a thread's jobs run one at a time in creation order across every `serve` and
  `worker` process. Jobs outlive processes: a stopping process leaves them for the others (or its
  successor), and a job whose process died is found by its missing heartbeat and run again (see
  `DurableQueue`). A job read back from the database is validated against its kind's model first
  (`MalformedJob` if it does not fit).
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from bot.db.spend import QuotaName
from bot.material.sources import Sources
from bot.slack.conversation import UserMessage
from bot.slack.payloads import problems
from bot.vocabulary.thread import MessageChange, ThreadKey

logger = logging.getLogger(__name__)


# -- payloads ------------------------------------------------------------------------------------


class JobPayload(BaseModel):
    """A job's arguments, one subclass per kind of job; a durable job is stored as its JSON."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: ClassVar[str]
    """The kind of job this payload is for (the procrastinate task is
    `bot.queue.durable.TASK_PREFIX` + kind)."""

    @property
    def thread(self) -> ThreadKey | None:
        """The Slack thread the job works in (None for a job of no thread)."""
        return None


class _MessageJob(JobPayload):
    message: UserMessage
    """The person's message the job answers in its thread."""

    @property
    def thread(self) -> ThreadKey:
        """The message's thread."""
        return self.message.thread


class PromptJob(_MessageJob):
    """A mention with nothing to do: answered with the rubric in force and "what should I do?".
    Queued so that it names the rubric in force after any earlier `rubric:` message in the thread."""

    kind: ClassVar[str] = "prompt"


class RubricJob(_MessageJob):
    """A `rubric:` message: it replaces the thread's rubric after the thread's earlier jobs."""

    kind: ClassVar[str] = "rubric"

    rubric: str
    """The rubric text after `rubric:`."""


class _RunJob(_MessageJob):
    run_id: int
    """The run recorded for the request (see `bot.db.store.Store.start_run`)."""


class RequestJob(_RunJob):
    """A request for the agent: run it, posting each evaluation and the answer."""

    kind: ClassVar[str] = "request"

    sources: Sources = Sources()
    """What the request shares besides its text (none in jobs queued before requests carried it)."""


class ReplyJob(_MessageJob):
    """A notice in answer to a message the bot does not act on otherwise (e.g. one too long to
    read); its message carries no text."""

    kind: ClassVar[str] = "reply"

    title: str
    """What is wrong, the notice's first line."""
    detail: str
    """What to do about it."""


class LimitJob(_MessageJob):
    """A request refused by a daily limit: its thread is told which limit and when it resets."""

    kind: ClassVar[str] = "limit"

    quota: QuotaName
    """The limit it met: the person's requests or the channel's tokens."""
    limit: int | float
    """The limit's value: requests or tokens, or US dollars for a money budget."""
    refused_at: datetime
    """When it was refused (the limit resets at the next midnight UTC)."""


class NoticeJob(_RunJob):
    """Telling a thread that an earlier process died in its run (the request and that run)."""

    kind: ClassVar[str] = "interrupted_notice"


class _ChangeJob(JobPayload):
    message: MessageChange
    """The deleted or edited message."""

    @property
    def thread(self) -> ThreadKey:
        """The message's thread."""
        return self.message.thread

    kept: int | None = None
    """Where jobs live in memory: the id of the change's row in `message_changes`, deleted once the
    change is applied (until then, a process starting applies it; see `bot.db.store.record_change`)."""


class ForgetJob(_ChangeJob):
    """A deleted message: it leaves the thread's conversation (see `bot.lifecycle.forget`)."""

    kind: ClassVar[str] = "forget"


class ReviseJob(_ChangeJob):
    """An edited request: its stored copy takes the new text (see `bot.lifecycle.forget`)."""

    kind: ClassVar[str] = "revise"


Revision = Callable[[JobPayload], JobPayload]
"""A change to a queued job's payload (an edited request's new text, say); the payload itself if
it does not apply."""

P = TypeVar("P", bound=JobPayload)
"""The payload model of one kind of job."""


class MalformedJob(ValueError):
    """A stored job's arguments do not fit its kind's model: it can never run, so it is not retried."""


class Abandoned(enum.Enum):
    """Why a job will never be done."""

    STOPPING = "stopping"
    """The embedded queue's process stopped before it reached the job."""
    GAVE_UP = "gave_up"
    """The job was cut short `MAX_ATTEMPTS` times (crashes or restarts mid-run)."""


@dataclass(frozen=True)
class JobKind(Generic[P]):
    """One kind of job: its payload model, how to do it, and what to tell its thread when it will
    never be done."""

    payload: type[P]
    run: Callable[[P, int], Awaitable[None]]
    """Does the job; the int counts earlier attempts that were cut short (0 on the first try),
    so a later attempt knows to resume rather than start."""
    abandon: Callable[[P, Abandoned], Awaitable[None]]

    @property
    def name(self) -> str:
        """The kind's name, as its payloads say."""
        return self.payload.kind

    def read(self, stored: Mapping[str, Any]) -> P:
        """A stored job's arguments as this kind's payload; `MalformedJob` naming what is wrong."""
        try:
            return self.payload.model_validate(stored)
        except ValidationError as exc:
            raise MalformedJob(f"a stored {self.name} job does not fit its payload: {problems(exc)}") from exc


class JobQueue(Protocol):
    """Where the runner puts work: per key (a thread) one job at a time, in submission order."""

    @property
    def durable(self) -> bool:
        """Whether queued and running jobs outlive this process (and so are never abandoned)."""
        ...

    @property
    def busy(self) -> int:
        """Jobs queued or running in this process (for the shutdown log)."""
        ...

    def register(self, kind: JobKind[Any]) -> None:
        """Make `kind` known; every kind is registered before `start`."""
        ...

    async def start(self) -> None:
        """Begin running jobs."""
        ...

    async def submit(self, thread: ThreadKey, payload: JobPayload) -> bool:
        """Queue a job behind the thread's earlier ones; False if the queue no longer takes jobs."""
        ...

    async def submit_claimed(self, jobs: Sequence[tuple[ThreadKey, JobPayload]], connection: Any) -> None:
        """Queue claimed messages' jobs, each behind its thread's earlier ones and in the order given.

        A durable queue inserts them through `connection` (the driver connection of the claims'
        open transaction, see `bot.db.claims`), so that they are queued only if that commits.
        """
        ...

    async def withdraw(self, thread: ThreadKey, message_ts: str) -> list[JobPayload]:
        """Take back the thread's queued (not yet running) jobs about the Slack message `message_ts`;
        their payloads. Finished jobs about it that the queue keeps (PostgreSQL's failed ones) go too."""
        ...

    async def revise_queued(self, thread: ThreadKey, message_ts: str, revise: Revision) -> int:
        """Replace each of the thread's queued (not yet running) jobs about the Slack message
        `message_ts` with `revise(job)`; how many changed."""
        ...

    def every_day(self, name: str, job: Callable[[], Awaitable[None]]) -> None:
        """Run `job` once a day (by one process of all sharing the queue); called before `start`."""
        ...

    async def drain(self, grace: float) -> None:
        """Stop: give running jobs `grace` seconds to finish, then cut them short."""
        ...

    async def job_counts(self) -> dict[str, int]:
        """How many jobs wait (``todo``) and run (``doing``), and on PostgreSQL ended otherwise."""
        ...


# -- shared by both queues ------------------------------------------------------------------------

MAX_ATTEMPTS = 3
"""How many times a job may be cut short (its process crashed or was stopped mid-run) before it is
given up and its thread told; each new attempt resumes from the conversation's checkpoint."""


def message_ts_of(payload: JobPayload) -> str | None:
    """The ts of the Slack message a job is about, if it is about one."""
    message = getattr(payload, "message", None)
    return message.ts if isinstance(message, UserMessage | MessageChange) else None
