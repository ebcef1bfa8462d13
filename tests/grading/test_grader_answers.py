"""What the middleware makes of imperfect grader answers, and what they may cost.

A grader that contradicts itself is overruled by its own criteria, never re-asked; each
iteration's grader model calls are bounded; names are matched to the rubric as leniently as is
unambiguous; items matching no criterion are kept on the evaluation.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from langchain_core.messages import AIMessage
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic.json_schema import model_json_schema

from grading import DEFAULT_MAX_GRADER_CALLS, RubricMiddleware
from grading.grader import grade_schema
from grading.tools import count_lines
from tests.grading.agents import HAIKU_RUBRIC, ask, build, criteria, list_grade
from tests.grading.scripted import answers, grade_call, payload_of, tool_call

ALL_PASS = (("The poem has three lines", True), ("The theme is spring", True), ("No rhyme", True))
"""The haiku rubric's criteria, every one passing."""


def claimed(result: str, *verdicts: tuple[str, bool]) -> AIMessage:
    """A list grade whose overall `result` is given, whatever its criteria say."""
    return grade_call(
        "RubricGrade", {"result": result, "explanation": "Checked.", "criteria": criteria(*verdicts)}
    )


def in_turn(*replies: AIMessage) -> Any:
    queue = list(replies)
    return lambda messages: queue.pop(0)


# -- a self-contradicting grader -------------------------------------------------------------


def test_satisfied_with_a_failing_criterion_is_overruled_by_the_criteria_without_a_reask(run, caplog):
    seen: list[dict[str, Any]] = []
    contradiction = claimed(
        "satisfied", ("The poem has three lines", True), ("The theme is spring", False), ("No rhyme", True)
    )
    agent, worker, grader = build(
        answers("winter", "spring"), in_turn(contradiction, list_grade(*ALL_PASS)), on_evaluation=seen.append
    )
    with caplog.at_level(logging.WARNING, logger="grading.middleware"):
        result = run(agent, ask("Write", HAIKU_RUBRIC))
    assert [(e["result"], e["grader_calls"]) for e in seen] == [("needs_revision", 1), ("satisfied", 1)]
    assert len(grader.calls) == 2 and len(worker.calls) == 2
    assert "fix it: The theme is spring" in worker.calls[1][-1].text
    assert result["_rubric_status"] == "satisfied"
    assert "the grader answered satisfied but its criteria say needs_revision" in caplog.text


def test_needs_revision_with_every_criterion_passing_is_satisfied_without_a_reask(run, caplog):
    seen: list[dict[str, Any]] = []
    agent, worker, grader = build(
        answers("spring"), in_turn(claimed("needs_revision", *ALL_PASS)), on_evaluation=seen.append
    )
    with caplog.at_level(logging.WARNING, logger="grading.middleware"):
        result = run(agent, ask("Write", HAIKU_RUBRIC))
    assert result["_rubric_status"] == "satisfied"
    assert len(grader.calls) == 1 and len(worker.calls) == 1
    assert "the grader answered needs_revision but its criteria say satisfied" in caplog.text


# -- the grader's call budget ----------------------------------------------------------------


# Without tools langchain asks again by itself; with tools the grader's turn ends and the
# middleware asks again: both count, and both stop at the budget.
WITH_AND_WITHOUT_TOOLS = pytest.mark.parametrize("tools", [[], [count_lines]], ids=["no tools", "tools"])


@WITH_AND_WITHOUT_TOOLS
def test_a_grader_that_never_answers_in_the_schema_stops_at_the_budget(run, tools):
    seen: list[dict[str, Any]] = []
    agent, _, grader = build(
        answers("x"),
        lambda m: "Looks fine to me.",
        tools=tools,
        max_grader_calls=4,
        on_evaluation=seen.append,
    )
    result = run(agent, ask("Write", HAIKU_RUBRIC))
    assert len(grader.calls) == 4
    assert result["_rubric_status"] == "grader_error"
    assert seen[0]["grader_calls"] == 4
    assert seen[0]["explanation"] == (
        "The grader failed: it used all 4 model calls this iteration allows without a usable answer"
    )
    assert seen[0]["usage"]["input_tokens"] == 40  # every call's tokens, the failed ones too


@WITH_AND_WITHOUT_TOOLS
def test_a_plain_text_answer_is_asked_again_and_counted(run, tools):
    seen: list[dict[str, Any]] = []
    agent, _, _ = build(
        answers("x"),
        in_turn("Looks fine to me.", list_grade(*ALL_PASS)),
        tools=tools,
        on_evaluation=seen.append,
    )
    result = run(agent, ask("Write", HAIKU_RUBRIC))
    assert result["_rubric_status"] == "satisfied"
    assert seen[0]["grader_calls"] == 2


