"""Block Kit rendering: content, Slack's limits, splitting and escaping."""

from __future__ import annotations

import json
import re

import pytest

from bot.rendering.errors import error_message, help_text
from bot.rendering.results import evaluation_message, final_messages
from bot.rendering.rubrics import no_rubric_hint, rubric_confirmation, rubric_error, rubric_modal
from bot.review.controls import AGREE_ACTION_ID, DISAGREE_ACTION_ID, parse_review_value, review_controls
from bot.slack.blocks import MARKDOWN_MESSAGE_BUDGET
from bot.slack.mrkdwn import split_mrkdwn, truncate
from grading.rubric import parse_rubric
from tests.bot.slack.block_assertions import all_text, assert_within_slack_limits

SCORED_RUBRIC = """\
dimensions:
  - name: Correctness
    weight: 0.5
    fail_below: 3
    anchors:
      5: All facts right.
      3: Minor slips that do not mislead.
      1: Contains false information.
  - name: Clarity
    weight: 0.5
aggregation: weighted
pass_score: 4
"""


def evaluation(**overrides):
    base = {
        "grading_run_id": "run-7",
        "iteration": 1,
        "max_iterations": 3,
        "kind": "list",
        "result": "needs_revision",
        "explanation": "The answer is **mostly** right.",
        "criteria": [
            {"name": "States the deadline", "passed": True, "gap": "", "score": None},
            {"name": "Cites a source", "passed": False, "gap": "No source is given.", "score": None},
        ],
        "score": None,
        "verdict": None,
        "usage": {"input_tokens": 1234, "output_tokens": 56, "total_tokens": 1290},
        "grader_calls": 2,
        "answer_message_id": "ai-1",
        "best_iteration": None,
        "calibration": [],
        "unmatched": [],
    }
    return base | overrides


def posted(evaluation, tally=None):
    """An evaluation message as the bot posts it: with the team review's tally and buttons."""
    return evaluation_message(evaluation, review=review_controls(evaluation, tally))


def section_texts(message):
    return [b["text"]["text"] for b in message["blocks"] if b["type"] == "section"]


def markdown_texts(message):
    return [b["text"] for b in message["blocks"] if b["type"] == "markdown"]


def visible(text):
    """Text without whitespace and the fences a split adds: what must survive splitting."""
    return re.sub(r"\s+", "", text.replace("```", ""))


# --- split_mrkdwn ------------------------------------------------------------------------------


def test_split_keeps_short_text_whole():
    assert split_mrkdwn("one\n\ntwo") == ["one\n\ntwo"]


def test_split_of_nothing_is_nothing():
    assert split_mrkdwn("  \n\n ") == []


def test_split_prefers_paragraph_breaks():
    first, second = "a" * 1000, " ".join(["word"] * 500)  # 2,499 characters with spaces
    assert split_mrkdwn(f"{first}\n\n{second}", 3000) == [first, second]


def test_split_loses_no_text_and_respects_the_limit():
    text = "\n".join(f"Line {i}: " + "lorem ipsum dolor " * (i % 7 + 1) for i in range(600))
    pieces = split_mrkdwn(text, 500)
    assert all(len(p) <= 500 for p in pieces)
    assert visible("".join(pieces)) == visible(text)


def test_split_cuts_one_huge_word_hard_without_losing_it():
    pieces = split_mrkdwn("x" * 7000, 3000)
    assert all(len(p) <= 3000 for p in pieces)
    assert "".join(pieces) == "x" * 7000


def test_split_moves_a_code_block_that_fits_to_the_next_piece_whole():
    code = "```\n" + "\n".join(f"    step({i})" for i in range(100)) + "\n```"
    text = "x " * 1000 + "\n\n" + code + "\n\nThe end."
    pieces = split_mrkdwn(text, 3000)
    assert len(pieces) == 2
    assert pieces[1].startswith(code)


