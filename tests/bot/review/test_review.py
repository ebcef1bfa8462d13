"""The review modal and its submission: built from an evaluation, read back into verdicts."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from slack_sdk.models.views import View

from bot.db.reviews import ReviewRow, ReviewVerdict
from bot.rendering.results import evaluation_message
from bot.review.controls import ReviewTally, parse_review_value, review_controls, review_value
from bot.review.form import (
    COMMENT_MAX,
    REVIEW_CALLBACK_ID,
    ReviewContext,
    parse_review_submission,
    review_context,
    review_modal,
)
from bot.review.verdicts import agree_verdicts, grader_verdicts, verdict_label
from bot.slack.payloads import ITERATION_MAX, SubmittedView
from grading.rubric import MAX_CRITERIA
from tests.bot.slack.block_assertions import all_text

UNGRADED = {
    "explanation": "",
    "unmatched": [],
    "score": None,
    "verdict": None,
    "usage": None,
    "grader_calls": 1,
    "answer_message_id": "ai-1",
    "best_iteration": None,
    "calibration": [],
}
"""The rest of a RubricEvaluation, which the review does not look at."""


def list_evaluation(**overrides):
    base = UNGRADED | {
        "grading_run_id": "run-7",
        "iteration": 1,
        "max_iterations": 3,
        "kind": "list",
        "result": "needs_revision",
        "criteria": [
            {"name": "States the deadline", "passed": True, "gap": "", "score": None},
            {"name": "Cites a source", "passed": False, "gap": "No source is given.", "score": None},
        ],
    }
    return base | overrides


def scored_evaluation(**overrides):
    base = UNGRADED | {
        "grading_run_id": "run-9",
        "iteration": 0,
        "max_iterations": 2,
        "kind": "scored",
        "result": "needs_revision",
        "criteria": [
            {"name": "Correctness", "passed": True, "gap": "", "score": 5},
            {"name": "Clarity", "passed": False, "gap": "Too long.", "score": 2},
        ],
        "score": 3.5,
        "verdict": "REVIEW",
    }
    return base | overrides


def modal(evaluation, previous=None):
    return review_modal(
        evaluation, channel="C1", message_ts="111.222", thread_ts="100.000", previous=previous
    )


def inputs(view):
    return [b for b in view["blocks"] if b["type"] == "input"]


def read(view):
    """A submitted view (a dict as Slack sends it) as the listeners hand it to bot.review."""
    return SubmittedView.model_validate(view)


def submit(view, choices=None, comments=None):
    """The view as Slack sends it back on submit: each input's state under block and action id.

    ``choices`` maps an input label to the chosen option value (else its initial option stays);
    ``comments`` maps the label of the menu a comment follows to the comment typed.
    """
    choices, comments = choices or {}, comments or {}
    values, label = {}, None
    for block in inputs(view):
        element = block["element"]
        if element["type"] == "static_select":
            label = block["label"]["text"]
            chosen = element["initial_option"]
            if label in choices:
                chosen = next(o for o in element["options"] if o["value"] == choices[label])
            state = {"type": "static_select", "selected_option": chosen}
        else:
            state = {"type": "plain_text_input", "value": comments.get(label)}
        values[block["block_id"]] = {element["action_id"]: state}
    return view | {"id": "V1", "state": {"values": values}}


def stored(verdicts, reviewer, evaluation):
    now = datetime.now(UTC)
    return [
        ReviewRow(
            "T1",
            "C1",
            "100.000",
            evaluation["grading_run_id"],
            evaluation["iteration"],
            v.criterion,
            v.grader_verdict,
            v.reviewer_verdict,
            v.comment,
            reviewer,
            now,
        )
        for v in verdicts
    ]


# --- verdict strings ------------------------------------------------------------------------------


def test_grader_verdicts_are_pass_fail_or_the_score():
    assert grader_verdicts(list_evaluation()) == {"States the deadline": "pass", "Cites a source": "fail"}
    assert grader_verdicts(scored_evaluation()) == {"Correctness": "5", "Clarity": "2"}


def test_a_repeated_name_counts_once_and_an_unscored_dimension_is_left_out():
    repeated = list_evaluation(
        criteria=[
            {"name": "Be brief", "passed": False, "gap": "Long.", "score": None},
            {"name": "Be brief", "passed": False, "gap": "Long.", "score": None},
        ]
    )
    assert grader_verdicts(repeated) == {"Be brief": "fail"}
    unscored = scored_evaluation(criteria=[{"name": "Tone", "passed": False, "gap": "", "score": None}])
    assert grader_verdicts(unscored) == {}


def test_agree_accepts_every_grader_verdict():
    assert agree_verdicts(scored_evaluation()) == [
        ReviewVerdict("Correctness", "5", "5"),
        ReviewVerdict("Clarity", "2", "2"),
    ]


def test_verdict_labels_for_agreement():
    assert verdict_label("pass") is True
    assert verdict_label("fail") is False
    assert verdict_label("4") == 4
    with pytest.raises(ValueError, match="not a verdict"):
        verdict_label("maybe")


# --- the modal -------------------------------------------------------------------------------------


def test_modal_lists_each_criterion_with_the_grader_verdict_preselected():
    view = modal(list_evaluation())
    assert view["callback_id"] == REVIEW_CALLBACK_ID
    menus = [b for b in inputs(view) if b["element"]["type"] == "static_select"]
    assert [m["label"]["text"] for m in menus] == ["States the deadline", "Cites a source"]
    assert [m["element"]["initial_option"]["value"] for m in menus] == ["pass", "fail"]
    assert [o["value"] for o in menus[0]["element"]["options"]] == ["pass", "fail"]
    assert "No source is given." in menus[1]["hint"]["text"]
    comments = [b for b in inputs(view) if b["element"]["type"] == "plain_text_input"]
    assert len(comments) == 2
    assert all(c["optional"] and c["element"]["multiline"] for c in comments)
    assert json.loads(view["private_metadata"]) == {
        "grading_run_id": "run-7",
        "iteration": 1,
        "channel": "C1",
        "message_ts": "111.222",
        "thread_ts": "100.000",
        "blind": False,
    }


def test_scored_modal_offers_1_to_5_starting_at_the_grader_score():
    view = modal(scored_evaluation())
    menus = [b for b in inputs(view) if b["element"]["type"] == "static_select"]
    assert sorted(o["value"] for o in menus[1]["element"]["options"]) == ["1", "2", "3", "4", "5"]
    assert [m["element"]["initial_option"]["value"] for m in menus] == ["5", "2"]
    assert "2/5" in menus[1]["hint"]["text"]


def test_an_earlier_review_is_preselected_with_its_comments():
    evaluation = scored_evaluation()
    earlier = stored([ReviewVerdict("Clarity", "2", "4", "Reads fine to me.")], "U1", evaluation)
    view = modal(evaluation, previous=earlier)
    menus = [b for b in inputs(view) if b["element"]["type"] == "static_select"]
    assert [m["element"]["initial_option"]["value"] for m in menus] == ["5", "4"]
    comments = [
        b["element"].get("initial_value") for b in inputs(view) if b["element"]["type"] != "static_select"
    ]
    assert comments == [None, "Reads fine to me."]
    assert "earlier review" in view["blocks"][0]["text"]["text"]


def test_thirty_long_criteria_fit_slack_modal_limits():
    names = [f"Criterion {i}: " + "very long wording " * 200 for i in range(MAX_CRITERIA)]
    evaluation = list_evaluation(
        criteria=[
            {"name": n, "passed": i % 2 == 0, "gap": "gap " * 1000, "score": None}
            for i, n in enumerate(names)
        ]
    )
    view = modal(evaluation)
    assert len(view["blocks"]) <= 100
    assert len(view["title"]["text"]) <= 24
    for block in inputs(view):
        assert len(block["label"]["text"]) <= 2000
        assert len(block.get("hint", {}).get("text", "")) <= 2000
        for option in block["element"].get("options", []):
            assert len(option["text"]["text"]) <= 75
    menus = [b for b in inputs(view) if b["element"]["type"] == "static_select"]
    assert len(menus) == MAX_CRITERIA
    assert menus[3]["label"]["text"].startswith("Criterion 3: very long")
    assert menus[3]["label"]["text"].endswith("…")
    # Parsing back through slack_sdk re-runs its own limit checks.
    assert View(**view).to_dict() == view


def test_nothing_to_review_is_an_error():
    with pytest.raises(ValueError, match="no graded criteria"):
        modal(list_evaluation(criteria=[]))


# --- reading a submission back ----------------------------------------------------------------------


def test_modal_round_trip_gives_both_verdicts_and_comments():
    evaluation = list_evaluation()
    view = submit(
        modal(evaluation),
        choices={"States the deadline": "fail"},
        comments={"States the deadline": "  The date is wrong.\n", "Cites a source": ""},
    )
    context, verdicts = parse_review_submission(read(view), evaluation)
    assert context == ReviewContext("run-7", 1, "C1", "111.222", "100.000")
    assert verdicts == [
        ReviewVerdict("States the deadline", "pass", "fail", "The date is wrong."),
        ReviewVerdict("Cites a source", "fail", "fail", ""),
    ]


def test_scored_round_trip_keeps_the_grader_score_beside_the_reviewer_score():
    evaluation = scored_evaluation()
    view = submit(modal(evaluation), choices={"Clarity": "4"}, comments={"Clarity": "Clear enough."})
    _, verdicts = parse_review_submission(read(view), evaluation)
    assert verdicts == [
        ReviewVerdict("Correctness", "5", "5", ""),
        ReviewVerdict("Clarity", "2", "4", "Clear enough."),
    ]


def test_comments_are_bounded():
    evaluation = list_evaluation()
    view = submit(modal(evaluation), comments={"Cites a source": "x" * (COMMENT_MAX + 50)})
    _, verdicts = parse_review_submission(read(view), evaluation)
    assert len(verdicts[1].comment) == COMMENT_MAX


@pytest.mark.parametrize(
    ("metadata", "problem"),
    [
        ("not json", "metadata is invalid"),
        ("", "metadata is invalid"),
        (json.dumps({"grading_run_id": "run-7", "iteration": 1}), "channel"),
        (
            json.dumps(
                {
                    "grading_run_id": "run-7",
                    "iteration": "1",
                    "channel": "C",
                    "message_ts": "1",
                    "thread_ts": "1",
                }
            ),
            "iteration",
        ),
        (
            json.dumps(
                {
                    "grading_run_id": "run-7",
                    "iteration": -1,
                    "channel": "C",
                    "message_ts": "1",
                    "thread_ts": "1",
                }
            ),
            "iteration",
        ),
        (
            json.dumps(
                {
                    "grading_run_id": "run-7",
                    "iteration": 1,
                    "channel": "C",
                    "message_ts": "1",
                    "thread_ts": "1",
                    "admin": True,
                }
            ),
            "admin",
        ),
    ],
)
def test_invalid_metadata_is_a_clear_error(metadata, problem):
    view = submit(modal(list_evaluation())) | {"private_metadata": metadata}
    with pytest.raises(ValueError, match=problem):
        review_context(read(view))


@pytest.mark.parametrize("iteration", ["1e999", str(ITERATION_MAX + 1), "2.0"])
def test_an_iteration_out_of_range_in_the_metadata_is_a_clear_error(iteration):
    about = '"grading_run_id":"run-7","channel":"C","message_ts":"1","thread_ts":"1"'
    view = submit(modal(list_evaluation())) | {"private_metadata": f'{{{about},"iteration":{iteration}}}'}
    with pytest.raises(ValueError, match="iteration"):
        review_context(read(view))


def test_another_view_is_not_read_as_a_review():
    view = submit(modal(list_evaluation())) | {"callback_id": "rubric_edit"}
    with pytest.raises(ValueError, match="not a review form"):
        review_context(read(view))


def test_a_verdict_that_was_not_offered_is_rejected():
    evaluation = scored_evaluation()
    view = submit(modal(evaluation))
    view["state"]["values"]["verdict-1"]["verdict"]["selected_option"] = {"value": "pass"}
    with pytest.raises(ValueError, match="Clarity"):
        parse_review_submission(read(view), evaluation)
    del view["state"]["values"]["verdict-1"]
    with pytest.raises(ValueError, match="Clarity"):
        parse_review_submission(read(view), evaluation)


def test_a_form_about_another_iteration_is_rejected():
    view = submit(modal(list_evaluation()))
    with pytest.raises(ValueError, match="different iteration"):
        parse_review_submission(read(view), list_evaluation(iteration=2))


# --- the tally the message shows ---------------------------------------------------------------------


def test_tally_of_an_agree_and_a_disagree_review():
    evaluation = list_evaluation()
    agreed = stored(agree_verdicts(evaluation), "U1", evaluation)
    view = submit(modal(evaluation), choices={"Cites a source": "pass"})
    disagreed = stored(parse_review_submission(read(view), evaluation)[1], "U2", evaluation)
    tally = ReviewTally.from_rows(agreed + disagreed)
    assert tally == ReviewTally(2, {"Cites a source": 1})
    assert tally.summary() == "2 reviews · 1 disagreement on Cites a source"


# --- the buttons' value and the tally on the evaluation message ---------------------------------


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ('{"r":"run-1","i":1e999}', "i: Input should be a valid integer"),
        (f'{{"r":"run-1","i":{ITERATION_MAX + 1}}}', "less than or equal"),
        ('{"r":"run-1","i":-1}', "greater than or equal"),
        ('{"r":"run-1","i":"2"}', "valid integer"),
        ('{"r":"run-1","i":true}', "valid integer"),
        ('{"r":"","i":0}', "r: String should have at least 1 character"),
        ('{"r":"run-1"}', "i: Field required"),
        ('{"r":"run-1","i":0,"x":1}', "x: Extra inputs"),
        ('["run-1",0]', "object"),
        ("run-1:0", "Invalid JSON"),
    ],
)
def test_a_button_value_the_bot_did_not_make_is_a_clear_value_error(value, problem):
    with pytest.raises(ValueError, match="not a review button's value") as error:
        parse_review_value(value)
    assert problem in str(error.value)


def test_the_largest_iteration_round_trips():
    assert parse_review_value(review_value("run-1", ITERATION_MAX)) == ("run-1", ITERATION_MAX)


def test_review_tally_line():
    ev = list_evaluation()
    message = evaluation_message(ev, review=review_controls(ev, ReviewTally(2, {"Clarity": 1})))
    assert "2 reviews · 1 disagreement on Clarity" in all_text(message)
    assert message["blocks"][-1]["type"] == "actions"
    assert ReviewTally(1).summary() == "1 review · no disagreements"
    assert ReviewTally(3, {"Tone": 1, "Clarity": 2}).summary() == (
        "3 reviews · 2 disagreements on Clarity, 1 on Tone"
    )


def test_review_tally_from_stored_rows():
    now = datetime.now(UTC)

    def row(reviewer, criterion, grader, human):
        return ReviewRow("T", "C", "1.0", "run", 0, criterion, grader, human, "", reviewer, now)

    rows = [
        row("U1", "Clarity", "pass", "fail"),
        row("U1", "Tone", "pass", "pass"),
        row("U2", "Clarity", "pass", "fail"),
        row("U2", "Tone", "3", "4"),
    ]
    assert ReviewTally.from_rows(rows) == ReviewTally(2, {"Clarity": 2, "Tone": 1})
