"""Which Slack thread a row, a job or a message belongs to, and a person's message there changing.

Pure value types: the store keys a thread's rows by `ThreadKey`, the job queues keep a thread's jobs
in order by it, and the listeners, the runner and the store all speak `MessageChange`.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.vocabulary.workspace import NO_ENTERPRISE, Workspace


def thread_id(workspace: Workspace, channel: str, root_ts: str) -> str:
    """The checkpoint key of one Slack thread: one thread is one conversation.

    A workspace outside Enterprise Grid keeps the key it always had (``team:channel:ts``).
    """
    key = f"{workspace.team}:{channel}:{root_ts}"
    return f"{workspace.enterprise}:{key}" if workspace.enterprise else key


@dataclass(frozen=True)
class ThreadKey:
    """Which Slack thread: its workspace (team, and Enterprise Grid org if any), its channel and
    its root message's ts.

    What the store keys a thread's rows by and the job queues keep a thread's jobs in order by.
    """

    team: str
    channel: str
    thread_ts: str
    """The thread root's ts: a top-level message starts a thread under itself."""
    enterprise: str = NO_ENTERPRISE

    @classmethod
    def of(cls, workspace: Workspace, channel: str, thread_ts: str) -> ThreadKey:
        """The thread `thread_ts` of `channel` in `workspace`."""
        return cls(workspace.team, channel, thread_ts, workspace.enterprise)

    @property
    def workspace(self) -> Workspace:
        """The workspace the thread is in."""
        return Workspace(self.team, self.enterprise)

    @property
    def thread_id(self) -> str:
        """The conversation's checkpoint key (and the durable queue's lock)."""
        return thread_id(self.workspace, self.channel, self.thread_ts)

    def message_key(self, ts: str) -> str:
        """The dedupe key of the thread's message `ts`: its ts in its workspace's channel (channel
        ids alone may repeat across workspaces)."""
        return f"msg:{thread_id(self.workspace, self.channel, ts)}"


class InThread:
    """Where a person's message was written, for the dataclasses that have its `team`, `channel`,
    `thread_ts` and `enterprise` as fields."""

    team: str
    channel: str
    thread_ts: str
    enterprise: str

    @property
    def workspace(self) -> Workspace:
        """The workspace the message was written in: the one whose token answers it."""
        return Workspace(self.team, self.enterprise)

    @property
    def thread(self) -> ThreadKey:
        """The thread the message is in."""
        return ThreadKey(self.team, self.channel, self.thread_ts, self.enterprise)


@dataclass(frozen=True)
class MessageChange(InThread):
    """A person's message in a thread that was deleted (`text`: what it said) or edited (`text`:
    what it says now), as the bot would have read it (mention removed, Slack's escaping undone)."""

    team: str
    channel: str
    thread_ts: str
    ts: str
    text: str
    previous_text: str = ""
    """An edited message's text before the edit (as read the same way); empty for a deletion."""
    enterprise: str = NO_ENTERPRISE
    cut_from: int = 0
    """An edit longer than a request may be: how many characters it had before `text` was cut to
    the limit (0: not cut)."""
