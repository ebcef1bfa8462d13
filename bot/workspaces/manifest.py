"""The Slack app manifest shipped with the package, and its variant for a distributed (OAuth) app.

The manifest is the one source of the scopes and events the bot needs: installations ask for its
bot scopes unless `RUBRIC_BOT_SCOPES` says otherwise, and `rubric-bot manifest --distributed`
fills in the URLs of one deployment.
"""

from __future__ import annotations

from importlib.resources import files
from typing import Any

import yaml

from bot.slack.http import EVENTS_PATH, INSTALL_PATH, OAUTH_REDIRECT_PATH

UNINSTALL_EVENTS = ("app_uninstalled", "tokens_revoked")
"""Events a distributed app subscribes to so that a workspace that removes the bot (or revokes its
token) has its installation deleted and its queued work dropped."""


def manifest_text() -> str:
    """The Slack app manifest shipped with the package (same file as the repo's manifest.yml)."""
    return files("bot").joinpath("manifest.yml").read_text(encoding="utf-8")


def manifest() -> dict[str, Any]:
    """The shipped manifest, parsed."""
    parsed: dict[str, Any] = yaml.safe_load(manifest_text())
    return parsed


def bot_scopes() -> tuple[str, ...]:
    """The bot scopes the manifest asks for: what an OAuth installation asks for by default."""
    return tuple(manifest()["oauth_config"]["scopes"]["bot"])


def distributed_manifest(base_url: str) -> str:
    """The manifest for an app installed into many workspaces from `base_url` (``https://HOST``).

    Slack's requests go to ``/slack/events`` over HTTP (Socket Mode off), installers come back to
    ``/slack/oauth_redirect``, the app may be installed org-wide on Enterprise Grid, and it hears
    when a workspace uninstalls it.
    """
    base = base_url.rstrip("/")
    app = manifest()
    app["oauth_config"]["redirect_urls"] = [base + OAUTH_REDIRECT_PATH]
    for command in app["features"]["slash_commands"]:
        command["url"] = base + EVENTS_PATH
    settings = app["settings"]
    events = settings["event_subscriptions"]
    events["request_url"] = base + EVENTS_PATH
    events["bot_events"] = list(dict.fromkeys([*events["bot_events"], *UNINSTALL_EVENTS]))
    settings["interactivity"]["request_url"] = base + EVENTS_PATH
    settings["socket_mode_enabled"] = False
    settings["org_deploy_enabled"] = True
    header = (
        f"# rubric-bot's Slack app manifest for offering the bot to many workspaces from {base}.\n"
        f"# Workspaces install it at {base}{INSTALL_PATH}; see the README, "
        '"Offering the bot to many workspaces".\n'
    )
    return header + yaml.safe_dump(app, sort_keys=False, allow_unicode=True)
