import json

from langchain_core.messages import ToolCall
from langchain_core.tools import BaseTool

from grading import tools
from grading.tools import (
    EVIDENCE_TOOLS,
    MAX_MATCH_CHARS,
    MAX_MATCHES,
    MAX_PATTERN_CHARS,
    MAX_TEXT_CHARS,
    count_characters,
    count_lines,
    count_sentences,
    count_syllables,
    count_words,
    regex_match,
)

BASHO = "An old silent pond\nA frog jumps into the pond\nSplash! Silence again.\n"


def call(tool: BaseTool, **args):
    return tool.invoke(args)


# --- syllables --------------------------------------------------------------------------------


def test_a_haiku_counts_five_seven_five():
    result = call(count_syllables, text=BASHO)
    assert [line["syllables"] for line in result["lines"]] == [5, 7, 5]
    assert result["lines"][0]["line"] == "An old silent pond"
    assert result["total"] == 17
    assert all(line["estimated_words"] == [] for line in result["lines"])


def test_a_haiku_that_misses_the_pattern_is_caught():
    poem = "Cherry blossoms fall\nSoftly on the warm spring wind\nPetals drift"
    assert [line["syllables"] for line in call(count_syllables, text=poem)["lines"]] == [5, 7, 3]


def test_words_outside_the_dictionary_are_estimated_and_listed():
    result = call(count_syllables, text="Slackbot wakes at dawn")
    (line,) = result["lines"]
    assert line["estimated_words"] == ["Slackbot"]
    assert line["syllables"] == 5


def test_syllables_handle_curly_apostrophes_and_skip_digits():
    assert call(count_syllables, text="don’t stop 42")["total"] == 2


def test_syllables_report_is_bounded_but_the_total_covers_everything():
    result = call(count_syllables, text="a frog\n" * (tools.MAX_LINES_REPORTED + 5))
    assert len(result["lines"]) == tools.MAX_LINES_REPORTED
    assert result["lines_not_shown"] == 5
    assert result["total"] == 2 * (tools.MAX_LINES_REPORTED + 5)


# --- counting ---------------------------------------------------------------------------------


def test_count_lines_ignores_blank_lines():
    assert call(count_lines, text=BASHO) == 3
    assert call(count_lines, text="\n\nfirst\n\n   \nsecond\n") == 2
    assert call(count_lines, text="") == 0


def test_count_words_keeps_contractions_and_hyphenated_words_whole():
    assert call(count_words, text="Don't stop — it's well-known, 42 times!") == 6
    assert call(count_words, text="  ") == 0


def test_count_sentences():
    assert call(count_sentences, text="Hi there. How are you? Fine!") == 3
    assert call(count_sentences, text="It costs 3.5 dollars. Cheap.") == 2
    assert call(count_sentences, text='He said "stop." Then left') == 2
    assert call(count_sentences, text="One sentence without a full stop") == 1
    assert call(count_sentences, text="... !") == 0


def test_count_characters_with_and_without_whitespace():
    assert call(count_characters, text="a b\nc") == 5
    assert call(count_characters, text="a b\nc", include_whitespace=False) == 3


# --- regex ------------------------------------------------------------------------------------


def test_regex_match_returns_the_matches_and_their_count():
    assert call(regex_match, pattern=r"(?i)pond", text=BASHO) == {
        "count": 2,
        "matches": ["pond", "pond"],
        "truncated": False,
    }
    assert call(regex_match, pattern=r"\d+", text=BASHO) == {
        "count": 0,
        "matches": [],
        "truncated": False,
    }


def test_regex_match_caps_the_matches_returned_but_counts_them_all():
    result = call(regex_match, pattern="a", text="a" * (MAX_MATCHES + 10))
    assert result["count"] == MAX_MATCHES + 10
    assert len(result["matches"]) == MAX_MATCHES
    assert result["truncated"] is True


def test_regex_match_shortens_a_long_match():
    (match,) = call(regex_match, pattern=".+", text="x" * 1000)["matches"]
    assert match == "x" * MAX_MATCH_CHARS + "…"


def test_invalid_regex_is_an_error_message_not_an_exception():
    result = call(regex_match, pattern="(unclosed", text="text")
    assert isinstance(result, str)
    assert result.startswith("Error: invalid regular expression")


def test_over_long_pattern_or_text_is_refused():
    assert "limit" in call(regex_match, pattern="a" * (MAX_PATTERN_CHARS + 1), text="a")
    assert "limit" in call(regex_match, pattern="a", text="a" * (MAX_TEXT_CHARS + 1))


def test_a_pathological_pattern_gives_up_instead_of_hanging(monkeypatch):
    monkeypatch.setattr(tools, "REGEX_TIMEOUT_SECONDS", 0.05)
    result = call(regex_match, pattern=r"(a|aa)+$", text="a" * 60 + "b")
    assert result == "Error: the search took too long; simplify the pattern."


# --- as tools the grader sees -------------------------------------------------------------------


def test_evidence_tools_are_described_for_the_grader():
    names = [t.name for t in EVIDENCE_TOOLS]
    assert names == [
        "count_lines",
        "count_words",
        "count_sentences",
        "count_characters",
        "count_syllables",
        "regex_match",
    ]
    for t in EVIDENCE_TOOLS:
        assert isinstance(t, BaseTool)
        assert len(t.description) > 40
        schema = t.tool_call_schema.model_json_schema()
        assert all(prop.get("description") for prop in schema["properties"].values())


def test_a_tool_call_comes_back_as_json_the_grader_can_read():
    message = count_syllables.invoke(
        ToolCall(name="count_syllables", args={"text": BASHO}, id="call-1", type="tool_call")
    )
    assert message.tool_call_id == "call-1"
    assert [line["syllables"] for line in json.loads(message.content)["lines"]] == [5, 7, 5]


def test_every_tool_answers_nothing_found_for_empty_text():
    for counter in (count_lines, count_words, count_sentences, count_characters):
        assert call(counter, text="") == 0
    assert call(count_syllables, text="") == {"lines": [], "total": 0}
    assert call(regex_match, pattern="x", text="")["count"] == 0
