"""Where each verdict came from. What is stored beside each
evaluation (`EvaluationProvenance`) is vocabulary every floor shares: `bot.vocabulary.provenance`.

- ``grouping``: what produced a group of verdicts, in words; coverage; what waits for a person.
"""
