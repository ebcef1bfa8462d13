"""rubric-bot: the Slack adapter that runs the grading engine in Slack threads.

One folder per feature; each folder's ``__init__`` docstring is its map, one line per module. The
floors (checked by ``tests/bot/test_layout.py``): ``vocabulary/`` imports nothing of the bot's;
``db/`` only the vocabulary; the features (and ``config``, ``agent/``) the floors below and each
other without a cycle; ``home`` and ``listeners`` above them; then ``app``; then ``cli``.

- ``vocabulary/``: the words every floor shares: the workspace and thread keys, message changes, run
  statuses, verdicts, what was not read.
- ``agent/``: the worker agent with the rubric grader, its models, one turn of a conversation with
  it, and long threads summarized.

- ``slack/``: Slack plumbing: the client and its errors, the signed-request HTTP app, Socket Mode,
  Block Kit limits and builders, mrkdwn and Markdown, inbound payload models, which messages are
  requests.
- ``listeners/``: Bolt listeners only: they register, ack and delegate to the feature that owns the work.
- ``threads/``: the loop of one thread: requests admitted, the runner, the answer delivered, the
  thread's status while it works, interrupted runs recovered.
- ``queue/``: the job queues the loop runs on: one job at a time per thread, in memory (SQLite) or
  durable across processes (PostgreSQL).
- ``rendering/``: how the bot's messages look in Slack: a run's results, rubrics, errors and help.
- ``streaming/``: a run's progress streamed as a plan in one message that ends with the answer.
- ``assistant/``: Slack's assistant pane: its greeting and suggested prompts, its title, and the
  channel beside it whose rubric a request there is graded by.
- ``material/``: what people shared, read for a request: the thread the bot is called into and attached
  files, delimited as material for the worker and the grader.
- ``review/``: team review of the grader: verdicts, the tally and buttons, the form, calibration.
- ``agreement/``: how far the grader agrees with the team: the report, replay, comparison and charts.
- ``trust/``: trust levels per channel: the grader acts alone only on verdicts whose confidence clears
  a threshold recalibrated from the channel's trusted reviews (`/rubric trust`).
- ``audit/``: the audit grader: a share of finished runs' final answers graded again on their own,
  and the audit disagreement by iterations (is the worker learning the grader?).
- ``shadow/``: the shadow grader: a candidate grader model grading a share of live iterations, never
  acting, with its agreement with people and its flips against the live grader.
- ``provenance/``: where each verdict came from (rubric version, grader model, instructions, examples).
- ``export/``: the reviewed cases as a JSON Lines dataset (`rubric-bot export`).
- ``sessions/``: each run as an agent session of its thread (Slack's Stop button), and stopping runs.
- ``feedback/``: people's 👍/👎 on the final answers, and the askers' satisfaction beside the pass rate.
- ``limits/``: daily limits (requests per person, tokens per channel) and the usage they count.
- ``proposals/``: no grader change without a replay: a new rubric, grader model or calibration drop
  is first replayed against the trusted reviews and waits for an editor's Apply.
- ``governance/``: who may change grading (editors, admins), and rubric changes: versions, history,
  revert, announcements.
- ``workspaces/``: many workspaces from one deployment: OAuth installation, each workspace's token,
  the manifest of a distributed app.
- ``lifecycle/``: the data's life: deleted and edited messages, retention, purge and uninstall, an
  emptied write-ahead log.
- ``db/``: the database (SQLite or PostgreSQL), its schema, the store by aggregate, admin and migrations.
- ``settings/``: how a setting's raw value is read: env-file values, the entries of list settings.
- ``ops/``: what an operator asks a running process: start-up, `/healthz`, `/readyz`, `/metrics`.
- ``cli/``: `rubric-bot` in the terminal: one module per subcommand.
- ``app``: the Slack app: Bolt wiring and the `serve` and `worker` process lifecycles.
- ``config``: every setting, validated in one place.
- ``home``: the App Home tab.
- ``__main__``: `python -m bot` is `rubric-bot`.
"""
