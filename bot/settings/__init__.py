"""How a setting's raw value is read, below `bot.config` (which validates every setting in one place).

- ``env_values``: a setting's value that carries an env file's inline comment, padding or quotes (as
  `docker run --env-file` passes them on), named in one line at start.
- ``setting_entries``: the entries of list settings: how a comma-separated value is split and what
  each entry must look like (user, workspace and org ids, logger names, model ids).
"""
