"""`rubric-bot manifest --distributed --url https://HOST`: the manifest of a bot workspaces install
with OAuth, ready to paste."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from bot.cli.main import main
from tests.test_readme import shell_lines

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


ROOT = Path(__file__).resolve().parents[3]
PACKAGED = Path("bot") / "manifest.yml"


def readme_manifest_step() -> str:
    """The README's multi-workspace manifest command, exactly as a reader copies it."""
    (step,) = [line for line in shell_lines() if line.startswith("rubric-bot manifest --distributed")]
    return step


@pytest.fixture
def checkout_copy(tmp_path: Path) -> Path:
    """A copy of this checkout (no .git, no caches) with `rubric-bot` on PATH running its own `bot`."""
    copy = tmp_path / "rubric-bot"
    shutil.copytree(
        ROOT, copy, ignore=shutil.ignore_patterns(".git", ".venv", "__pycache__", "*_cache", "*.sqlite*")
    )
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "rubric-bot"
    shim.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m bot "$@"\n')
    shim.chmod(0o755)
    return copy


def run_in(copy: Path, command: str) -> subprocess.CompletedProcess[str]:
    environment = {
        "PATH": f"{copy.parent / 'bin'}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": str(copy),  # the copy's own `bot`, not the installed one
        "HOME": str(copy.parent),
    }
    return subprocess.run(
        ["/bin/sh", "-c", command], cwd=copy, env=environment, capture_output=True, text=True, timeout=120
    )


def test_the_readmes_multi_workspace_step_leaves_the_packaged_manifest_intact(checkout_copy):
    packaged_before = (checkout_copy / PACKAGED).read_text()
    step = readme_manifest_step()

    result = run_in(checkout_copy, step)

    assert result.returncode == 0, result.stderr
    written = checkout_copy / step.rpartition(">")[2].strip()
    assert yaml.safe_load(written.read_text())["settings"]["socket_mode_enabled"] is False
    assert (checkout_copy / PACKAGED).read_text() == packaged_before
    assert (checkout_copy / "manifest.yml").read_text() == packaged_before  # the checkout's copy too
    again = run_in(checkout_copy, "rubric-bot manifest")
    assert again.returncode == 0 and again.stdout == packaged_before
    assert written.name in (ROOT / ".gitignore").read_text().split()  # the work tree stays clean


def test_redirecting_into_the_checkouts_manifest_yml_overwrites_a_copy_not_the_packaged_file(checkout_copy):
    packaged_before = (checkout_copy / PACKAGED).read_text()

    result = run_in(
        checkout_copy, "rubric-bot manifest --distributed --url https://r.example.com > manifest.yml"
    )

    assert result.returncode == 0, result.stderr
    assert not (checkout_copy / "manifest.yml").is_symlink()
    assert (checkout_copy / PACKAGED).read_text() == packaged_before
    assert run_in(checkout_copy, "rubric-bot manifest").stdout == packaged_before


@pytest.mark.parametrize("redirect", [">", ">>"], ids=["truncating", "appending"])
def test_manifest_refuses_to_write_into_the_packaged_file_it_reads(checkout_copy, redirect):
    packaged = checkout_copy / PACKAGED
    before = packaged.read_text()

    result = run_in(
        checkout_copy, f"rubric-bot manifest --distributed --url https://r.example.com {redirect} {PACKAGED}"
    )

    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert f"stdout is {packaged}, the packaged manifest this command reads" in line
    assert "git checkout bot/manifest.yml" in line
    # Appending leaves it as it was; a truncating redirect emptied it before the command ran.
    assert packaged.read_text() == (before if redirect == ">>" else "")
    if redirect == ">":  # and what the bot says of an emptied manifest is one line, not a traceback
        damaged = run_in(checkout_copy, "rubric-bot manifest")
        assert damaged.returncode == 2 and damaged.stdout == ""
        (line,) = damaged.stderr.strip().splitlines()
        assert "is empty or not an app manifest: restore it (git checkout bot/manifest.yml" in line


def test_the_checkouts_manifest_is_a_real_file_equal_to_the_packaged_one():
    root = ROOT / "manifest.yml"

    assert not root.is_symlink()
    assert root.read_text() == (ROOT / PACKAGED).read_text(), (
        "manifest.yml is generated from bot/manifest.yml: run rubric-bot manifest > manifest.yml"
    )
