"""One Slack thread, one conversation: requests in, graded answers out.

- ``conversation``: which Slack messages are requests (or deletions and edits of one), read from their
  events (the thread key and the change itself are `bot.vocabulary.thread`).
- ``jobs``: the job queues' protocol and the jobs' payloads and kinds.
- ``scheduler``: the in-process job queue (SQLite).
- ``durable_queue``: PostgreSQL's job queue for many processes (procrastinate), and the one that suits
  the database.
- ``queue_retries``: the durable queue's retries: malformed jobs not retried, worker writes outlasting
  a database restart.
- ``runner``: what a job does: `ThreadRunner`, its parts wired to the job kinds.
- ``runner_base``: what the runner's parts share: collaborators, replies, the database retry pause.
- ``admission``: requests, rubric changes, notices, deletions and edits claimed and queued.
- ``answering``: the run itself: the agent on a request, each iteration and the answer posted.
- ``recovery``: interrupted runs told in their threads, jobs given up or tried again.
- ``delivery``: a run's thread messages: each posted once, in order, and owed while Slack refuses them.
- ``progress``: what a thread shows while the bot works (thread status, else ⏳).
- ``summary``: long threads summarized for the worker past `RUBRIC_BOT_CONTEXT_TOKENS`.
- ``render``: the thread messages and the rubric UI, as pure functions to Slack payloads.
"""
