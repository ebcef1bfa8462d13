"""Trust in the grade end to end: calibration only from trusted reviews, and the audit grader,
against the real bot process and the stand-ins, on SQLite and PostgreSQL.

What the grader is shown is read from the model stand-in's requests; that something did *not* reach
it is checked on a later grade the test waits for, never a clock window.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from bot.cli.main import main
from tests.e2e.conftest import (
    CRITERIA,
    RUBRIC,
    RUN_TIMEOUT,
    Service,
    click_proposal,
    get,
    responses,
    wait_proposal,
)
from tests.standins import slack_requests as sr
from tests.standins import wait_for
from tests.standins.model_api import (
    DEFAULT_GAP,
    DRAFT_ANSWER,
    REVISED_ANSWER,
    ChatRequest,
    answering_model,
    grade,
)
from tests.standins.slack_api import SlackApiStandin, SlackMessage

EDITOR = "UEDITOR"
"""The channel's one rubric editor (`RUBRIC_BOT_RUBRIC_EDITORS`)."""


@pytest.fixture
def launch(launch: Callable[..., Service], slack_api: SlackApiStandin) -> Callable[..., Service]:
    """The e2e `launch`, with `EDITOR` the channel's one rubric editor and two other people Slack knows."""

    def start(**env: str) -> Service:
        for user in ("UNOBODY", "USECOND", "UTHIRD"):
            slack_api.add_user(user, user.title())
        return launch(**{"RUBRIC_BOT_RUBRIC_EDITORS": EDITOR, **env})

    return start


def command(s: Service, text: str, channel: str, user: str) -> str:
    """Run `/rubric …` as `user`; the ephemeral answer's text, blocks included."""
    answer = s.send(sr.slash_command(text, channel, user, response_url=s.slack.response_url(channel))).json()
    assert answer["response_type"] == "ephemeral", answer
    return answer["text"] + "\n" + "\n".join(str(block) for block in answer.get("blocks") or [])


def channel_posts(s: Service, channel: str) -> list[SlackMessage]:
    """Messages posted in the channel itself (not in a thread)."""
    return [m for m in s.slack.messages(channel) if m.thread_ts is None and m.event_type is None]


def ask_again(s: Service, channel: str, root: str, question: str) -> list[str]:
    """Ask in the thread and wait for its answer; what the grader was shown for it."""
    before = len(s.model.requests("grader"))
    done = len(s.finals(channel, root))
    s.say(question, channel, thread_ts=root)
    s.wait_finals(channel, root, done + 1)
    shown = s.grader_requests_after(before)
    assert shown
    return shown


def test_only_an_editors_or_three_peoples_disagreement_reaches_the_grader_and_an_editor_can_drop_one(launch):
    s = launch()
    root, first = s.graded_thread("C1")
    s.disagree(first, root, "UNOBODY", {"Is polite": ("fail", "LONE-VOICE: too curt")})
    s.wait_message(first, "1 disagreement on Is polite")
    assert not any("LONE-VOICE" in text for text in ask_again(s, "C1", root, "Is tea healthy?"))

    # Two accounts that agree cannot steer the grader while editors are named; a third person can.
    s.disagree(first, root, "USECOND", {"Is polite": ("fail", "SECOND-VOICE: agreed")})
    s.wait_message(first, "2 disagreements on Is polite")
    shown = ask_again(s, "C1", root, "Is yerba healthy?")
    assert not any("VOICE" in text for text in shown)
    s.disagree(first, root, "UTHIRD", {"Is polite": ("fail", "THIRD-VOICE: agreed too")})
    s.wait_message(first, "3 disagreements on Is polite")
    shown = ask_again(s, "C1", root, "Is mate healthy?")
    assert all("THIRD-VOICE" in text and "LONE-VOICE" not in text for text in shown)  # one case, newest
    assert all("UTHIRD and USECOND and UNOBODY, agreeing" in text for text in shown)

    second = [m for m in s.thread("C1", root) if m.event_type == "rubric_evaluation"][2]
    s.disagree(second, root, EDITOR, {"Cites a source": ("pass", "EDITOR-VOICE: the link is enough")})
    shown = ask_again(s, "C1", root, "Is cocoa healthy?")
    assert all("EDITOR-VOICE" in text and "UEDITOR, a rubric editor" in text for text in shown)

    listing = command(s, "calibration", "C1", "UNOBODY")
    numbers = [int(n) for n in re.findall(r"\*(\d+)\* · ", listing)]
    assert (
        len(numbers) == 2 and "<@UEDITOR>" in listing and "<@UTHIRD> and <@USECOND> and <@UNOBODY>" in listing
    )
    editors_example = numbers[0]  # newest first
    refused = command(s, f"calibration drop {editors_example}", "C1", "UNOBODY")
    assert "Only <@UEDITOR>" in refused and "nothing was changed" in refused

    # Trusted reviews are in the channel: the drop is replayed first and waits for an editor's Apply.
    assert "Nothing is changed yet" in command(s, f"calibration drop {editors_example}", "C1", EDITOR)
    click_proposal(s, wait_proposal(s, "C1", 1), "proposal_apply", EDITOR)
    announced = wait_for(
        lambda: [m for m in channel_posts(s, "C1") if "out of the grader's calibration" in m.all_text],
        RUN_TIMEOUT,
        message="the drop's announcement",
    )
    assert f"<@UEDITOR> took example {editors_example} out" in announced[-1].all_text
    assert "Calibration examples dropped" in command(s, "history", "C1", "UNOBODY")
    assert f"no calibration example {editors_example}" in command(
        s, f"calibration drop {editors_example}", "C1", EDITOR
    )
    shown = ask_again(s, "C1", root, "Is milk healthy?")
    assert all("EDITOR-VOICE" not in text and "THIRD-VOICE" in text for text in shown)


