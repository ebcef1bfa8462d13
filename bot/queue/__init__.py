"""The job queue: background jobs per Slack thread, one at a time per thread, in arrival order.

- ``jobs``: the job queues' protocol (`JobQueue`), the jobs' payloads and kinds.
- ``scheduler``: the in-process job queue (SQLite).
- ``durable``: PostgreSQL's job queue for many processes (procrastinate), the one that suits the
  database, and erasing a workspace's jobs.
- ``retries``: the durable queue's retries: malformed jobs not retried, worker writes outlasting a
  database restart.
"""