def test_split_closes_and_reopens_a_code_block_it_must_cut():
    lines = [f"row {i:03d} = compute({i}) * 2" for i in range(400)]
    text = "Intro.\n\n```\n" + "\n".join(lines) + "\n```\n\nOutro."
    pieces = split_mrkdwn(text, 3000)
    assert len(pieces) > 3
    for piece in pieces:
        assert len(piece) <= 3000
        assert piece.count("```") % 2 == 0, piece[:80]
    inner = pieces[2]
    assert inner.startswith("```\n") and inner.endswith("\n```")
    joined = "\n".join(pieces)
    assert all(line in joined for line in lines)
    assert visible(joined) == visible(text)


def test_split_never_cuts_inside_a_link_or_an_entity():
    link = "<https://example.com/page|a link with several words>"
    pieces = split_mrkdwn("x" * 60 + " " + link + " tail", 100)
    assert pieces == ["x" * 60, link + " tail"]
    pieces = split_mrkdwn("y" * 93 + "&amp;" + "z" * 20, 100)
    assert pieces[0] == "y" * 93
    assert "".join(pieces) == "y" * 93 + "&amp;" + "z" * 20


def test_split_rejects_a_limit_too_small_to_hold_fences():
    with pytest.raises(ValueError, match="at least"):
        split_mrkdwn("text", 8)


def test_truncate_marks_the_cut_and_closes_code():
    assert truncate("short", 10) == "short"
    cut = truncate("```\n" + "code line\n" * 50 + "```", 60)
    assert len(cut) <= 60
    assert "…" in cut
    assert cut.count("```") == 2


# --- Evaluation messages ---------------------------------------------------------------------------


def test_evaluation_message_shows_iteration_verdict_criteria_and_gaps():
    message = posted(evaluation())
    header = message["blocks"][0]
    assert header["type"] == "header"
    assert "Iteration 2/3" in header["text"]["text"]
    assert "Needs revision" in header["text"]["text"]
    body = all_text(message)
    assert "✅ States the deadline" in body
    assert "❌ Cites a source\n> No source is given." in body
    assert "The answer is **mostly** right." in markdown_texts(message)[0]
    assert "Grader: 2 calls · 1,234 in · 56 out" in body
    assert "Needs revision" in message["text"]
    assert_within_slack_limits(message)


def test_evaluation_message_lists_what_the_grader_flagged_outside_the_rubric():
    flagged = [
        {"name": "Gives the population", "passed": False, "gap": "No population given.", "score": None}
    ]
    message = posted(evaluation(result="satisfied", criteria=[], unmatched=flagged))
    body = all_text(message)
    assert "*The grader also flagged* (not in the rubric, so not part of the verdict):" in body
    assert "❌ Gives the population\n> No population given." in body
    assert message["text"].endswith("the grader also flagged 1 failing item outside the rubric")
    assert_within_slack_limits(message)


def test_many_long_flagged_items_still_fit_with_every_criterion():
    criteria = [
        {"name": f"Criterion {n} " + "c" * 400, "passed": False, "gap": "g" * 2000, "score": None}
        for n in range(20)
    ]
    flagged = [
        {"name": f"Extra {n} " + "e" * 400, "passed": False, "gap": "x" * 2000, "score": None}
        for n in range(20)
    ]
    message = posted(evaluation(criteria=criteria, unmatched=flagged))
    body = all_text(message)
    assert all(f"Criterion {n} " in body and f"Extra {n} " in body for n in range(20))
    assert_within_slack_limits(message)


def test_evaluation_message_says_when_team_examples_calibrated_the_grader():
    example = {"criterion": "Cites a source", "grader_verdict": "pass", "team_verdict": "fail", "comment": ""}
    assert "Calibrated with 2 team review examples" in all_text(
        posted(evaluation(calibration=[example, example]))
    )
    assert "Calibrated" not in all_text(posted(evaluation(calibration=[])))


def provenance(samples=1, model="gpt-4o-mini-2024-07-18"):
    return {
        "rubric_hash": "h",
        "grader_model": model,
        "grader_prompt_hash": "p",
        "calibration_examples": [],
        "worker_model": None,
        "samples": samples,
        "escalation_model": None,
    }


def context_texts(message):
    return [e["text"] for b in message["blocks"] if b["type"] == "context" for e in b["elements"]]


