"""What an operator (or an orchestrator) asks a running process: is it alive, is it ready, how is it doing.

- ``health``: `/healthz` (the process answers) and `/readyz` (the database answers, and in Socket Mode
  the socket is connected; else 503 with the reason in one line).
- ``logs``: what a process logs: the bot's lines at `RUBRIC_BOT_LOG_LEVEL`, other libraries' at INFO
  unless named in `RUBRIC_BOT_DEBUG_LOGGERS`, and never a Slack token or a queued job's arguments.
- ``metrics``: the Prometheus counters the runner, the auditor and the shadow grader move, and
  `/metrics` (with the Slack client's own count of failed calls).
- ``startup``: how a `serve` or `worker` process starts: its one start-up line, the schema first, an
  unusable database in one line (or waited for with ``--wait-for-db``).
- ``server``: those three routes on a port of their own (`RUBRIC_BOT_METRICS_PORT`) in every
  process, and in HTTP mode the two probes (never `/metrics`) on the port Slack posts to as well.
"""
