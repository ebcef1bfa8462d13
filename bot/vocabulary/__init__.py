"""The words every floor of the bot shares: pure value types that import nothing of the bot's (only
`grading` and the standard library), so that the database, the features and the listeners can all
speak them without any of them importing another upwards.

- ``workspace``: `Workspace`, `Organization` and `Tenant`: the key that keeps tenants apart in every
  row, query and job.
- ``thread``: `ThreadKey`, which thread a row or job belongs to, and `MessageChange`, a person's
  message in a thread deleted or edited.
- ``statuses``: how a run ended (`RunStatus`): grading's statuses and the bot's own.
- ``verdicts``: `Verdict`, the grader's or a reviewer's word on one criterion.
- ``unread``: `Unread`, something a request shared that was not read, and why.
- ``provenance``: `EvaluationProvenance`, what produced a stored evaluation (the engine's
  `grading.Provenance` plus the rubric's version in the channel and the bot's version).
"""
