"""Where each verdict came from, as stored beside its evaluation, and agreement kept apart by it.

- ``record``: an evaluation's stored provenance (the engine's, plus rubric version and bot version).
- ``grouping``: reviews and evaluations split by rubric version and grader model, for the reports.
"""