def test_evaluation_message_names_the_rubric_version_and_the_grader_model_that_answered():
    message = evaluation_message(evaluation(provenance=provenance()), rubric_version="v3")

    assert "Rubric v3 · grader gpt-4o-mini-2024-07-18" in context_texts(message)
    assert "samples" not in all_text(message)  # one sample: nothing to say about it


def test_with_several_samples_the_source_line_says_how_many_and_where_they_split():
    split = evaluation(provenance=provenance(samples=3))
    split["criteria"][0]["confidence"] = 2 / 3
    unanimous = evaluation(provenance=provenance(samples=3))

    assert "Rubric #ab12 · grader gpt-4o-mini-2024-07-18 · 3 samples, split on 1 criterion" in context_texts(
        evaluation_message(split, rubric_version="#ab12")
    )
    assert "Rubric v1 · grader gpt-4o-mini-2024-07-18 · 3 samples, unanimous" in context_texts(
        evaluation_message(unanimous, rubric_version="v1")
    )


def test_evaluation_message_shows_scores_and_aggregate_for_scored_rubrics():
    message = posted(
        evaluation(
            kind="scored",
            result="satisfied",
            score=3.85,
            verdict="REVIEW",
            criteria=[
                {"name": "Correctness", "passed": True, "gap": "", "score": 4},
                {"name": "Clarity", "passed": False, "gap": "Too long.", "score": 2},
            ],
        )
    )
    body = all_text(message)
    assert "Rubric satisfied" in message["blocks"][0]["text"]["text"]
    assert "Correctness — *4/5*" in body
    assert "Clarity — *2/5*\n> Too long." in body
    assert "Score 3.85/5" in body
    assert "REVIEW" in body
    assert_within_slack_limits(message)


def test_evaluation_buttons_carry_the_run_and_iteration():
    message = posted(evaluation(grading_run_id="abc-123", iteration=2))
    actions = message["blocks"][-1]
    assert actions["type"] == "actions"
    buttons = {b["action_id"]: b for b in actions["elements"]}
    assert set(buttons) == {AGREE_ACTION_ID, DISAGREE_ACTION_ID}
    assert buttons[DISAGREE_ACTION_ID]["text"]["text"] == "Disagree…"
    for button in buttons.values():
        assert parse_review_value(button["value"]) == ("abc-123", 2)
    assert message["metadata"] == {
        "event_type": "rubric_evaluation",
        "event_payload": {"grading_run_id": "abc-123", "iteration": 2},
    }


def test_grader_error_without_criteria_offers_nothing_to_review():
    message = posted(
        evaluation(result="grader_error", criteria=[], explanation="Model timed out", usage=None)
    )
    assert "Grader error" in message["blocks"][0]["text"]["text"]
    assert all(b["type"] != "actions" for b in message["blocks"])
    assert "Model timed out" in all_text(message)


def test_forty_criteria_with_long_gaps_all_fit_and_none_is_dropped():
    criteria = [
        {
            "name": f"Criterion number {i}",
            "passed": i % 3 == 0,
            "gap": f"gap {i} " + "z" * 2000,
            "score": None,
        }
        for i in range(40)
    ]
    criteria[1]["gap"] = "A short gap stays whole."
    message = posted(evaluation(criteria=criteria, explanation="e " * 3000))
    assert_within_slack_limits(message)
    body = all_text(message)
    for i, criterion in enumerate(criteria):
        assert re.search(rf"[✅❌] Criterion number {i}\b", body)
        if not criterion["passed"] and i != 1:
            assert f"> gap {i} z" in body  # every failing gap is shown, shortened
    assert "> A short gap stays whole." in body
    assert "…" in body
    assert message["blocks"][-1]["type"] == "actions"


def test_evaluation_escapes_model_and_rubric_text():
    message = posted(
        evaluation(
            criteria=[{"name": "Mentions <!here>", "passed": False, "gap": "Say <@U1> & go", "score": None}]
        )
    )
    body = all_text(message)
    assert "<!here>" not in body and "<@U1>" not in body
    assert "Mentions &lt;!here&gt;" in body
    assert "Say &lt;@U1&gt; &amp; go" in body


