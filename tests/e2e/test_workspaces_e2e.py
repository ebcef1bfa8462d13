"""Many workspaces from one deployment: the real bot in OAuth mode, installed by two (and more)
workspaces through Bolt's OAuth flow, as a browser and Slack take an installer through it.

The Slack stand-in plays every workspace: its authorize page sends the installer back with a code,
``oauth.v2.access`` hands each workspace its own bot token, and every Web API call is recorded with
the token it carried. The workspaces share one channel id (and even thread timestamps), so any row
or call that crossed between them would show.
"""

from __future__ import annotations

import html
import re
import sqlite3
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import BOT_COMMAND, BotProcess, bot_environment
from tests.e2e.stored_rows import tables_containing
from tests.standins import slack_requests as sr
from tests.standins import wait_for
from tests.standins.model_api import ChatRequest, ModelApiStandin, grade
from tests.standins.slack_api import SlackApiStandin, SlackCall, SlackMessage, StandinWorkspace

CHANNEL = "C1"
"""The channel id both workspaces have."""
RUBRICS = {"T1": "- Cites a source\n- Is polite", "T2": "- Is short\n- Names a date"}
"""Each workspace's rubric for its channel C1."""
RUN_TIMEOUT = 30.0
"""Bound for one run to show up; the stand-ins answer in milliseconds."""
STATE_COOKIE = "slack-app-oauth-state"
"""Bolt's cookie that ties the installer's browser to the state it was given."""
GONE_WORDS, QUEUED_WORDS, KEPT_WORDS = "Zanzibar-gone", "Quokka-queued", "Kestrel-kept"
"""Words only one workspace's requests hold: whether they are still stored tells whose data went."""


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """A browser step at a time: a redirect is returned to the test rather than followed."""

    def redirect_request(self, *args: Any) -> None:
        return None


BROWSER = urllib.request.build_opener(_NoRedirects)


@dataclass(frozen=True)
class Page:
    status: int
    headers: Any
    body: str


def browse(url: str, cookie: str | None = None) -> Page:
    request = urllib.request.Request(url, headers={"Cookie": cookie} if cookie else {})
    try:
        with BROWSER.open(request, timeout=10) as response:
            return Page(response.status, response.headers, response.read().decode())
    except urllib.error.HTTPError as error:
        return Page(error.code, error.headers, error.read().decode())


def install(bot: BotProcess, team: str, *, with_cookie: bool = True) -> Page:
    """An admin of `team` installs the bot: the "Add to Slack" page, Slack's authorize page, and back
    to the bot's redirect URL with the code (and the state cookie the install page set)."""
    page = browse(f"http://127.0.0.1:{bot.port}/slack/install?team={team}")
    assert page.status == 200, page
    cookie = page.headers["Set-Cookie"].split(";")[0]
    assert cookie.startswith(STATE_COOKIE + "=")
    authorize_url = html.unescape(re.search(r'<a href="([^"]+)"', page.body).group(1))
    slack_answer = browse(authorize_url)
    assert slack_answer.status == 302, slack_answer
    return browse(slack_answer.headers["Location"], cookie if with_cookie else None)


def oauth_environment(slack: SlackApiStandin, model: ModelApiStandin, db: str | Path) -> dict[str, str]:
    """The bot's settings as a distributed app: client id and secret, no bot token."""
    env = bot_environment(slack, model, Path("unused"))
    del env["SLACK_BOT_TOKEN"]
    return env | {
        "SLACK_CLIENT_ID": slack.client_id,
        "SLACK_CLIENT_SECRET": slack.client_secret,
        "RUBRIC_BOT_DB": str(db),
    }


def start(env: dict[str, str], workdir: Path, name: str, redirect_to: BotProcess | None = None) -> BotProcess:
    """A serve process; installers come back to `redirect_to` (default: itself)."""
    process = BotProcess(BOT_COMMAND, env, workdir / f"{name}.log", workdir)
    target = redirect_to or process
    process.env["SLACK_OAUTH_REDIRECT_URL"] = f"http://127.0.0.1:{target.port}/slack/oauth_redirect"
    return process.start()


