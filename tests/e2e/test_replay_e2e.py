"""`/rubric replay` end to end: the real bot process, a database of reviewed iterations, the stand-ins.

The database is seeded before the bot starts, as the bot fills it (tests/bot/agreement/replay_seed.py). The
model stand-in grades like the seed's replayed grader: it fails "Is polite" only when shown a team
example on the transcript's topic, so leave-one-out calibration beats none on the seeded cases.
"""

from __future__ import annotations

import asyncio
import io
import json
import re
from pathlib import Path

from PIL import Image

from tests.bot.agreement.chart_reading import PNG_SIGNATURE
from tests.bot.agreement.replay_seed import CASES, CHANNEL, TEAM, replayed_grade, seed
from tests.e2e.conftest import BotProcess, responses
from tests.standins import slack_requests as sr
from tests.standins import wait_for
from tests.standins.model_api import ModelApiStandin
from tests.standins.slack_api import SlackApiStandin

BUDGETS = ("This channel", "This workspace", "The whole bot")
"""How `/rubric usage` names the budgets a replay spends from."""
REPLAY_TIMEOUT = 60.0  # bound for two replays of the seeded cases with the stand-in's latency
ASKER = "U7"


def replay_command(slack: SlackApiStandin, text: str, channel: str = CHANNEL, user: str = ASKER) -> dict:
    return sr.slash_command(text, channel, user, team=TEAM, response_url=slack.response_url(channel))


def test_replay_posts_loo_against_off_naming_who_asked_and_runs_once_per_channel(
    start_bot, slack_api: SlackApiStandin, model_api: ModelApiStandin, tmp_path: Path
):
    asyncio.run(seed(tmp_path / "bot.sqlite"))  # the database the bot is started on
    model_api.grader = lambda request: replayed_grade(request.last_user_text)
    bot: BotProcess = start_bot()
    model_api.hold()  # the replay is still running when it is asked for again

    first = bot.sender.send(replay_command(slack_api, "replay 30")).json()
    assert first["response_type"] == "ephemeral" and "Replaying this channel" in first["text"]
    wait_for(lambda: model_api.requests("grader"), REPLAY_TIMEOUT, message="the replay's first grader call")
    again = bot.sender.send(replay_command(slack_api, "replay", user="U8")).json()
    assert again["response_type"] == "ephemeral"
    assert f"already running (asked by <@{ASKER}>)" in again["text"]
    model_api.release()

    upload = wait_for(
        lambda: next((u for u in slack_api.uploads() if u.channel == CHANNEL and u.completed), None),
        REPLAY_TIMEOUT,
        message=lambda: f"the replay's chart; bot log:\n{bot.stderr_text()[-3000:]}",
    )
    (posted,) = [m for m in slack_api.messages(CHANNEL) if "Does calibration help?" in m.text]
    text = posted.all_text
    assert "Replay · last 30 days" in text and f"Asked by <@{ASKER}>" in text
    assert "calibration loo vs calibration off" in text and f"{CASES} cases compared" in text
    polite = next(line for line in text.splitlines() if line.startswith("*Is polite*"))
    assert "agree 74% → 95%" in polite and "κ 0.00 → *0.85*" in polite
    assert "Flipped verdicts (4)" in text and "4 now match the team, 0 no longer do" in text
    assert (
        len(model_api.requests("grader")) == 2 * CASES
    )  # off and loo, once each: the second ask ran nothing
    assert upload.data.startswith(PNG_SIGNATURE) and Image.open(io.BytesIO(upload.data)).size[0] >= 600
    assert responses(slack_api, CHANNEL) == []  # nothing went wrong, so nothing private to say
    # The replay's grader tokens count toward the day's budgets of the channel, workspace and bot.
    usage = json.dumps(bot.sender.send(replay_command(slack_api, "usage")).json())
    spent = {level: re.search(rf"{level}: ([\d,]+) tokens", usage) for level in BUDGETS}
    assert all(spent.values()), usage
    assert len({found[1] for found in spent.values() if found}) == 1 and "This channel: 0 tokens" not in usage

    # Once done, the channel can replay again; a channel without reviews is told so privately.
    quiet = replay_command(slack_api, "replay", channel="C9")
    assert "Replaying" in bot.sender.send(quiet).json()["text"]
    (told,) = wait_for(
        lambda: responses(slack_api, "C9"), REPLAY_TIMEOUT, message="the nothing-to-replay answer"
    )
    assert told.args["response_type"] == "ephemeral" and "Nothing to replay in <#C9>" in told.args["text"]
    assert slack_api.messages("C9") == []
    # Finding nothing graded nothing, so it started no cooldown: asking again at once replays.
    retried = bot.sender.send(replay_command(slack_api, "replay", channel="C9")).json()
    assert "Replaying" in retried["text"], retried["text"]
    wait_for(lambda: len(responses(slack_api, "C9")) == 2, REPLAY_TIMEOUT, message="the second answer")

    bad = bot.sender.send(replay_command(slack_api, "replay soon")).json()
    assert "`soon` is not a number of days" in bad["text"] and "/rubric replay [days]" in bad["text"]
    assert json.dumps(bad).count("Replaying") == 0


def test_a_replay_is_refused_at_its_start_once_a_budget_it_spends_from_is_spent(
    start_bot, slack_api: SlackApiStandin, model_api: ModelApiStandin, tmp_path: Path
):
    asyncio.run(seed(tmp_path / "bot.sqlite"))
    model_api.grader = lambda request: replayed_grade(request.last_user_text)
    budget = {"RUBRIC_BOT_DAILY_TOKENS_PER_CHANNEL": "1", "RUBRIC_BOT_REPLAY_COOLDOWN": "0"}
    bot: BotProcess = start_bot(env=budget)

    def channel_tokens() -> str:
        usage = json.dumps(bot.sender.send(replay_command(slack_api, "usage")).json())
        spent = re.search(r"This channel: ([\d,]+) of 1 tokens", usage)
        assert spent is not None, usage
        return spent[1]

    first = bot.sender.send(replay_command(slack_api, "replay")).json()
    assert "Replaying this channel" in first["text"]  # nothing spent yet: under the budget
    wait_for(
        lambda: any(u.channel == CHANNEL and u.completed for u in slack_api.uploads()),
        REPLAY_TIMEOUT,
        message=lambda: f"the first replay's chart; bot log:\n{bot.stderr_text()[-3000:]}",
    )  # its grader tokens are charged before it posts
    graded, spent = len(model_api.requests("grader")), channel_tokens()

    refused = bot.sender.send(replay_command(slack_api, "replay")).json()

    assert refused["response_type"] == "ephemeral"
    assert "This channel has used its budget of 1 model tokens for today" in refused["text"]
    assert "so I did not start the replay" in refused["text"]
    assert "midnight UTC" in json.dumps(refused) and "Replaying" not in json.dumps(refused)
    assert len(model_api.requests("grader")) == graded  # no replay ran
    assert channel_tokens() == spent != "0"  # and nothing more was charged
    assert len([m for m in slack_api.messages(CHANNEL) if "Does calibration help?" in m.text]) == 1
    assert responses(slack_api, CHANNEL) == []  # nor is anything said later
