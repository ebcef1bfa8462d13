"""What a request asks to have read besides its text: part of the request job's payload."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from bot.material.files import SharedFile


class Sources(BaseModel):
    """What a request asks the runner to read besides its text (part of the request job's payload)."""

    model_config = ConfigDict(frozen=True)

    files: tuple[SharedFile, ...] = ()
    bot_user_id: str = ""
    """The bot's user id: its own messages are left out of a thread's earlier messages."""
