"""Evidence tools the grader may call before judging: counting and pattern matching, nothing more.

Graders are poor at counting syllables, words or lines in their heads, so a rubric like
"5-7-5 syllables" or "under 100 words" is judged far more reliably with a tool. These tools only
read the text they are given — no code runs, no files or network are touched — and every
answer is bounded in size and time, because their input comes from an untrusted transcript.
The docstrings below are what the grader model reads as each tool's description.
"""

from __future__ import annotations

from typing import Any

import pronouncing
import regex
import syllables
from langchain_core.tools import BaseTool, tool

MAX_PATTERN_CHARS = 500
"""Longest regular expression regex_match accepts; real rubric checks are short."""

MAX_TEXT_CHARS = 50_000
"""Longest text regex_match searches, bounding its work on long transcripts."""

MAX_MATCHES = 50
"""Most matches regex_match returns; it still reports how many there were in all."""

MAX_MATCH_CHARS = 200
"""Longest single match returned in full; longer ones are cut so one match cannot flood the reply."""

REGEX_TIMEOUT_SECONDS = 1.0
"""Wall-clock limit for one regex_match search, so a pathological pattern cannot hang grading."""

MAX_LINES_REPORTED = 100
"""Most lines count_syllables reports one by one; the total still covers every line."""

_WORD = regex.compile(r"[\p{L}\p{N}]+(?:['’\-][\p{L}\p{N}]+)*")
_SPOKEN_WORD = regex.compile(r"\p{L}+(?:['’]\p{L}+)*")
_SENTENCE_BREAK = regex.compile(r"(?<=[.!?…][\"'”’)\]]*)\s+")
_HAS_WORD = regex.compile(r"[\p{L}\p{N}]")


@tool(parse_docstring=True)
def count_lines(text: str) -> int:
    """Count the non-blank lines of a text; blank lines between stanzas are not counted.

    Use it for criteria such as "the poem has three lines".

    Args:
        text: The text to measure, copied exactly from the answer.
    """
    return len(_non_blank_lines(text))


@tool(parse_docstring=True)
def count_words(text: str) -> int:
    """Count the words of a text.

    A word is a run of letters or digits; apostrophes and hyphens inside a word keep it one word
    ("don't", "well-known"). Punctuation and emoji are not words.

    Args:
        text: The text to measure, copied exactly from the answer.
    """
    return len(_WORD.findall(text))


@tool(parse_docstring=True)
def count_sentences(text: str) -> int:
    """Count the sentences of a text, approximately.

    A sentence ends at ".", "!", "?" or "…" followed by a space or line break, or at the end of
    the text. Abbreviations such as "e.g." or "Dr." also end a sentence here, so allow for
    them when the text has any.

    Args:
        text: The text to measure, copied exactly from the answer.
    """
    return sum(1 for part in _SENTENCE_BREAK.split(text) if _HAS_WORD.search(part))


@tool(parse_docstring=True)
def count_characters(text: str, include_whitespace: bool = True) -> int:
    """Count the characters of a text.

    Each Unicode code point counts once, so some emoji count as more than one character.

    Args:
        text: The text to measure, copied exactly from the answer.
        include_whitespace: False to leave out spaces, tabs and line breaks.
    """
    return len(text) if include_whitespace else sum(1 for ch in text if not ch.isspace())


@tool(parse_docstring=True)
def count_syllables(text: str) -> dict[str, Any]:
    """Count English syllables in each non-blank line of a text, e.g. to check a 5-7-5 haiku.

    Words are looked up in the CMU Pronouncing Dictionary (first pronunciation). Words it does
    not know are estimated from their spelling and listed in "estimated_words", so judge those
    by ear. Digits are not counted: a number should be written out as words. The result is
    {"lines": [{"line", "syllables", "estimated_words"}, ...], "total"}.

    Args:
        text: The text to measure, copied exactly from the answer, one verse line per line.
    """
    counts = [_line_syllables(line) for line in _non_blank_lines(text)]
    report: dict[str, Any] = {
        "lines": counts[:MAX_LINES_REPORTED],
        "total": sum(c["syllables"] for c in counts),
    }
    if len(counts) > MAX_LINES_REPORTED:
        report["lines_not_shown"] = len(counts) - MAX_LINES_REPORTED
    return report


@tool(parse_docstring=True)
def regex_match(pattern: str, text: str) -> dict[str, Any] | str:
    """Find every match of a regular expression in a text.

    The result is {"count", "matches", "truncated"}: how many matches there are in all and the
    first ones found. An invalid pattern, an over-long input or a search that takes too long
    gives an error message instead.

    Args:
        pattern: A Python regular expression; put flags inline, e.g. "(?i)" to ignore case or
            "(?m)" to make ^ and $ match at every line.
        text: The text to search, copied exactly from the answer.
    """
    if len(pattern) > MAX_PATTERN_CHARS:
        return f"Error: the pattern is {len(pattern)} characters; the limit is {MAX_PATTERN_CHARS}."
    if len(text) > MAX_TEXT_CHARS:
        return f"Error: the text is {len(text)} characters; the limit is {MAX_TEXT_CHARS}."
    try:
        compiled = regex.compile(pattern)
        found = [m.group(0) for m in compiled.finditer(text, timeout=REGEX_TIMEOUT_SECONDS)]
    except regex.error as exc:
        return f"Error: invalid regular expression: {exc}"
    except TimeoutError:
        return "Error: the search took too long; simplify the pattern."
    return {
        "count": len(found),
        "matches": [_shorten(m) for m in found[:MAX_MATCHES]],
        "truncated": len(found) > MAX_MATCHES,
    }


EVIDENCE_TOOLS: list[BaseTool] = [
    count_lines,
    count_words,
    count_sentences,
    count_characters,
    count_syllables,
    regex_match,
]
"""The tools handed to the grader by default; all are read-only and bounded."""


def _non_blank_lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


def _line_syllables(line: str) -> dict[str, Any]:
    total = 0
    estimated: list[str] = []
    for word in _SPOKEN_WORD.findall(line):
        known = _dictionary_syllables(word.replace("’", "'").lower())
        if known is None:
            estimated.append(word)
            total += syllables.estimate(word)
        else:
            total += known
    return {"line": line, "syllables": total, "estimated_words": estimated}


def _dictionary_syllables(word: str) -> int | None:
    phones = pronouncing.phones_for_word(word)
    return pronouncing.syllable_count(phones[0]) if phones else None


def _shorten(match: str) -> str:
    return match if len(match) <= MAX_MATCH_CHARS else match[:MAX_MATCH_CHARS] + "…"
