"""Who used the bot how much: requests, tokens and money per UTC day, channel and person, from the runs the
bot records. Loading is one store query; everything else is pure (summaries, Block Kit for
`/rubric usage`, text and JSON for `rubric-bot usage`)."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import date, datetime, timedelta

from bot.db.spend import LevelSpend, SpendCounter, Spender, SpendLevel
from bot.db.store import Store
from bot.db.usage import REPLAYS, SHADOW, CostTally, UsageRow
from bot.limits.prices import dollars
from bot.limits.quota import DailyLimits, day_start
from bot.slack.blocks import block_dicts, context_block, header_block, plural, section_block
from bot.slack.messages import SlackMessage
from bot.vocabulary.workspace import Workspace

CHANNEL_USAGE_DAYS = 30
"""The period `/rubric usage` sums besides today: the last 30 UTC days, today included."""

TOP_REQUESTERS = 5
"""How many of the channel's heaviest requesters `/rubric usage` names."""

UNKNOWN_REQUESTER = "(unknown)"
"""Who asked for runs recorded before the bot kept requesters."""


@dataclass(frozen=True)
class Totals:
    """Requests started, the tokens they used and what those cost."""

    requests: int = 0
    tokens: int = 0
    usd: float = 0.0
    """US dollars of their priced model calls."""
    unpriced: int = 0
    """Of the requests, those that used a model the price table does not know."""

    def __add__(self, other: Totals) -> Totals:
        return Totals(
            self.requests + other.requests,
            self.tokens + other.tokens,
            self.usd + other.usd,
            self.unpriced + other.unpriced,
        )

    @classmethod
    def of(cls, row: UsageRow) -> Totals:
        """One usage row's totals."""
        return cls(row.requests, row.tokens, row.usd, row.unpriced)


@dataclass(frozen=True)
class ChannelUsage:
    """One channel's use: today, over the last `days` days, and its top requesters over them; and
    what today's budgets it spends from (its asker's, its own, its workspace's, the deployment's)
    have spent, reservations of runs still going and replays included."""

    channel: str
    days: int
    today: Totals
    period: Totals
    top: list[tuple[str, Totals]]
    budgets: dict[SpendLevel, LevelSpend] = field(default_factory=dict)


def totals(rows: Iterable[UsageRow]) -> Totals:
    return sum((Totals.of(row) for row in rows), Totals())


def totals_by(rows: Iterable[UsageRow], key: Callable[[UsageRow], str]) -> dict[str, Totals]:
    """Totals per `key` (channel, requester), the most tokens first, then the most requests."""
    grouped: defaultdict[str, Totals] = defaultdict(Totals)
    for row in rows:
        grouped[key(row)] += Totals.of(row)
    return dict(sorted(grouped.items(), key=lambda item: (-item[1].tokens, -item[1].requests, item[0])))


def summarize(rows: Sequence[UsageRow], *, channel: str, today: date, days: int) -> ChannelUsage:
    """The channel's usage from its rows of the last `days` days."""
    by_requester = totals_by(rows, lambda row: row.requester)
    return ChannelUsage(
        channel=channel,
        days=days,
        today=totals(row for row in rows if row.day == today),
        period=totals(rows),
        top=list(by_requester.items())[:TOP_REQUESTERS],
    )


async def load_channel_usage(
    store: Store,
    *,
    workspace: Workspace,
    channel: str,
    now: datetime,
    asker: str | None = None,
    days: int = CHANNEL_USAGE_DAYS,
) -> ChannelUsage:
    """The channel's usage today and over the last `days` UTC days (today included), with today's
    budgets of `asker`, the channel, its workspace and the deployment."""
    since = day_start(now) - timedelta(days=days - 1)
    rows = await store.usage(workspace, channel, since)
    today = day_start(now).date()
    budgets = await store.spent_today(Spender(today, workspace, channel, asker))
    usage = summarize(rows, channel=channel, today=today, days=days)
    return replace(usage, budgets=budgets)


def _amount(total: Totals) -> str:
    requests = f"{total.requests:,} request{'' if total.requests == 1 else 's'}"
    return f"{requests}, {total.tokens:,} tokens, {money_words(total)}"


