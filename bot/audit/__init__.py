"""The audit grader: a second, independent grade of a share of finished runs' final answers.

A revise-until-the-grader-is-satisfied loop can drift: the worker learns to satisfy its grader
rather than the rubric (Pan et al. 2024). An audit model (`RUBRIC_BOT_AUDIT_MODEL`) grades a share
(`RUBRIC_BOT_AUDIT_SHARE`) of finished runs again, once, against the same rubric, seeing only the
request and the final answer; it never posts in the thread and never changes the run's outcome.
"Passed by the loop, failed by the audit" is what drift would look like; since runs that take more
iterations are the harder requests, the report sets beside it each audited run's first grade
against its audit, which holds the request fixed.

- ``selection``: which runs are audited: a share chosen by a hash of the run's id (reproducible).
- ``auditor``: auditing a finished run once, storing the verdict with its provenance, tokens and
  cost, and counting it in `/metrics`.
- ``budget``: the audit inside the day's budgets: its estimate reserved before the audit grader is
  called (a spent budget skips the audit, not the run), settled at what it used.
- ``report``: the audit disagreement, overall and by iterations (1, 2, 3+) beside the runs in each
  bucket, and the first grade against the audit, for `/rubric report` and `rubric-bot report`.
- ``export``: each run's audit as `rubric-bot export` writes it (its ``audit`` key).
"""