@dataclass
class Deployment:
    """One or more bot processes serving every workspace installed, with the two stand-ins."""

    slack: SlackApiStandin
    model: ModelApiStandin
    bots: list[BotProcess]

    def workspace(self, team: str) -> StandinWorkspace:
        return self.slack.workspace(team)

    def send(self, team: str, payload: dict[str, Any], bot: int = 0) -> Any:
        response = self.bots[bot].sender.send(payload)
        assert response.status == 200, (team, response.status, response.body)
        return response

    def mention(self, team: str, text: str, ts: str, thread_ts: str | None = None, bot: int = 0) -> str:
        ws = self.workspace(team)
        event = sr.app_mention(text, CHANNEL, ts, thread_ts, team=team, bot_user=ws.bot_user_id)
        self.send(team, sr.event_callback(event, team=team, bot_user=ws.bot_user_id), bot)
        return ts

    def command(self, team: str, text: str, bot: int = 0) -> Any:
        response_url = self.slack.response_url(f"{team}-{sr.new_ts()}")
        return self.send(team, sr.slash_command(text, CHANNEL, team=team, response_url=response_url), bot)

    def thread(self, team: str, root: str) -> list[SlackMessage]:
        return [m for m in self.slack.messages_in_thread(CHANNEL, root) if m.team == team]

    def wait_final(self, team: str, root: str) -> SlackMessage:
        def final() -> SlackMessage | None:
            return next((m for m in self.thread(team, root) if m.event_type == "rubric_final"), None)

        return wait_for(final, RUN_TIMEOUT, message=lambda: f"{team}'s answer; log:\n{self.logs()[-4000:]}")

    def calls_in_thread(self, root: str) -> list[SlackCall]:
        return [
            call
            for call in self.slack.calls()
            if call.args.get("channel") == CHANNEL
            and root in (call.args.get("thread_ts"), call.args.get("ts"))
        ]

    def logs(self) -> str:
        return "\n".join(bot.stderr_text() for bot in self.bots)


def installed_teams(db: Path) -> set[str]:
    with sqlite3.connect(db) as connection:
        return {team for (team,) in connection.execute("SELECT team_id FROM slack_installations")}


@pytest.fixture(scope="module")
def deployment(tmp_path_factory) -> Iterator[Deployment]:
    """One bot process on SQLite, installed by workspaces T1 and T2 through the OAuth flow."""
    workdir = tmp_path_factory.mktemp("distributed")
    with SlackApiStandin() as slack, ModelApiStandin() as model:
        for team in ("T1", "T2"):
            slack.add_workspace(team)
        bot = start(oauth_environment(slack, model, workdir / "bot.sqlite"), workdir, "bot")
        try:
            for team in ("T1", "T2"):
                assert install(bot, team).status == 200
            yield Deployment(slack, model, [bot])
        finally:
            bot.stop()
            bot.sender.close()


def answer(request: ChatRequest) -> str:
    return "Here it is: the release note, with a source and a date."


def grade_by_rubric(request: ChatRequest) -> dict[str, Any]:
    """Passes every criterion of whichever workspace's rubric the grader was shown."""
    for rubric in RUBRICS.values():
        criteria = [line.removeprefix("- ") for line in rubric.splitlines()]
        if all(name in request.all_text for name in criteria):
            return grade(criteria)
    raise AssertionError("the grader was shown a rubric no workspace set")


@pytest.fixture
def fresh(deployment: Deployment) -> Deployment:
    deployment.model.worker, deployment.model.grader = answer, grade_by_rubric
    return deployment


# -- installing ----------------------------------------------------------------------------------


