"""Two workspaces (and two Enterprise Grid orgs) on one database: each sees only its own rows, even
where their channel ids and thread timestamps are the same (SQLite and PostgreSQL)."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest

from bot.db.replays import ReplayRefused
from bot.db.reviews import ReviewVerdict
from bot.db.spend import Cap, QuotaExceeded, RunQuota
from bot.db.store import Store
from bot.vocabulary.thread import ThreadKey
from bot.vocabulary.workspace import Organization, Workspace

ACME = Workspace("T1")
GLOBEX = Workspace("T2")
ORG_A = Workspace("T9", enterprise="E1")
ORG_B = Workspace("T9", enterprise="E2")
"""Two orgs whose rows name the same team (as rows of an org-wide installation may)."""

CHANNEL, ROOT = "C1", "1700000000.000100"
"""The channel id and thread root both workspaces use."""


def evaluation(run: str) -> dict:
    return {"grading_run_id": run, "iteration": 0, "result": "needs_revision", "criteria": []}


@pytest.mark.parametrize(("first", "second"), [(ACME, GLOBEX), (ORG_A, ORG_B)], ids=["teams", "orgs"])
async def test_the_same_channel_in_two_workspaces_keeps_two_sets_of_rows(store, first, second):
    mine, theirs = ThreadKey.of(first, CHANNEL, ROOT), ThreadKey.of(second, CHANNEL, ROOT)
    await store.set_channel_rubric(first, CHANNEL, "- Mine", "U1")
    await store.set_channel_rubric(second, CHANNEL, "- Theirs", "U1")
    await store.set_calibration(second, CHANNEL, False)
    await store.add_thread(mine)
    await store.start_run(mine, ROOT)
    await store.save_evaluation(mine, "1.5", evaluation("run-mine"), "- Mine")
    await store.save_review(mine, "run-mine", 0, "U1", [ReviewVerdict("Clarity", "pass", "fail", "no")])

    assert await store.get_channel_rubric(first, CHANNEL) == "- Mine"
    assert await store.get_channel_rubric(second, CHANNEL) == "- Theirs"
    assert await store.calibration_enabled(first, CHANNEL)
    assert await store.has_thread(mine) and not await store.has_thread(theirs)
    assert len(await store.recent_graded_runs(first, CHANNEL, 5)) == 1
    assert await store.recent_graded_runs(second, CHANNEL, 5) == []
    assert await store.evaluations_in_channel(second, CHANNEL) == []
    assert await store.reviews_in_channel(second, CHANNEL) == []
    assert await store.recent_disagreements(second, CHANNEL) == []
    assert len(await store.recent_disagreements(first, CHANNEL)) == 1
    # A button or form naming the other workspace's evaluation finds nothing.
    assert await store.get_evaluation(second, "run-mine", 0) is None
    assert await store.reviews_for_iteration(second, "run-mine", 0) == []
    assert (await store.get_evaluation(first, "run-mine", 0)).thread == mine

    assert await store.clear_channel_rubric(second, CHANNEL, "U1")
    assert await store.get_channel_rubric(first, CHANNEL) == "- Mine"


async def test_runs_left_behind_are_claimed_with_their_workspace(store):
    acme, org = ThreadKey.of(ACME, CHANNEL, ROOT), ThreadKey.of(ORG_A, CHANNEL, ROOT)
    await store.start_run(acme, "1.1")
    await store.start_run(org, "1.2")

    claimed = await store.claim_abandoned_runs(datetime.now(UTC))

    assert {run.thread for run in claimed} == {acme, org}
    assert {run.thread.thread_id for run in claimed} == {f"T1:{CHANNEL}:{ROOT}", f"E1:T9:{CHANNEL}:{ROOT}"}


@pytest.mark.parametrize(("first", "second"), [(ACME, GLOBEX), (ORG_A, ORG_B)], ids=["teams", "orgs"])
async def test_rubric_history_replays_and_daily_limits_count_per_workspace(store, first, second):
    await store.set_channel_rubric(first, CHANNEL, "- Mine", "U1")
    await store.set_channel_rubric(first, CHANNEL, "- Mine, again", "U1")
    theirs = await store.set_channel_rubric(second, CHANNEL, "- Theirs", "U2")

    assert theirs.version == 1  # numbered per workspace's channel, not after the other's two
    assert [v.rubric_text for v in await store.rubric_versions(first, CHANNEL, 5)] == [
        "- Mine, again",
        "- Mine",
    ]
    assert [v.rubric_text for v in await store.rubric_versions(second, CHANNEL, 5)] == ["- Theirs"]
    assert await store.rubric_version(second, CHANNEL, 2) is None

    lease = await store.start_replay(first, CHANNEL, "U1", timedelta(hours=1))
    assert not isinstance(lease, ReplayRefused)  # …and the other workspace's channel is free as well:
    other = await store.start_replay(second, CHANNEL, "U2", timedelta(hours=1))
    assert not isinstance(other, ReplayRefused)
    await lease.release()
    await other.release()

    today = datetime.now(UTC) - timedelta(minutes=1)
    quota = RunQuota(day=today.date(), caps={"person": Cap(requests=1)})
    await store.start_run(ThreadKey.of(first, CHANNEL, ROOT), "1.1", requester="U7", quota=quota)
    # The same user id in the other workspace has made no request there yet.
    await store.start_run(ThreadKey.of(second, CHANNEL, ROOT), "1.2", requester="U7", quota=quota)
    with pytest.raises(QuotaExceeded):
        await store.start_run(ThreadKey.of(first, CHANNEL, ROOT), "1.3", requester="U7", quota=quota)
    assert [(row.requester, row.requests) for row in await store.usage(first, CHANNEL, today)] == [("U7", 1)]
    assert [(row.requester, row.requests) for row in await store.usage(second, CHANNEL, today)] == [("U7", 1)]


async def seed_thread(store: Store, thread: ThreadKey, request_ts: str) -> int:
    """A thread with a claimed request, its run, a posted evaluation and a review."""
    assert await store.claim(thread.message_key(request_ts))
    await store.add_thread(thread)
    run_id = await store.start_run(thread, request_ts)
    run = f"run-{thread.enterprise}-{thread.team}"
    await store.record_posted(run_id, 0, 0, f"{request_ts}1")
    await store.save_evaluation(thread, f"{request_ts}1", evaluation(run), "- Rubric")
    await store.save_review(thread, run, 0, "U1", [ReviewVerdict("Clarity", "pass", "fail", "no")])
    await store.set_channel_rubric(thread.workspace, thread.channel, "- Rubric", "U1")
    await store.set_calibration(thread.workspace, thread.channel, False)
    return run_id


@pytest.mark.parametrize(("first", "second"), [(ACME, GLOBEX), (ORG_A, ORG_B)], ids=["teams", "orgs"])
async def test_deleting_one_workspaces_data_leaves_the_other_s(store, first, second):
    mine, theirs = ThreadKey.of(first, CHANNEL, ROOT), ThreadKey.of(second, CHANNEL, ROOT)
    await seed_thread(store, mine, "1.1")
    their_run = await seed_thread(store, theirs, "1.1")

    assert await store.threads_in(first) == [mine]
    assert (await store.request_run(second, CHANNEL, "1.1")).run_id == their_run
    erased = await store.erase_threads(await store.threads_in(first), keep_verdicts=False)
    erased += await store.erase_channel_settings(first, None)

    assert erased == Counter(
        {
            "threads": 1,
            "runs": 1,
            "posted messages": 1,
            "evaluations": 1,
            "reviews": 1,
            "dedupe records": 1,
            "channel rubrics": 1,
            "channel rubric versions": 1,
            "channel settings": 1,
        }
    )
    assert await store.threads_in(first) == [] and await store.request_run(first, CHANNEL, "1.1") is None
    assert await store.threads_in(second) == [theirs]
    assert await store.get_channel_rubric(second, CHANNEL) == "- Rubric"
    assert not await store.calibration_enabled(second, CHANNEL)
    assert len(await store.reviews_in_channel(second, CHANNEL)) == 1
    assert [p.message_ts for p in await store.posted_messages(their_run)] == ["1.11"]
    assert not await store.claim(theirs.message_key("1.1"))  # its dedupe record is still there
    assert await store.claim(mine.message_key("1.1"))  # the erased one's is gone


async def test_an_org_s_data_is_deleted_with_every_workspace_of_it_and_nothing_else(store):
    org_team, org_other_team, outside = Workspace("T1", "E1"), Workspace("T2", "E1"), Workspace("T1")
    for workspace in (org_team, org_other_team, outside):
        await seed_thread(store, ThreadKey.of(workspace, CHANNEL, ROOT), "1.1")

    refs = await store.threads_in(Organization("E1"))
    await store.erase_threads(refs, keep_verdicts=False)
    await store.erase_channel_settings(Organization("E1"), None)

    assert {ref.workspace for ref in refs} == {org_team, org_other_team}
    assert await store.threads_in(None) == [ThreadKey.of(outside, CHANNEL, ROOT)]
    assert await store.get_channel_rubric(outside, CHANNEL) == "- Rubric"
    assert await store.get_channel_rubric(org_team, CHANNEL) is None


async def test_a_deleted_message_is_redacted_in_its_own_workspace_only(store):
    mine, theirs = ThreadKey.of(ACME, CHANNEL, ROOT), ThreadKey.of(GLOBEX, CHANNEL, ROOT)
    await seed_thread(store, mine, "1.1")
    await seed_thread(store, theirs, "1.1")

    assert await store.redact_rubric(mine, "- Rubric", "(removed)") == {"run--T1"}

    assert (await store.get_evaluation(ACME, "run--T1", 0)).rubric_text == "(removed)"
    assert (await store.get_evaluation(GLOBEX, "run--T2", 0)).rubric_text == "- Rubric"
