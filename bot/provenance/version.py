"""Which rubric version a run grades against: the channel's history number, or a thread rubric's hash."""

from __future__ import annotations

from bot.db.store import Store
from bot.threads.conversation import ThreadKey
from grading import text_hash

VERSIONS_SCANNED = 100
"""The latest channel rubric versions searched for the run's rubric text; an older match (or a
thread's own rubric) is named by its hash instead, which identifies it as well."""


async def rubric_version(store: Store, thread: ThreadKey, rubric_text: str) -> str:
    """``v3`` when `rubric_text` is (the latest) version 3 of the channel's default rubric, else
    ``#`` and the text's hash: a thread's own rubric has no number."""
    versions = await store.rubric_versions(thread.workspace, thread.channel, VERSIONS_SCANNED)
    number = next((v.version for v in versions if v.rubric_text == rubric_text), None)
    return f"v{number}" if number is not None else f"#{text_hash(rubric_text)}"