def test_each_installation_gets_its_own_token_and_an_install_without_the_state_cookie_is_refused(deployment):
    d = deployment
    codes = [call for call in d.slack.calls("oauth.v2.access") if call.ok]
    assert [call.response["team"]["id"] for call in codes] == ["T1", "T2"]
    assert d.workspace("T1").token != d.workspace("T2").token

    d.slack.add_workspace("T7")
    refused = install(d.bots[0], "T7", with_cookie=False)

    assert refused.status == 400  # Bolt's "invalid_browser": the state was not issued to this browser
    assert "T7" not in installed_teams(Path(d.bots[0].env["RUBRIC_BOT_DB"]))
    assert not [
        call for call in d.slack.calls("oauth.v2.access") if call.ok and call.response["team"]["id"] == "T7"
    ]


# -- strict separation -----------------------------------------------------------------------------


def test_the_same_channel_and_thread_in_two_workspaces_are_two_conversations_each_with_its_own_token(fresh):
    d = fresh
    for team in ("T1", "T2"):
        d.command(team, f"set {RUBRICS[team]}")
    root = sr.new_ts()  # the same thread root in both workspaces' channel C1
    for team in ("T1", "T2"):
        d.mention(team, "Write the release note", root)

    for team, other in (("T1", "T2"), ("T2", "T1")):
        d.wait_final(team, root)
        graded = "\n".join(m.all_text for m in d.thread(team, root) if m.event_type == "rubric_evaluation")
        assert all(line[2:] in graded for line in RUBRICS[team].splitlines())
        assert not any(line[2:] in graded for line in RUBRICS[other].splitlines())
    calls = d.calls_in_thread(root)
    for team in ("T1", "T2"):
        tokens = {call.token for call in calls if call.team == team}
        assert tokens == {d.workspace(team).token}
    assert all(call.team in ("T1", "T2") for call in calls)


def test_reviews_reports_and_the_home_tab_stay_in_their_workspace(fresh):
    d = fresh
    d.command("T1", f"set {RUBRICS['T1']}")
    root = d.mention("T1", "Summarise the incident", sr.new_ts())
    d.wait_final("T1", root)
    evaluation = next(m for m in d.thread("T1", root) if m.event_type == "rubric_evaluation")
    agree = next(
        element
        for block in evaluation.blocks
        if block.get("type") == "actions"
        for element in block["elements"]
        if element.get("action_id") == "review_agree"
    )

    # Someone in T2 clicks a button carrying T1's evaluation (a forged or misrouted value).
    d.send("T2", sr.block_actions("review_agree", agree["value"], CHANNEL, evaluation.ts, root, team="T2"))
    refused = wait_for(
        lambda: [c for c in d.slack.calls("chat.postEphemeral") if c.team == "T2"], RUN_TIMEOUT
    )
    assert refused[-1].token == d.workspace("T2").token
    d.send("T1", sr.block_actions("review_agree", agree["value"], CHANNEL, evaluation.ts, root, team="T1"))
    wait_for(lambda: any(c.team == "T1" and c.ok for c in d.slack.calls("chat.update")), RUN_TIMEOUT)

    for team in ("T1", "T2"):
        d.command(team, "report")
    reports = wait_for(lambda: _reports(d), RUN_TIMEOUT, message="both workspaces' /rubric report")
    assert "No reviews" not in reports["T1"] and "Cites a source" in reports["T1"]
    assert "No reviews in <#C1>" in reports["T2"]

    d.slack.join(CHANNEL, "U1", d.workspace("T1").bot_user_id, d.workspace("T2").bot_user_id)
    for team in ("T1", "T2"):
        bot_user = d.workspace(team).bot_user_id
        d.send(team, sr.event_callback(sr.app_home_opened("U1"), team=team, bot_user=bot_user))
    homes = wait_for(lambda: _homes(d), RUN_TIMEOUT, message="both workspaces' Home tabs")
    assert "Cites a source" in homes["T1"] and "Cites a source" not in homes["T2"]


