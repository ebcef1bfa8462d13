"""A channel replay inside the day's budgets: each grader call reserves its estimate from the budgets
the replay spends from before it is made (as a run's admission does), and is settled at what it
used once made; the first call a budget refuses stops the replay, which reports what it has. The shadow
grader (`bot.shadow`) spends within the budgets the same way, one call per live iteration.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime
from typing import TypeVar

from bot.agreement.replay import Calibration, Case, Regrade, estimate_tokens, total_usage
from bot.db.spend import QuotaExceeded, RunQuota
from bot.db.store import Store
from bot.db.usage import Spent
from bot.limits.prices import RoleUsage, estimated_usd, role_usage
from bot.vocabulary.workspace import Workspace

Written = TypeVar("Written")
"""What a budget's write returns."""


@dataclass
class ReplayBudget:
    """What one replay of a channel has reserved and spent, and the cap that stopped it, if any."""

    store: Store
    workspace: Workspace
    channel: str
    model: str
    """The grader model whose rate prices the replay's tokens."""
    quota: RunQuota | None = None
    """The day's caps the replay spends within (None: none; its spend is counted all the same)."""
    refused: QuotaExceeded | None = None
    """The cap that stopped the replay (None: it was never stopped)."""
    _reserved: dict[tuple[Calibration, tuple[str, int]], Spent] = field(default_factory=dict)
    """Each grader call admitted and not settled yet: the tokens and dollars it reserved."""

    @property
    def day(self) -> date:
        """The UTC day whose counters the replay charges."""
        return self.quota.day if self.quota is not None else datetime.now(UTC).date()

    async def admit(self, calibration: Calibration, case: Case) -> bool:
        """Reserve the estimate of `case`'s grader call with `calibration`; False (nothing reserved)
        once a budget refused one: the replay stops there."""
        if self.refused is not None:
            return False
        tokens = estimate_tokens(case, (), None)
        quota = replace(
            self.quota or RunQuota(day=self.day),
            estimate=tokens,
            estimate_usd=estimated_usd(tokens, [self.model]),
        )
        reserving = asyncio.ensure_future(self.store.reserve_replay(self.workspace, self.channel, quota))
        try:
            refusal = await _uncancelled(reserving)
        finally:  # kept even when cancelled meanwhile: `give_back` gives it back
            made = reserving.done() and not reserving.cancelled() and reserving.exception() is None
            if made and reserving.result() is None:
                self._reserved[calibration, case.key] = Spent(quota.estimate, quota.estimate_usd)
        if refusal is not None:
            self.refused = refusal
            return False
        return True

    async def settle(self, calibration: Calibration, graded: Regrade) -> None:
        """Replace the call's reservation by the tokens it used, at the grader's rate, and keep what
        it used for the cost history (both in one transaction)."""
        reserved, spent = self._used(calibration, graded)
        used = Spent(spent.total_tokens, spent.usd or 0.0)
        settling = self.store.settle_replay_call
        await _uncancelled(settling(self.workspace, self.channel, self.day, reserved=reserved, used=used))

    async def charge_used(self, calibration: Calibration, graded: Regrade) -> RoleUsage:
        """Replace the call's reservation by the tokens it used, at the grader's rate; what it used."""
        reserved, spent = self._used(calibration, graded)
        await self._charge(spent.total_tokens - reserved.tokens, (spent.usd or 0.0) - reserved.usd)
        return spent

    def _used(self, calibration: Calibration, graded: Regrade) -> tuple[Spent, RoleUsage]:
        """What the call reserved (no longer held here) and what it used, at the grader's rate."""
        reserved = self._reserved.pop((calibration, graded.case.key), Spent(0, 0.0))
        return reserved, role_usage(self.model, total_usage([graded]))

    async def give_back(self) -> None:
        """Give back what calls admitted but never made (the replay stopped or failed) reserved."""
        reserved, self._reserved = self._reserved, {}
        tokens = sum(one.tokens for one in reserved.values())
        if tokens:
            await self._charge(-tokens, -sum(one.usd for one in reserved.values()))

    async def _charge(self, tokens: int, usd: float) -> None:
        if tokens or usd:
            await _uncancelled(
                self.store.charge_replay(self.workspace, self.channel, tokens, usd, day=self.day)
            )


async def _uncancelled(write: Awaitable[Written]) -> Written:
    """`write`'s result, the write finished even if the replay is cancelled meanwhile (the bot
    stopping): a transaction cut off halfway would hold SQLite's write lock, and a reservation made
    but not known could never be given back. A cancellation is raised once the write is done (and
    its outcome kept by the caller, see `ReplayBudget.admit`)."""
    task = asyncio.ensure_future(write)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        await asyncio.gather(task, return_exceptions=True)
        raise
