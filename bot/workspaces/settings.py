"""A workspace's own settings over the deployment's: which apply, where each comes from, and checking
what a workspace admin asks for.

The operator's environment is every workspace's default and the ceiling of its limits: a workspace
may choose its worker and grader models among `RUBRIC_BOT_ALLOWED_MODELS`, set daily limits no
higher than the deployment's, and name its own rubric editors. A stored choice the environment no
longer permits (a model taken off the list, a limit above a lowered ceiling) gives way to the
deployment's value, and says so, rather than being used.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Generic, Literal, TypeVar

from bot.agent.models import ModelPair
from bot.config import DEFAULT_RUN_TOKEN_ESTIMATE, Settings
from bot.db.store import Store
from bot.db.workspace_settings import WorkspaceSettingsRow
from bot.limits.quota import NO_LIMIT, DailyLimits, MoneyLimits, workspace_tokens
from bot.settings.setting_entries import EDITOR_ID
from bot.vocabulary.workspace import Workspace

T = TypeVar("T")

SettingName = Literal[
    "worker_model",
    "grader_model",
    "daily_requests_per_user",
    "daily_tokens_per_channel",
    "daily_tokens_per_workspace",
    "rubric_editors",
    "grader_samples",
]
"""The settings a workspace admin may set, by their column in ``workspace_settings``."""

ModelName = Literal["worker_model", "grader_model"]
"""The models among them."""

MODEL_SETTINGS: tuple[ModelName, ...] = ("worker_model", "grader_model")
"""Every `ModelName`, in the order forms and summaries show them."""

LimitName = Literal["daily_requests_per_user", "daily_tokens_per_channel", "daily_tokens_per_workspace"]
"""The daily limits among them."""

LIMITS: tuple[LimitName, ...] = (
    "daily_requests_per_user",
    "daily_tokens_per_channel",
    "daily_tokens_per_workspace",
)
"""Every `LimitName`, in the order forms and summaries show them."""

Source = Literal["workspace", "deployment"]
"""Where a setting in force comes from: the workspace's admins, or the operator's environment."""

LIMIT_MAX = 2**31 - 1
"""Largest limit a workspace may set: the range of the INTEGER column that keeps it."""

MAX_GRADER_SAMPLES = 9
"""Most grader samples per iteration a workspace may ask for: each one is a whole grader call, so
nine already cost nine times one; past that a confidence gains little (shares of 9 are 0.11 apart)."""


@dataclass(frozen=True)
class Resolved(Generic[T]):
    """A setting in force, where it comes from, and why the workspace's own value is not used, if
    it set one the deployment no longer permits."""

    value: T
    source: Source
    set_aside: str | None = None


@dataclass(frozen=True)
class Deployment:
    """What the operator's environment sets: each workspace's defaults and the bounds of its choices."""

    worker_model: str
    grader_model: str
    allowed_models: tuple[str, ...]
    daily_requests_per_user: int
    """The deployment's limit and every workspace's ceiling; `NO_LIMIT` (0): none."""
    daily_tokens_per_channel: int
    """The deployment's budget and every workspace's ceiling; `NO_LIMIT` (0): none."""
    rubric_editors: tuple[str, ...]
    daily_tokens_per_workspace: int = NO_LIMIT
    """Each workspace's token budget, which its admins may lower; `NO_LIMIT` (0): none."""
    daily_tokens: int = NO_LIMIT
    """The whole deployment's token budget (no workspace changes it); `NO_LIMIT` (0): none."""
    run_token_estimate: int = DEFAULT_RUN_TOKEN_ESTIMATE
    """Tokens a run reserves from the budgets until it ends."""
    money: MoneyLimits = field(default_factory=MoneyLimits)
    """The daily money budgets (no workspace changes them)."""
    summary_model: str | None = None
    """The model that summarizes long threads (`RUBRIC_BOT_SUMMARY_MODEL`); None: each workspace's
    worker."""
    grader_samples: int = 1
    """Times the grader is asked per iteration (`RUBRIC_BOT_GRADER_SAMPLES`), unless a workspace sets
    its own."""

    @classmethod
    def from_settings(cls, settings: Settings) -> Deployment:
        return cls(
            worker_model=settings.worker_model or "",
            grader_model=settings.grader_model or "",
            allowed_models=settings.allowed_models,
            daily_requests_per_user=settings.daily_requests_per_user,
            daily_tokens_per_channel=settings.daily_tokens_per_channel,
            daily_tokens_per_workspace=workspace_tokens(settings),
            daily_tokens=settings.daily_tokens,
            run_token_estimate=settings.run_token_estimate,
            money=MoneyLimits.from_settings(settings),
            rubric_editors=settings.rubric_editors,
            summary_model=settings.summary_model_override,
            grader_samples=settings.grader_samples,
        )

    def ceiling(self, name: LimitName) -> int:
        """The deployment's value of a limit: no workspace goes above it (`NO_LIMIT`: no ceiling)."""
        return int(getattr(self, name))


