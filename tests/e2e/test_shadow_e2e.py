"""The shadow grader end to end, against the real bot process and the stand-ins, on SQLite and
PostgreSQL: it grades a share of live iterations with what the live grader was given, is never shown
in the thread and never acts, is reported beside the live grader, and is paid for like any role.

That the shadow grader did *not* act or speak is checked once the thread's next run has ended: a
thread's jobs run one at a time, and a run's shadow grades are made in its job, after its answer.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from bot.cli.main import main
from tests.e2e.conftest import (
    CRITERIA,
    RUBRIC,
    RUN_TIMEOUT,
    Service,
    evaluations,
    metrics,
    posted_report,
    value,
)
from tests.e2e.stored_rows import tables_containing
from tests.standins import slack_requests as sr
from tests.standins import wait_for
from tests.standins.model_api import ChatRequest, ErrorReply, Json, grade
from tests.standins.slack_api import SlackMessage

SHADOW_MODEL = "gpt-4.1-mini"
"""The shadow grader's model (priced, unlike the live grader's stand-in alias would need)."""

LIVE_MODEL = "gpt-4o-mini"
"""The live worker's and grader's model (the e2e default)."""

POLITE, CITES = CRITERIA[1], CRITERIA[0]

EDITOR = "UEDITOR"
"""The channel's rubric editor, whose reviews are trusted."""

PROVIDER_TEXT = "SHADOW-PROVIDER-DETAIL overloaded"
"""The shadow provider's error text when it fails: never in an INFO line, nor in what is stored."""


def shadow_env(share: str) -> dict[str, str]:
    return {"RUBRIC_BOT_SHADOW_GRADER_MODEL": f"openai:{SHADOW_MODEL}", "RUBRIC_BOT_SHADOW_SHARE": share}


def scripted(s: Service, shadow: Callable[[ChatRequest], Any] | None = None) -> None:
    """One iteration per run: the worker answers, the live grader passes every criterion, and the
    shadow grader (by default) fails "Is polite"."""
    s.model.worker = lambda request: f"Answer to {request.last_user_text[-12:]}."

    def grader(request: ChatRequest) -> Json:
        if request.model == SHADOW_MODEL:
            return shadow(request) if shadow else grade(CRITERIA, failing=(POLITE,))
        return grade(CRITERIA)

    s.model.grader = grader


def assert_never_sent_to_slack(s: Service) -> None:
    """No Slack call of the bot carried the shadow model's name."""
    assert not any(SHADOW_MODEL in json.dumps(call.args, default=str) for call in s.slack.calls())


def shadow_requests(s: Service) -> list[ChatRequest]:
    return [r for r in s.model.requests("grader") if r.model == SHADOW_MODEL]


def live_requests(s: Service) -> list[ChatRequest]:
    return [r for r in s.model.requests("grader") if r.model == LIVE_MODEL]


def shadow_count(s: Service, outcome: str) -> float:
    return value(metrics(s.bot), "rubric_bot_shadow_grades_total", outcome=outcome)


def ask_in_new_threads(s: Service, channel: str, count: int) -> list[str]:
    """Ask `count` questions, each in a thread of its own, and wait for every answer; their roots."""
    roots = [s.mention(f"Question number {n:02d}?", channel) for n in range(count)]
    for root in roots:
        s.wait_finals(channel, root, 1)
    return roots


UNGUESSABLE = re.compile(r"-[0-9a-f]{8,}\b")
"""The random part of the delimiters the grader's payload wraps untrusted text in."""


def payload(request: ChatRequest) -> str:
    """What a grader request shows the grader, its random delimiters masked."""
    return UNGUESSABLE.sub("-…", request.last_user_text)


def shown(thread: list[SlackMessage], channel: str) -> list[tuple[str | None, str]]:
    """What a thread shows, without what names its channel or its messages (ids and timestamps)."""
    return [
        (m.event_type, re.sub(r"\d{10}\.\d{6}", "TS", m.all_text.replace(channel, "CHANNEL"))) for m in thread
    ]