# --- Final messages --------------------------------------------------------------------------------


def long_answer(chars=20_000):
    paragraphs, size, i = [], 0, 0
    while size < chars:
        paragraph = f"Paragraph {i}: " + " ".join(f"word{i}-{j}" for j in range(40))
        paragraphs.append(paragraph)
        size += len(paragraph) + 2
        i += 1
    return "\n\n".join(paragraphs)


def test_a_long_answer_is_split_without_losing_anything():
    answer = long_answer(30_000)
    messages = final_messages(
        "satisfied", answer, iterations=2, max_iterations=3, usage={"input_tokens": 9, "output_tokens": 8}
    )
    assert len(messages) == 3  # 30,000 characters take three messages of one markdown block each
    for message in messages:
        assert_within_slack_limits(message, budget=MARKDOWN_MESSAGE_BUDGET)
        assert len(markdown_texts(message)) == 1
    assert visible("".join(t for m in messages for t in markdown_texts(m))) == visible(answer)
    assert "Rubric satisfied (2/3)" in section_texts(messages[0])[0]
    assert messages[0]["metadata"] == {"event_type": "rubric_final", "event_payload": {"status": "satisfied"}}
    assert all("metadata" not in m for m in messages[1:])
    assert messages[1]["text"] == "(continued, part 2 of 3)"
    # Usage closes the last message only.
    assert "9 in · 8 out" in all_text(messages[-1])
    assert all("9 in · 8 out" not in all_text(m) for m in messages[:-1])


def test_an_answer_that_fits_one_markdown_block_is_one_message_in_markdown_as_written():
    answer = "# Plan\n\n" + "Use **bold**, `2 * 3 * 4` and [the docs](https://example.com/a?b=1&c=2). " * 140
    assert 10_000 < len(answer) < 11_500
    (message,) = final_messages("satisfied", answer, iterations=1, max_iterations=3)
    assert markdown_texts(message) == [answer]
    assert_within_slack_limits(message, budget=MARKDOWN_MESSAGE_BUDGET)


def test_code_blocks_survive_splitting_across_messages():
    code_lines = [f"result_{i} = transform(data[{i}])  # step {i}" for i in range(600)]
    answer = "Here is the script:\n\n```python\n" + "\n".join(code_lines) + "\n```\n\nRun it."
    messages = final_messages(None, answer, iterations=None, max_iterations=None)
    pieces = [t for m in messages for t in markdown_texts(m)]
    assert len(messages) > 1
    for piece in pieces:
        assert piece.count("```") % 2 == 0
    code_pieces = [p for p in pieces if "result_" in p]
    assert all(p.startswith("```python\n") for p in code_pieces[1:])
    assert all(p.endswith("\n```") for p in code_pieces[:-1])
    joined = "\n".join(pieces)
    assert all(line in joined for line in code_lines)


def test_mentions_in_an_answer_stay_inert():
    answer = "Hey <!channel>, <!here> and <!everyone>: ask <@U123> or @here. `<!DOCTYPE html>` stays."
    (message,) = final_messages(None, answer, iterations=None, max_iterations=None)
    shown = markdown_texts(message)[0]
    for mention in ("<!channel>", "<!here>", "<!everyone>", "<@U123>", "@here"):
        assert mention not in shown and mention not in message["text"]
        assert mention in shown.replace("\u200b", "").replace("\u2060", "")  # still reads the same
    assert "<!DOCTYPE html>" in shown


def test_max_iterations_shows_the_best_answer_label():
    (message,) = final_messages(
        "max_iterations_reached", "Best draft.", iterations=3, max_iterations=3, best_iteration=1
    )
    status = section_texts(message)[0]
    assert "Max iterations reached (3/3)" in status
    assert "Showing the best answer (iteration 2 of 3)" in status
    assert markdown_texts(message) == ["Best draft."]
    assert message["text"].startswith("Max iterations reached (3/3)")


