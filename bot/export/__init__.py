"""The team's reviewed cases as a dataset: `rubric-bot export` writes them as JSON Lines.

- ``dataset``: one row per (iteration, criterion): the request, the graded answer, the grader's
  verdict with its provenance, the team's reviews; streamed from the store and the checkpoints.
"""
