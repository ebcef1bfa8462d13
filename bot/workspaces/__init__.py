"""Many workspaces from one deployment: offering the bot to workspaces that install it with OAuth.

- ``manifest``: the shipped app manifest, its bot scopes, and the variant for a distributed app.
"""
