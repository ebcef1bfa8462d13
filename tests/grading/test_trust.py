"""The grader may abstain per criterion, and every evaluation says what produced it."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, BaseMessage

from grading import CalibrationExample, RubricEvaluation, abstained, text_hash
from grading.grader import GRADER_SYSTEM_PROMPT
from grading.provenance import instructions_hash
from tests.grading.agents import HAIKU_RUBRIC, ask, build
from tests.grading.scripted import grade_call, payload_of

LINES, SPRING, RHYME = "The poem has three lines", "The theme is spring", "No rhyme"
REASON = "No figures were shared to check the theme against."


def abstaining_grader(*, lines_after: str | None = None, model_name: str | None = None) -> Any:
    """Cannot tell the theme; fails the line count until the latest answer holds `lines_after`."""

    def script(messages: list[BaseMessage]) -> AIMessage:
        latest = payload_of(messages).rsplit("[assistant]", 1)[-1]
        lines_ok = lines_after is None or lines_after in latest
        criteria = [
            {"name": LINES, "passed": lines_ok, "gap": "" if lines_ok else "Write three lines."},
            {"name": SPRING, "passed": False, "cannot_tell": True, "gap": REASON},
            {"name": RHYME, "passed": True},
        ]
        grade = {"result": "needs_revision", "explanation": "Checked.", "criteria": criteria}
        answer = grade_call("RubricGrade", grade)
        if model_name:
            answer.response_metadata = {"model_name": model_name}
        return answer

    return script


def dated_worker(text: str, model_name: str) -> Any:
    def script(messages: list[BaseMessage]) -> AIMessage:
        return AIMessage(content=text, response_metadata={"model_name": model_name})

    return script


def test_a_criterion_the_grader_cannot_tell_ends_the_run_satisfied_after_one_iteration(run):
    seen: list[RubricEvaluation] = []
    agent, worker, _ = build(
        dated_worker("a poem", "worker-1"), abstaining_grader(), on_evaluation=seen.append
    )
    result = run(agent, ask("Write a haiku", HAIKU_RUBRIC))

    assert result["_rubric_status"] == "satisfied"
    assert len(worker.calls) == 1
    [evaluation] = seen
    assert abstained(evaluation) == [SPRING]
    spring = next(c for c in evaluation["criteria"] if c["name"] == SPRING)
    assert spring == {
        "name": SPRING,
        "passed": False,
        "gap": REASON,
        "score": None,
        "cannot_tell": True,
        "confidence": 1.0,  # one sample: the share of one
    }
    assert all("cannot_tell" not in c for c in evaluation["criteria"] if c["name"] != SPRING)


def test_an_abstained_criterion_is_never_sent_back_to_the_worker(run):
    seen: list[RubricEvaluation] = []
    agent, worker, _ = build(
        lambda messages: "three\nlines\nhere" if len(messages) > 2 else "one line",
        abstaining_grader(lines_after="three"),
        on_evaluation=seen.append,
    )
    result = run(agent, ask("Write a haiku", HAIKU_RUBRIC))

    assert [e["result"] for e in seen] == ["needs_revision", "satisfied"]
    assert result["_rubric_status"] == "satisfied"
    feedback = worker.calls[1][-1].text
    assert "Write three lines." in feedback
    assert SPRING not in feedback and REASON not in feedback


def test_provenance_names_the_models_as_they_answered_and_hashes_what_the_grader_was_given(run):
    seen: list[RubricEvaluation] = []
    examples = [
        CalibrationExample(criterion=LINES, grader_verdict="pass", team_verdict="fail", comment="", id="r7"),
        CalibrationExample(criterion=RHYME, grader_verdict="fail", team_verdict="pass", comment=""),
    ]
    agent, _, _ = build(
        dated_worker("a poem", "worker-2026-01-01"),
        abstaining_grader(model_name="grader-2026-01-01"),
        on_evaluation=seen.append,
        calibration=lambda rubric, runtime: examples,
    )
    run(agent, ask("Write a haiku", HAIKU_RUBRIC))

    assert seen[0]["provenance"] == {
        "rubric_hash": text_hash(HAIKU_RUBRIC),
        "grader_model": "grader-2026-01-01",
        "grader_prompt_hash": instructions_hash(GRADER_SYSTEM_PROMPT, "list"),
        "calibration_examples": ["r7"],
        "worker_model": "worker-2026-01-01",
        "samples": 1,
        "escalation_model": None,
    }


def test_provenance_falls_back_to_the_model_asked_for_and_follows_the_instructions(run):
    seen: list[RubricEvaluation] = []
    agent, _, _ = build(
        dated_worker("a poem", "w"), abstaining_grader(), on_evaluation=seen.append, system_prompt="Grade."
    )
    run(agent, ask("Write a haiku", HAIKU_RUBRIC))

    provenance = seen[0]["provenance"]
    assert provenance["grader_model"] == "ScriptedChatModel"  # it names no model of its own
    assert provenance["grader_prompt_hash"] == instructions_hash("Grade.", "list")
    assert provenance["grader_prompt_hash"] != instructions_hash(GRADER_SYSTEM_PROMPT, "list")
