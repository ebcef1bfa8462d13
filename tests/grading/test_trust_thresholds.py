"""Trust thresholds in the loop: a verdict whose confidence is under its criterion's threshold is
withheld — "can't tell", left to a person, never sent back to the worker — on both hook paths."""

from __future__ import annotations

import json

import pytest

from grading import RubricEvaluation
from tests.grading.agents import HAIKU_RUBRIC, ask, build
from tests.grading.scripted import answers
from tests.grading.test_sampling import LINES, RHYME, SPRING, by_name, splitting_grader


def test_a_verdict_under_its_threshold_is_withheld_and_not_sent_back(run):
    seen: list[RubricEvaluation] = []
    asked: list[str] = []

    def thresholds(rubric, model, runtime):
        asked.append(model)
        return {SPRING: 1.0, LINES: 0.5}

    # Spring fails 2 of 3: acted on, that would be a revision.
    agent, worker, _ = build(
        answers("a poem"),
        splitting_grader([False, False, True]),
        samples=3,
        trust=thresholds,
        on_evaluation=seen.append,
    )
    result = run(agent, ask("Write a haiku", HAIKU_RUBRIC))

    assert result["_rubric_status"] == "satisfied"
    assert len(worker.calls) == 1  # no revision asked
    spring = by_name(seen[0])[SPRING]
    assert spring["cannot_tell"] is True and spring["passed"] is False
    assert spring["confidence"] == pytest.approx(2 / 3)
    assert spring["trust_threshold"] == 1.0
    assert spring["withheld_passed"] is False  # what was withheld, for the thresholds' next calibration
    assert "the grader said it fails with confidence 0.67, under 1.00" in spring["gap"]
    assert "cannot_tell" not in by_name(seen[0])[LINES]  # confidence 1 clears 0.5
    assert asked and asked[0]  # the model as it answered, for per-model thresholds


def test_a_confident_verdict_is_acted_on_whatever_the_threshold(run):
    seen: list[RubricEvaluation] = []
    agent, worker, _ = build(
        answers("a poem", "a better poem"),
        splitting_grader([False, False, False, True, True, True]),
        samples=3,
        max_iterations=2,
        trust=lambda rubric, model, runtime: {SPRING: 1.0},
        on_evaluation=seen.append,
    )
    run(agent, ask("Write a haiku", HAIKU_RUBRIC))

    assert seen[0]["result"] == "needs_revision"  # unanimous fail: acted on
    assert len(worker.calls) == 2
    assert "trust_threshold" not in by_name(seen[0])[SPRING]


def test_a_failing_trust_source_withholds_every_verdict(run, caplog):
    def broken(rubric, model, runtime):
        raise RuntimeError("database gone")

    seen: list[RubricEvaluation] = []
    agent, worker, _ = build(
        answers("a poem"), splitting_grader([False]), trust=broken, on_evaluation=seen.append
    )
    result = run(agent, ask("Write a haiku", HAIKU_RUBRIC))

    assert result["_rubric_status"] == "satisfied"
    assert len(worker.calls) == 1
    criteria = by_name(seen[0])
    assert all(criteria[name]["cannot_tell"] for name in (LINES, SPRING, RHYME))
    assert "could not be read" in criteria[SPRING]["gap"]
    assert "trust source failed" in caplog.text and "database gone" in caplog.text
    # Strict JSON, as a jsonb column takes it: no infinite threshold recorded.
    assert all("trust_threshold" not in criterion for criterion in criteria.values())
    json.dumps(seen[0], allow_nan=False)


def test_an_async_trust_source_needs_the_async_api(caplog):
    async def thresholds(rubric, model, runtime):
        return {SPRING: 1.0}

    seen: list[RubricEvaluation] = []
    agent, _, _ = build(
        answers("a poem"), splitting_grader([True]), trust=thresholds, on_evaluation=seen.append
    )
    agent.invoke(ask("Write a haiku", HAIKU_RUBRIC), {"configurable": {"thread_id": "t"}})

    assert "the trust source is async: run the agent with ainvoke or astream" in caplog.text
    assert by_name(seen[0])[SPRING]["cannot_tell"] is True  # unread: withheld
