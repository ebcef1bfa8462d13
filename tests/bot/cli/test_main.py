"""`rubric-bot manifest` and `rubric-bot grade`: what a user sees in the terminal."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
import yaml
from langchain_core.messages import AIMessage

from bot.assistant.prompts import SUGGESTED_PROMPTS
from bot.cli.grade import grade
from bot.cli.main import CLI_SUBCOMMANDS, main
from tests.documents import pdf_bytes
from tests.e2e.conftest import SCRUBBED_ENV_PREFIXES
from tests.grading.scripted import ScriptedChatModel, grade_call, grader_wanting
from tests.standins.model_api import REVISED_ANSWER, ModelApiStandin, fixed_grader, scripted_revision

ROOT = Path(__file__).resolve().parents[3]
MAX_AGENT_PROMPTS = 4
"""Most suggested prompts the manifest's ``agent_view`` takes."""
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
        "usergroups:read",
        "im:history",
        "reactions:write",
        "files:write",
        "files:read",
        "users:read",
        "channels:read",
        "groups:read",
        "assistant:write",
    }
    assert set(manifest["settings"]["event_subscriptions"]["bot_events"]) == {
        "app_mention",
        "message.channels",
        "message.groups",
        "message.im",
        "app_home_opened",
        "app_uninstalled",
        "tokens_revoked",
        "assistant_thread_started",
        "assistant_thread_context_changed",
        "agent_session_stopped",
    }
    assert manifest["features"]["app_home"]["home_tab_enabled"] is True
    assert manifest["settings"]["interactivity"]["is_enabled"] is True
    assert manifest["settings"]["socket_mode_enabled"] is True
    assert [c["command"] for c in manifest["features"]["slash_commands"]] == ["/rubric"]
    assert "request_url" in printed  # the comments say what to change for HTTP mode


@pytest.mark.parametrize(
    "argv",
    [["manifest"], ["manifest", "--distributed", "--url", "https://bot.example"]],
    ids=["socket", "oauth"],
)
def test_the_manifest_declares_the_agent_view_with_the_panes_prompts_and_keeps_the_pane(capsys, argv):
    assert main(argv) == 0
    features = yaml.safe_load(capsys.readouterr().out)["features"]

    agent = features["agent_view"]
    assert "rubric" in agent["agent_description"] and "Stop" in agent["agent_description"]
    assert agent["suggested_prompts"] == [dict(p) for p in SUGGESTED_PROMPTS][:MAX_AGENT_PROMPTS]
    assert features["assistant_view"]["assistant_description"]


def test_python_dash_m_bot_is_the_same_program():
    result = subprocess.run(
        [sys.executable, "-m", "bot", "manifest"], capture_output=True, text=True, timeout=60
    )

    assert result.returncode == 0
    assert result.stdout == (ROOT / "manifest.yml").read_text()


async def test_grade_prints_each_iterations_table_then_the_final_answer():
    replies = ["Paris.", "Paris, on the Seine."]
    worker = ScriptedChatModel(script=lambda messages: replies.pop(0))
    out = io.StringIO()

    outcome = await grade(
        RUBRIC,
        "Capital of France?",
        worker=worker,
        grader=ScriptedChatModel(script=grader_wanting("Seine")),
        max_iterations=3,
        out=out,
    )

    printed = out.getvalue()
    first, rest = printed.split("Iteration 2/3", 1)
    assert "Iteration 1/3: needs revision" in first
    assert "FAIL    Mentions the river  No river named." in first
    assert "grader: 1 call · 10 in · 5 out" in first
    assert "pass    Names the capital" in first
    assert ": rubric satisfied" in rest
    assert "Final status: rubric satisfied (2/3)" in rest
    assert rest.rstrip().endswith("Paris, on the Seine.")
    assert outcome.status == "satisfied"


async def test_grade_stops_a_grader_at_its_call_budget_and_says_how_many_calls_it_took():
    grader = ScriptedChatModel(script=lambda messages: "I would rather chat.")
    out = io.StringIO()

    outcome = await grade(
        RUBRIC,
        "Capital of France?",
        worker=ScriptedChatModel(script=lambda messages: "Paris."),
        grader=grader,
        max_iterations=3,
        max_grader_calls=2,
        out=out,
    )

    assert len(grader.calls) == 2
    assert outcome.status == "grader_error"
    assert "it used all 2 model calls this iteration allows" in out.getvalue()
    assert "grader: 2 calls" in out.getvalue()


