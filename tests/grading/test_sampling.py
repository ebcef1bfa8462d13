"""Several grader samples per iteration: majority verdicts with their confidence, and escalation."""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage

from grading import RubricEvaluation
from grading.middleware import RubricMiddleware
from tests.grading.agents import HAIKU_RUBRIC, SEED_YAML, arun, ask, build, list_grade
from tests.grading.scripted import ScriptedChatModel, answers, payload_of
from tests.grading.test_middleware import scored

LINES, SPRING, RHYME = "The poem has three lines", "The theme is spring", "No rhyme"


def splitting_grader(spring_verdicts: list[bool]) -> Any:
    """Passes lines and rhyme every time; on spring, answers each verdict of the list in turn."""
    turns: Iterator[bool] = itertools.cycle(spring_verdicts)
    lock = threading.Lock()  # the async path asks samples at once, from several threads

    def script(messages: list[BaseMessage]) -> AIMessage:
        with lock:
            spring = next(turns)
        return list_grade((LINES, True), (SPRING, spring), (RHYME, True))

    return script


def by_name(evaluation: RubricEvaluation) -> dict[str, Any]:
    return {c["name"]: c for c in evaluation["criteria"]}


def test_three_samples_split_two_to_one_give_the_majority_with_confidence_two_thirds(run):
    seen: list[RubricEvaluation] = []
    agent, _, grader = build(
        answers("a poem"), splitting_grader([True, True, False]), samples=3, on_evaluation=seen.append
    )
    result = run(agent, ask("Write a haiku", HAIKU_RUBRIC))

    assert len(grader.calls) == 3
    assert result["_rubric_status"] == "satisfied"
    [evaluation] = seen
    criteria = by_name(evaluation)
    assert criteria[SPRING]["passed"] is True
    assert criteria[SPRING]["confidence"] == pytest.approx(2 / 3)
    assert criteria[LINES]["confidence"] == criteria[RHYME]["confidence"] == 1.0
    assert evaluation["grader_calls"] == 3
    assert evaluation["usage"]["input_tokens"] == 30  # the stand-in reports 10 a call
    assert evaluation["provenance"]["samples"] == 3


def test_an_even_split_is_cant_tell_left_to_a_person_not_a_revision(run):
    seen: list[RubricEvaluation] = []
    agent, worker, _ = build(
        answers("a poem"), splitting_grader([True, False]), samples=2, on_evaluation=seen.append
    )
    result = run(agent, ask("Write a haiku", HAIKU_RUBRIC))

    assert result["_rubric_status"] == "satisfied"
    assert len(worker.calls) == 1  # nothing sent back to the worker
    spring = by_name(seen[0])[SPRING]
    assert spring["cannot_tell"] is True
    assert spring["confidence"] == 0.5
    assert "2 samples split evenly" in spring["gap"] and "1 pass, 1 fail" in spring["gap"]


def test_a_sample_without_a_usable_answer_does_not_vote(run):
    replies = itertools.cycle(
        [
            list_grade((LINES, True), (SPRING, False), (RHYME, True)),
            AIMessage(content="I would rather chat."),  # outside the schema: its only call is spent
            list_grade((LINES, True), (SPRING, False), (RHYME, True)),
        ]
    )
    lock = threading.Lock()

    def grader(messages: list[BaseMessage]) -> AIMessage:
        with lock:
            return next(replies)

    seen: list[RubricEvaluation] = []
    agent, _, _ = build(
        answers("a poem"), grader, samples=3, max_grader_calls=1, max_iterations=1, on_evaluation=seen.append
    )
    run(agent, ask("Write a haiku", HAIKU_RUBRIC))

    spring = by_name(seen[0])[SPRING]
    assert spring["passed"] is False
    assert spring["confidence"] == 1.0  # both samples that answered failed it
    assert seen[0]["grader_calls"] == 3