def test_with_a_share_of_1_every_live_iteration_is_graded_in_the_shadow_never_shown_and_reported(
    launch, database_url, capsys
):
    s = launch(**shadow_env("1"), RUBRIC_BOT_MAX_ITERATIONS="1", RUBRIC_BOT_RUBRIC_EDITORS=EDITOR)
    scripted(s)
    channel = "CSHADOW"
    answer = s.send(sr.slash_command(f"set {RUBRIC}", channel, EDITOR)).json()
    assert "Channel default rubric set" in answer["text"]
    roots = ask_in_new_threads(s, channel, 10)
    wait_for(lambda: shadow_count(s, "graded") >= 10, RUN_TIMEOUT, message="ten shadow grades")

    # Each live iteration once, with exactly what the live grader was shown: rubric, draft, examples.
    assert len(shadow_requests(s)) == 10
    live = {payload(r) for r in live_requests(s)}
    assert all(payload(r) in live for r in shadow_requests(s))
    assert len({payload(r) for r in shadow_requests(s)}) == 10

    # Never shown, never acting: the shadow failed "Is polite" every time, the runs passed on the
    # live grader's word, with one iteration each and nothing of the shadow in the thread.
    for root in roots:
        thread = s.thread(channel, root)
        assert len(evaluations(thread)) == 1
        assert "satisfied" in s.finals(channel, root)[0].all_text.lower()
        assert not any(SHADOW_MODEL in m.all_text or "shadow" in m.all_text.lower() for m in thread)
    assert_never_sent_to_slack(s)

    for root in roots:  # an editor agrees with the live grader on every criterion: trusted reviews
        [evaluation] = evaluations(s.thread(channel, root))
        s.click("review_agree", evaluation, root, EDITOR)
        s.wait_message(evaluation, "1 review")

    report = posted_report(s, channel)
    assert "Shadow grader" in report and "10 live iterations graded in the shadow" in report
    polite = next(line for line in report.splitlines() if POLITE in line and SHADOW_MODEL in line)
    assert "with people: shadow 0% (" in polite and "· live 100% (" in polite
    assert "on 10 trusted reviews from 10 runs" in polite
    assert "flips against live: 10 of 10 iterations: 100% (95% CI 100–100%)" in polite
    cites = next(line for line in report.splitlines() if CITES in line and SHADOW_MODEL in line)
    assert "with people: shadow 100% (" in cites and "flips against live: 0 of 10 iterations: 0%" in cites

    assert main(["report", "--db", database_url, "--channel", channel]) == 0
    printed = capsys.readouterr().out
    assert "Shadow grader: 10 live iterations graded in the shadow" in printed
    assert "flips against live: 10 of 10 iterations: 100%" in printed
    assert main(["report", "--db", database_url, "--channel", channel, "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    criteria = {c["criterion"]: c for c in document["runs"]["shadow"]["criteria"]}
    assert criteria[POLITE]["model"].startswith(SHADOW_MODEL)
    assert (criteria[POLITE]["flips"], criteria[POLITE]["compared"]) == (10, 10)
    assert criteria[POLITE]["shadow"]["n"] == 10 and criteria[POLITE]["shadow"]["percent_agreement"] == 0
    assert criteria[POLITE]["live"]["percent_agreement"] == 1

    # Paid for like any role: tokens and money in /metrics and in the cost history, under its name.
    samples = metrics(s.bot)
    assert value(samples, "rubric_bot_tokens_total", role="shadow") > 0
    assert value(samples, "rubric_bot_cost_usd_total", role="shadow") > 0
    assert main(["usage", "--db", database_url, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    (spent,) = [row for row in rows if row["user"] == "shadow"]
    assert spent["tokens"] > 0 and spent["usd"] > 0 and spent["requests"] == 0


def test_a_share_of_0_grades_nothing_and_the_thread_is_the_same_as_with_every_iteration_shadowed(launch):
    def conversation(s: Service, channel: str) -> list[SlackMessage]:
        s.set_channel_rubric(channel)
        root = s.mention("First question?", channel)
        s.wait_finals(channel, root, 1)
        s.mention("Second question?", channel, thread_ts=root)
        s.wait_finals(channel, root, 2)
        return s.thread(channel, root)

    s = launch(**shadow_env("0"))
    without = conversation(s, "CNONE")
    assert shadow_requests(s) == []  # the first run's job had ended when the second's began
    s.bot.stop()

    s = launch(**shadow_env("1"))
    with_shadow = conversation(s, "CALL")
    # Two runs of two iterations each (the first answer fails a criterion, the revision passes).
    wait_for(lambda: shadow_count(s, "graded") >= 4, RUN_TIMEOUT, message="four shadow grades")
    assert len(shadow_requests(s)) == 4
    assert shown(with_shadow, "CALL") == shown(without, "CNONE")


def test_a_failing_shadow_grader_leaves_the_run_as_it_was_and_its_text_out_of_the_logs(
    launch, database_url, capsys
):
    s = launch(**shadow_env("1"), RUBRIC_BOT_MAX_ITERATIONS="1")
    scripted(s, shadow=lambda request: ErrorReply(500, PROVIDER_TEXT))
    channel = "CFAIL"
    s.set_channel_rubric(channel)
    (root,) = ask_in_new_threads(s, channel, 1)
    wait_for(lambda: shadow_count(s, "error") >= 1, RUN_TIMEOUT, message="the failed shadow grade")

    assert "satisfied" in s.finals(channel, root)[0].all_text.lower()
    assert len(evaluations(s.thread(channel, root))) == 1
    assert not any("shadow" in m.all_text.lower() for m in s.thread(channel, root))
    assert_never_sent_to_slack(s)
    logs = s.bot.stderr_text()
    assert "the shadow grader failed" in logs
    # The provider's text only where the grader logs every failure, under a reference, never at INFO.
    told = [line for line in logs.splitlines() if "SHADOW-PROVIDER-DETAIL" in line]
    assert told and all(" WARNING grading." in line and "(ref " in line for line in told)

    assert main(["report", "--db", database_url, "--channel", channel]) == 0
    assert "1 failed and are left out" in capsys.readouterr().out
    assert not tables_containing(database_url, "SHADOW-PROVIDER-DETAIL")  # kept as a reference only


def test_a_spent_budget_skips_the_shadow_grade_never_the_run(launch):
    # A channel budget of one token: the run is admitted (nothing spent yet) and spends past it, so
    # the shadow grade's reservation after it is refused.
    s = launch(**shadow_env("1"), RUBRIC_BOT_MAX_ITERATIONS="1", RUBRIC_BOT_DAILY_TOKENS_PER_CHANNEL="1")
    scripted(s)
    channel = "CBUDGET"
    s.set_channel_rubric(channel)
    (root,) = ask_in_new_threads(s, channel, 1)
    wait_for(lambda: shadow_count(s, "over_budget") >= 1, RUN_TIMEOUT, message="the refused shadow grade")

    assert "satisfied" in s.finals(channel, root)[0].all_text.lower()
    assert shadow_requests(s) == []
    assert shadow_count(s, "graded") == 0
    assert value(metrics(s.bot), "rubric_bot_tokens_total", role="shadow") == 0


def test_the_shadow_grader_is_shown_the_calibration_examples_the_live_grader_was(launch):
    s = launch(**shadow_env("1"), RUBRIC_BOT_RUBRIC_EDITORS=EDITOR)
    root, first = s.graded_thread("CCALIB")  # two iterations: the first answer fails a criterion
    s.disagree(first, root, EDITOR, {POLITE: ("fail", "CALIBRATION-MARK: too curt")})
    s.wait_message(first, f"1 disagreement on {POLITE}")
    s.mention("Is tea healthy?", "CCALIB", thread_ts=root)
    s.wait_finals("CCALIB", root, 2)
    wait_for(lambda: shadow_count(s, "graded") >= 4, RUN_TIMEOUT, message="both runs' shadow grades")

    # The second run's two iterations were graded with the editor's example, by both graders alike.
    calibrated = [r for r in shadow_requests(s) if "CALIBRATION-MARK" in r.all_text]
    assert len(calibrated) == 2
    live = {payload(r) for r in live_requests(s) if "CALIBRATION-MARK" in r.all_text}
    assert {payload(r) for r in calibrated} == live
