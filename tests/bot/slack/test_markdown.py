"""Model Markdown for Slack's markdown blocks: splitting to a limit and keeping mentions inert."""

from __future__ import annotations

import re

import pytest

from bot.slack.markdown import inert_mentions, split_markdown, truncate_markdown


def visible(text):
    """Text without whitespace and the fences a split adds: what must survive splitting."""
    return re.sub(r"\s+", "", re.sub(r"^(`{3,}|~{3,})\w*$", "", text, flags=re.MULTILINE))


def test_short_markdown_stays_whole_and_nothing_gives_nothing():
    assert split_markdown("# Title\n\nOne **bold** line.\n", 100) == ["# Title\n\nOne **bold** line."]
    assert split_markdown(" \n\n ", 100) == []


def test_cuts_fall_between_blocks_and_lose_nothing():
    paragraphs = [f"Paragraph {i}." + " word" * 30 for i in range(20)]
    pieces = split_markdown("\n\n".join(paragraphs), 500)
    assert len(pieces) > 1 and all(len(piece) <= 500 for piece in pieces)
    # Each paragraph (about 165 characters) fits, so none is cut: the pieces hold them whole.
    assert [p for piece in pieces for p in piece.split("\n\n")] == paragraphs


def test_a_list_is_kept_whole_when_it_fits():
    text = "Intro " + "x" * 60 + "\n\n" + "\n".join(f"- item {i}" for i in range(8)) + "\n\nOutro"
    items = "\n".join(f"- item {i}" for i in range(8))
    # Intro and list (140 characters) do not fit 100 together: the cut falls between them.
    assert split_markdown(text, 100) == ["Intro " + "x" * 60, items + "\n\nOutro"]


@pytest.mark.parametrize("fence", ["```", "~~~", "````"])
def test_a_cut_code_block_is_closed_and_reopened_with_its_language(fence):
    lines = [f"value_{i} = compute({i})" for i in range(200)]
    text = f"Run this:\n\n{fence}python\n" + "\n".join(lines) + f"\n{fence}\n\nDone."
    pieces = split_markdown(text, 1000)
    code = [p for p in pieces if "value_" in p]
    assert len(code) > 1
    assert code[0].startswith(f"Run this:\n\n{fence}python\n")  # the intro shares the first piece
    assert code[-1].endswith(f"\n{fence}\n\nDone.")  # and the closing paragraph the last
    shown = []
    for piece in code:
        assert len(piece) <= 1000
        before, inside = piece.split(f"{fence}python\n")
        body, after = inside.split(f"\n{fence}")
        assert before in ("", "Run this:\n\n") and after in ("", "\n\nDone.")
        shown += body.splitlines()
    assert shown == lines
    assert visible("\n".join(pieces)) == visible(text)


def test_an_unclosed_code_block_is_closed_on_every_piece():
    text = "```\n" + "\n".join(f"line {i}" for i in range(100))
    pieces = split_markdown(text, 200)
    assert len(pieces) > 1 and all(p.startswith("```\n") and p.endswith("\n```") for p in pieces)


def test_one_huge_word_is_cut_hard_without_losing_it():
    pieces = split_markdown("x" * 7000, 3000)
    assert [len(p) for p in pieces] == [3000, 3000, 1000]


def test_a_limit_too_small_for_fences_is_refused():
    with pytest.raises(ValueError):
        split_markdown("text", 8)


def test_truncation_marks_the_cut():
    text = "First paragraph.\n\n" + "Second " * 100
    short = truncate_markdown(text, 100)
    assert len(short) <= 100 and short.endswith("…") and short.startswith("First paragraph.")
    assert truncate_markdown("Fits.", 100) == "Fits."


def test_mentions_become_inert_but_read_the_same():
    text = "<!channel> <!here|here> <!everyone> <!subteam^S1> <@U1> <@W2|ann> @here @channel @everyone"
    inert = inert_mentions(text)
    assert not re.search(r"<[!@]", inert)
    assert not re.search(r"(?<![\w])@(here|channel|everyone)", inert)
    assert inert.replace("\u200b", "").replace("\u2060", "") == text


@pytest.mark.parametrize(
    "text", ["_@here_", "_@channel_", "@here_", "x_@everyone", "*@channel*", "<!group>", "<!GROUP|group>"]
)
def test_broadcasts_wrapped_in_underscores_and_the_old_group_syntax_become_inert(text):
    inert = inert_mentions(text)
    assert not re.search(r"<!|(?<![^\W_])@(here|channel|everyone)", inert), inert
    assert inert.replace("\u200b", "").replace("\u2060", "") == text


def test_ordinary_angle_brackets_and_addresses_are_left_alone():
    text = "`<!DOCTYPE html>` <!-- note --> a <b> 1 < 2, mail me@here.com, <https://example.com>"
    assert inert_mentions(text) == text
