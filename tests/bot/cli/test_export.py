"""`rubric-bot export`'s choice of whose rows: a workspace is found under its Enterprise Grid org
(its rows are filed under both), and an org alone means every workspace of it."""

from __future__ import annotations

import pytest

from bot.cli.export import _tenant
from bot.cli.main import build_parser
from bot.vocabulary.workspace import Organization, Workspace


@pytest.mark.parametrize(
    ("args", "whose"),
    [
        (["--team", "T5", "--enterprise", "E1"], Workspace("T5", "E1")),
        (["--team", "T5"], Workspace("T5")),
        (["--enterprise", "E1"], Organization("E1")),
        ([], None),
    ],
)
def test_team_and_enterprise_name_whose_rows_are_exported(args, whose):
    assert _tenant(build_parser().parse_args(["export", *args])) == whose
