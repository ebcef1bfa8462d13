"""`--team` and `--enterprise` as the terminal commands take them: a workspace named by its team id
alone is found under whichever Enterprise Grid org its data is filed (a workspace of an org, whether
the org-wide installation or its own serves it, has every row filed under the org's id as well)."""

from __future__ import annotations

import argparse

from bot.config import ConfigError
from bot.db.store import Store
from bot.vocabulary.workspace import NO_ENTERPRISE, Workspace

ENTERPRISE_HELP = (
    "with --team: the Enterprise Grid org (E0123ABCD) of the workspace; needed only if its data is "
    "filed under more than one (the workspace joined an org)"
)
"""The `--enterprise` option's help where it qualifies `--team`."""


def add_team_options(parser: argparse.ArgumentParser, team_help: str) -> None:
    """`--team T` and the `--enterprise E` that qualifies it."""
    parser.add_argument("--team", metavar="T", help=team_help)
    parser.add_argument("--enterprise", metavar="E", help=ENTERPRISE_HELP)


def require_team_for_enterprise(args: argparse.Namespace) -> None:
    """A `ConfigError` for an `--enterprise` given without the `--team` it qualifies."""
    if args.enterprise and not args.team:
        raise ConfigError(["--enterprise names the org of the workspace given with --team; add --team T"])


async def team_workspace(store: Store, team: str, enterprise: str | None) -> Workspace:
    """Workspace `team` of org `enterprise` when given, else of the one org (or none) the database
    files its data under; a `ConfigError` naming the orgs when there are several."""
    if enterprise:
        return Workspace(team, enterprise)
    orgs = await store.enterprises_of(team)
    if len(orgs) > 1:
        named = ", ".join(org or "none" for org in orgs)
        raise ConfigError(
            [
                f"workspace {team} has data filed under more than one Enterprise Grid org ({named}): "
                "add --enterprise E to name one"
            ]
        )
    return Workspace(team, orgs[0] if orgs else NO_ENTERPRISE)
