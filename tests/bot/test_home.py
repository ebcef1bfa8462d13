"""The Home tab renderer and publishing it through a real Slack client to the Slack stand-in."""

from __future__ import annotations

from datetime import UTC, datetime

from genai_prices import Usage, calc_price

from bot.agreement.report import build_report
from bot.config import Settings
from bot.db.admin import upgrade
from bot.db.audits import AuditResult, AuditStart
from bot.db.database import Database
from bot.db.runs import RunRecord
from bot.db.store import Store
from bot.home import ChannelHome, home_view, load_home, publish_home
from bot.limits.prices import dollars, role_usage, run_cost
from bot.slack.client import build_client
from bot.vocabulary.thread import ThreadKey
from bot.vocabulary.workspace import Workspace
from tests.standins.slack_api import BOT_USER_ID, SlackApiStandin
from tests.standins.slack_api import block_problems as slack_problems

TOKEN = "xoxb-home-test"


def channel_home(
    channel: str, *, rubric: str | None = None, runs: list[RunRecord] | None = None
) -> ChannelHome:
    return ChannelHome(channel, rubric, runs or [], build_report([], [], days=None))


def run(status: str | None, *, undelivered: bool = False) -> RunRecord:
    started = datetime(2025, 3, 1, 9, 30, tzinfo=UTC)
    return RunRecord(1, "T1:C1:1.0", "T1", "C1", "1.0", "1.0", status, undelivered, started, None)


def test_a_channel_shows_its_rubric_and_each_runs_status_and_time():
    runs = [run("satisfied"), run("max_iterations_reached", undelivered=True), run(None), run("timed_out")]
    view = home_view([channel_home("C1", rubric="- Cites a <source>", runs=runs)])

    text = "\n".join(b["text"]["text"] for b in view["blocks"] if b.get("text", {}).get("type") == "mrkdwn")
    assert "*<#C1>*" in text
    assert "- Cites a &lt;source&gt;" in text  # the rubric is shown verbatim, escaped
    assert (
        "✅ Rubric satisfied · <!date^1740821400^{date_short_pretty} at {time}|2025-03-01 09:30 UTC>" in text
    )
    assert "Max iterations reached" in text and "the answer never reached the thread" in text
    assert "⏳ In progress" in text and "⌛ Timed out" in text
    assert "No reviews in <#C1>" in text


def test_many_channels_stay_within_slacks_hundred_blocks_and_say_how_many_are_left_out():
    view = home_view([channel_home(f"C{i}", rubric="- Short") for i in range(30)])

    assert len(view["blocks"]) <= 100 and not slack_problems(view["blocks"], max_blocks=100)
    shown = sum("*<#C" in (b.get("text") or {}).get("text", "") for b in view["blocks"])
    assert 0 < shown < 30
    assert view["blocks"][-1]["elements"][0]["text"] == f"…and {30 - shown} more channels."


def test_no_shared_channel_says_how_to_invite_the_bot():
    view = home_view([])
    assert "/invite @rubric-bot" in view["blocks"][-1]["text"]["text"]


async def test_when_slack_refuses_the_channel_list_the_tab_says_why(tmp_path):
    with SlackApiStandin(token=TOKEN) as slack:
        store = await Store.open(str(tmp_path / "bot.sqlite"))
        try:
            client = build_client(Settings(slack_bot_token=TOKEN, slack_api_url=slack.api_url))
            slack.join("C1", BOT_USER_ID, "U1")
            slack.error_next("users.conversations", "missing_scope")

            await publish_home(client, store, workspace=Workspace("T1"), user="U1")
        finally:
            await store.close()

        view = slack.home("U1")
        assert view is not None
        assert "missing_scope" in view["blocks"][-1]["text"]["text"]
        assert "channels:read" in view["blocks"][-1]["text"]["text"]


async def test_a_channel_shows_what_its_runs_of_the_last_30_days_cost(tmp_path):
    store = await Store.open(str(tmp_path / "bot.sqlite"))
    try:
        spent = {"input_tokens": 10_000, "output_tokens": 1_000, "total_tokens": 11_000}
        for request, status in (("1.1", "satisfied"), ("1.2", "max_iterations_reached")):
            run_id = await store.start_run(ThreadKey("T1", "C1", "1.0"), request)
            cost = run_cost(
                {"worker": ("openai:gpt-4o-mini", spent), "grader": ("openai:gpt-4o-mini", spent)}
            )
            await store.finish_run(run_id, status, 22_000, cost=cost)
        homes = await load_home(store, workspace=Workspace("T1"), channels=["C1", "C2"])
    finally:
        await store.close()

    by_channel = {home.channel: home_text(home_view([home])) for home in homes}
    one = float(calc_price(Usage(input_tokens=10_000, output_tokens=1_000), "gpt-4o-mini").total_price)
    expected = f"*Cost, last 30 days:* {dollars(4 * one)} over 2 runs, {dollars(4 * one)} per satisfied run"
    assert expected in by_channel["C1"] and "grader 50% of it" in by_channel["C1"]
    assert "Cost, last" not in by_channel["C2"]  # no runs, no cost line


