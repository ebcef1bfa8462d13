"""The grader's transcript keeps shared material and the request whole, whatever the thread's length."""

from langchain_core.messages import AIMessage, HumanMessage

from grading import MATERIAL_SOURCE
from grading.grader import (
    GRADER_SOURCE,
    MAX_MESSAGE_CHARS,
    MAX_TRANSCRIPT_CHARS,
    build_transcript,
    request_index,
)


def material(text: str) -> HumanMessage:
    return HumanMessage(text, additional_kwargs={"lc_source": MATERIAL_SOURCE})


def test_material_is_not_the_request():
    messages = [material("the thread"), HumanMessage("summarize it")]
    assert request_index(messages) == 1
    assert request_index([material("only material")]) is None


def test_long_material_and_a_long_request_are_kept_whole_and_the_latest_answer_still_fits():
    thread = "THREAD-START " + "t" * (MAX_MESSAGE_CHARS * 3) + " THREAD-END"
    document = "DOC-START " + "d" * (MAX_MESSAGE_CHARS * 3) + " DOC-END"
    messages = [material(thread), HumanMessage(f"check the spec\n{document}")]
    for n in range(40):
        feedback = HumanMessage(f"feedback {n}", additional_kwargs={"lc_source": GRADER_SOURCE})
        messages += [AIMessage(f"answer {n} " + "a" * 2_000), feedback]
    messages.append(AIMessage("THE LATEST ANSWER"))

    transcript = build_transcript(messages)

    assert "[material shared for the work]\nTHREAD-START" in transcript and "THREAD-END" in transcript
    assert "DOC-START" in transcript and "DOC-END" in transcript and "characters cut" not in transcript
    assert "THE LATEST ANSWER" in transcript and "omitted" in transcript
    assert len(transcript) < MAX_TRANSCRIPT_CHARS + len(thread) + len(document)
