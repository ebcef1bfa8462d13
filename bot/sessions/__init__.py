"""Each run as an agent session of its thread, and stopping a run (Slack's Stop button, `/rubric stop`).

Slack's agent sessions (``agents.sessions.setStatus``) show a run as ``processing`` while it works,
with a native Stop button; the bot moves the session to ``active`` when the run ends (however it
ends) and to ``closed`` when the thread is purged. A Stop click (``agent_session_stopped``), or
`/rubric stop` where Slack has no sessions, asks every unfinished run of the thread (or of the
caller) to stop: the request is recorded on the run (`runs.stopped_by`), so whichever process runs
it, or takes its queued job later, ends it at once without another model call; the process that
received the click signals its own runs without waiting.

- ``status``: the session's status set in Slack (a workspace without agent sessions is logged, not failed).
- ``stop``: asking to stop, and the watch that ends a run's turn when asked (`RunStopped`).
"""
