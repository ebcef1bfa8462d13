"""Where each verdict came from, as stored beside its evaluation, and agreement kept apart by it.

- ``record``: an evaluation's stored provenance (the engine's, plus rubric version and bot version).
- ``version``: which version of the channel's rubric a run graded against (or the thread rubric's hash).
- ``grouping``: reviews and evaluations split by rubric version and grader model, for the reports.
"""
