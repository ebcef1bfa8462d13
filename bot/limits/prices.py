"""What a run's model calls cost in US dollars, priced from their tokens with pydantic's `genai-prices`.

Prices come from the price table bundled with the installed `genai-prices` (never fetched at run
time); the raw token counts are kept beside the money (`RoleUsage`), so a later table can price a
run again. A model the table does not know is *unpriced*, never free: its run's cost says so.

Each role's tokens are summed over its calls and priced at its model's rate: one model per role
per run (a summary of a long thread is its own role, priced at the rate of the model that wrote it,
`RUBRIC_BOT_SUMMARY_MODEL` or the worker's; an audit of the finished run, `bot.audit`, is its own
role too, at `RUBRIC_BOT_AUDIT_MODEL`'s rate).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import cache
from typing import Literal

from genai_prices import Usage, calc_price
from langchain_core.messages import UsageMetadata
from pydantic import BaseModel

Role = Literal["worker", "grader", "summary", "audit", "shadow"]
"""Who made a model call: the worker answering, the grader grading, the summary model summarizing
a long thread's older turns for the worker, the audit grader grading the finished run again, or the
shadow grader grading a live iteration again (`bot.shadow`: never acting, its spend kept with its
grades rather than with the run's)."""

ROLES: tuple[Role, ...] = ("worker", "grader", "summary", "audit", "shadow")
"""Every role, in the order they are shown."""

PROVIDER_IDS: Mapping[str, str] = {
    "openai": "openai",
    "anthropic": "anthropic",
    "google_genai": "google",
    "mistralai": "mistral",
    "groq": "groq",
}
"""genai-prices' provider id for each langchain `provider:` prefix it prices (others: guessed from
the model's name, and unpriced when it cannot be)."""


class RoleUsage(BaseModel):
    """One role's tokens in a run, as the provider reported them, and the model that spent them."""

    model: str
    """The langchain model string (``openai:gpt-4o-mini``)."""
    input_tokens: int = 0
    """All input tokens, cached ones included."""
    cached_input_tokens: int = 0
    """Input tokens served from the provider's prompt cache (billed at its cached rate)."""
    cache_write_tokens: int = 0
    """Input tokens written to the provider's prompt cache (Anthropic bills these above input)."""
    output_tokens: int = 0
    usd: float | None = None
    """What they cost; None when the price table does not know `model`."""

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


class RunCost(BaseModel):
    """A run's tokens and money per role."""

    roles: dict[Role, RoleUsage] = {}

    @property
    def usd(self) -> float:
        """The money of the priced roles (see `unpriced` for the rest)."""
        return sum(role.usd or 0.0 for role in self.roles.values())

    @property
    def unpriced(self) -> list[str]:
        """Models whose tokens the price table could not price (empty: the cost is complete)."""
        return sorted({role.model for role in self.roles.values() if role.usd is None and role.total_tokens})

    def role_usd(self, role: Role) -> float:
        """One role's money (0 when it made no priced call)."""
        found = self.roles.get(role)
        return found.usd or 0.0 if found else 0.0

    @property
    def cached_input_tokens(self) -> int:
        return sum(role.cached_input_tokens for role in self.roles.values())


def role_usage(model: str, usage: UsageMetadata) -> RoleUsage:
    """`usage` (langchain's, summed over a role's calls) priced at `model`'s rate."""
    details = usage.get("input_token_details") or {}
    counted = RoleUsage(
        model=model,
        input_tokens=usage.get("input_tokens", 0),
        cached_input_tokens=details.get("cache_read", 0) or 0,
        cache_write_tokens=details.get("cache_creation", 0) or 0,
        output_tokens=usage.get("output_tokens", 0),
    )
    return counted.model_copy(update={"usd": price(counted)})


def price(usage: RoleUsage) -> float | None:
    """What `usage` costs at the bundled price table, or None when it does not know the model."""
    provider, _, name = usage.model.rpartition(":")
    if provider and provider not in PROVIDER_IDS:
        return None  # a provider the table has no prices for (a local ollama model, say)
    tokens = Usage(
        input_tokens=usage.input_tokens,
        cache_read_tokens=usage.cached_input_tokens,
        cache_write_tokens=usage.cache_write_tokens,
        output_tokens=usage.output_tokens,
    )
    try:
        calculation = calc_price(tokens, name, provider_id=PROVIDER_IDS.get(provider))
    except LookupError:
        return None
    return float(calculation.total_price)


ESTIMATE_OUTPUT_SHARE = 0.2
"""Share of a run's estimated tokens priced as output when its cost is estimated at admission: a
run's calls mostly send the thread, rubric and draft again (input) and write an answer or a verdict
(output), so a fifth errs on the dear side of most runs' mix."""


def estimated_usd(tokens: int, models: Iterable[str]) -> float:
    """What a run of `tokens` may cost, reserved at admission: the tokens priced at the dearest of
    `models` (`ESTIMATE_OUTPUT_SHARE` of them as output, none as cached), so the reservation does not
    fall short whichever model spends them; a model the price table does not know adds nothing."""
    return _estimated_usd(tokens, tuple(models))


@cache
def _estimated_usd(tokens: int, models: tuple[str, ...]) -> float:
    """`estimated_usd`, looked up in the price table once per estimate and models: every admission
    with a workspace's own settings asks again, and a lookup costs about a millisecond."""
    output = round(tokens * ESTIMATE_OUTPUT_SHARE)
    prices = (
        price(RoleUsage(model=model, input_tokens=tokens - output, output_tokens=output)) for model in models
    )
    return max((usd for usd in prices if usd is not None), default=0.0)


def run_cost(usage: Mapping[Role, tuple[str, UsageMetadata | None]]) -> RunCost:
    """The cost of each role's (model, summed usage); a role without reported usage is left out."""
    return RunCost(roles={role: role_usage(model, spent) for role, (model, spent) in usage.items() if spent})


def dollars(usd: float) -> str:
    """Money as people read it: cents for a dollar and up, four decimals under a dollar (a run's
    cost is often a fraction of a cent)."""
    return f"${usd:,.2f}" if usd >= 1 else f"${usd:.4f}"


def cost_words(cost: RunCost) -> str:
    """A run's money in a few words: ``$0.0123``, with the models it could not price."""
    if not cost.unpriced:
        return dollars(cost.usd)
    models = ", ".join(cost.unpriced)
    if not cost.usd:
        return f"unpriced ({models}: not in the price table)"
    return f"{dollars(cost.usd)} + unpriced ({models}: not in the price table)"
