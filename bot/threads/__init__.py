"""The loop of one Slack thread: requests admitted, run, answered and delivered; runs recovered.

- ``runner``: what a job does: `ThreadRunner`, its parts wired to the job kinds.
- ``runner_base``: what the runner's parts share: its ports and policy (`RunnerPorts`, `RunnerPolicy`),
  replies, the database retry pause.
- ``admission``: requests, rubric changes, notices, deletions and edits claimed and queued.
- ``answering``: the run itself: the agent on a request, each iteration and the answer posted.
- ``recovery``: interrupted runs told in their threads, jobs given up or tried again.
- ``delivery``: a run's thread messages: each posted once, in order, and owed while Slack refuses them.
- ``progress``: what a thread shows while the bot works (thread status, else ⏳).
"""