def test_evidence_tool_rounds_count_against_the_budget(run):
    agent, _, grader = build(
        answers("a\nb\nc"),
        lambda m: tool_call("count_lines", {"text": "a\nb\nc"}),
        tools=[count_lines],
        max_grader_calls=3,
    )
    result = run(agent, ask("Write", HAIKU_RUBRIC))
    assert len(grader.calls) == 3
    assert result["_rubric_status"] == "grader_error"


def test_a_schema_retry_counts_as_a_grader_call(run):
    seen: list[dict[str, Any]] = []
    no_gap = grade_call(
        "RubricGrade",
        {
            "result": "needs_revision",
            "explanation": "Checked.",
            "criteria": [{"name": n, "passed": n != "No rhyme"} for n, _ in ALL_PASS],
        },
    )
    agent, _, grader = build(answers("x"), in_turn(no_gap, list_grade(*ALL_PASS)), on_evaluation=seen.append)
    result = run(agent, ask("Write", HAIKU_RUBRIC))
    assert result["_rubric_status"] == "satisfied"
    assert seen[0]["grader_calls"] == 2
    assert "failed without a gap" in grader.calls[1][-1].text  # langchain told the grader why


def test_a_reask_for_missing_criteria_counts_and_is_skipped_when_the_budget_is_spent(run):
    seen: list[dict[str, Any]] = []
    partial = list_grade(("The poem has three lines", True), ("No rhyme", True))
    agent, _, grader = build(answers("x"), lambda m: partial, max_grader_calls=1, on_evaluation=seen.append)
    result = run(agent, ask("Write", HAIKU_RUBRIC))
    assert len(grader.calls) == 1
    assert result["_rubric_status"] == "grader_error"
    assert seen[0]["explanation"] == (
        "The grader failed: it did not grade 1 item(s) of the rubric: “The theme is spring”"
    )


def test_the_budget_is_per_iteration(run):
    seen: list[dict[str, Any]] = []
    tool_then = [
        tool_call("count_lines", {"text": "x"}),
        list_grade(("The theme is spring", False), *ALL_PASS[::2]),
    ]
    agent, _, _ = build(
        answers("x"),
        in_turn(*tool_then, *tool_then),
        tools=[count_lines],
        max_iterations=2,
        max_grader_calls=2,
        on_evaluation=seen.append,
    )
    run(agent, ask("Write", HAIKU_RUBRIC))
    assert [(e["result"], e["grader_calls"]) for e in seen] == [("needs_revision", 2), ("needs_revision", 2)]


def test_max_grader_calls_defaults_to_six_and_must_be_a_positive_int():
    assert DEFAULT_MAX_GRADER_CALLS == 6
    assert RubricMiddleware(model="openai:gpt-4o-mini").max_grader_calls == 6
    with pytest.raises(ValueError, match="max_grader_calls"):
        RubricMiddleware(model="openai:gpt-4o-mini", max_grader_calls=0)
    with pytest.raises(TypeError, match="max_grader_calls"):
        RubricMiddleware(model="openai:gpt-4o-mini", max_grader_calls=2.5)


# -- matching names --------------------------------------------------------------------------


PASTED = "- The poem has three\u200b lines\n- It mentions a cafe\u0301\n- No\trhyme"
"""A rubric pasted with a zero-width space, a decomposed accent and a tab."""


def test_invisible_characters_and_decomposed_accents_still_match_in_one_call(run):
    seen: list[dict[str, Any]] = []
    clean = list_grade(("The poem has three lines", True), ("It mentions a café", True), ("No rhyme", True))
    agent, _, grader = build(answers("x"), lambda m: clean, on_evaluation=seen.append)
    result = run(agent, ask("Write", PASTED))
    assert result["_rubric_status"] == "satisfied"
    assert len(grader.calls) == 1
    # Shown as the user wrote them.
    assert [c["name"] for c in seen[0]["criteria"]] == [
        "The poem has three\u200b lines",
        "It mentions a cafe\u0301",
        "No\trhyme",
    ]


def test_errors_name_criteria_as_written_never_in_escape_notation(run):
    seen: list[dict[str, Any]] = []
    agent, _, _ = build(
        answers("x"), lambda m: list_grade(("Something else", True)), on_evaluation=seen.append
    )
    run(agent, ask("Write", "- The poem has three\u200b lines\n- Short"))
    explanation = seen[0]["explanation"]
    assert "“The poem has three\u200b lines”" in explanation
    assert "\\u200b" not in explanation and "'" not in explanation