@dataclass(frozen=True)
class EffectiveSettings:
    """The settings in force in one workspace, each with its source, and the workspace's last change."""

    worker_model: Resolved[str]
    grader_model: Resolved[str]
    daily_requests_per_user: Resolved[int]
    daily_tokens_per_channel: Resolved[int]
    daily_tokens_per_workspace: Resolved[int]
    rubric_editors: Resolved[tuple[str, ...]]
    grader_samples: Resolved[int]
    deployment: Deployment
    stored: WorkspaceSettingsRow | None
    """What the workspace's admins set, with who changed it last and when; None: they never did."""

    @property
    def models(self) -> ModelPair:
        return ModelPair(self.worker_model.value, self.grader_model.value)

    @property
    def summary_model(self) -> str:
        """The model that writes the workspace's thread summaries: the deployment's, else its worker."""
        return self.deployment.summary_model or self.worker_model.value

    @property
    def limits(self) -> DailyLimits:
        return DailyLimits.of(
            self.daily_requests_per_user.value,
            self.daily_tokens_per_channel.value,
            self.daily_tokens_per_workspace.value,
            self.deployment.daily_tokens,
            run_estimate=self.deployment.run_token_estimate,
            money=self.deployment.money,
            models=(self.worker_model.value, self.grader_model.value),
        )


def resolve(deployment: Deployment, stored: WorkspaceSettingsRow | None) -> EffectiveSettings:
    """The settings in force in a workspace whose admins set `stored` (None: nothing)."""
    return EffectiveSettings(
        worker_model=_model(deployment, stored.worker_model if stored else None, deployment.worker_model),
        grader_model=_model(deployment, stored.grader_model if stored else None, deployment.grader_model),
        daily_requests_per_user=_limit(
            stored.daily_requests_per_user if stored else None, deployment.daily_requests_per_user
        ),
        daily_tokens_per_channel=_limit(
            stored.daily_tokens_per_channel if stored else None, deployment.daily_tokens_per_channel
        ),
        daily_tokens_per_workspace=_limit(
            stored.daily_tokens_per_workspace if stored else None, deployment.daily_tokens_per_workspace
        ),
        rubric_editors=(
            Resolved(stored.rubric_editors, "workspace")
            if stored and stored.rubric_editors is not None
            else Resolved(deployment.rubric_editors, "deployment")
        ),
        grader_samples=(
            Resolved(stored.grader_samples, "workspace")
            if stored and stored.grader_samples is not None
            else Resolved(deployment.grader_samples, "deployment")
        ),
        deployment=deployment,
        stored=stored,
    )


def _model(deployment: Deployment, chosen: str | None, default: str) -> Resolved[str]:
    if chosen is None:
        return Resolved(default, "deployment")
    if chosen not in deployment.allowed_models:
        return Resolved(default, "deployment", f"{chosen} is no longer among the allowed models")
    return Resolved(chosen, "workspace")


def _limit(chosen: int | None, ceiling: int) -> Resolved[int]:
    if chosen is None:
        return Resolved(ceiling, "deployment")
    if ceiling != NO_LIMIT and not NO_LIMIT < chosen <= ceiling:
        shown = "no limit" if chosen == NO_LIMIT else f"{chosen:,}"
        return Resolved(ceiling, "deployment", f"this workspace's {shown} is above the deployment's limit")
    return Resolved(chosen, "workspace")


@dataclass(frozen=True)
class AdminChoices:
    """What an admin submitted: None (or an empty text or list) keeps the deployment's value."""

    worker_model: str | None = None
    grader_model: str | None = None
    daily_requests_per_user: str = ""
    """As typed: a whole number, or empty."""
    daily_tokens_per_channel: str = ""
    daily_tokens_per_workspace: str = ""
    rubric_editors: Sequence[str] = ()
    grader_samples: str = ""
    """As typed: a whole number from 1 to `MAX_GRADER_SAMPLES`, or empty."""


class SettingsInputError(ValueError):
    """An admin's choices that cannot be saved: what is wrong with each setting at fault."""

    def __init__(self, problems: Mapping[SettingName, str]) -> None:
        super().__init__("; ".join(problems.values()))
        self.problems: dict[str, str] = {str(name): words for name, words in problems.items()}
        """By setting name (each setting's input in the form has its name as block_id)."""


