"""`rubric-bot report`: the agreement report of a seeded database, checked against scikit-learn."""

from __future__ import annotations

import asyncio
import json
import os
import re
import sqlite3
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from contextlib import closing
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from genai_prices import Usage, calc_price
from PIL import Image
from sklearn.metrics import cohen_kappa_score

from bot.cli.main import main
from bot.db.reviews import ReviewVerdict
from bot.db.store import Store
from bot.limits.prices import dollars, run_cost
from bot.vocabulary.thread import ThreadKey
from bot.vocabulary.unread import Unread
from tests.bot.agreement.chart_reading import PNG_SIGNATURE
from tests.e2e.conftest import BOT_TOKEN, SCRUBBED_ENV_PREFIXES
from tests.standins.slack_api import SlackApiStandin

# (reviewer, grader) verdicts per criterion, one review each, all in channel C1 within the week.
CITES = (["pass"] * 6 + ["fail"] * 5 + ["pass"], ["pass"] * 7 + ["fail"] * 5)
POLITE = (["pass", "fail", "pass"], ["pass", "pass", "pass"])
CLARITY = ([5, 4, 3, 3, 2, 2, 4, 4, 3, 1, 1, 5], [5, 4, 4, 3, 3, 2, 5, 4, 3, 2, 1, 4])
TONE = ([3, 4, 5, 2, 4, 3, 5, 2, 3, 4, 4, 2], [5, 5, 4, 4, 4, 4, 3, 3, 3, 3, 2, 2])
CORRELATED = [(5, 4), (3, 2), (4, 3), (1, 1)]  # grader scores (Clarity, Concision) of four answers


def verdicts(name: str, reviewer: object, grader: object, comment: str = "") -> ReviewVerdict:
    return ReviewVerdict(name, str(grader), str(reviewer), comment)


def scored_evaluation(run: str, clarity: int, concision: int) -> dict:
    criteria = [
        {"name": "Clarity", "passed": clarity >= 3, "gap": "", "score": clarity},
        {"name": "Concision", "passed": concision >= 3, "gap": "", "score": concision},
    ]
    return {
        "grading_run_id": run,
        "iteration": 0,
        "max_iterations": 3,
        "kind": "scored",
        "criteria": criteria,
    }


async def seed(path: Path) -> None:
    store = await Store.open(str(path))
    try:
        for i, (reviewer, grader) in enumerate(zip(*CITES, strict=True)):
            row = [verdicts("Cites a source", reviewer, grader)]
            if i < len(POLITE[0]):
                row.append(verdicts("Is polite", POLITE[0][i], POLITE[1][i]))
            await store.save_review(ThreadKey("T1", "C1", "1.0"), f"list-{i}", 0, "U1", row)
        for i in range(len(CLARITY[0])):
            row = [
                verdicts("Clarity", CLARITY[0][i], CLARITY[1][i]),
                verdicts("Tone", TONE[0][i], TONE[1][i]),
            ]
            await store.save_review(ThreadKey("T1", "C1", "2.0"), f"scored-{i}", 0, "U2", row)
        for i, (clarity, concision) in enumerate(CORRELATED):
            evaluation = scored_evaluation(f"scored-{i}", clarity, concision)
            await store.save_evaluation(ThreadKey("T1", "C1", "2.0"), f"3.{i}", evaluation, "dimensions: …")
        # Two old disagreements on Cites a source, and another channel's review: outside the report.
        for i in range(2):
            await store.save_review(
                ThreadKey("T1", "C1", "1.0"),
                f"old-{i}",
                0,
                "U1",
                [verdicts("Cites a source", "fail", "pass")],
            )
        await store.save_review(
            ThreadKey("T1", "C2", "9.0"), "other", 0, "U1", [verdicts("Cites a source", "fail", "pass")]
        )
    finally:
        await store.close()
    month_ago = (datetime.now(UTC) - timedelta(days=30)).isoformat(timespec="microseconds")
    with closing(sqlite3.connect(path)) as db, db:
        db.execute("UPDATE reviews SET created_at = ? WHERE grading_run_id LIKE 'old-%'", (month_ago,))


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)  # no .env from the developer's checkout
    path = tmp_path / "bot.sqlite"
    asyncio.run(seed(path))
    return path


