"""No grader change without a replay, end to end on SQLite and PostgreSQL: in a channel whose
iterations an editor reviewed, `/rubric set` posts the replay of the new rubric against those reviews
(agreement and κ before → after with the interval of each difference, the flips linked) and changes
nothing until an editor clicks Apply — a non-editor's Apply is refused, Cancel leaves it, a proposal
outlives a restart, a stale one is refused — `/rubric set!` applies at once and says the replay was
skipped, and `/rubric history` keeps each change's replay; a calibration drop and a workspace's new
grader model are held the same way."""

from __future__ import annotations

import re
from collections.abc import Callable

from tests.e2e.conftest import (
    CRITERIA,
    RUBRIC,
    RUN_TIMEOUT,
    Service,
    click_proposal,
    evaluations,
    wait_proposal,
)
from tests.e2e.test_agreement_e2e import rubric_of
from tests.e2e.test_trust_e2e import channel_posts, command
from tests.e2e.test_workspace_settings_e2e import choose_models
from tests.standins import wait_for
from tests.standins.model_api import ChatRequest, Json, grade

CITES, POLITE = CRITERIA
EDITOR, SOMEONE, ADMIN = "UEDITOR", "USOMEONE", "UADMIN"
CHANNEL = "C1"
REVIEWED = 10
"""Iterations the editor agrees with: the fewest for which figures are shown."""
RUDE = (1, 4, 7)
"""The reviewed requests the stricter rubric fails on politeness (the editor had passed them)."""
STRICTER = f"{RUBRIC}\n- Is short"
"""The proposed rubric: adding "Is short" makes the stand-in grader fail "Is polite" on RUDE requests."""
ALLOWED = "openai:gpt-4o-mini,openai:gpt-4.1"


def grader(request: ChatRequest) -> Json:
    """Passes everything, except "Is polite" on a RUDE request graded against the stricter rubric
    or by gpt-4.1."""
    criteria = rubric_of(request)
    strict = "Is short" in criteria or request.model == "gpt-4.1"
    return grade(criteria, failing=[POLITE] if strict and "RUDE" in request.all_text else [])


def reviewed_channel(s: Service) -> None:
    """`REVIEWED` answered requests in the channel, each agreed with by the editor."""
    assert "Channel default rubric set" in command(s, f"set {RUBRIC}", CHANNEL, EDITOR)  # no reviews yet
    roots = [s.mention(f"Question {i} {'RUDE' if i in RUDE else ''}", CHANNEL) for i in range(REVIEWED)]
    for root in roots:
        s.wait_finals(CHANNEL, root, 1)
        [evaluation] = evaluations(s.thread(CHANNEL, root))
        s.click("review_agree", evaluation, root, EDITOR)
        s.wait_message(evaluation, "1 review")


def started(launch: Callable[..., Service]) -> Service:
    s = launch(
        RUBRIC_BOT_RUBRIC_EDITORS=EDITOR, RUBRIC_BOT_MAX_ITERATIONS="1", RUBRIC_BOT_ALLOWED_MODELS=ALLOWED
    )
    s.slack.add_user(SOMEONE, "Someone")
    s.slack.add_user(EDITOR, "Eddie")
    s.slack.add_user(ADMIN, "Ada", admin=True)
    s.model.worker = lambda request: "An answer."
    s.model.grader = grader
    reviewed_channel(s)
    return s


def told(s: Service, user: str) -> list[str]:
    return [c.args["text"] for c in s.slack.calls("chat.postEphemeral") if c.args.get("user") == user]


def shown_rubric(s: Service) -> str:
    return command(s, "show", CHANNEL, SOMEONE)