def checked_settings(
    deployment: Deployment, choices: AdminChoices, *, user: str, now: datetime
) -> WorkspaceSettingsRow:
    """The workspace's settings as `user` chose them at `now`; `SettingsInputError` naming every
    choice the deployment does not permit (then nothing is to be saved)."""
    problems: dict[SettingName, str] = {}
    for name in MODEL_SETTINGS:
        model = getattr(choices, name)
        if model is not None and model not in deployment.allowed_models:
            problems[name] = f"{model} is not among the models this deployment allows: {_listed(deployment)}."
    limits: dict[LimitName, int | None] = {}
    for limit in LIMITS:
        try:
            limits[limit] = _checked_limit(getattr(choices, limit), deployment.ceiling(limit))
        except ValueError as exc:
            problems[limit] = str(exc)
    wrong = [id_ for id_ in choices.rubric_editors if not EDITOR_ID.fullmatch(id_)]
    if wrong:
        problems["rubric_editors"] = f"{', '.join(wrong)} is not a Slack user or user-group id."
    try:
        samples = _checked_samples(choices.grader_samples)
    except ValueError as exc:
        problems["grader_samples"] = str(exc)
    if problems:
        raise SettingsInputError(problems)
    return WorkspaceSettingsRow(
        worker_model=choices.worker_model,
        grader_model=choices.grader_model,
        daily_requests_per_user=limits["daily_requests_per_user"],
        daily_tokens_per_channel=limits["daily_tokens_per_channel"],
        daily_tokens_per_workspace=limits["daily_tokens_per_workspace"],
        rubric_editors=tuple(dict.fromkeys(choices.rubric_editors)) or None,
        grader_samples=samples,
        updated_by=user,
        updated_at=now,
    )


def _listed(deployment: Deployment) -> str:
    return ", ".join(deployment.allowed_models)


def _checked_limit(typed: str, ceiling: int) -> int | None:
    """A limit as typed (None: empty, the deployment's); ValueError saying what is wrong with it."""
    shown = typed.strip()
    text = shown.replace(",", "")
    if not text:
        return None
    if ceiling == NO_LIMIT:
        lowest, highest, above = NO_LIMIT, LIMIT_MAX, "the most a limit can be"
    else:
        lowest, highest, above = 1, ceiling, "the deployment's limit"
    fix = f"give a whole number from {lowest} to {highest:,}, or leave it empty for the deployment's"
    if text.startswith("-") and text[1:].isdecimal():
        raise ValueError(f"A limit can't be negative: {fix}.")
    if not text.isdecimal():
        raise ValueError(f"`{shown}` is not a whole number: {fix}.")
    value = int(text)
    if value == NO_LIMIT and ceiling != NO_LIMIT:
        raise ValueError(f"0 (no limit) would be above the deployment's limit of {ceiling:,}: {fix}.")
    if value > highest:
        raise ValueError(f"{value:,} is above {above}, {highest:,}: {fix}.")
    return value


def _checked_samples(typed: str) -> int | None:
    """Grader samples as typed (None: empty, the deployment's); ValueError saying what is wrong."""
    shown = typed.strip()
    if not shown:
        return None
    fix = f"give a whole number from 1 to {MAX_GRADER_SAMPLES}, or leave it empty for the deployment's"
    if not shown.isdecimal() or not 1 <= int(shown) <= MAX_GRADER_SAMPLES:
        raise ValueError(f"`{shown}` is not a number of grader samples: {fix}.")
    return int(shown)


class WorkspaceOverrides:
    """Each workspace's settings in force, read from the store on every use: a change one process
    saves applies to the next request any process takes."""

    def __init__(self, deployment: Deployment, store: Store) -> None:
        self.deployment = deployment
        self._store = store

    async def effective(self, workspace: Workspace) -> EffectiveSettings:
        """The settings in force in the workspace."""
        return self.in_force(await self._store.workspace_settings(workspace))

    def in_force(self, stored: WorkspaceSettingsRow | None) -> EffectiveSettings:
        """The settings in force in a workspace whose admins set `stored` (read by the caller in a
        transaction of its own: a request's claim, a run's start)."""
        return resolve(self.deployment, stored)

    async def limits(self, workspace: Workspace) -> DailyLimits:
        """The daily limits in force in the workspace."""
        return (await self.effective(workspace)).limits

    async def models(self, workspace: Workspace) -> ModelPair:
        """The worker and grader models of a run in the workspace."""
        return (await self.effective(workspace)).models

    async def rubric_editors(self, workspace: Workspace) -> tuple[str, ...]:
        """Who may change grading in the workspace (besides its admins and owners); empty: anyone."""
        return (await self.effective(workspace)).rubric_editors.value

    async def save(self, workspace: Workspace, stored: WorkspaceSettingsRow) -> EffectiveSettings:
        """Store what the workspace's admins set; the settings now in force."""
        await self._store.save_workspace_settings(workspace, stored)
        return self.in_force(stored)
