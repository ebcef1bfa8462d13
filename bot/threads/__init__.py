"""One Slack thread, one conversation: requests in, graded answers out.

- ``conversation``: which Slack messages are requests (or deletions and edits of one), and which thread
  (conversation) each is in.
- ``jobs``: the job queues (in-process for SQLite, PostgreSQL's for many processes) and their payloads.
- ``runner``: what a job does: run the agent on a request and post each iteration and the answer.
- ``delivery``: a run's thread messages: each posted once, in order, and owed while Slack refuses them.
- ``progress``: what a thread shows while the bot works (thread status, else ⏳).
- ``summary``: long threads summarized for the worker past `RUBRIC_BOT_CONTEXT_TOKENS`.
- ``render``: the thread messages and the rubric UI, as pure functions to Slack payloads.
"""
