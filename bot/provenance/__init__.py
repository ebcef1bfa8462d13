"""Where each verdict came from, and agreement kept apart by it. What is stored beside each
evaluation (`EvaluationProvenance`) is vocabulary every floor shares: `bot.vocabulary.provenance`.

- ``grouping``: reviews and evaluations split by rubric version and grader model, for the reports.
"""
