"""The data's life: what people delete or edit, how long threads are kept, purge and uninstall, and
the charts in Slack that go with the data.

- ``forget``: a deleted message leaves its thread's stored conversation and the records quoting it;
  an edited request's stored copy takes the new text.
- ``erase``: deleting whole threads' data (a team's, a channel's, a thread's, or idle ones), shared
  by `rubric-bot db purge`, uninstall and retention.
- ``retention``: the daily sweep of threads idle longer than `RUBRIC_BOT_RETENTION_DAYS`.
- ``sessions``: the purged threads' agent sessions closed in Slack (``agents.sessions.setStatus``).
- ``uploads``: the charts the bot uploaded to Slack, deleted (``files.delete``) with the data they show.
- ``files``: the SQLite file's write-ahead log emptied after a deletion, so it keeps nothing deleted.
"""
