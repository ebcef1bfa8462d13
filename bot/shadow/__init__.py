"""The shadow grader: a candidate grader model judged on live traffic before it replaces the live one.

`RUBRIC_BOT_SHADOW_GRADER_MODEL` grades a share (`RUBRIC_BOT_SHADOW_SHARE`) of live grader
iterations once their run has ended, with the same rubric, draft and calibration examples as the live
grader; it is never posted in the thread and never acts (no verdict, revision or status changes).
Its cost is the ``shadow`` role's, within the daily budgets; its agreement with people and its flips
against the live grader are reported, so that a model swap is judged before it is made.

- ``grader``: which iterations are graded in the shadow (a hash of their ids), grading them within
  the budgets, keeping the verdicts with their provenance and cost, and counting them in `/metrics`.
- ``report``: per shadow model and criterion, its agreement with trusted reviews beside the live
  grader's and its flips against the live grader, for `/rubric report` and `rubric-bot report`.
"""
