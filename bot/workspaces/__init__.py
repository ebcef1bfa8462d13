"""Many workspaces from one deployment: offering the bot to workspaces that install it with OAuth,
and each workspace's own settings.

- ``manifest``: the shipped app manifest, its bot scopes, and the variant for a distributed app.
- ``settings``: a workspace's settings over the deployment's (models, daily limits, rubric editors):
  which apply and where each comes from, and checking an admin's choices against the deployment.
- ``admin``: `/rubric admin`: the admin check, the settings in force and their form, saving a change.
- ``admin_view``: `/rubric admin` rendered (settings, form, confirmation) and a submitted form read back.
"""
