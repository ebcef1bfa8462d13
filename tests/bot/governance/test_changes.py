"""Rubric versions as the channel and `/rubric history` show them (pure rendering)."""

from __future__ import annotations

from datetime import UTC, datetime

from bot.db.rubrics import RubricVersion
from bot.governance.changes import Change, announcement, change_words, first_criteria, history_message

WHEN = datetime(2026, 12, 1, 9, 30, tzinfo=UTC)


def version(number: int, text: str | None, user: str = "U1") -> RubricVersion:
    return RubricVersion(version=number, rubric_text=text, set_by=user, created_at=WHEN)


def test_an_announcement_names_who_changed_it_and_the_new_criteria_or_that_it_was_cleared():
    changed = announcement(version(2, "- Cites a source\n- Is polite", "U7"))
    assert "<@U7> changed this channel's default rubric" in changed["text"]
    blocks = str(changed["blocks"])
    assert "Cites a source" in blocks and "Is polite" in blocks and "Version 2" in blocks

    cleared = announcement(version(3, None, "U8"), reverted_to=1)
    assert cleared["text"] == "<@U8> cleared this channel's default rubric (back to version 1)."


def test_history_lists_versions_newest_first_with_their_first_criteria():
    message = history_message([version(3, None), version(2, "- A\n- B\n- C\n- D\n- E"), version(1, "- A")])
    text = str(message["blocks"])
    assert text.index("*3* (in force)") < text.index("*2*") < text.index("*1*")
    assert "_cleared_" in text and "“A”, “B”, “C” and 2 more" in text
    assert "never been set" in history_message([])["text"]


def test_the_caller_is_told_when_the_announcement_could_not_be_posted():
    assert "Announced in this channel" in change_words(Change(version(1, "- A"), announced=True))
    assert "/invite @rubric-bot" in change_words(Change(version(1, "- A"), announced=False))
    assert first_criteria("not: [a rubric") == "“not: [a rubric”"