# -- the audit grader --------------------------------------------------------------------------------

AUDIT_MODEL = "audit-model"
"""The audit grader's model, as the model stand-in is asked for it."""


def audit_samples(s: Service) -> dict[tuple[str, ...], float]:
    """`rubric_bot_audit_total` on /metrics: its value by (agreement, loop, iterations)."""
    status, text = get(f"http://127.0.0.1:{s.bot.metrics_port}/metrics")
    assert status == 200
    return {
        (sample.labels["agreement"], sample.labels["loop"], sample.labels["iterations"]): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "rubric_bot_audit_total"
    }


def test_with_a_share_of_1_each_finished_run_gets_one_audit_call_never_shown_and_reported_by_iterations(
    launch, database_url, capsys
):
    s = launch(RUBRIC_BOT_AUDIT_MODEL=f"openai:{AUDIT_MODEL}", RUBRIC_BOT_AUDIT_SHARE="1")
    loop_grader = s.model.grader

    def grader(request: ChatRequest) -> Any:
        if request.model == AUDIT_MODEL:  # fails the answer that took a revision
            return grade(CRITERIA, failing=("Is polite",) if "HARD" in request.all_text else ())
        return grade(CRITERIA) if "EASY" in request.all_text else loop_grader(request)

    s.model.grader = grader
    assert "Channel default rubric set" in command(s, f"set {RUBRIC}", "C2", EDITOR)
    easy = s.mention("An EASY question", "C2")
    hard = s.mention("A HARD question", "C2")
    s.wait_finals("C2", easy, 1)
    s.wait_finals("C2", hard, 1)

    def audits() -> list[ChatRequest]:
        return [r for r in s.model.requests("grader") if r.model == AUDIT_MODEL]

    wait_for(lambda: sum(audit_samples(s).values()) >= 2, RUN_TIMEOUT, message="both runs' audits counted")
    assert len(audits()) == 2  # one each
    hard_audit = next(r for r in audits() if "HARD" in r.all_text)
    assert REVISED_ANSWER in hard_audit.all_text
    assert DRAFT_ANSWER not in hard_audit.all_text and DEFAULT_GAP not in hard_audit.all_text  # no history
    for root, iterations in ((easy, 1), (hard, 2)):
        thread = s.thread("C2", root)
        assert len([m for m in thread if m.event_type == "rubric_evaluation"]) == iterations
        assert not any(AUDIT_MODEL in m.all_text or "audit" in m.all_text.lower() for m in thread)
        assert len(s.finals("C2", root)) == 1

    samples = audit_samples(s)
    assert samples[("agree", "passed", "1")] == 1 and samples[("disagree", "passed", "2")] == 1
    assert samples[("disagree", "passed", "1")] == 0 and samples[("agree", "passed", "2")] == 0

    s.send(sr.slash_command("report", "C2", "UNOBODY", response_url=s.slack.response_url("C2")))
    (told,) = wait_for(lambda: responses(s.slack, "C2"), RUN_TIMEOUT, message="the report's answer")
    shown = json.dumps(told.args["blocks"], ensure_ascii=False)
    buckets = (
        "1 iteration: 1 run, 1 audited: too few audits to read · 2 iterations: 1 run, 1 audited: too few "
        "audits to read · 3+ iterations: 0 runs, none audited"
    )
    first_grade = (
        "First grade against the audit (the same runs, so the same requests): 2 audited runs: too few"
    )
    assert "the audit grader failed 2 audits: too few audits to read" in shown
    assert buckets in shown and first_grade in shown
    assert "Harder requests take more iterations" in shown

    assert main(["report", "--db", database_url, "--channel", "C2"]) == 0
    printed = capsys.readouterr().out
    assert "the audit grader failed 2 audits: too few audits to read" in printed
    assert buckets in printed and first_grade in printed
    assert main(["report", "--db", database_url, "--channel", "C2", "--json"]) == 0
    audit = json.loads(capsys.readouterr().out)["runs"]["audit"]
    assert [(b["runs"], b["audited"]) for b in audit["by_iterations"].values()] == [(1, 1), (1, 1), (0, 0)]
    # The hard run's first answer failed the loop's grader, and the audit failed its final answer.
    assert audit["first_grade"] == {"runs": 2, "agreed": 2, "first_failed": 1, "fixed": 0, "loop_only": 1}

    # The export: the rows of each audited run's last iteration (the final answer) carry its audit.
    assert main(["export", "--db", database_url, "--channel", "C2"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    hard_rows = [row for row in rows if row["thread_ts"] == hard]
    assert sorted({row["iteration"] for row in hard_rows}) == [0, 1]
    failed = {"model": answering_model(AUDIT_MODEL), "verdict": "fail", "reason": "Not yet met: Is polite."}
    assert [row["audit"] for row in hard_rows if row["iteration"] == 1] == [failed, failed]
    assert [row["audit"] for row in hard_rows if row["iteration"] == 0] == [None, None]
    easy_rows = [row for row in rows if row["thread_ts"] == easy]
    assert [row["audit"]["verdict"] for row in easy_rows] == ["pass", "pass"]
