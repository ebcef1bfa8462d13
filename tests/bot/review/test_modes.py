"""Review modes: the blind form and the Review… button, who is asked for a second review, the iterations
double review picks, what a blind reviewer sees once saved, and `/rubric review`'s argument."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from bot.db.review_modes import ReviewModes
from bot.db.reviews import ReviewRow, ReviewVerdict
from bot.listeners.command_text import CommandError, ReviewModeChange, review_mode_change
from bot.review.controls import REVIEW_ACTION_ID, ReviewTally, review_controls
from bot.review.form import review_modal
from bot.review.modes import picked_for_double_review, review_ask
from bot.review.saving import grader_revealed
from bot.slack.blocks import block_dicts
from tests.bot.review.test_review import inputs, list_evaluation

NOW = datetime.now(UTC)


def reviewed_by(*reviewers: str) -> list[ReviewRow]:
    return [
        ReviewRow("T1", "C1", "1.0", "run-7", 1, "Cites a source", "fail", "fail", "", r, NOW)
        for r in reviewers
    ]


def test_the_blind_form_preselects_nothing_and_shows_no_grader_verdict():
    view = review_modal(list_evaluation(), channel="C1", message_ts="1.1", thread_ts="1.0", blind=True)

    menus = [b for b in inputs(view) if b["element"]["type"] == "static_select"]
    assert [m["label"]["text"] for m in menus] == ["States the deadline", "Cites a source"]
    assert all("initial_option" not in m["element"] and "hint" not in m for m in menus)
    text = json.dumps(view)
    assert "Grader:" not in text and "No source is given." not in text  # neither verdict nor reason
    assert "the grader's verdicts stay hidden until you save" in text
    assert json.loads(view["private_metadata"])["blind"] is True


def test_a_blind_reviewer_revisiting_finds_their_own_earlier_verdicts_and_still_no_grader():
    earlier = [ReviewRow("T1", "C1", "1.0", "run-7", 1, "Cites a source", "fail", "pass", "seen", "U1", NOW)]
    view = review_modal(
        list_evaluation(), channel="C1", message_ts="1.1", thread_ts="1.0", previous=earlier, blind=True
    )

    menus = [b for b in inputs(view) if b["element"]["type"] == "static_select"]
    assert [m["element"].get("initial_option", {}).get("value") for m in menus] == [None, "pass"]
    assert "Grader:" not in json.dumps(view)


def test_a_second_reviewer_is_told_a_second_review_is_wanted():
    view = review_modal(
        list_evaluation(), channel="C1", message_ts="1.1", thread_ts="1.0", blind=True, second=True
    )

    assert "A second review is wanted on this iteration." in json.dumps(view)


def test_blind_mode_shows_one_review_button_instead_of_agree_and_disagree():
    [actions] = block_dicts(review_controls(list_evaluation(), blind=True))

    assert [(b["text"]["text"], b["action_id"]) for b in actions["elements"]] == [
        ("Review…", REVIEW_ACTION_ID)
    ]
    pre_set = block_dicts(review_controls(list_evaluation()))[0]
    assert [b["text"]["text"] for b in pre_set["elements"]] == ["Agree", "Disagree…"]


def test_the_tally_says_a_second_review_is_wanted_and_keeps_the_first_ones_disagreements_unsaid():
    rows = [ReviewRow("T1", "C1", "1.0", "run-7", 1, "Cites a source", "fail", "pass", "", "U1", NOW)]

    wanted = ReviewTally.from_rows(rows, second_wanted=True).summary()

    assert wanted.startswith("1 review · 🔁 a second review is wanted") and "disagreement" not in wanted
    assert ReviewTally.from_rows(rows).summary() == "1 review · 1 disagreement on Cites a source"


def test_a_second_review_is_asked_of_anyone_but_the_first_reviewer_and_only_once():
    everyone = ReviewModes(double_share=1.0)

    assert review_ask(everyone, reviewed_by("U1"), "run-7", 1, "U2").second
    assert review_ask(everyone, reviewed_by("U1"), "run-7", 1, "U2").blind
    first_again = review_ask(everyone, reviewed_by("U1"), "run-7", 1, "U1")
    assert not first_again.second and not first_again.blind
    assert not review_ask(everyone, reviewed_by("U1", "U2"), "run-7", 1, "U3").second  # two already
    assert not review_ask(everyone, [], "run-7", 1, "U1").second  # the first is asked nothing
    assert not review_ask(ReviewModes(), reviewed_by("U1"), "run-7", 1, "U2").second
    assert review_ask(ReviewModes(blind=True), [], "run-7", 1, "U1").blind


def test_double_review_picks_the_same_iterations_every_time_about_the_share_asked():
    ids = [(f"run-{n}", n % 3) for n in range(2000)]

    picked = [i for i in ids if picked_for_double_review(*i, 0.2)]

    assert picked == [i for i in ids if picked_for_double_review(*i, 0.2)]
    assert 0.17 < len(picked) / len(ids) < 0.23
    assert set(picked) <= {i for i in ids if picked_for_double_review(*i, 0.5)}  # a larger share keeps them
    assert not any(picked_for_double_review(*i, 0.0) for i in ids)
    assert all(picked_for_double_review(*i, 1.0) for i in ids)


def test_a_blind_reviewer_is_shown_the_grader_beside_their_verdicts_with_names_escaped():
    shown = grader_revealed(
        [ReviewVerdict("Cites <a> source", "fail", "pass"), ReviewVerdict("Tone", "4", "4")]
    )

    assert "• *Cites &lt;a&gt; source* — grader ❌ Fail (you: ✅ Pass)" in shown
    assert "• *Tone* — grader 4/5 (same)" in shown


@pytest.mark.parametrize(
    ("argument", "change"),
    [
        ("", None),
        ("blind on", ReviewModeChange(blind=True)),
        ("BLIND off", ReviewModeChange(blind=False)),
        ("double 0.2", ReviewModeChange(double_share=0.2)),
        ("double 35%", ReviewModeChange(double_share=0.35)),
        ("double off", ReviewModeChange(double_share=0.0)),
        ("double 1", ReviewModeChange(double_share=1.0)),
    ],
)
def test_review_arguments_are_read(argument, change):
    assert review_mode_change(argument) == change


@pytest.mark.parametrize(
    ("argument", "said"),
    [
        ("blind", "changes how this channel reviews, not `blind`"),
        ("blind maybe", "takes `on` or `off`, not `maybe`"),
        ("double 1.5", "from 0 to 1 (e.g. `0.2` or `20%`), or `off`, not `1.5`"),
        ("double nan", "not `nan`"),
        ("triple 0.2", "not `triple 0.2`"),
    ],
)
def test_unusable_review_arguments_say_what_is_wrong(argument, said):
    with pytest.raises(CommandError, match=None) as raised:
        review_mode_change(argument)
    assert said in str(raised.value)