def test_a_shortened_name_on_a_one_criterion_rubric_matches_without_a_reask(run):
    agent, _, grader = build(answers("x"), lambda m: list_grade(("tests pass", False)), max_iterations=1)
    result = run(agent, ask("Fix it", "- All tests pass in run_test_suite"))
    assert len(grader.calls) == 1
    evaluation = result["_rubric_evaluations"][0]
    assert evaluation["criteria"][0]["name"] == "All tests pass in run_test_suite"
    assert evaluation["criteria"][0]["passed"] is False
    assert evaluation["unmatched"] == []


def test_a_reworded_name_matches_by_clear_similarity(run):
    reworded = list_grade(("The poem has 3 lines", True), ("The theme is spring", True), ("No rhyme", True))
    agent, _, grader = build(answers("x"), lambda m: reworded)
    result = run(agent, ask("Write", HAIKU_RUBRIC + "\n- Uses a kigo"))  # four criteria, three returned
    # "Uses a kigo" is missing and re-asked; the reworded name was not.
    assert "Grade only these now, one entry each (1 in all)" in payload_of(grader.calls[1])
    assert "“Uses a kigo”" in payload_of(grader.calls[1])
    assert result["_rubric_evaluations"][0]["result"] == "grader_error"


def test_when_the_counts_agree_an_unrecognisable_name_matches_by_position(run):
    garbled = list_grade(("The poem has three lines", True), ("criterion #2", False), ("No rhyme", True))
    agent, _, grader = build(answers("x"), lambda m: garbled, max_iterations=1)
    result = run(agent, ask("Write", HAIKU_RUBRIC))
    assert len(grader.calls) == 1
    assert [c["passed"] for c in result["_rubric_evaluations"][0]["criteria"]] == [True, False, True]


def test_an_ambiguous_name_is_not_guessed_and_only_the_missing_criteria_are_reasked(run):
    rubric = "- The theme is spring\n- Spring words appear twice\n- No rhyme"
    first = list_grade(("No rhyme", True), ("spring", True))
    second = list_grade(("The theme is spring", True), ("Spring words appear twice", False))
    seen: list[dict[str, Any]] = []
    agent, _, grader = build(
        answers("x"), in_turn(first, second), max_iterations=1, on_evaluation=seen.append
    )
    run(agent, ask("Write", rubric))
    reask = payload_of(grader.calls[1])
    assert "“The theme is spring”; “Spring words appear twice”" in reask
    assert "(2 in all)" in reask and "“No rhyme”" not in reask.split("</transcript-")[-1]
    assert [c["passed"] for c in seen[0]["criteria"]] == [True, False, True]
    assert seen[0]["grader_calls"] == 2
    assert [u["name"] for u in seen[0]["unmatched"]] == ["spring"]  # shown, never dropped


def test_the_answer_schema_lists_the_rubrics_own_names(run):
    agent, _, grader = build(answers("x"), lambda m: list_grade(*ALL_PASS))
    run(agent, ask("Write", HAIKU_RUBRIC))
    schema = next(convert_to_openai_tool(t) for t in grader._tools if "RubricGrade" in str(t))
    item = schema["function"]["parameters"]["properties"]["criteria"]["items"]
    assert item["properties"]["name"]["enum"] == [
        "The poem has three lines",
        "The theme is spring",
        "No rhyme",
    ]


def test_a_changed_answer_schema_leaves_the_next_grader_call_its_own_names():
    # The JSON schema is built once per rubric and handed out as a copy: a provider adapter that
    # edits what it is given (strict mode does) cannot change what the next call sends.
    schema = grade_schema("list", ("The poem has three lines", "No rhyme"))
    first = schema.model_json_schema()
    first["$defs"]["CriterionGrade"]["properties"]["name"]["enum"].append("Anything goes")

    assert schema.model_json_schema() == model_json_schema(schema)
    assert schema.model_json_schema()["$defs"]["CriterionGrade"]["properties"]["name"]["enum"] == [
        "The poem has three lines",
        "No rhyme",
    ]


# -- items that match no criterion -----------------------------------------------------------


def test_an_extra_failing_item_is_kept_on_the_evaluation_and_the_criteria_decide(run):
    seen: list[dict[str, Any]] = []
    extra = list_grade(*ALL_PASS, ("Uses a seasonal word", False))
    agent, _, grader = build(answers("x"), lambda m: extra, on_evaluation=seen.append)
    result = run(agent, ask("Write", HAIKU_RUBRIC))
    assert result["_rubric_status"] == "satisfied"
    assert len(grader.calls) == 1
    assert seen[0]["unmatched"] == [
        {
            "name": "Uses a seasonal word",
            "passed": False,
            "gap": "fix it: Uses a seasonal word",
            "score": None,
        }
    ]