def test_samples_of_a_scored_rubric_vote_on_each_dimension_score(run):
    replies = itertools.cycle(
        [
            scored({"Correctness": 4, "Completeness": 5, "Clarity": 5, "Tone": 5}),
            scored({"Correctness": 4, "Completeness": 5, "Clarity": 3, "Tone": 5}),
            scored({"Correctness": 2, "Completeness": 5, "Clarity": 4, "Tone": 5}),
        ]
    )
    lock = threading.Lock()

    def grader(messages: list[BaseMessage]) -> AIMessage:
        with lock:
            return next(replies)

    seen: list[RubricEvaluation] = []
    agent, _, _ = build(answers("x"), grader, samples=3, max_iterations=1, on_evaluation=seen.append)
    run(agent, ask("Explain", SEED_YAML))

    dimensions = by_name(seen[0])
    assert dimensions["Correctness"]["score"] == 4
    assert dimensions["Correctness"]["confidence"] == pytest.approx(2 / 3)
    assert dimensions["Clarity"]["score"] == 3  # 5, 3, 4 tie three ways: the lowest, not a pass
    assert dimensions["Clarity"]["confidence"] == pytest.approx(1 / 3)
    assert dimensions["Completeness"]["confidence"] == 1.0


def escalating(run: Any, threshold: float | None = None) -> tuple[RubricEvaluation, ScriptedChatModel]:
    """Spring split 2–1 over three samples, with an escalation model that fails it; under a trust
    source giving spring `threshold` when one is given."""
    stronger = ScriptedChatModel(script=lambda messages: list_grade((SPRING, False)))
    seen: list[RubricEvaluation] = []
    trust = None if threshold is None else (lambda rubric, model, runtime: {SPRING: threshold})
    agent, _, _ = build(
        answers("a poem"),
        splitting_grader([True, True, False]),
        samples=3,
        max_iterations=1,
        escalation_model=stronger,
        trust=trust,
        on_evaluation=seen.append,
    )
    run(agent, ask("Write a haiku", HAIKU_RUBRIC))
    return seen[0], stronger


def test_a_criterion_under_the_bar_is_graded_again_by_the_escalation_model(run):
    evaluation, stronger = escalating(run)

    assert len(stronger.calls) == 1
    asked = payload_of(stronger.calls[0])
    assert "Grade only these now, one entry each (1 in all)" in asked and f"“{SPRING}”" in asked
    criteria = by_name(evaluation)
    assert criteria[SPRING]["passed"] is False
    assert criteria[SPRING]["escalated"] is True
    assert criteria[SPRING]["confidence"] == 1.0
    assert "escalated" not in criteria[LINES]
    assert evaluation["provenance"]["escalation_model"] == "ScriptedChatModel"
    assert evaluation["grader_calls"] == 4


def test_unanimous_samples_are_not_escalated(run):
    stronger = ScriptedChatModel(script=lambda messages: list_grade((SPRING, False)))
    agent, _, _ = build(answers("a poem"), splitting_grader([True]), samples=3, escalation_model=stronger)
    run(agent, ask("Write a haiku", HAIKU_RUBRIC))
    assert stronger.calls == []


def test_the_async_hook_asks_every_sample_at_once():
    # Each sample waits at a barrier until all three have been asked: asked one after the other,
    # the first would wait alone and the barrier would break.
    barrier = threading.Barrier(3, timeout=30)

    def grader(messages: list[BaseMessage]) -> AIMessage:
        barrier.wait()
        return list_grade((LINES, True), (SPRING, True), (RHYME, True))

    agent, _, model = build(answers("a poem"), grader, samples=3)
    result = asyncio.run(arun(agent, ask("Write a haiku", HAIKU_RUBRIC)))
    assert result["_rubric_status"] == "satisfied"
    assert len(model.calls) == 3


@pytest.mark.parametrize(
    ("setting", "value"), [("samples", 0), ("samples", 1.5), ("escalate_below", 0), ("escalate_below", 1.2)]
)
def test_bad_sampling_settings_are_refused_naming_the_setting(setting, value):
    with pytest.raises((TypeError, ValueError), match=setting):
        RubricMiddleware("openai:gpt-4o-mini", **{setting: value})


def test_a_verdict_its_trust_threshold_would_leave_to_people_is_escalated_and_acted_on(run):
    evaluation, stronger = escalating(run, 0.9)  # 2/3 is under 0.9: people would get it

    assert len(stronger.calls) == 1
    spring = by_name(evaluation)[SPRING]
    assert spring["escalated"] is True and spring["passed"] is False
    assert not spring.get("cannot_tell")  # the stronger model's verdict is acted on


def test_a_verdict_its_trust_threshold_keeps_is_not_escalated_though_the_samples_split(run):
    evaluation, stronger = escalating(run, 0.6)  # 2/3 clears 0.6: acted on as it is

    assert stronger.calls == []
    spring = by_name(evaluation)[SPRING]
    assert spring["passed"] is True and "escalated" not in spring
    assert spring["confidence"] == pytest.approx(2 / 3)
