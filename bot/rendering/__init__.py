"""How the bot's thread messages look in Slack, as pure functions to Slack payloads (no I/O), shared by
every feature that posts them.

- ``results``: a run's results: each iteration's evaluation, the final answer, and the words for a
  status and a run's tokens and cost.
- ``rubrics``: a rubric confirmed, refused or asked about, the hints on setting one, and the
  channel-rubric editor.
- ``errors``: a failure told in a thread, and the ``/rubric help`` text.
"""