@pytest.mark.parametrize(
    ("status", "words"),
    [
        ("needs_revision", "Needs revision"),
        ("failed", "Failed"),
        ("grader_error", "Grader error"),
    ],
)
def test_final_status_in_words(status, words):
    (message,) = final_messages(status, "Answer.", iterations=1, max_iterations=3)
    assert f"{words} (1/3)" in section_texts(message)[0]


def test_no_rubric_means_just_the_answer():
    (message,) = final_messages(None, "Just **this**.", iterations=None, max_iterations=None)
    assert section_texts(message) == []
    assert markdown_texts(message) == ["Just **this**."]
    assert message["text"] == "Just **this**."
    assert message["metadata"]["event_payload"] == {"status": "plain"}


def test_empty_answer_still_makes_a_valid_message():
    (message,) = final_messages("failed", "", iterations=0, max_iterations=3)
    assert_within_slack_limits(message)
    assert "empty" in all_text(message)


# --- Rubric and help messages --------------------------------------------------------------------


def test_rubric_confirmation_lists_list_criteria():
    message = rubric_confirmation(parse_rubric("- Under 100 words\n- Mentions <the> deadline"))
    body = all_text(message)
    assert "2 criteria" in body
    assert "• Under 100 words" in body
    assert "• Mentions &lt;the&gt; deadline" in body
    assert "⚠️" not in body
    assert_within_slack_limits(message)


def test_rubric_confirmation_summarises_dimensions_and_warnings():
    message = rubric_confirmation(parse_rubric(SCORED_RUBRIC))
    body = all_text(message)
    assert "2 scored dimensions" in body
    assert "passes at 4/5" in body
    assert "weighted average" in body
    assert "*Correctness* (weight 50%, fails below 3)" in body
    assert "5: All facts right." in body
    assert "*Clarity* (weight 50%)" in body
    # Clarity has no anchors: the lint warning is shown.
    assert re.search(r"⚠️ .*Clarity", body)
    assert_within_slack_limits(message)


def test_rubric_error_keeps_the_old_rubric_and_shows_the_error():
    message = rubric_error("line 3: anchor 4 is not allowed; use 1, 3 and 5")
    body = all_text(message)
    assert "didn't parse, so the previous rubric is still in place" in body
    assert "line 3: anchor 4 is not allowed" in body
    assert_within_slack_limits(message)


def test_error_message_names_the_failure():
    message = error_message("The grader failed: timed out", "TimeoutError: after 60 s")
    body = all_text(message)
    assert "The grader failed: timed out" in body
    assert "TimeoutError: after 60 s" in body
    assert message["text"] == "The grader failed: timed out"
    assert_within_slack_limits(message)


def test_hint_and_help_name_the_ways_to_set_a_rubric():
    assert "`rubric:`" in no_rubric_hint() and "/rubric set" in no_rubric_hint()
    text = help_text([("/rubric set <rubric>", "set the default"), ("/rubric help", "show this help")])
    assert "• `/rubric set <rubric>` — set the default\n• `/rubric help` — show this help" in text
    assert "`rubric:`" in text  # a thread's own rubric


def test_rubric_modal_is_prefilled_and_knows_its_channel():
    view = rubric_modal("- Be brief", channel_id="C42")
    assert view["type"] == "modal"
    assert view["callback_id"] == "rubric_edit"
    assert json.loads(view["private_metadata"]) == {"channel": "C42"}
    (block,) = view["blocks"]
    assert block["block_id"] == "rubric"
    element = block["element"]
    assert element["action_id"] == "rubric_text"
    assert element["multiline"] is True
    assert element["initial_value"] == "- Be brief"
    assert element["max_length"] == 3000  # Slack's cap for plain_text_input


def test_rubric_modal_does_not_prefill_what_it_could_not_save():
    view = rubric_modal("- criterion\n" * 400, channel_id="C1")
    assert "initial_value" not in view["blocks"][-1]["element"]
    assert "/rubric set" in view["blocks"][0]["text"]["text"]
    empty = rubric_modal(None, channel_id="C1")
    assert "initial_value" not in empty["blocks"][0]["element"]
