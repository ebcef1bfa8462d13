"""Where the bot keeps its data: SQLite by default, PostgreSQL at scale, one schema for both.

Below every feature: it imports nothing of the bot's but `bot.vocabulary`. The store is one part per
aggregate, each owning its statements and the types of its rows, composed into `Store`.

- ``database``: which database ``RUBRIC_BOT_DB`` names; its engine and langgraph checkpointer.
- ``private_file``: the SQLite file and its companions private to the bot's account.
- ``schema``: the bot's own tables (SQLAlchemy Core).
- ``store``: `Store`, every read and write of those tables: the parts below on one engine.
- ``base``: the engine the parts share: writing and reading connections, SQLite's turns, and the
  SQLite thread its reads and hottest writes run in whole.
- ``scope``: the workspace, channel and thread columns and conditions every part filters by, and locks.
- ``claims``: dedupe claims of messages.
- ``threads``: the threads the bot takes part in.
- ``rubrics``: channel rubrics and their versions.
- ``replays``: a channel's replay lock and cooldown.
- ``proposals``: grading changes held until an editor applies them, and what became of each.
- ``runs``: runs and their attempts: leases, interruption, undelivered endings.
- ``usage``: runs, tokens and cost per day, and the spend counters a run's admission charges.
- ``spend``: the daily spend counters per person, channel, workspace and deployment, and admission
  against their caps in one statement.
- ``material``: what a run's request shared, read and not.
- ``ledger``: the posted-message ledger.
- ``evaluations``: the evaluation messages posted, and their redaction.
- ``reviews``: reviews of the grader, and calibration per channel and its drops.
- ``review_modes``: how each channel's iterations are reviewed (blind, double reviews; every change kept).
- ``trust``: each channel's trust level (every change kept) and its criteria's confidence thresholds.
- ``calibration``: which reviews calibrate the grader (trusted, not dropped), as SQL conditions.
- ``message_changes``: deletions and edits kept until applied.
- ``feedback``: people's 👍/👎 on final answers, tallied per channel and read for the export.
- ``audits``: the audit grader's second look at finished runs, as rows and statements.
- ``shadow``: the shadow grader's grades of live iterations and its verdicts per criterion.
- ``erasure``: deleting whole threads' data and channels' settings.
- ``uploads``: the files (charts) the bot uploaded to Slack, kept to delete them with their data.
- ``workspace_settings``: what a workspace's admins set.
- ``transactions``: the transactions spanning aggregates: a request's admission, a run's start and end.
- ``admin``: `rubric-bot db` (upgrade, copy).
- ``queue_schema``: the PostgreSQL job queue's schema, applied by ``admin`` with the bot's tables.
- ``migrations``: the versioned Alembic migrations of ``schema``.
"""
