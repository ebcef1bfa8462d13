"""Deletions and edits of people's messages, kept until they are applied."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Literal

from sqlalchemy import delete, insert, select

from bot.db.base import StoreBase
from bot.db.schema import message_changes
from bot.db.scope import thread_columns, utc_now
from bot.vocabulary.thread import MessageChange

ChangeKind = Literal["forget", "revise"]
"""What a kept message change asks: a deleted message forgotten, or an edited one's stored copy revised."""


@dataclass(frozen=True)
class PendingChange:
    """A deletion or edit kept until it is applied (see `Store.record_change`)."""

    change_id: int
    kind: ChangeKind
    change: MessageChange


class MessageChangeStore(StoreBase):
    """Deletions and edits waiting to be applied."""

    async def record_change(self, kind: ChangeKind, change: MessageChange) -> int:
        """Keep a deletion or edit until it is applied (see `message_changes`); its id."""
        row = {
            **thread_columns(change.thread),
            "kind": kind,
            "change": asdict(change),
            "received_at": utc_now(),
        }
        async with self._write() as connection:
            result = await connection.execute(
                insert(message_changes).values(row).returning(message_changes.c.change_id)
            )
            return int(result.scalar_one())

    async def change_applied(self, change_id: int) -> None:
        """Forget a kept deletion or edit once it is applied."""
        async with self._write() as connection:
            await connection.execute(delete(message_changes).where(message_changes.c.change_id == change_id))

    async def pending_changes(self) -> list[PendingChange]:
        """The deletions and edits kept and not applied yet, in the order they came."""
        query = select(message_changes.c.change_id, message_changes.c.kind, message_changes.c.change)
        rows = await self._rows(query.order_by(message_changes.c.change_id))
        return [PendingChange(row.change_id, row.kind, MessageChange(**row.change)) for row in rows]
