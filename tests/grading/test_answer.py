"""Grading a final answer on its own: the request and the answer, nothing of the loop."""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from grading import MATERIAL_SOURCE, TranscriptGrader, agrade_answer, answer_only, grade_answer
from tests.grading.scripted import ScriptedChatModel, grade_call, payload_of

RUBRIC = "- Names the capital\n- Mentions the river"


def feedback(text: str) -> HumanMessage:
    return HumanMessage(text, additional_kwargs={"lc_source": "rubric_grader"}, name="rubric_grader")


CONVERSATION = [
    HumanMessage("An older question."),
    AIMessage("An older answer."),
    HumanMessage("Notes: the Seine runs through it.", additional_kwargs={"lc_source": MATERIAL_SOURCE}),
    HumanMessage("Tell me about Paris."),
    AIMessage("DRAFT: Paris is big."),
    feedback("FEEDBACK: name the river."),
    AIMessage("", tool_calls=[{"name": "count_words", "args": {"text": "x"}, "id": "t1"}]),
    ToolMessage("1", tool_call_id="t1", name="count_words"),
    AIMessage("Paris, on the Seine, is the capital."),
]


def test_only_the_current_request_its_material_and_the_final_answer_are_kept():
    kept = answer_only(CONVERSATION, "FINAL: Paris, on the Seine, is the capital.")

    assert [m.text for m in kept] == [
        "Notes: the Seine runs through it.",
        "Tell me about Paris.",
        "FINAL: Paris, on the Seine, is the capital.",
    ]
    assert isinstance(kept[-1], AIMessage)
    assert [m.text for m in answer_only([], "alone")] == ["alone"]


def passing(messages):
    criteria = [{"name": "Names the capital", "passed": True}, {"name": "Mentions the river", "passed": True}]
    return grade_call("RubricGrade", {"result": "satisfied", "explanation": "Fine.", "criteria": criteria})


async def test_an_answer_is_graded_once_without_the_loops_history_on_both_paths():
    model = ScriptedChatModel(script=passing)
    grader = TranscriptGrader(model)

    graded = [
        await agrade_answer(grader, RUBRIC, CONVERSATION, "FINAL answer"),
        grade_answer(grader, RUBRIC, CONVERSATION, "FINAL answer"),
    ]

    assert [e["result"] for e in graded] == ["satisfied", "satisfied"]
    assert len(model.calls) == 2  # once each
    for call in model.calls:
        payload = payload_of(call)
        assert "FINAL answer" in payload and "Tell me about Paris." in payload
        assert not any(seen in payload for seen in ("DRAFT", "FEEDBACK", "count_words", "older"))
    assert all(e["calibration"] == [] and e["iteration"] == 0 for e in graded)
