"""`rubric-bot replay` in the terminal, against a seeded database and the model stand-in over HTTP.

The database is seeded as the bot fills it (tests/bot/agreement/replay_seed.py). The candidate grader is
`openai:gpt-4o-mini` served by the local OpenAI-compatible stand-in, which grades like the
scripted replayed grader: it fails "Is polite" only when shown a team example on the same topic.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from PIL import Image
from sklearn.metrics import cohen_kappa_score

from bot.cli.main import main
from tests.bot.agreement.chart_reading import PNG_SIGNATURE
from tests.bot.agreement.replay_seed import (
    CASES,
    IMPOLITE,
    REVIEWED_FIRST_DRAFTS,
    TOPICS,
    replayed_grade,
    seed,
)
from tests.e2e.conftest import SCRUBBED_ENV_PREFIXES
from tests.standins import wait_for
from tests.standins.model_api import NO_ANSWER, ModelApiStandin

ROOT = Path(__file__).resolve().parents[3]
MODEL = "openai:gpt-4o-mini"
INTERRUPT_TIMEOUT = 120.0  # bound for the replay to get going (start-up included), and to stop after Ctrl-C
CLI_TIMEOUT = 300.0  # bound for one whole replay of the seeded database (start-up included)


@pytest.fixture
def model_api() -> Iterator[ModelApiStandin]:
    with ModelApiStandin() as api:
        api.grader = lambda request: replayed_grade(request.last_user_text)
        yield api


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, model_api: ModelApiStandin) -> Path:
    monkeypatch.chdir(tmp_path)  # no .env from the developer's checkout
    for name in list(os.environ):
        if name.startswith(SCRUBBED_ENV_PREFIXES):
            monkeypatch.delenv(name)
    monkeypatch.setenv("OPENAI_BASE_URL", model_api.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    path = tmp_path / "bot.sqlite"
    asyncio.run(seed(path))
    return path


def as_from_a_terminal() -> None:
    """Give the replay Ctrl-C's default effect, as a shell at a terminal does: tests started in the
    background by a shell without job control inherit SIGINT ignored, and so would the replay."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def replay(db: Path, *args: str) -> list[str]:
    return ["replay", "--db", str(db), "--grader-model", MODEL, *args]