async def test_grade_shows_what_the_grader_flagged_outside_the_rubric_next_to_satisfied():
    def grader(messages: list[Any]) -> AIMessage:
        criteria = [
            {"name": "Names the capital", "passed": True},
            {"name": "Mentions the river", "passed": True},
            {"name": "Gives the population", "passed": False, "gap": "No population given."},
        ]
        explanation = "One criterion is not met yet."
        return grade_call(
            "RubricGrade", {"result": "needs_revision", "explanation": explanation, "criteria": criteria}
        )

    out = io.StringIO()
    outcome = await grade(
        RUBRIC,
        "Capital of France?",
        worker=ScriptedChatModel(script=lambda messages: "Paris, on the Seine."),
        grader=ScriptedChatModel(script=grader),
        max_iterations=3,
        out=out,
    )

    printed = out.getvalue()
    assert outcome.status == "satisfied"  # the rubric's own criteria decide
    assert printed.startswith(
        "Iteration 1/3: rubric satisfied; the grader also flagged 1 failing item outside the rubric\n"
    )
    flagged = printed.split("the grader also flagged (not in the rubric, so not part of the verdict):\n", 1)[
        1
    ]
    assert flagged.startswith("  FAIL    Gives the population  No population given.\n")


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


def test_worker_on_a_sqlite_file_exits_2_saying_it_needs_postgresql(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-test")
    monkeypatch.setenv("RUBRIC_BOT_MODEL", "openai:gpt-4o-mini")
    monkeypatch.setenv("RUBRIC_BOT_DB", str(tmp_path / "bot.sqlite"))

    assert main(["worker"]) == 2
    err = capsys.readouterr().err
    assert "RUBRIC_BOT_DB is a SQLite file" in err and "postgresql://" in err
    assert not (tmp_path / "bot.sqlite").exists()


def test_grade_with_an_unusable_model_exits_2_naming_the_setting(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RUBRIC_BOT_MODEL", "no-such-provider:some-model")
    rubric = tmp_path / "rubric.txt"
    rubric.write_text(RUBRIC)

    assert main(["grade", "--rubric", str(rubric), "Some task"]) == 2
    err = capsys.readouterr().err
    assert "RUBRIC_BOT_MODEL cannot be used" in err
    assert "RUBRIC_BOT_GRADER_MODEL" not in err  # unset: the grader is the worker's model


@pytest.mark.parametrize(
    "argv",
    [[], ["serve", "--port", "not-a-number"], ["grade", "task"], ["grade", "--rubric", "r.txt"]],
)
def test_usage_errors_exit_2_with_one_line_pointing_at_help(argv, capsys):
    with pytest.raises(SystemExit) as caught:
        main(argv)

    assert caught.value.code == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1
    assert err.startswith("rubric-bot") and "--help)" in err


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://bot:Pa55-w0rd@db.internal:port/rubric",  # a port that is not a number
        "postgresql://bot:Pa55-w0rd@db.internal/",  # no database
        "mysql://bot:Pa55-w0rd@db.internal/rubric",  # not supported
    ],
)
def test_a_db_argument_that_is_no_database_is_one_line_without_its_password(url, capsys):
    with pytest.raises(SystemExit) as caught:
        main(["usage", "--db", url])

    assert caught.value.code == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "is not a database" in err
    assert "Pa55-w0rd" not in err and "bot:***@db.internal" in err


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


# -- `grade` as scripts use it: the models are the OpenAI stand-in, reached through the real client ----

CRITERIA = ["Names the capital", "Mentions the river"]


