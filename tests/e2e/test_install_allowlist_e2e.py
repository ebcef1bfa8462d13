"""An install allowlist (`RUBRIC_BOT_ALLOWED_TEAMS` / `RUBRIC_BOT_ALLOWED_ENTERPRISES`): the real bot in
OAuth mode keeps the installs of the workspaces and orgs listed, and refuses another's at the OAuth
redirect with a page saying so, its new token revoked and nothing of it stored. On SQLite and
PostgreSQL."""

from __future__ import annotations

from tests.e2e.stored_rows import tables_containing
from tests.e2e.test_workspaces_e2e import install, oauth_environment, start
from tests.standins.model_api import ModelApiStandin
from tests.standins.slack_api import SlackApiStandin


def test_an_install_from_a_workspace_not_allowed_is_refused_with_a_page_and_undone(database_url, tmp_path):
    with SlackApiStandin() as slack, ModelApiStandin() as model:
        for team, enterprise in (("T1", None), ("TNOTLISTED", None), ("TORG", "E1")):
            slack.add_workspace(team, enterprise=enterprise, org_wide=enterprise is not None)
        env = oauth_environment(slack, model, database_url)
        env |= {"RUBRIC_BOT_ALLOWED_TEAMS": "T1", "RUBRIC_BOT_ALLOWED_ENTERPRISES": "E1"}
        bot = start(env, tmp_path, "bot")
        try:
            kept = install(bot, "T1")
            org = install(bot, "TORG")  # an org-wide install of an allowed org
            refused = install(bot, "TNOTLISTED")
        finally:
            bot.stop()
            bot.sender.close()
        log = bot.stderr_text()

    assert kept.status == 200 and org.status == 200
    assert refused.status == 403
    assert "rubric-bot was not installed" in refused.body and "workspace TNOTLISTED is not" in refused.body
    assert tables_containing(database_url, "TNOTLISTED") == []  # long: a random state token never holds it
    assert tables_containing(database_url, "T1") and tables_containing(database_url, "E1")
    assert slack.workspace("TNOTLISTED").uninstalled  # its token revoked: Slack no longer counts it installed
    assert [c.team for c in slack.calls("auth.revoke")] == ["TNOTLISTED"]
    assert "refused an install by team TNOTLISTED (Enterprise Grid org none)" in log