def table_rows(output: str) -> dict[str, dict[str, str]]:
    """Criterion → its table cells by column (the two "95% CI" columns named after the figure before
    them: ``Agree CI``, ``κ CI``, ``Coverage CI``) from the printed table."""
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Criterion"))
    header: list[str] = []
    for name in re.split(r"\s{2,}", lines[start].strip())[1:]:
        header.append(f"{header[-1]} CI" if name == "95% CI" else name)
    rows = {}
    for line in lines[start + 1 :]:
        if not line.strip() or line.startswith("κ is shown"):
            break
        name, *cells = re.split(r"\s{2,}", line.strip())
        rows[name] = dict(zip(header, cells, strict=False))
    return rows


def expected(reviewer: list, grader: list, *, scored: bool) -> dict[str, str]:
    """Kind, n, runs, agreement, baseline and κ as the table prints them, computed with scikit-learn
    (each review here is of its own run)."""
    agreement = sum(r == g for r, g in zip(reviewer, grader, strict=True)) / len(reviewer)
    baseline = Counter(reviewer).most_common(1)[0][1] / len(reviewer)
    options = {"weights": "quadratic", "labels": [1, 2, 3, 4, 5]} if scored else {}
    kappa = cohen_kappa_score(reviewer, grader, **options)
    return {
        "Kind": "1–5" if scored else "pass/fail",
        "n": str(len(reviewer)),
        "Runs": str(len(reviewer)),
        "Agree": f"{agreement:.0%}",
        "Baseline": f"{baseline:.0%}",
        "κ": f"{kappa:.2f}",
    }


def shown(row: dict[str, str]) -> dict[str, str]:
    return {column: row[column] for column in ("Kind", "n", "Runs", "Agree", "Baseline", "κ")}


def test_report_prints_each_criterions_numbers_as_scikit_learn_computes_them(db, capsys):
    assert main(["report", "--db", str(db), "--channel", "C1", "--days", "7"]) == 0
    output = capsys.readouterr().out
    rows = table_rows(output)

    assert output.startswith("Channel C1\nGrader agreement, last 7 days: 24 reviews by 2 reviewers")
    assert shown(rows["Cites a source"]) == expected(*CITES, scored=False)
    assert shown(rows["Clarity"]) == expected(*CLARITY, scored=True)
    assert shown(rows["Tone"]) == expected(*TONE, scored=True)
    # Each κ with its 95% interval (12 runs resampled): around the κ, and bounded by ±1.
    for name in ("Cites a source", "Clarity", "Tone"):
        low, high = (float(x) for x in rows[name]["κ CI"].split("–"))
        assert -1 <= low <= float(rows[name]["κ"]) <= high <= 1
    # κ 0.66 and 0.87 clear the 0.6 bar; Tone's 0.12 lies under it with its whole interval.
    assert "Flag" not in rows["Cites a source"] and "Flag" not in rows["Clarity"]
    assert rows["Tone"]["Flag"] == "⚠ κ's interval under 0.6: rewrite its anchors"
    assert "Flagged: Tone" in output and "rewrite its anchors" in output
    # Too few reviews: said plainly, with no κ.
    polite = rows["Is polite"]
    assert (polite["n"], polite["Agree"], polite["Baseline"], polite["κ"]) == ("3", "67%", "67%", "—")
    assert polite["Flag"] == "3 reviews so far; κ needs at least 10"
    assert re.search(r"Clarity & Concision: r = 0\.9\d over 4 answers", output)