def spend_words(tally: CostTally) -> str:
    """What runs cost in one line: in all, per satisfied run, the grader's share and the audit
    grader's (over the runs it audited), how many are unpriced, and what replays' grader calls cost
    besides (``$0.0420 over 12 runs, $0.0042 per satisfied run, grader 38% of it, audit grader
    $0.0020 of it over 2 audited runs; replays $0.0100 over 40 grader calls``)."""
    per_satisfied = (
        f"{dollars(tally.usd / tally.satisfied)} per satisfied run" if tally.satisfied else "no satisfied run"
    )
    grader = f"grader {tally.grader_usd / tally.usd:.0%} of it" if tally.usd else "grader share unknown"
    audits = (
        f", audit grader {dollars(tally.audit_usd)} of it over {plural(tally.audits, 'audited run')}"
        if tally.audits
        else ""
    )
    unpriced = (
        f"; {plural(tally.unpriced, 'run')} used a model with no list price (not counted)"
        if tally.unpriced
        else ""
    )
    replays = (
        f"; replays {dollars(tally.replay_usd)} over {plural(tally.replay_calls, 'grader call')}"
        if tally.replay_calls
        else ""
    )
    runs = f"{dollars(tally.usd)} over {plural(tally.runs, 'run')}, {per_satisfied}, {grader}{audits}"
    return f"{runs}{unpriced}{replays}"


def money_words(total: Totals) -> str:
    """What the requests cost: ``$0.0123``, saying how many of them are unpriced, never free."""
    if not total.unpriced:
        return dollars(total.usd)
    return f"{dollars(total.usd)} ({total.unpriced:,} unpriced: a model not in the price table)"


def _requester(user: str) -> str:
    if user == REPLAYS:
        return "replays (`/rubric replay`)"
    if user == SHADOW:
        return "shadow grader (`RUBRIC_BOT_SHADOW_GRADER_MODEL`)"
    return f"<@{user}>" if user else UNKNOWN_REQUESTER


def usage_message(usage: ChannelUsage, limits: DailyLimits, *, many_workspaces: bool = False) -> SlackMessage:
    """`/rubric usage`: the channel's requests and tokens today and over the period, its top
    requesters, and the limits in force. When the deployment serves `many_workspaces` (OAuth mode),
    its own budget and spend are left out: a member sees their workspace's figures, not the others'."""
    lines = [
        f"*Today (UTC):* {_amount(usage.today)}",
        f"*Last {usage.days} days:* {_amount(usage.period)}",
    ]
    if usage.top:
        top = "\n".join(f"• {_requester(user)}: {_amount(total)}" for user, total in usage.top)
        lines.append(f"*Top requesters, last {usage.days} days:*\n{top}")
    text = f"Bot usage in <#{usage.channel}>: " + "; ".join(lines[:2]).replace("*", "")
    return {
        "text": text,
        "blocks": block_dicts(
            [
                header_block("Bot usage in this channel"),
                section_block("\n".join(lines)),
                section_block(budget_lines(usage.budgets, limits, deployment=not many_workspaces)),
                context_block(limits_words(limits, deployment=not many_workspaces)),
            ]
        ),
    }


def budget_lines(
    budgets: dict[SpendLevel, LevelSpend], limits: DailyLimits, *, deployment: bool = True
) -> str:
    """Today's spend of each budget level against its limit, one line each (the whole deployment's
    only with `deployment`)."""

    def of(level: SpendLevel) -> LevelSpend:
        return budgets.get(level, LevelSpend(level, 0, 0))

    def level(name: SpendLevel, tokens: int | None, usd: float | None) -> str:
        spent = f"{of(name).tokens:,}"
        amount = f"{spent} of {tokens:,} tokens" if tokens is not None else f"{spent} tokens (no budget)"
        cost = dollars(of(name).usd)
        return f"{amount} · " + (f"{cost} of {dollars(usd)}" if usd is not None else f"{cost} (no budget)")

    money = limits.money

    you = f"{of('person').requests:,}" + (
        f" of {limits.requests_per_user:,} requests" if limits.requests_per_user is not None else " requests"
    )
    lines = [
        "*Today's budgets (UTC), runs still going counted at their reservation:*",
        f"• You: {you}",
        f"• This channel: {level('channel', limits.tokens_per_channel, money.per_channel)}",
        f"• This workspace: {level('workspace', limits.tokens_per_workspace, money.per_workspace)}",
    ]
    if deployment:
        lines.append(
            f"• The whole bot: {level('deployment', limits.tokens_per_deployment, money.per_deployment)}"
        )
    return "\n".join(lines)


