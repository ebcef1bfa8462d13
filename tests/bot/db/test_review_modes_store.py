"""Review modes per channel and how each review was given, on a real SQLite file and a real PostgreSQL."""

from __future__ import annotations

from bot.db.review_modes import ReviewModes
from bot.db.reviews import ReviewVerdict
from bot.vocabulary.thread import ThreadKey
from bot.vocabulary.workspace import Workspace

T1 = Workspace("T1")
THREAD = ThreadKey("T1", "C1", "1.0")


async def test_a_channel_reviews_as_before_until_changed_and_every_change_is_kept(store):
    assert await store.review_modes(T1, "C1") == ReviewModes(blind=False, double_share=0.0)

    await store.set_review_modes(T1, "C1", ReviewModes(blind=True), "U1")
    await store.set_review_modes(T1, "C1", ReviewModes(blind=True, double_share=0.2), "U2")

    assert await store.review_modes(T1, "C1") == ReviewModes(blind=True, double_share=0.2)
    changes = await store.review_mode_changes(T1, "C1", 10)
    assert [(c.modes, c.set_by) for c in changes] == [
        (ReviewModes(True, 0.2), "U2"),
        (ReviewModes(True, 0.0), "U1"),
    ]
    assert await store.review_modes(T1, "C2") == ReviewModes()
    assert await store.review_modes(Workspace("T2"), "C1") == ReviewModes()


async def test_how_a_review_was_given_is_kept_and_a_new_save_replaces_it(store):
    verdicts = [ReviewVerdict("Cites a source", "pass", "pass")]
    await store.save_review(THREAD, "run-1", 0, "U1", verdicts, via="agree")
    await store.save_review(THREAD, "run-1", 0, "U2", verdicts, via="blind")
    await store.save_review(THREAD, "run-2", 0, "U1", verdicts)

    given = {(r.grading_run_id, r.reviewer): r.via for r in await store.reviews_in_channel(T1, "C1")}
    assert given == {("run-1", "U1"): "agree", ("run-1", "U2"): "blind", ("run-2", "U1"): "form"}

    await store.save_review(THREAD, "run-1", 0, "U1", verdicts, via="form")
    given = {(r.grading_run_id, r.reviewer): r.via for r in await store.reviews_in_channel(T1, "C1")}
    assert given[("run-1", "U1")] == "form"


async def test_erasing_a_channels_settings_erases_its_review_modes(store):
    await store.set_review_modes(T1, "C1", ReviewModes(blind=True), "U1")
    await store.set_review_modes(T1, "C2", ReviewModes(double_share=0.5), "U1")

    erased = await store.erase_channel_settings(T1, "C1")

    assert erased["review modes"] == 1
    assert await store.review_mode_changes(T1, "C1", 10) == []
    assert await store.review_modes(T1, "C2") == ReviewModes(double_share=0.5)