def run_replay(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`rubric-bot replay` in a process of its own, as a user runs it (one event loop per process:
    the provider's HTTP client is cached per process and cannot outlive its loop)."""
    command = [sys.executable, "-m", "bot", *replay(db, *args)]
    return subprocess.run(command, capture_output=True, text=True, timeout=CLI_TIMEOUT, check=False)


def test_loo_replay_reports_the_gain_over_the_original_grader_as_json_and_chart(
    db, model_api, capsys, tmp_path
):
    chart = tmp_path / "replay.png"
    assert main(replay(db, "--calibration", "loo", "--json", "--chart", str(chart))) == 0
    result = json.loads(capsys.readouterr().out)

    polite = next(row for row in result["criteria"] if row["criterion"] == "Is polite")
    team = [False] * IMPOLITE + [True] * (len(TOPICS) - IMPOLITE + len(REVIEWED_FIRST_DRAFTS))
    original = [True] * len(team)  # the grader at the time passed every answer's politeness
    replayed = [False] * 4 + [True] * (len(team) - 4)  # topic D had no other example to learn from
    assert (polite["kind"], polite["n"]) == ("pass/fail", CASES)
    assert polite["before"]["agreement"] == pytest.approx(14 / 19)
    assert polite["after"]["agreement"] == pytest.approx(18 / 19)
    assert polite["before"]["kappa"] == pytest.approx(cohen_kappa_score(team, original))
    assert polite["after"]["kappa"] == pytest.approx(cohen_kappa_score(team, replayed))
    low, high = polite["difference"]["kappa_interval"]
    assert 0 < low <= polite["difference"]["kappa"] <= high
    assert [row["criterion"] for row in result["overall"]] == ["All criteria"]
    assert result["cases"] == {"compared": CASES, "planned": CASES, "skipped": [], "failed": []}
    assert [(f["criterion"], f["before"], f["after"], f["effect"]) for f in result["flipped"]] == [
        ("Is polite", "pass", "fail", "fixed")
    ] * 4
    assert result["tokens"]["input_tokens"] > 0 and result["tokens"]["output_tokens"] > 0
    assert len(model_api.requests("grader")) == CASES
    assert chart.read_bytes().startswith(PNG_SIGNATURE)
    assert Image.open(chart).size[0] > 600


def test_the_table_names_both_graders_and_lists_the_flips(db):
    finished = run_replay(db, "--calibration", "loo", "--rubric-match", "IS POLITE")
    assert finished.returncode == 0, finished.stderr
    output = finished.stdout

    assert output.startswith(f"Replay: {MODEL} · calibration loo vs original grader\n19 cases compared")
    polite = next(line for line in output.splitlines() if line.startswith("Is polite"))
    assert "74%" in polite and "95%" in polite and "0.85" in polite
    assert "Flipped verdicts (4: 4 now match the team, 0 no longer do):" in output
    assert "C1 thread 100.0 iteration 2 · Is polite: pass → fail (team: fail; now matches the team)" in output


def test_dry_run_counts_cases_and_tokens_without_calling_the_model(db, capsys, model_api):
    assert main(replay(db, "--calibration", "loo", "--dry-run")) == 0
    output = capsys.readouterr().out
    assert output.startswith(f"Would replay {CASES} reviewed iteration(s) with {MODEL} · calibration loo")
    assert "roughly" in output and " tokens" in output
    assert model_api.requests() == []

    assert main(replay(db, "--dry-run", "--json", "--channel", "C9")) == 0
    assert json.loads(capsys.readouterr().out) == {
        "cases": 0,
        "skipped": 0,
        "with_material": 0,
        "estimated_tokens": 0,
    }


def test_a_candidate_prompt_and_calibration_as_at_the_time_on_the_latest_cases(db, model_api, tmp_path):
    prompt = tmp_path / "strict.txt"
    prompt.write_text("You are the strictest grader alive.")
    finished = run_replay(db, "--prompt", str(prompt), "--limit", "3", "--json")
    assert finished.returncode == 0, finished.stderr
    result = json.loads(finished.stdout)

    assert result["after"] == f"{MODEL} · calibration on · prompt strict.txt"
    # No examples were shown at the time, so the replayed grader agrees with the original.
    assert result["cases"]["compared"] == 3 and result["flipped"] == []
    requests = model_api.requests("grader")
    assert len(requests) == 3
    assert all(r.system.startswith("You are the strictest grader alive.") for r in requests)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--prompt", "missing.txt"], "cannot read missing.txt: No such file or directory"),
        (
            ["--grader-model", "nosuchprovider:model"],
            "the grader model 'nosuchprovider:model' cannot be used",
        ),
    ],
)
def test_unusable_arguments_get_a_clear_message(db, capsys, args, message):
    assert main(replay(db, *args)) == 2
    assert message in capsys.readouterr().err


def test_no_database_and_no_model_are_explained(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RUBRIC_BOT_MODEL", raising=False)
    monkeypatch.delenv("RUBRIC_BOT_GRADER_MODEL", raising=False)
    assert main(["replay", "--db", str(tmp_path / "none.sqlite")]) == 2
    assert "no database at" in capsys.readouterr().err
    (tmp_path / "empty.sqlite").touch()
    assert main(["replay", "--db", str(tmp_path / "empty.sqlite")]) == 2
    assert "no grader model: pass --grader-model" in capsys.readouterr().err
    (tmp_path / "notes.txt").write_text("not a database " * 100)
    assert main(["replay", "--db", str(tmp_path / "notes.txt"), "--grader-model", MODEL, "--dry-run"]) == 2
    assert "notes.txt is not a rubric-bot database" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["replay", "--calibration", "sometimes"])
    assert "invalid choice: 'sometimes'" in capsys.readouterr().err


def test_ctrl_c_stops_cleanly_and_prints_what_was_graded(db, model_api):
    graded_first = 3
    answer = model_api.grader
    # The calls after the first three are never answered: Ctrl-C always comes half-way.
    model_api.grader = lambda request: (
        NO_ANSWER if len(model_api.requests("grader")) > graded_first else answer(request)
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "bot", *replay(db, "--concurrency", "1", "--calibration", "loo")],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=as_from_a_terminal,
    )
    try:
        held = f"grader call {graded_first + 1}, the one held"
        wait_for(lambda: model_api.requests("grader")[graded_first:], INTERRUPT_TIMEOUT, message=held)
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=INTERRUPT_TIMEOUT)
    finally:
        process.kill()
    assert process.returncode == 130, err
    assert f"stopped early: {graded_first} of {CASES} graded" in out
    assert "Replay: " in out and "Traceback" not in err
    assert "replay:" in err and "case" in err  # the progress bar
