"""`TranscriptGrader`: one grade of a transcript you already have, as the middleware would grade it."""

from __future__ import annotations

import asyncio
import re

from langchain_core.messages import AIMessage, HumanMessage

from grading import EVIDENCE_TOOLS, CalibrationExample, TranscriptGrader
from tests.grading.scripted import ScriptedChatModel, grade_call, payload_of

RUBRIC = "- Names the capital\n- Mentions the river"
TRANSCRIPT = [HumanMessage("Tell me about Paris.", id="h1"), AIMessage("Paris is the capital.", id="a1")]
EXAMPLE = CalibrationExample(
    criterion="Mentions the river", grader_verdict="pass", team_verdict="fail", comment="No Seine."
)


def grades(river: bool):
    def script(messages):
        criteria = [
            {"name": "Names the capital", "passed": True},
            {"name": "Mentions the river", "passed": river, "gap": "" if river else "Name the Seine."},
        ]
        result = "satisfied" if river else "needs_revision"
        return grade_call("RubricGrade", {"result": result, "explanation": "x", "criteria": criteria})

    return script


def test_a_transcript_is_graded_once_with_the_middlewares_payload_and_verdict_rules():
    model = ScriptedChatModel(script=grades(river=False))
    evaluation = TranscriptGrader(model, tools=EVIDENCE_TOOLS).grade(
        RUBRIC, TRANSCRIPT, iteration=1, max_iterations=4, calibration=[EXAMPLE]
    )

    assert len(model.calls) == 1  # graded once: no loop back to a worker
    payload = payload_of(model.calls[0])
    assert "Grading iteration 1." in payload
    assert "Paris is the capital." in payload and "No Seine." in payload
    assert "count_words" in model.bound_tool_names
    assert evaluation["result"] == "needs_revision"
    assert [c["passed"] for c in evaluation["criteria"]] == [True, False]
    assert (evaluation["iteration"], evaluation["max_iterations"]) == (1, 4)
    assert evaluation["calibration"] == [EXAMPLE]
    assert evaluation["answer_message_id"] == "a1"
    assert evaluation["usage"] == {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}


async def test_concurrent_grades_each_show_their_own_examples():
    model = ScriptedChatModel(script=grades(river=True))
    grader = TranscriptGrader(model)
    other = CalibrationExample(
        criterion="Names the capital", grader_verdict="fail", team_verdict="pass", comment=""
    )
    await asyncio.gather(
        grader.agrade(RUBRIC, TRANSCRIPT, calibration=[EXAMPLE]),
        grader.agrade(RUBRIC, TRANSCRIPT, calibration=[other]),
        grader.agrade(RUBRIC, TRANSCRIPT),
    )
    shown = sorted(
        ("No Seine" in p, re.search(r"criterion \W?Names the capital", p) is not None)
        for p in map(payload_of, model.calls)
    )
    assert shown == [(False, False), (False, True), (True, False)]


async def test_a_failing_grader_is_an_evaluation_not_an_exception():
    def broken(messages):
        raise RuntimeError("provider is down")

    evaluation = await TranscriptGrader(ScriptedChatModel(script=broken)).agrade(RUBRIC, TRANSCRIPT)

    assert evaluation["result"] == "grader_error"
    # The provider's text (which may hold a key's tail) stays in the log; the evaluation names the
    # failure's type and the reference to find it by.
    assert "provider is down" not in evaluation["explanation"]
    assert "RuntimeError" in evaluation["explanation"] and "ref " in evaluation["explanation"]