@pytest.fixture
def model_api(tmp_path, monkeypatch) -> Iterator[ModelApiStandin]:
    """The model stand-in as the configured provider; runs in an empty directory (no stray .env)."""
    monkeypatch.chdir(tmp_path)
    for name in list(os.environ):
        if name.startswith(SCRUBBED_ENV_PREFIXES):
            monkeypatch.delenv(name)
    with ModelApiStandin() as api:
        monkeypatch.setenv("RUBRIC_BOT_MODEL", "openai:gpt-4o-mini")
        monkeypatch.setenv("OPENAI_BASE_URL", api.base_url)
        # langchain-openai caches its HTTP client per OPENAI_API_BASE and the client keeps the event
        # loop of its first use; a per-test URL keeps each test's `asyncio.run` to its own client.
        monkeypatch.setenv("OPENAI_API_BASE", api.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test")
        monkeypatch.setenv("RUBRIC_BOT_MAX_ITERATIONS", "2")
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        api.worker, api.grader = scripted_revision(CRITERIA)
        yield api


@pytest.fixture
def rubric_file(tmp_path) -> Path:
    path = tmp_path / "rubric.txt"
    path.write_text(RUBRIC)
    return path


def test_grade_exits_0_when_the_rubric_is_satisfied(model_api, rubric_file, capsys):
    assert main(["grade", "--rubric", str(rubric_file), "Capital of France?"]) == 0
    assert capsys.readouterr().out.rstrip().endswith(REVISED_ANSWER)


def test_grade_attaches_files_read_as_in_slack_for_the_worker_and_the_grader(
    model_api, rubric_file, tmp_path, capsys
):
    notes = tmp_path / "notes.md"
    notes.write_bytes(b"# Notes\nThe launch city is Lyon \xff")
    spec = tmp_path / "spec.pdf"
    spec.write_bytes(pdf_bytes("Page one: Lyon", "Page two: budget 5k"))
    photo = tmp_path / "photo.png"
    photo.write_bytes(b"\x89PNG\r\n\x1a\n")

    code = main(
        ["grade", "--rubric", str(rubric_file), "Which city?", "--attach", str(notes), str(spec), str(photo)]
    )

    assert code == 0
    out = capsys.readouterr().out
    assert "Read: notes.md" in out and "Read: spec.pdf" in out
    assert "Not read: photo.png: an image" in out
    worker = model_api.requests("worker")[0].last_user_text
    assert worker.startswith("Which city?") and 'name="notes.md"' in worker and "Lyon \ufffd" in worker
    assert "--- page 2 ---\nPage two: budget 5k" in worker and "photo.png: an image" in worker
    assert all("Page two: budget 5k" in r.all_text for r in model_api.requests("grader"))


def test_grade_with_a_missing_attachment_exits_2_naming_it(model_api, rubric_file, tmp_path, capsys):
    assert (
        main(["grade", "--rubric", str(rubric_file), "Which city?", "--attach", str(tmp_path / "gone.txt")])
        == 2
    )
    assert "cannot read" in capsys.readouterr().err and model_api.requests() == []


def test_grade_exits_3_when_the_iterations_run_out(model_api, rubric_file, capsys):
    model_api.grader = fixed_grader(CRITERIA, failing=["Mentions the river"])

    assert main(["grade", "--rubric", str(rubric_file), "Capital of France?"]) == 3
    assert "Final status: max iterations reached (2/2)" in capsys.readouterr().out


def test_grade_exits_4_when_the_grader_fails(model_api, rubric_file, capsys):
    model_api.fail_next(400, times=2, role="grader")  # 400s are not retried by the client

    assert main(["grade", "--rubric", str(rubric_file), "Capital of France?"]) == 4
    assert "Final status: grader error" in capsys.readouterr().out


def test_grade_exits_5_when_the_grader_finds_the_rubric_unusable(model_api, rubric_file, capsys):
    explanation = "The two criteria contradict each other."
    model_api.grader = lambda request: {"result": "failed", "explanation": explanation, "criteria": []}

    assert main(["grade", "--rubric", str(rubric_file), "Capital of France?"]) == 5
    out = capsys.readouterr().out
    assert "Final status: failed (1/2)" in out and explanation in out


def test_grade_exits_1_with_one_line_when_the_worker_model_fails(model_api, rubric_file, capsys):
    model_api.fail_next(400, role="worker")

    assert main(["grade", "--rubric", str(rubric_file), "Capital of France?"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("rubric-bot: the run failed: ") and "400" in err and len(err.splitlines()) == 1


def test_every_grade_exit_code_is_documented_in_help_and_readme(capsys):
    with pytest.raises(SystemExit):
        main(["grade", "--help"])
    help_text = capsys.readouterr().out
    readme = (ROOT / "README.md").read_text()

    for code in ("0", "1", "2", "3", "4", "5"):
        assert f"\n  {code}  " in help_text
        assert f"| `{code}` |" in readme


def test_grade_reads_a_dash_request_from_stdin(model_api, rubric_file, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO("Capital of France, from a pipe?\n"))

    assert main(["grade", "--rubric", str(rubric_file), "-"]) == 0
    assert model_api.requests("worker")[0].last_user_text.startswith("Capital of France, from a pipe?")


def test_grade_reads_a_request_too_long_for_the_command_line_from_a_file(model_api, rubric_file, tmp_path):
    request = tmp_path / "request.txt"
    # Linux caps one argument at 128 KiB (MAX_ARG_STRLEN); this one is 320 KB.
    request.write_text("Capital of France? " + "context " * 40_000)

    assert main(["grade", "--rubric", str(rubric_file), "--file", str(request)]) == 0
    assert model_api.requests("worker")[0].last_user_text == request.read_text()


@pytest.mark.parametrize("request_text", ["", "  \n\t "])
def test_an_empty_request_is_refused_before_any_model_call(model_api, rubric_file, capsys, request_text):
    assert main(["grade", "--rubric", str(rubric_file), request_text]) == 2
    assert "the request is empty" in capsys.readouterr().err
    assert model_api.requests() == []


def test_grade_exits_quietly_when_its_reader_goes_away(model_api, rubric_file):
    """`rubric-bot grade … | head -1`: the reader closes the pipe while the run still writes."""
    process = subprocess.Popen(
        [sys.executable, "-m", "bot", "grade", "--rubric", str(rubric_file), "Capital of France?"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=dict(os.environ),
    )
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()  # before the first iteration is printed, so every write finds it closed
    err = process.stderr.read().decode()

    assert process.wait(timeout=60) == 141  # what the shell reports for a tool ended by SIGPIPE
    assert err == ""


HELP_MUST_NAME = {
    "serve": ("SLACK_BOT_TOKEN", "SLACK_APP_TOKEN", "SLACK_SIGNING_SECRET", "RUBRIC_BOT_MODEL", ".env"),
    "manifest": ("manifest.yml", "Reads no settings"),
    "grade": (
        "RUBRIC_BOT_MODEL",
        "OPENAI_API_KEY",
        "RUBRIC_BOT_MAX_ITERATIONS",
        ".env",
        "one per line",
        "YAML",
    ),
    "report": ("RUBRIC_BOT_DB", ".env", "never writes", "#name", "SLACK_BOT_TOKEN"),
    "db": ("RUBRIC_BOT_DB", ".env", "db upgrade", "db copy", "postgresql://"),
    "worker": ("SLACK_BOT_TOKEN", "RUBRIC_BOT_MODEL", "RUBRIC_BOT_DB", "postgresql://", ".env"),
    "usage": ("RUBRIC_BOT_DB", ".env", "per channel, per person and per UTC day", "DAILY_TOKENS_PER_CHANNEL"),
    "replay": ("RUBRIC_BOT_DB", "RUBRIC_BOT_GRADER_MODEL", "RUBRIC_BOT_MODEL", ".env", "Ctrl-C", "130"),
    "export": ("RUBRIC_BOT_DB", ".env", "never exported", "needs no Slack or model keys", "--reviewed-only"),
}


@pytest.mark.parametrize("name", [subcommand.name for subcommand in CLI_SUBCOMMANDS])
def test_every_subcommand_help_describes_it_and_names_the_settings_it_reads(name, capsys):
    with pytest.raises(SystemExit) as caught:
        main([name, "--help"])
    text = " ".join(capsys.readouterr().out.split())  # unwrapped

    assert caught.value.code == 0
    for words in HELP_MUST_NAME[name]:
        assert words in text


def test_version_prints_the_installed_version(capsys):
    with pytest.raises(SystemExit) as caught:
        main(["--version"])

    assert caught.value.code == 0
    assert capsys.readouterr().out.strip() == f"rubric-bot {version('rubric-bot')}"
