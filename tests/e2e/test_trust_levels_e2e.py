"""Trust levels end to end, on SQLite and PostgreSQL: with `/rubric trust 0.9` and 30 verdicts an
editor agreed with, each criterion's threshold is 1 (every sample agreeing): a verdict the grader's
3 samples split 2–1 on is not acted on — "can't tell", no revision asked, its confidence shown — while
a unanimous one is; `/rubric report` shows the threshold, the coverage and the agreement observed."""

from __future__ import annotations

import threading
from collections.abc import Callable

from tests.e2e.conftest import CRITERIA, RUBRIC, RUN_TIMEOUT, Service, evaluations, posted_report
from tests.e2e.test_samples_e2e import splitting_grader
from tests.e2e.test_trust_e2e import channel_posts, command
from tests.standins import wait_for
from tests.standins.model_api import ChatRequest, Json, grade

CITES, POLITE = CRITERIA
EDITOR, SOMEONE = "UEDITOR", "UNOBODY"
REVIEWED_RUNS = 30
"""Verdicts an editor agrees with: at a 90 % target and risk 0.05, 29 all agreeing make the least
that can promise it (0.05 ** (1 / 29) > 0.9)."""


def unanimous(failing: tuple[str, ...] = ()) -> Callable[[ChatRequest], Json]:
    lock = threading.Lock()

    def script(request: ChatRequest) -> Json:
        with lock:
            return grade(CRITERIA, failing=failing, scored=request.is_scored)

    return script


def reviewed_channel(s: Service, channel: str) -> None:
    """`REVIEWED_RUNS` requests in `channel`, the grader unanimous, each agreed with by an editor."""
    s.model.grader = unanimous()
    roots = [s.mention(f"Question {i}?", channel) for i in range(REVIEWED_RUNS)]
    for root in roots:
        s.wait_finals(channel, root, 1)
        [evaluation] = evaluations(s.thread(channel, root))
        s.click("review_agree", evaluation, root, EDITOR)
        s.wait_message(evaluation, "1 review · no disagreements")  # shown after the recalibration


def ask(s: Service, channel: str, question: str) -> str:
    root = s.mention(question, channel)
    s.wait_finals(channel, root, 1)
    return root


def test_a_low_confidence_verdict_is_left_to_people_and_a_confident_one_acted_on(launch):
    s: Service = launch(RUBRIC_BOT_GRADER_SAMPLES="3", RUBRIC_BOT_RUBRIC_EDITORS=EDITOR)
    s.slack.add_user(SOMEONE, "Nobody")
    s.model.worker = lambda request: "Coffee is fine in moderation (WHO, 2023)."
    assert "Channel default rubric set" in command(s, f"set {RUBRIC}", "C1", EDITOR)

    assert "Trust is *off*" in command(s, "trust", "C1", SOMEONE)
    refused = command(s, "trust 0.9", "C1", SOMEONE)
    assert "Only <@UEDITOR>" in refused and "nothing was changed" in refused
    assert "takes a level from 0.5 to 0.99" in command(s, "trust 2", "C1", EDITOR)
    done = command(s, "trust 0.9", "C1", EDITOR)
    assert "Trust level 90%. 0 of 0 criteria have a threshold" in done
    announced = wait_for(lambda: channel_posts(s, "C1"), RUN_TIMEOUT, message="the trust announcement")
    assert "<@UEDITOR> set the grader's trust level to 90%" in announced[-1].all_text

    reviewed_channel(s, "C1")
    shown = command(s, "trust", "C1", SOMEONE)
    assert "Trust level *90%*" in shown and "2 of 2 criteria have a threshold" in shown
    assert f"*{CITES}* — confidence ≥ 1.00 acted on (30 trusted reviews)" in shown

    # 2 of 3 samples fail "Cites a source": under its threshold, so no revision is asked.
    s.model.grader = splitting_grader([False, False, True])
    before = len(s.model.requests("worker"))
    root = ask(s, "C1", "Is tea healthy?")
    assert len(s.model.requests("worker")) == before + 1  # answered once: nothing sent back
    [evaluation] = evaluations(s.thread("C1", root))
    assert f"❔ can't tell: {CITES} · _1 of 3 samples_" not in evaluation.all_text
    assert f"❔ can't tell: {CITES}" in evaluation.all_text
    assert "the grader said it fails with confidence 0.67, under 1.00" in evaluation.all_text
    [final] = s.finals("C1", root)
    assert f"a person's verdict is needed:_ {CITES}" in final.all_text

    # Every sample fails it: acted on, a revision is asked (each time, up to the cap of 3).
    s.model.grader = unanimous(failing=(CITES,))
    before = len(s.model.requests("worker"))
    root = ask(s, "C1", "Is cocoa healthy?")
    assert len(s.model.requests("worker")) == before + 3
    assert all(f"❌ {CITES}" in e.all_text for e in evaluations(s.thread("C1", root)))

    report = posted_report(s, "C1")
    assert "Trust level 90%" in report
    # 30 reviewed verdicts, the withheld one and cocoa's 3: 33 of 34 acted on.
    assert f"{CITES}* — λ 1.00 · coverage 97% (" in report and "of 34 · agreement on acted-on" in report
    assert "agreement on acted-on 100% (88–100%) of 30" in report
    assert "90% holds on this window" in report

    assert "Trust levels" in command(s, "history", "C1", SOMEONE)
    assert "Trust level off." in command(s, "trust off", "C1", EDITOR)
    assert "Trust is *off*" in command(s, "trust", "C1", SOMEONE)