def limits_words(limits: DailyLimits, *, deployment: bool = True) -> str:
    """The daily limits in force, in one sentence (the whole deployment's only with `deployment`)."""

    def budget(limit: int | None, per: str) -> str:
        return f"{limit:,} tokens per {per}" if limit is not None else f"no token budget per {per}"

    person = (
        f"{limits.requests_per_user:,} requests per person"
        if limits.requests_per_user is not None
        else "no request limit per person"
    )
    levels = [
        (limits.tokens_per_channel, limits.money.per_channel, "channel"),
        (limits.tokens_per_workspace, limits.money.per_workspace, "workspace"),
    ]
    if deployment:
        levels.append((limits.tokens_per_deployment, limits.money.per_deployment, "day for the whole bot"))
    budgets = ", ".join(budget(tokens, per) for tokens, _, per in levels)
    money = [f"{dollars(usd)} per {per}" for _, usd, per in levels if usd is not None]
    in_money = f"; in money: {', '.join(money)} at list prices" if money else ""
    return f"Daily limits (reset at midnight UTC): {person}, {budgets} (worker and grader tokens){in_money}."


def counters_table(counters: Sequence[SpendCounter]) -> str:
    """`rubric-bot usage`'s today section: what every budget level spent today, reservations of
    runs still going and replays included."""
    if not counters:
        return "Today's budgets: nothing spent yet."
    names = {
        "deployment": lambda c: "the whole bot",
        "workspace": lambda c: f"workspace {_workspace(c)}",
        "channel": lambda c: f"channel {c.subject} ({_workspace(c)})",
        "person": lambda c: f"person {c.subject} ({_workspace(c)})",
    }
    rows = [([names[c.level](c)], Totals(c.requests, c.tokens, c.usd)) for c in counters]
    return _table("Today's budgets (UTC), runs still going at their reservation", ["Level"], rows)


def _workspace(counter: SpendCounter) -> str:
    return f"{counter.enterprise}/{counter.team}" if counter.enterprise else counter.team


def usage_table(rows: Sequence[UsageRow]) -> str:
    """`rubric-bot usage`'s text: totals per workspace, per channel, per person, and every day's rows."""
    if not rows:
        return "No requests in this period."
    sections = [
        _table(
            "Per workspace",
            ["Workspace"],
            [([w], t) for w, t in totals_by(rows, lambda r: r.workspace).items()],
        ),
        _table(
            "Per channel", ["Channel"], [([c], t) for c, t in totals_by(rows, lambda r: r.channel).items()]
        ),
        _table(
            "Per person",
            ["Person"],
            [([u or UNKNOWN_REQUESTER], t) for u, t in totals_by(rows, lambda r: r.requester).items()],
        ),
        _table(
            "Per day",
            ["Day", "Channel", "Person"],
            [
                (
                    [row.day.isoformat(), row.channel, row.requester or UNKNOWN_REQUESTER],
                    Totals.of(row),
                )
                for row in rows
            ],
        ),
    ]
    return "\n\n".join([*sections, f"Total: {_amount(totals(rows))}"])


def _table(title: str, heads: list[str], rows: list[tuple[list[str], Totals]]) -> str:
    cells = [[*heads, "Requests", "Tokens", "Cost (USD)", "Unpriced"]] + [
        [*key, f"{t.requests:,}", f"{t.tokens:,}", f"{t.usd:.4f}", f"{t.unpriced:,}"] for key, t in rows
    ]
    widths = [max(len(row[i]) for row in cells) for i in range(len(cells[0]))]
    numeric = len(heads)
    lines = [
        "  ".join(
            cell.rjust(width) if i >= numeric else cell.ljust(width)
            for i, (cell, width) in enumerate(zip(row, widths, strict=True))
        ).rstrip()
        for row in cells
    ]
    return "\n".join([title, *lines])


def usage_json(
    rows: Sequence[UsageRow], counters: Sequence[SpendCounter], *, since: date, channel: str | None
) -> str:
    """`rubric-bot usage --json`: the period, every day's rows and the totals, and what each budget
    level spent today, for scripts."""
    document = {
        "since": since.isoformat(),
        "channel": channel,
        "rows": [
            {
                "day": row.day.isoformat(),
                "workspace": row.workspace,
                "channel": row.channel,
                "user": row.requester or None,
                "requests": row.requests,
                "tokens": row.tokens,
                "usd": row.usd,
                "unpriced": row.unpriced,
            }
            for row in rows
        ],
        "total": asdict(totals(rows)),
        "today_by_level": [asdict(counter) for counter in counters],
    }
    return json.dumps(document, indent=2)