def test_period_and_channel_choose_the_reviews(db, capsys):
    assert main(["report", "--db", str(db), "--channel", "C1"]) == 0  # all time: the old two count
    assert table_rows(capsys.readouterr().out)["Cites a source"]["n"] == "14"

    assert main(["report", "--db", str(db)]) == 0  # every channel: C2's review too
    output = capsys.readouterr().out
    assert output.startswith("All channels\n") and table_rows(output)["Cites a source"]["n"] == "15"


def test_report_needs_no_slack_or_model_settings_and_writes_the_chart(db, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(SCRUBBED_ENV_PREFIXES)}
    env["RUBRIC_BOT_DB"] = str(db)
    chart = tmp_path / "agreement.png"

    result = subprocess.run(
        [sys.executable, "-m", "bot", "report", "--channel", "C1", "--chart", str(chart)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=60,
    )

    assert result.returncode == 0, result.stderr
    assert "Cites a source" in result.stdout and f"Chart written to {chart}" in result.stdout
    assert chart.read_bytes().startswith(PNG_SIGNATURE)
    with Image.open(chart) as image:
        assert image.width >= 600 and image.height >= 300


def test_a_missing_database_or_a_bad_period_exits_2(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)

    assert main(["report", "--db", str(tmp_path / "nowhere.sqlite")]) == 2
    assert "no database at" in capsys.readouterr().err
    assert not (tmp_path / "nowhere.sqlite").exists()
    with pytest.raises(SystemExit) as caught:
        main(["report", "--days", "0"])
    assert caught.value.code == 2
    assert "0 is not a number of days" in capsys.readouterr().err


# -- the report only reads, and says what it could not find ------------------------------------------


@pytest.fixture
def no_slack_settings(monkeypatch):
    for name in list(os.environ):
        if name.startswith(SCRUBBED_ENV_PREFIXES):
            monkeypatch.delenv(name)


@pytest.fixture
def slack_api(no_slack_settings, monkeypatch) -> Iterator[SlackApiStandin]:
    """The Slack stand-in knowing #general (C1) and #random (C7), configured as the bot's Slack."""
    with SlackApiStandin(token=BOT_TOKEN) as api:
        api.channel_names = {"C1": "general", "C7": "random"}
        monkeypatch.setenv("SLACK_BOT_TOKEN", BOT_TOKEN)
        monkeypatch.setenv("SLACK_API_URL", api.api_url)
        yield api


@pytest.mark.parametrize("content", [b"", b"name,score\nada,5\n"], ids=["empty", "csv"])
def test_a_file_that_is_not_the_bots_database_is_one_line_exit_2_and_left_alone(
    tmp_path, monkeypatch, capsys, content
):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "not-a-database.sqlite"
    path.write_bytes(content)

    assert main(["report", "--db", str(path)]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"rubric-bot: {path} is not a rubric-bot database")
    assert path.read_bytes() == content


@pytest.mark.parametrize("given", ["#general", "general"])
def test_a_channel_can_be_given_by_name(db, slack_api, capsys, given):
    assert main(["report", "--db", str(db), "--channel", "C1"]) == 0
    by_id = capsys.readouterr().out

    assert main(["report", "--db", str(db), "--channel", given]) == 0
    by_name = capsys.readouterr().out
    assert by_name.startswith("Channel #general (C1)\n")
    assert by_name.split("\n", 1)[1] == by_id.split("\n", 1)[1]  # the same report


def test_a_channel_name_slack_does_not_know_is_said_so(db, slack_api, capsys):
    assert main(["report", "--db", str(db), "--channel", "#genral"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert "Slack has no channel named #genral" in line and "channel's id" in line


def test_a_channel_the_database_has_nothing_from_is_said_so_with_the_ones_it_has(db, slack_api, capsys):
    assert main(["report", "--db", str(db), "--channel", "#random"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line == f"rubric-bot: {db} has nothing from #random (C7); channels with reviews: C1, C2"

    assert main(["report", "--db", str(db), "--channel", "C0NOSUCH"]) == 2
    assert "has nothing from C0NOSUCH; channels with reviews: C1, C2" in capsys.readouterr().err


def test_a_channel_name_without_a_bot_token_or_scope_says_how_to_do_without(
    db, slack_api, monkeypatch, capsys
):
    slack_api.error_next("conversations.list", "missing_scope")
    assert main(["report", "--db", str(db), "--channel", "#general"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert "(missing_scope)" in line and "channels:read" in line and "channel's id" in line

    monkeypatch.delenv("SLACK_BOT_TOKEN")
    assert main(["report", "--db", str(db), "--channel", "#general"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert "looking up #general needs SLACK_BOT_TOKEN" in line


async def add_runs(path: Path) -> None:
    """Three runs: one delivered, one whose answer Slack never took, and another channel's lost one."""
    store = await Store.open(str(path))
    try:
        for channel, request, undelivered in (("C1", "5.1", False), ("C1", "5.2", True), ("C2", "6.1", True)):
            run_id = await store.start_run(ThreadKey("T1", channel, "5.0"), request)
            await store.finish_run(run_id, "satisfied")
            if undelivered:
                await store.mark_undelivered(run_id)
    finally:
        await store.close()


def test_answers_that_never_reached_slack_are_listed_for_the_operator(db, capsys):
    assert main(["report", "--db", str(db), "--channel", "C1"]) == 0
    assert "Undelivered answers: none" in capsys.readouterr().out

    asyncio.run(add_runs(db))
    assert main(["report", "--db", str(db), "--channel", "C1"]) == 0
    output = capsys.readouterr().out
    (line,) = [line for line in output.splitlines() if "request 5." in line]
    assert "channel C1  thread 5.0  request 5.2  satisfied" in line
    assert "Undelivered answers: 1 (the run ended, but Slack never took its last reply)" in output

    month_ago = (datetime.now(UTC) - timedelta(days=30)).isoformat(timespec="microseconds")
    with closing(sqlite3.connect(db)) as connection, connection:
        connection.execute("UPDATE runs SET started_at = ? WHERE channel = 'C2'", (month_ago,))
    assert main(["report", "--db", str(db)]) == 0
    assert "Undelivered answers: 2" in capsys.readouterr().out
    assert main(["report", "--db", str(db), "--days", "7"]) == 0
    assert "Undelivered answers: 1" in capsys.readouterr().out


async def add_runs_that_read_material(path: Path) -> None:
    store = await Store.open(str(path))
    try:
        called_in = await store.start_run(ThreadKey("T1", "C1", "7.0"), "7.5")
        await store.record_material(called_in, 4, ["spec.pdf"], [Unread("chart.png", "an image")])
        attached = await store.start_run(ThreadKey("T1", "C2", "8.0"), "8.0")
        await store.record_material(attached, 0, ["a.csv", "b.md"], [])
    finally:
        await store.close()


def test_the_report_says_how_much_of_what_requests_shared_was_read(db, capsys):
    assert main(["report", "--db", str(db), "--channel", "C1"]) == 0
    assert "Shared with requests: nothing" in capsys.readouterr().out

    asyncio.run(add_runs_that_read_material(db))
    assert main(["report", "--db", str(db), "--channel", "C1"]) == 0
    expected = "1 run read 4 earlier thread messages and 1 file; 1 file could not be read"
    assert f"Shared with requests: {expected}" in capsys.readouterr().out
    assert main(["report", "--db", str(db)]) == 0
    assert "2 runs read 4 earlier thread messages and 3 files" in capsys.readouterr().out


def test_a_database_from_before_delivery_was_recorded_is_reported_without_changing_it(db, capsys):
    with closing(sqlite3.connect(db)) as connection, connection:
        connection.execute("ALTER TABLE runs DROP COLUMN undelivered")
        connection.execute("ALTER TABLE runs DROP COLUMN files_unread")

    assert main(["report", "--db", str(db)]) == 0
    output = capsys.readouterr().out
    assert "Undelivered answers: not recorded in this database yet" in output
    assert "Shared with requests: not recorded in this database yet" in output
    with closing(sqlite3.connect(db)) as connection:
        columns = {row[1] for row in connection.execute("PRAGMA table_info(runs)")}
    assert "undelivered" not in columns


async def add_priced_runs(path: Path) -> None:
    """Two satisfied runs and one that hit the cap, all on gpt-4o-mini; a fourth on a model with no price."""
    store = await Store.open(str(path))
    try:
        spent = {"input_tokens": 10_000, "output_tokens": 1_000, "total_tokens": 11_000}
        for request, status, model in (
            ("9.1", "satisfied", "openai:gpt-4o-mini"),
            ("9.2", "satisfied", "openai:gpt-4o-mini"),
            ("9.3", "max_iterations_reached", "openai:gpt-4o-mini"),
            ("9.4", "satisfied", "openai:house-model"),
        ):
            run_id = await store.start_run(ThreadKey("T1", "C1", "9.0"), request)
            cost = run_cost({"worker": (model, spent), "grader": (model, spent)})
            await store.finish_run(run_id, status, 22_000, cost=cost)
    finally:
        await store.close()


def test_the_report_gives_the_cost_per_satisfied_run_and_the_graders_share(db, capsys):
    assert main(["report", "--db", str(db), "--channel", "C1"]) == 0
    assert "Cost: no priced runs recorded yet" in capsys.readouterr().out

    asyncio.run(add_priced_runs(db))
    assert main(["report", "--db", str(db), "--channel", "C1"]) == 0
    one = float(calc_price(Usage(input_tokens=10_000, output_tokens=1_000), "gpt-4o-mini").total_price)
    total = 6 * one  # three priced runs, each a worker's and a grader's share
    expected = (
        f"Cost: {dollars(total)} over 4 runs, {dollars(total / 3)} per satisfied run, grader 50% of it; "
        "1 run used a model with no list price (not counted)"
    )
    assert expected in capsys.readouterr().out


def test_report_json_carries_the_same_figures_as_the_table(db, capsys):
    assert main(["report", "--db", str(db), "--channel", "C1"]) == 0
    table = table_rows(capsys.readouterr().out)

    assert main(["report", "--db", str(db), "--channel", "C1", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)

    assert document["channel"] == "C1" and document["team"] is None and document["days"] is None
    criteria = {c["agreement"]["criterion"]: c["agreement"] for c in document["report"]["criteria"]}
    assert set(criteria) == set(table)
    assert table["Cites a source"]["n"] == str(criteria["Cites a source"]["n"])
    assert document["runs"]["undelivered"] == []


def test_report_team_keeps_to_that_workspace(db, capsys):
    assert main(["report", "--db", str(db), "--team", "T1", "--json"]) == 0
    ours = json.loads(capsys.readouterr().out)["report"]["reviews"]
    assert main(["report", "--db", str(db), "--team", "T9", "--json"]) == 0
    none = json.loads(capsys.readouterr().out)["report"]["reviews"]

    assert ours > 0 and none == 0


REPLAY_DRY_RUN = ["replay", "--dry-run", "--grader-model", "openai:gpt-4o-mini"]


@pytest.mark.parametrize(
    "command", [["usage"], ["export"], REPLAY_DRY_RUN], ids=["usage", "export", "replay"]
)
def test_every_command_looks_a_channels_name_up_as_report_does(db, slack_api, capsys, command):
    assert main([*command, "--db", str(db), "--channel", "#nosuch"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert "Slack has no channel named #nosuch" in line


@pytest.mark.parametrize("command", [["usage"], REPLAY_DRY_RUN], ids=["usage", "replay"])
def test_a_channels_name_and_its_id_give_the_same_output(db, slack_api, capsys, command):
    assert main([*command, "--db", str(db), "--channel", "#general"]) == 0
    by_name = capsys.readouterr().out
    assert main([*command, "--db", str(db), "--channel", "C1"]) == 0
    assert by_name == capsys.readouterr().out
