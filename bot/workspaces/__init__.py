"""Many workspaces from one deployment (the workspace key itself is `bot.vocabulary.workspace`): OAuth
installation, the token each workspace's work runs with, and each workspace's own settings.

- ``installations``: OAuth mode: Bolt's OAuth flow settings and SQLAlchemy installation and state
  stores on the bot's database, and the authorization that finds (and refreshes) a workspace's token.
- ``install_flow``: the install pages safe for anyone to open: a signed OAuth state (no write until
  the redirect), and installs refused for workspaces outside `RUBRIC_BOT_ALLOWED_TEAMS`/`_ENTERPRISES`.
- ``authorization``: Bolt's authorization with its cache on: a token is checked with Slack once per
  process, and forgotten when the app is uninstalled, the token revoked or Slack refuses it.
- ``encryption``: the stored OAuth tokens encrypted with `RUBRIC_BOT_ENCRYPTION_KEY`: the store
  that encrypts and decrypts them, encrypting those left in plain text, and rotating keys.
- ``clients``: `WorkspaceClients`: the Web API client of a workspace, for jobs run after the request.
- ``manifest``: the shipped app manifest, its bot scopes, and the variant for a distributed app.
- ``settings``: a workspace's settings over the deployment's (models, daily limits, rubric editors):
  which apply and where each comes from, and checking an admin's choices against the deployment.
- ``admin``: `/rubric admin`: the admin check, the settings in force and their form, saving a change.
- ``admin_view``: `/rubric admin` rendered (settings, form, confirmation) and a submitted form read back.
"""