def _reports(d: Deployment) -> dict[str, str] | None:
    """Each workspace's /rubric report: posted in the channel with its token, or (with no reviews)
    answered only to the caller through the command's response_url (named after the workspace)."""
    found: dict[str, str] = {}
    for call in d.slack.calls():
        text = str(call.args.get("text", ""))
        if text.startswith("Grader agreement"):
            team = call.team if call.method == "chat.postMessage" else str(call.args["name"]).split("-")[0]
            found[team] = text + str(call.args.get("blocks", ""))
    return found if {"T1", "T2"} <= found.keys() else None


def _homes(d: Deployment) -> dict[str, str] | None:
    homes = {call.team: str(call.args.get("view")) for call in d.slack.calls("views.publish") if call.ok}
    return homes if {"T1", "T2"} <= homes.keys() else None


# -- uninstalling --------------------------------------------------------------------------------


def test_an_uninstall_ends_its_workspaces_work_and_deletes_its_data_and_the_other_keeps_its(fresh):
    d = fresh
    db = d.bots[0].env["RUBRIC_BOT_DB"]
    d.slack.add_workspace("T3")
    assert install(d.bots[0], "T3").status == 200
    kept = d.mention("T1", f"Keep {KEPT_WORDS}", sr.new_ts())
    d.wait_final("T1", kept)
    d.command("T3", f"set {RUBRICS['T1']}")
    root = d.mention("T3", f"Remember {GONE_WORDS}", sr.new_ts())
    d.wait_final("T3", root)
    d.model.hold()
    d.mention("T3", f"Now {GONE_WORDS} again", sr.new_ts(), thread_ts=root)
    wait_for(lambda: [r for r in d.model.requests() if "again" in r.all_text], RUN_TIMEOUT)
    d.mention("T3", f"Then {QUEUED_WORDS}", sr.new_ts(), thread_ts=root)  # queued behind it
    before = len(d.logs())

    d.slack.uninstall("T3")
    t3 = d.workspace("T3")
    d.send("T3", sr.event_callback(sr.app_uninstalled(), team="T3", bot_user=t3.bot_user_id))
    line = "deleted every thread, rubric and setting of team T3"
    wait_for(lambda: line in d.logs()[before:], RUN_TIMEOUT, message="the uninstall's log line")
    d.model.release()
    wait_for(lambda: "deleted what it left" in d.logs()[before:], RUN_TIMEOUT, message="the held run's end")

    assert "T3" not in installed_teams(Path(db)) and "T1" in installed_teams(Path(db))
    assert tables_containing(db, GONE_WORDS) == [] and tables_containing(db, QUEUED_WORDS) == []
    assert tables_containing(db, KEPT_WORDS)  # the other workspace's thread is all there
    assert not [r for r in d.model.requests() if QUEUED_WORDS in r.all_text]  # never reached a model
    assert d.logs()[before:].count(line) == 1


def test_a_revoked_bot_token_forgets_the_installation_and_its_workspaces_data(fresh):
    d = fresh
    db = d.bots[0].env["RUBRIC_BOT_DB"]
    t3 = d.slack.add_workspace("T3")
    assert install(d.bots[0], "T3").status == 200
    kept = d.mention("T1", f"Keep {KEPT_WORDS}", sr.new_ts())
    d.wait_final("T1", kept)
    d.command("T3", f"set {RUBRICS['T1']}")
    d.wait_final("T3", d.mention("T3", f"Remember {GONE_WORDS}", sr.new_ts()))
    before = len(d.logs())

    revoked = sr.tokens_revoked(bot_user=t3.bot_user_id)
    d.send("T3", sr.event_callback(revoked, team="T3", bot_user=t3.bot_user_id))
    line = "deleted every thread, rubric and setting of team T3"
    wait_for(lambda: line in d.logs()[before:], RUN_TIMEOUT, message="the revocation's log line")

    assert "T3" not in installed_teams(Path(db)) and "T1" in installed_teams(Path(db))
    assert tables_containing(db, GONE_WORDS) == [] and tables_containing(db, KEPT_WORDS)


# -- Enterprise Grid and rotating tokens ---------------------------------------------------------------


