"""Where the bot keeps its data: SQLite by default, PostgreSQL at scale, one schema for both.

- ``database``: which database ``RUBRIC_BOT_DB`` names; its engine and langgraph checkpointer.
- ``schema``: the bot's own tables (SQLAlchemy Core).
- ``store``: every read and write of those tables.
- ``audits``: the audit grader's verdicts on finished runs' final answers, as statements.
- ``calibration``: which reviews calibrate the grader (trusted, not dropped), as SQL conditions.
- ``spend``: the daily spend counters per person, channel, workspace and deployment, and admission
  against their caps in one statement.
- ``admin``: `rubric-bot db` (upgrade, copy).
- ``migrations``: the versioned Alembic migrations of ``schema``.
"""
