"""Reviews that measure, end to end on SQLite and PostgreSQL through the real bot and the stand-ins:
`/rubric review blind on` (an editor's) makes the form open with nothing selected and no grader
verdict shown, and Agree read Review…; `/rubric review double 1` asks the next reviewer but the first
for a blind second review, and the people's own agreement appears in `/rubric report` and
`rubric-bot report` beside the grader's, with the count of one-click Agrees."""

from __future__ import annotations

import json
from typing import Any

from bot.cli.main import main
from tests.e2e.conftest import CRITERIA, RUBRIC, RUN_TIMEOUT, Service, evaluations, form_values, posted_report
from tests.e2e.test_agreement_e2e import grader, set_rubric
from tests.e2e.test_trust_e2e import channel_posts, command
from tests.standins import slack_requests as sr
from tests.standins import wait_for
from tests.standins.slack_api import SlackMessage

CITES, POLITE = CRITERIA
EDITOR, SOMEONE, SECOND = "UEDITOR", "UNOBODY", "USECOND"
DOUBLE_REVIEWED = 10
"""Iterations two people review: the fewest the people's agreement is shown from."""


def answered(s: Service, channel: str, request: str) -> tuple[str, SlackMessage]:
    """Ask in a new thread (the grader judges both criteria: POLITE) and wait for the answer."""
    root = s.mention(f"{request} POLITE", channel)
    s.wait_finals(channel, root, 1)
    [evaluation] = evaluations(s.thread(channel, root))
    return root, evaluation


def buttons(message: SlackMessage) -> list[tuple[str, str]]:
    actions = next(b for b in message.blocks if b["type"] == "actions")
    return [(b["text"]["text"], b["action_id"]) for b in actions["elements"]]


def opened_form(s: Service, action_id: str, message: SlackMessage, root: str, user: str) -> dict[str, Any]:
    """Click `action_id` with a trigger; the form the bot opened for it."""
    trigger = sr.new_trigger_id()
    s.click(action_id, message, root, user, trigger_id=trigger)
    opened = wait_for(
        lambda: [c for c in s.slack.calls("views.open") if c.args.get("trigger_id") == trigger],
        RUN_TIMEOUT,
        message=f"views.open after {action_id}",
    )
    return opened[0].args["view"]


def preselected(view: dict[str, Any]) -> list[str | None]:
    menus = [b for b in view["blocks"] if b["type"] == "input" and b["element"]["type"] == "static_select"]
    return [m["element"].get("initial_option", {}).get("value") for m in menus]


def submit(s: Service, view: dict[str, Any], user: str, cites: str = "pass", polite: str = "pass") -> None:
    values = form_values(view, {CITES: (cites, ""), POLITE: (polite, "")})
    assert s.submit_form(view, values, user).body == ""


def test_blind_mode_opens_the_form_empty_hides_the_grader_and_agree_reads_review(launch):
    s: Service = launch(RUBRIC_BOT_MAX_ITERATIONS="1", RUBRIC_BOT_RUBRIC_EDITORS=EDITOR)
    s.slack.add_user(SOMEONE, "Nobody")
    s.model.worker = lambda request: "Answer."
    s.model.grader = grader
    channel = "CBLIND"
    assert "Channel default rubric set" in command(s, f"set {RUBRIC}", channel, EDITOR)
    assert "blind off · double review off (never changed)" in command(s, "review", channel, SOMEONE)
    refused = command(s, "review blind on", channel, SOMEONE)
    assert "Only <@UEDITOR>" in refused and "blind off" in command(s, "review", channel, SOMEONE)
    assert "takes `on` or `off`, not `soon`" in command(s, "review blind soon", channel, EDITOR)

    done = command(s, "review blind on", channel, EDITOR)
    assert "Reviews in this channel: blind on · double review off. Announced in this channel." in done
    assert any("blind on" in m.text and "<@UEDITOR>" in m.text for m in channel_posts(s, channel))
    assert "blind on · double review off already; nothing was changed" in command(
        s, "review blind on", channel, EDITOR
    )
    root, evaluation = answered(s, channel, "Question 1 FAIL")
    assert buttons(evaluation) == [("Review…", "review_open")]

    view = opened_form(s, "review_open", evaluation, root, "U1")
    assert preselected(view) == [None, None]  # nothing selected
    assert "Grader:" not in json.dumps(view) and "stay hidden until you save" in json.dumps(view)
    submit(s, view, "U1", cites="pass")

    # Saved: now the reviewer is shown how the grader judged (it failed "Cites a source").
    revealed = wait_for(
        lambda: [c for c in s.slack.calls("chat.postEphemeral") if "How the grader judged" in c.args["text"]],
        RUN_TIMEOUT,
        message="the grader's verdicts shown to the blind reviewer",
    )
    assert revealed[0].args["user"] == "U1"
    assert f"*{CITES}* — grader ❌ Fail (you: ✅ Pass)" in revealed[0].args["text"]
    updated = s.wait_message(evaluation, f"1 review · 1 disagreement on {CITES}")
    assert buttons(updated) == [("Review…", "review_open")]

    # An Agree button from before blind mode opens the blind form: no one-click review is recorded.
    second = opened_form(s, "review_agree", evaluation, root, "U2")
    assert preselected(second) == [None, None]
    assert "1 review ·" in next(m for m in s.slack.messages(channel) if m.ts == evaluation.ts).all_text
    history = command(s, "history", channel, SOMEONE)
    assert "*Review modes*" in history and "blind on · double review off · <@UEDITOR>" in history