def test_an_org_wide_install_answers_two_of_its_workspaces_and_its_uninstall_deletes_both(fresh):
    d = fresh
    org = d.slack.add_workspace("TORG", enterprise="E1", org_wide=True)
    assert install(d.bots[0], "TORG").status == 200
    roots = {}
    for team in ("T5", "T6"):  # two workspaces of the org, the org's one installation
        root = sr.new_ts()
        event = sr.app_mention(f"Hello from {team}", CHANNEL, root, team=team, bot_user=org.bot_user_id)
        d.send(
            team,
            sr.event_callback(event, team=team, enterprise="E1", org_wide=True, bot_user=org.bot_user_id),
        )
        roots[team] = root

    for root in roots.values():
        d.wait_final("TORG", root)
        assert {c.token for c in d.calls_in_thread(root)} == {d.workspace("TORG").token}
    with sqlite3.connect(d.bots[0].env["RUBRIC_BOT_DB"]) as db:
        stored = set(db.execute("SELECT enterprise, team FROM runs WHERE enterprise = 'E1'"))
    assert stored == {("E1", "T5"), ("E1", "T6")}

    before = len(d.logs())
    d.slack.uninstall("TORG")
    uninstalled = sr.event_callback(
        sr.app_uninstalled(), team="T5", enterprise="E1", org_wide=True, bot_user=org.bot_user_id
    )
    d.send("T5", uninstalled)
    line = "deleted every thread, rubric and setting of Enterprise Grid org E1"
    wait_for(lambda: line in d.logs()[before:], RUN_TIMEOUT, message="the org uninstall's log line")
    with sqlite3.connect(d.bots[0].env["RUBRIC_BOT_DB"]) as db:
        assert not list(db.execute("SELECT team FROM runs WHERE enterprise = 'E1'"))  # both workspaces'
        assert not list(db.execute("SELECT team_id FROM slack_installations WHERE enterprise_id = 'E1'"))
        assert list(db.execute("SELECT team_id FROM slack_installations WHERE team_id = 'T1'"))  # kept


def test_a_rotating_token_is_refreshed_before_it_is_used(fresh):
    d = fresh
    d.slack.add_workspace("T8", rotating=True)
    assert install(d.bots[0], "T8").status == 200
    first = d.workspace("T8").token

    root = d.mention("T8", "Anything new?", sr.new_ts())
    d.wait_final("T8", root)

    refreshes = [c for c in d.slack.calls("oauth.v2.access") if c.args.get("grant_type") == "refresh_token"]
    assert refreshes and all(c.ok for c in refreshes)
    newest = d.workspace("T8").token
    assert newest != first
    assert {c.token for c in d.calls_in_thread(root)} <= set(d.workspace("T8").tokens[1:])


# -- several processes on PostgreSQL --------------------------------------------------------------


@pytest.mark.postgres
def test_two_serve_processes_on_postgresql_serve_both_workspaces(tmp_path, postgres_url):
    with SlackApiStandin() as slack, ModelApiStandin() as model:
        model.worker, model.grader = answer, grade_by_rubric
        for team in ("T1", "T2"):
            slack.add_workspace(team)
        env = oauth_environment(slack, model, postgres_url)
        first = start(env, tmp_path, "first")
        second = start(env, tmp_path, "second")
        d = Deployment(slack, model, [first, second])
        try:
            assert install(first, "T1").status == 200
            assert install(second, "T2").status == 200
            for team, via in (("T1", 1), ("T2", 0)):  # each asked through the process it did not install on
                d.command(team, f"set {RUBRICS[team]}", bot=via)
            root = sr.new_ts()
            for team, via in (("T1", 1), ("T2", 0)):
                d.mention(team, "Write the release note", root, bot=via)
            for team in ("T1", "T2"):
                d.wait_final(team, root)
                assert {c.token for c in d.calls_in_thread(root) if c.team == team} == {
                    d.workspace(team).token
                }
            assert {c.team for c in d.calls_in_thread(root)} == {"T1", "T2"}
        finally:
            for bot in (first, second):
                bot.stop()
                bot.sender.close()
