"""Shadow grades in the database: kept once per iteration with their verdicts and provenance, read for
the report and the usage, and erased with their thread; on SQLite and PostgreSQL."""

from __future__ import annotations

from bot.db.shadow import ShadowGrade
from bot.db.usage import SHADOW
from bot.shadow.report import load_shadow
from bot.vocabulary.thread import ThreadKey
from bot.vocabulary.workspace import Workspace

T1 = Workspace("T1")
THREAD = ThreadKey("T1", "C1", "1.0")


def grade(iteration: int, *, usd: float | None = 0.002, failed: bool = False) -> ShadowGrade:
    return ShadowGrade(
        thread=THREAD,
        grading_run_id="grading-1",
        iteration=iteration,
        model="shadow-2026-01-01",
        prompt_hash="abc123",
        result="grader_error" if failed else "needs_revision",
        evaluation={"result": "grader_error" if failed else "needs_revision"},
        tokens=300,
        usd=usd,
        verdicts={} if failed else {"Is polite": "fail", "Cites a source": "pass"},
        live_verdicts={"Is polite": "pass", "Cites a source": "pass"},
    )


async def test_a_shadow_grade_is_kept_once_read_for_the_report_and_usage_and_goes_with_its_thread(store):
    assert await store.record_shadow_grade(grade(0))
    assert not await store.record_shadow_grade(grade(0))  # once per iteration
    assert await store.record_shadow_grade(grade(1, usd=None, failed=True))
    assert await store.shadowed_iterations("grading-1") == {0, 1}

    rows = await store.shadow_verdicts_in_channel(T1, "C1")
    assert sorted((r.iteration, r.criterion, r.verdict, r.live_verdict, r.model) for r in rows) == [
        (0, "Cites a source", "pass", "pass", "shadow-2026-01-01"),
        (0, "Is polite", "fail", "pass", "shadow-2026-01-01"),
    ]
    assert await store.shadow_verdicts_in_channel(Workspace("T2"), "C1") == []
    tally = await store.shadow_tally(T1, "C1")
    assert (tally.grades, tally.errors, tally.tokens, tally.usd, tally.unpriced) == (2, 1, 600, 0.002, 1)
    figures = await load_shadow(store, workspace=T1, channel="C1", days=7)
    assert [(c.criterion, c.compared, c.flips) for c in figures.criteria] == [
        ("Cites a source", 1, 0),
        ("Is polite", 1, 1),
    ]

    # The cost history: the shadow grades' tokens and money under their own name, no request counted.
    (usage,) = await store.usage(
        T1, "C1", rows[0].created_at.replace(hour=0, minute=0, second=0, microsecond=0)
    )
    assert (usage.requester, usage.requests, usage.tokens, usage.usd) == (SHADOW, 0, 600, 0.002)

    erased = await store.erase_threads([THREAD], keep_verdicts=False)
    assert (erased["shadow grades"], erased["shadow verdicts"]) == (2, 2)
    assert await store.shadow_verdicts_in_channel(T1, "C1") == []
    assert (await store.shadow_tally(T1, "C1")).grades == 0
