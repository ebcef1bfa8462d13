"""`rubric-bot manifest --distributed --url https://HOST`: the manifest of a bot workspaces install
with OAuth, ready to paste."""

from __future__ import annotations

import pytest
import yaml

from bot.cli.main import main

HOST = "https://rubric.example.com"


def test_the_distributed_manifest_fills_in_the_urls_and_turns_socket_mode_off(capsys):
    assert main(["manifest", "--distributed", "--url", HOST + "/"]) == 0
    manifest = yaml.safe_load(capsys.readouterr().out)

    settings = manifest["settings"]
    assert manifest["oauth_config"]["redirect_urls"] == [f"{HOST}/slack/oauth_redirect"]
    assert settings["event_subscriptions"]["request_url"] == f"{HOST}/slack/events"
    assert settings["interactivity"]["request_url"] == f"{HOST}/slack/events"
    assert [c["url"] for c in manifest["features"]["slash_commands"]] == [f"{HOST}/slack/events"]
    assert settings["socket_mode_enabled"] is False
    assert settings["org_deploy_enabled"] is True  # Enterprise Grid orgs may install it org-wide
    assert {"app_uninstalled", "tokens_revoked"} <= set(settings["event_subscriptions"]["bot_events"])
    # Everything else is the shipped manifest's: the same scopes and the same commands.
    main(["manifest"])
    shipped = yaml.safe_load(capsys.readouterr().out)
    assert manifest["oauth_config"]["scopes"] == shipped["oauth_config"]["scopes"]


@pytest.mark.parametrize(
    "args",
    [["--distributed"], ["--url", HOST], ["--distributed", "--url", "http://rubric.example.com"]],
    ids=["no-url", "url-alone", "not-https"],
)
def test_a_distributed_manifest_needs_an_https_url_and_says_so_in_one_line(args, capsys):
    try:
        code = main(["manifest", *args])
    except SystemExit as exit_info:  # argparse's own refusal of the --url value
        code = exit_info.code

    assert code == 2
    printed = capsys.readouterr()
    errors = printed.err.strip().splitlines()
    assert printed.out == "" and len(errors) == 1 and ("https" in errors[0] or "--url" in errors[0])


@pytest.mark.parametrize("args", [[], ["--distributed", "--url", HOST]], ids=["shipped", "distributed"])
def test_both_manifests_declare_the_assistant_pane_with_its_scope_and_events(args, capsys):
    assert main(["manifest", *args]) == 0
    manifest = yaml.safe_load(capsys.readouterr().out)

    assert manifest["features"]["assistant_view"]["assistant_description"].strip()
    assert "assistant:write" in manifest["oauth_config"]["scopes"]["bot"]
    events = manifest["settings"]["event_subscriptions"]["bot_events"]
    assert {"assistant_thread_started", "assistant_thread_context_changed", "message.im"} <= set(events)
