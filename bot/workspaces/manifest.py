"""The Slack app manifest shipped with the package, and its variant for a distributed (OAuth) app.

The manifest is the one source of the scopes and events the bot needs: installations ask for its
bot scopes unless `RUBRIC_BOT_SCOPES` says otherwise, and `rubric-bot manifest --distributed`
fills in the URLs of one deployment. The repository's root ``manifest.yml`` is a copy of the
packaged file (``rubric-bot manifest > manifest.yml`` writes it; a test keeps the two equal), so a
shell redirect into the checkout's ``manifest.yml`` can never empty the file the bot reads.
"""

from __future__ import annotations

import os
from importlib.resources import files
from pathlib import Path
from typing import Any

import yaml

from bot.config import ConfigError
from bot.slack.http import EVENTS_PATH, INSTALL_PATH, OAUTH_REDIRECT_PATH

UNINSTALL_EVENTS = ("app_uninstalled", "tokens_revoked")
"""Events a distributed app subscribes to so that a workspace that removes the bot (or revokes its
token) has its installation deleted and its queued work dropped."""


PACKAGED_MANIFEST = "manifest.yml"
"""The manifest's file name inside the `bot` package: the one source of the app's scopes and events."""


class DamagedManifest(ConfigError):
    """The packaged manifest is missing, empty or not a Slack app manifest (a settings problem: the
    bot cannot start, nor ask for its scopes); its one line says how to restore it."""


RESTORE = (
    ": restore it (git checkout bot/manifest.yml in a checkout; reinstall rubric-bot otherwise). "
    "Write a generated manifest to a file of its own, e.g. rubric-bot manifest > slack-manifest.yml"
)
"""How a damaged packaged manifest is put right, ending every line that reports one."""


def packaged_manifest_path() -> Path:
    """Where the packaged manifest is on disk (the checkout's ``bot/manifest.yml`` in an editable install)."""
    return Path(str(files("bot").joinpath(PACKAGED_MANIFEST)))


def manifest_text() -> str:
    """The Slack app manifest shipped with the package (the repository's manifest.yml is a copy)."""
    path = packaged_manifest_path()
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        reason = exc.strerror
        raise DamagedManifest([f"cannot read the packaged manifest {path} ({reason}){RESTORE}"]) from None
    if not isinstance(yaml.safe_load(text), dict):
        raise DamagedManifest([f"the packaged manifest {path} is empty or not an app manifest{RESTORE}"])
    return text


def is_packaged_manifest(descriptor: int) -> bool:
    """Whether the open file `descriptor` (e.g. stdout) is the packaged manifest itself, as after
    ``rubric-bot manifest > bot/manifest.yml``: writing there would destroy what is being read."""
    try:
        return os.path.samestat(os.fstat(descriptor), packaged_manifest_path().stat())
    except OSError:
        return False


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
