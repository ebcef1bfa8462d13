"""`rubric-bot manifest` and `rubric-bot grade`: what a user sees in the terminal."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from langchain_core.messages import AIMessage

from bot.cli import grade, main
from tests.grading.scripted import ScriptedChatModel, grade_call, payload_of

ROOT = Path(__file__).resolve().parents[2]
RUBRIC = "- Names the capital\n- Mentions the river"


def test_manifest_is_the_repos_manifest_and_a_complete_socket_mode_app(capsys):
    assert main(["manifest"]) == 0
    printed = capsys.readouterr().out

    assert printed == (ROOT / "manifest.yml").read_text()
    manifest = yaml.safe_load(printed)
    assert set(manifest["oauth_config"]["scopes"]["bot"]) == {
        "app_mentions:read",
        "chat:write",
        "commands",
        "channels:history",
        "groups:history",
        "im:history",
        "reactions:write",
        "files:write",
    }
    assert set(manifest["settings"]["event_subscriptions"]["bot_events"]) == {
        "app_mention",
        "message.channels",
        "message.groups",
        "message.im",
    }
    assert manifest["settings"]["interactivity"]["is_enabled"] is True
    assert manifest["settings"]["socket_mode_enabled"] is True
    assert [c["command"] for c in manifest["features"]["slash_commands"]] == ["/rubric"]
    assert "request_url" in printed  # the comments say what to change for HTTP mode


def test_python_dash_m_bot_is_the_same_program():
    result = subprocess.run(
        [sys.executable, "-m", "bot", "manifest"], capture_output=True, text=True, timeout=60
    )

    assert result.returncode == 0
    assert result.stdout == (ROOT / "manifest.yml").read_text()


def river_grader(messages: list[Any]) -> AIMessage:
    latest = payload_of(messages).rsplit("[assistant]", 1)[-1]
    river = "Seine" in latest
    criteria = [
        {"name": "Names the capital", "passed": True},
        {"name": "Mentions the river", "passed": river, "gap": "" if river else "No river named."},
    ]
    result = "satisfied" if river else "needs_revision"
    return grade_call("RubricGrade", {"result": result, "explanation": "Checked.", "criteria": criteria})


async def test_grade_prints_each_iterations_table_then_the_final_answer():
    replies = ["Paris.", "Paris, on the Seine."]
    worker = ScriptedChatModel(script=lambda messages: replies.pop(0))
    out = io.StringIO()

    outcome = await grade(
        RUBRIC,
        "Capital of France?",
        worker=worker,
        grader=ScriptedChatModel(script=river_grader),
        max_iterations=3,
        out=out,
    )

    printed = out.getvalue()
    first, rest = printed.split("Iteration 2/3", 1)
    assert "Iteration 1/3: needs revision" in first
    assert "FAIL    Mentions the river  No river named." in first
    assert "pass    Names the capital" in first
    assert ": rubric satisfied" in rest
    assert "Final status: rubric satisfied (2/3)" in rest
    assert rest.rstrip().endswith("Paris, on the Seine.")
    assert outcome.status == "satisfied"


def test_grade_with_an_invalid_rubric_file_exits_2(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RUBRIC_BOT_MODEL", "openai:gpt-4o-mini")
    rubric = tmp_path / "rubric.yaml"
    rubric.write_text("dimensions: [")

    assert main(["grade", "--rubric", str(rubric), "Some task"]) == 2
    assert "is not a valid rubric" in capsys.readouterr().err


def test_grade_without_a_model_exits_2_naming_the_setting(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RUBRIC_BOT_MODEL", raising=False)
    rubric = tmp_path / "rubric.txt"
    rubric.write_text(RUBRIC)

    assert main(["grade", "--rubric", str(rubric), "Some task"]) == 2
    assert "RUBRIC_BOT_MODEL is not set" in capsys.readouterr().err


def test_grade_with_an_unusable_model_exits_2_naming_the_setting(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RUBRIC_BOT_MODEL", "no-such-provider:some-model")
    rubric = tmp_path / "rubric.txt"
    rubric.write_text(RUBRIC)

    assert main(["grade", "--rubric", str(rubric), "Some task"]) == 2
    err = capsys.readouterr().err
    assert "RUBRIC_BOT_MODEL cannot be used" in err
    assert "RUBRIC_BOT_GRADER_MODEL" not in err  # unset: the grader is the worker's model


@pytest.mark.parametrize("argv", [[], ["serve", "--port", "not-a-number"], ["grade", "task"]])
def test_usage_errors_exit_2(argv, capsys):
    with pytest.raises(SystemExit) as caught:
        main(argv)

    assert caught.value.code == 2
    assert "usage: rubric-bot" in capsys.readouterr().err


def test_an_unusable_grader_model_is_named_separately(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RUBRIC_BOT_MODEL", "openai:gpt-4o-mini")
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    monkeypatch.setenv("RUBRIC_BOT_GRADER_MODEL", "no-such-provider:some-model")
    rubric = tmp_path / "rubric.txt"
    rubric.write_text(RUBRIC)

    assert main(["grade", "--rubric", str(rubric), "Some task"]) == 2
    err = capsys.readouterr().err
    assert "RUBRIC_BOT_GRADER_MODEL cannot be used" in err
    assert "RUBRIC_BOT_MODEL cannot" not in err