async def test_a_channels_cost_line_counts_the_audit_graders_money_and_names_its_part(database_url):
    store = await Store.open(database_url)
    try:
        spent = {"input_tokens": 10_000, "output_tokens": 1_000, "total_tokens": 11_000}
        run_id = await store.start_run(ThreadKey("T1", "C1", "1.0"), "1.1")
        await store.finish_run(
            run_id, "satisfied", 11_000, cost=run_cost({"worker": ("openai:gpt-4o-mini", spent)})
        )
        audit = role_usage("openai:gpt-4o", spent)
        await store.start_audit(AuditStart(run_id, "T1", "C1", "1.0", "g", 1, True, "openai:gpt-4o"))
        await store.finish_audit(run_id, AuditResult("pass", "Fine.", "gpt-4o", None, {}, 11_000, cost=audit))
        (home,) = await load_home(store, workspace=Workspace("T1"), channels=["C1"])
    finally:
        await store.close()

    worker = float(calc_price(Usage(input_tokens=10_000, output_tokens=1_000), "gpt-4o-mini").total_price)
    assert audit.usd and audit.usd > worker  # priced at the audit model's own (dearer) rate
    shown = home_text(home_view([home]))
    assert f"*Cost, last 30 days:* {dollars(worker + audit.usd)} over 1 run" in shown
    assert f"audit grader {dollars(audit.usd)} of it over 1 audited run" in shown


def home_text(view: dict) -> str:
    return "\n".join(b["text"]["text"] for b in view["blocks"] if b.get("text", {}).get("type") == "mrkdwn")


# -- the askers' 👍/👎 beside the grader's pass rate, on SQLite and PostgreSQL --------------------

SATISFACTION_HEADING = "*Askers' verdicts on the answers*"


async def satisfaction_on_home(database_url: str, votes: dict[str, list[tuple[str, bool]]]) -> dict[str, str]:
    """Each channel's lines under `SATISFACTION_HEADING` on U1's Home tab (or "" without them),
    after runs in C1 ended with the statuses `votes` names, each voted on by (person, 👍?) in
    order; C2 has one satisfied run with a 👍 that C1 must not count."""
    database = Database.parse(database_url)
    await upgrade(database)
    store = await Store.open(database)
    try:
        ended = [("C1", status, clicks) for status, runs in votes.items() for clicks in runs]
        for n, (channel, status, clicks) in enumerate([*ended, ("C2", "satisfied", [("U9", True)])]):
            run_id = await store.start_run(ThreadKey("T1", channel, "1.0"), f"1.{n + 1}")
            await store.finish_run(run_id, status)
            for person, positive in clicks:
                assert await store.record_feedback(Workspace("T1"), run_id, person, positive=positive)
        homes = await load_home(store, workspace=Workspace("T1"), channels=["C1", "C2", "C3"])
    finally:
        await store.close()
    texts = {home.channel: home_text(home_view([home])) for home in homes}
    return {channel: text.partition(SATISFACTION_HEADING)[2].strip() for channel, text in texts.items()}


async def test_home_shows_the_askers_votes_as_counts_alone_under_ten_and_the_last_click_counts(database_url):
    votes = {
        "satisfied": [[("U1", True), ("U2", False)], [("U1", True), ("U1", False)]],  # U1 changed their mind
        "max_iterations_reached": [[("U3", True)]],
        "timed_out": [[]],  # not graded: no pass rate over it
    }

    shown = await satisfaction_on_home(database_url, votes)

    assert shown["C1"].splitlines() == [
        "Askers' 👍 on answers: 2 of 4 votes",
        "Grader passed: 2 of 3 graded runs",
        "👎 on answers the grader passed: 2 of 3 votes on them",
    ]
    assert shown["C2"].splitlines()[0] == "Askers' 👍 on answers: 1 of 1 votes"
    assert shown["C3"] == ""  # nothing run, nothing voted: no heading at all


async def test_home_shows_each_rate_with_its_95_interval_from_ten_votes_or_runs_on(database_url):
    votes = {
        "satisfied": [[("U1", True)]] * 9 + [[("U1", False)]],
        "max_iterations_reached": [[("U1", False)], [("U2", False)]],
    }

    shown = await satisfaction_on_home(database_url, votes)

    # Wilson's score intervals: 9/12 → 46.8–91.1 %, 10/12 → 55.2–95.3 %, 1/10 → 1.8–40.4 %.
    assert shown["C1"].splitlines() == [
        "Askers' 👍 on answers: 9 of 12 votes: 75% (95% CI 47%–91%)",
        "Grader passed: 10 of 12 graded runs: 83% (95% CI 55%–95%)",
        "👎 on answers the grader passed: 1 of 10 votes on them: 10% (95% CI 2%–40%)",
    ]
