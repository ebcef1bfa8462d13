"""`rubric-bot` in the terminal: one module per subcommand.

- ``main``: the entry point (console script and `python -m bot`): the parser and the subcommand registry.
- ``subcommand``: what every subcommand uses: the `CliSubcommand` record, argument types, one-line errors.
- ``channels``: `--channel` as every command takes it: an id, or a #name looked up in Slack.
- ``teams``: `--team` (and `--enterprise`) as the commands take it: a workspace found in whichever
  Enterprise Grid org its data is filed under.
- ``exits``: the exit-code table of every subcommand (and the "exit status:" help it prints).
- ``serve``: `serve` (the bot, in Socket Mode or HTTP) and `worker` (more capacity for the PostgreSQL queue).
- ``manifest``: `manifest`: print the Slack app manifest.
- ``grade``: `grade`: answer and grade one request in the terminal.
- ``report``: `report`: the agreement report from the database, read-only.
- ``export``: `export`: the reviewed cases as a JSON Lines dataset, read-only.
- ``usage``: `usage`: requests, tokens and cost per workspace, channel, person and day, read-only.
- ``db``: `db upgrade`, `db copy`, `db prune` and `db purge`.
- ``purge``: what `db prune` and `db purge` do: delete threads' data now and print what went, per kind.
- ``replay``: `replay`: grade the team's reviewed iterations again with a candidate and compare.
"""
