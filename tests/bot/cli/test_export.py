"""`rubric-bot export`'s choice of whose rows: a workspace is found under its Enterprise Grid org
(its rows are filed under both), named with its org or not, and an org alone means every workspace
of it."""

from __future__ import annotations

import pytest

from bot.cli.export import _tenant
from bot.cli.main import build_parser
from bot.db.store import Store
from bot.vocabulary.thread import ThreadKey
from bot.vocabulary.workspace import Organization, Workspace


@pytest.mark.parametrize(
    ("args", "whose"),
    [
        (["--team", "T5", "--enterprise", "E1"], Workspace("T5", "E1")),
        (["--team", "T5"], Workspace("T5", "E1")),  # its data is filed under E1
        (["--team", "T6"], Workspace("T6")),
        (["--enterprise", "E1"], Organization("E1")),
        ([], None),
    ],
)
async def test_team_and_enterprise_name_whose_rows_are_exported(database_url, args, whose):
    store = await Store.open(database_url)
    try:
        await store.add_thread(ThreadKey("T5", "C1", "1.0", enterprise="E1"))
        assert await _tenant(store, build_parser().parse_args(["export", *args])) == whose
    finally:
        await store.close()