def test_double_review_asks_a_second_person_and_the_reports_show_people_beside_the_grader(
    launch, database_url, capsys
):
    s: Service = launch(RUBRIC_BOT_MAX_ITERATIONS="1")
    s.model.worker = lambda request: "Answer."
    s.model.grader = grader  # passes both criteria
    channel = "CDOUBLE"
    set_rubric(s, channel, RUBRIC)
    assert "double review 100%" in command(s, "review double 1", channel, "U1")

    for i in range(DOUBLE_REVIEWED):
        root, evaluation = answered(s, channel, f"Question {i}")
        s.click("review_agree", evaluation, root, "U1")
        s.wait_message(evaluation, "1 review · 🔁 a second review is wanted")
        if i == 0:  # the first reviewer is not asked again: their form is pre-set as before
            again = opened_form(s, "review_disagree", evaluation, root, "U1")
            assert preselected(again) == ["pass", "pass"] and "second review" not in json.dumps(again)
        view = opened_form(s, "review_agree", evaluation, root, SECOND)
        assert "A second review is wanted on this iteration." in json.dumps(view)
        assert preselected(view) == [None, None]
        # The second person differs from the first (and the grader) on one iteration's citation.
        submit(s, view, SECOND, cites="fail" if i == DOUBLE_REVIEWED - 1 else "pass")
        s.wait_message(evaluation, "2 reviews ·")

    shown = posted_report(s, channel)
    assert "Of 20 reviews, 10 (50%) were one-click Agrees" in shown and "and 10 blind" in shown
    assert "10 iterations reviewed by two people" in shown
    assert "*People's own agreement*" in shown
    assert (
        f"*{CITES}* — people agree 90% (" in shown and "on 10 double-reviewed verdicts from 10 runs" in shown
    )
    assert "grader 95% (" in shown and "grader within the people's own agreement" in shown
    assert f"*{POLITE}* — people agree 100% (" in shown

    assert main(["report", "--db", database_url, "--channel", channel]) == 0
    printed = capsys.readouterr().out
    assert "Of 20 reviews, 10 (50%) were one-click Agrees" in printed
    [cites] = [line for line in printed.splitlines() if line.startswith(CITES) and "within" in line]
    assert cites.split()[3:6] == ["10", "10", "90%"] and "95%" in cites
    assert main(["report", "--db", database_url, "--channel", channel, "--json"]) == 0
    reviewing = json.loads(capsys.readouterr().out)["report"]["reviewing"]
    assert (reviewing["reviews"], reviewing["one_click"], reviewing["blind"]) == (20, 10, 10)
    [people] = [p for p in reviewing["people"] if p["criterion"] == CITES]
    assert people["people"]["n"] == 10 and people["people"]["percent_agreement"] == 0.9
    assert people["comparison"] == "within" and people["grader"]["percent_agreement"] == 0.95