def test_a_new_rubric_is_replayed_and_waits_for_an_editors_apply(launch):
    s = started(launch)

    held = command(s, f"set {STRICTER}", CHANNEL, EDITOR)
    assert "Nothing is changed yet: I'm replaying the change on 10 reviewed iterations" in held
    offer = wait_proposal(s, CHANNEL, 1)
    text = offer.all_text
    assert f"<@{EDITOR}> proposes a new default rubric for this channel" in text
    # Per criterion, before → after with the interval of the difference and its count.
    polite = next(line for line in text.splitlines() if line.startswith(f"*{POLITE}*"))
    assert "agreement 1.00→0.70 (−0.30, 95 % " in polite and "on 10 verdicts" in polite
    cites = next(line for line in text.splitlines() if line.startswith(f"*{CITES}*"))
    assert "agreement 1.00→1.00 (+0.00, 95 % +0.00…+0.00) on 10 verdicts" in cites
    assert "*Flips (3)* — 0 now match the team, 3 no longer do" in text
    assert (
        len(re.findall(r"<https://slack\.com/archives/C1/p\d+\?thread_ts=[\d.]+\|iteration 1 of run", text))
        == 3
    )
    assert (
        "```Greet" not in text and text.count("```") >= 2 * 3 + 2
    )  # the rubric and each flip's words fenced
    assert RUBRIC in shown_rubric(s) and "Is short" not in shown_rubric(s)  # nothing changed yet

    click_proposal(s, offer, "proposal_apply", SOMEONE)
    wait_for(lambda: told(s, SOMEONE), RUN_TIMEOUT, message="the refusal")
    assert "Only <@UEDITOR>" in told(s, SOMEONE)[-1] and "Is short" not in shown_rubric(s)

    s.bot.restart()  # the proposal is stored: it can be applied after a restart
    click_proposal(s, offer, "proposal_apply", EDITOR)
    applied = s.wait_message(offer, f"Applied by <@{EDITOR}>")
    assert not any(b["type"] == "actions" for b in applied.blocks)
    assert "Is short" in shown_rubric(s)
    history = command(s, "history", CHANNEL, SOMEONE)
    assert re.search(
        r"replayed on 10 reviewed iterations: agreement 1\.00→0\.85 \(−0\.15, 95 % −0\.\d\d…[−+]0\.\d\d\) "
        rf"on 20 verdicts; 3 flips · applied by <@{EDITOR}>",
        history,
    ), history
    click_proposal(s, offer, "proposal_apply", EDITOR)  # a second click changes nothing more
    wait_for(lambda: told(s, EDITOR), RUN_TIMEOUT, message="the answer to the second click")
    assert f"This proposal was applied by <@{EDITOR}>; nothing was changed." in told(s, EDITOR)[-1]

    # Cancel leaves the rubric as it is.
    command(s, f"set {RUBRIC}", CHANNEL, EDITOR)
    cancelled = wait_proposal(s, CHANNEL, 2)
    click_proposal(s, cancelled, "proposal_cancel", EDITOR)
    s.wait_message(cancelled, f"Cancelled by <@{EDITOR}>: nothing was changed.")
    assert "Is short" in shown_rubric(s)

    # A proposal made before another change is refused as stale; set! applies at once, saying so.
    command(s, f"set {RUBRIC}\n- Is kind", CHANNEL, EDITOR)
    stale = wait_proposal(s, CHANNEL, 3)
    forced = command(s, f"set! {RUBRIC}\n- Is brief", CHANNEL, EDITOR)
    assert "Channel default rubric set" in forced and "Is brief" in shown_rubric(s)
    announced = channel_posts(s, CHANNEL)[-1].all_text
    assert "Is brief" in announced and "replay skipped (`/rubric set!`)" in announced
    click_proposal(s, stale, "proposal_apply", EDITOR)
    s.wait_message(stale, "Not applied: this channel's rubric changed since it was proposed")
    assert "Is kind" not in shown_rubric(s)
    assert "replay skipped (`/rubric set!`)" in command(s, "history", CHANNEL, SOMEONE)


def test_a_calibration_drop_and_a_new_grader_model_wait_for_apply(launch):
    s = started(launch)

    held = command(s, "calibration drop 1", CHANNEL, EDITOR)
    assert "Nothing is changed yet" in held
    drop = wait_proposal(s, CHANNEL, 1)
    assert "proposes taking example 1 out of this channel's calibration" in drop.all_text
    assert "example 1 ·" not in command(s, "history", CHANNEL, SOMEONE)  # not dropped yet
    click_proposal(s, drop, "proposal_apply", EDITOR)
    s.wait_message(drop, f"Applied by <@{EDITOR}>")
    history = command(s, "history", CHANNEL, SOMEONE)
    assert "example 1 ·" in history and "replayed on 10 reviewed iterations" in history

    choose_models(s, ADMIN, grader="openai:gpt-4.1")
    model = wait_proposal(s, CHANNEL, 2)
    text = model.all_text
    assert "the grader model of this workspace: `openai:gpt-4.1` instead of `openai:gpt-4o-mini`" in text
    assert "*Flips (3)*" in text
    held_words = wait_for(lambda: told(s, ADMIN), RUN_TIMEOUT, message="the admin's confirmation")
    assert "The new grader model is not in force yet" in held_words[-1]
    root = s.mention("Graded before Apply", CHANNEL)
    s.wait_finals(CHANNEL, root, 1)
    graded = [r for r in s.model.requests("grader") if "Graded before Apply" in r.all_text]
    assert {r.model for r in graded} == {"gpt-4o-mini"}

    click_proposal(s, model, "proposal_apply", EDITOR)  # an editor, not an admin
    wait_for(lambda: told(s, EDITOR), RUN_TIMEOUT, message="the refusal")
    assert "Only this workspace's admins and owners may change its grader model" in told(s, EDITOR)[-1]
    click_proposal(s, model, "proposal_apply", ADMIN)
    s.wait_message(model, f"Applied by <@{ADMIN}>")
    root = s.mention("Graded after Apply", CHANNEL)
    s.wait_finals(CHANNEL, root, 1)
    graded = [r for r in s.model.requests("grader") if "Graded after Apply" in r.all_text]
    assert {r.model for r in graded} == {"gpt-4.1"}
