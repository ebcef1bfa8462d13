"""The bot's configuration: environment variables (and an optional `.env`), validated in one place.

Every problem is collected and reported together, naming the variable and how to fix it, and never
echoing a value (tokens are secrets; a mistyped token is still mostly a token).
"""

from __future__ import annotations

import os
from collections.abc import Collection
from typing import Annotated, Literal

from pydantic import (
    Field,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
)
from pydantic_core import ErrorDetails
from pydantic_settings import (
    BaseSettings,
    DotEnvSettingsSource,
    EnvSettingsSource,
    NoDecode,
    SettingsConfigDict,
)

from bot.db.database import DEFAULT_DB, STORE_POOL_SIZE, Database
from bot.settings import setting_entries as entries
from bot.settings.env_values import PROVIDER_KEY_SUFFIX, pasted_value_problem
from grading import DEFAULT_MAX_GRADER_CALLS, DEFAULT_RISK

ENV_FILE = ".env"
"""The optional settings file, read from the working directory."""

DEFAULT_SLACK_API_URL = "https://slack.com/api/"
"""Slack's own Web API base URL; tests point `SLACK_API_URL` at a local stand-in instead."""

DEFAULT_MODEL_TIMEOUT = 120.0
"""Seconds one model call (worker or grader) may wait for the provider's answer."""

RUN_TIMEOUT_FACTOR = 10
"""Without `RUBRIC_BOT_RUN_TIMEOUT`, a whole run may take this many model timeouts: room for the
worker's and the grader's calls over several iterations, yet a bound on how long a thread waits."""

DEFAULT_RUN_TIMEOUT = DEFAULT_MODEL_TIMEOUT * RUN_TIMEOUT_FACTOR
"""Seconds a whole run may take when neither timeout is set."""

DEFAULT_DELIVERY_RETRY = 600.0
"""Seconds a run keeps retrying messages Slack refused for the time being (5xx, rate limits beyond
their Retry-After, no connection) before it records its answer as undelivered."""

SLACK_CONNECTION = "SLACK_APP_TOKEN or SLACK_SIGNING_SECRET"
"""A requirement met by either setting: `serve` needs one of them to hear from Slack at all."""

SLACK_IDENTITY = "SLACK_BOT_TOKEN or SLACK_CLIENT_ID"
"""A requirement met by either setting: the bot token of the one workspace served, or the app's
client id when it is installed with OAuth into many."""

DEFAULT_CONCURRENCY = 100
"""Runs one process works on at once with PostgreSQL (`--concurrency`): runs mostly wait on the
model, so many fit in one process. (With SQLite the one process runs every thread at once.)"""

DEFAULT_THREAD_CONTEXT_CHARS = 20_000
"""Characters of a thread's earlier messages the worker gets when the bot is called into it: the
most recent ones, so a long discussion costs about as much as a long request."""

DEFAULT_MAX_FILE_BYTES = 1_000_000
"""Largest attached file (1 MB) the bot downloads and reads; a bigger one is named as skipped."""

DEFAULT_SLACK_RETRY_BACKOFF = 0.5
"""Seconds the first retry of a Slack call that failed for the time being (5xx, a dropped
connection) waits; each later retry waits twice as long as the one before (slack_sdk's backoff)."""

DEFAULT_STALLED_AFTER = 30.0
"""Seconds without a heartbeat after which a worker on PostgreSQL counts as dead: its runs then
resume in another process within 4/3 of this (see `bot.queue.jobs.DurableQueue`)."""

DEFAULT_METRICS_PORT = 9464
"""Port of `/healthz`, `/readyz` and `/metrics` in every process (the serve port never answers
`/metrics`); OpenTelemetry's Prometheus exporter uses it too, so scrapers expect it."""

DEFAULT_DAILY_REQUESTS_PER_USER = 100
"""Requests one person may make per UTC day when `RUBRIC_BOT_DAILY_REQUESTS_PER_USER` is not set:
plenty for a person's day of work, a stop for a script or a loop gone wrong."""

DEFAULT_RUN_TOKEN_ESTIMATE = 20_000
"""Tokens a run reserves from its daily token budgets when admitted, until it ends and what it really
used replaces them (`RUBRIC_BOT_RUN_TOKEN_ESTIMATE`): about a run of three grader iterations, so a
burst of requests cannot start far more runs than a budget holds."""

DEFAULT_AUDIT_SHARE = 0.1
"""Share of finished runs audited when `RUBRIC_BOT_AUDIT_MODEL` is set and `RUBRIC_BOT_AUDIT_SHARE` is
not: enough audits to see a trend over a few weeks, a tenth of a grader call per run in cost."""

DEFAULT_SHADOW_SHARE = 0.1
"""Share of live grader iterations the shadow grader grades too when `RUBRIC_BOT_SHADOW_GRADER_MODEL`
is set and `RUBRIC_BOT_SHADOW_SHARE` is not: about a hundred shadow grades per thousand iterations,
enough to read a candidate's agreement and flips within weeks, at a tenth of the grader's cost."""

DEFAULT_REPLAY_COOLDOWN = 3600.0
"""Seconds between the starts of two `/rubric replay`s in one channel: each costs two grader calls
per reviewed answer, and a second within the hour rarely tells anything new."""

DEFAULT_REPLAY_MAX_CASES = 500
"""Most reviewed answers (the latest) one `/rubric replay` grades again, twice each."""
DEFAULT_CONTEXT_TOKENS = 24_000
"""Tokens of thread history the worker is sent at most (`RUBRIC_BOT_CONTEXT_TOKENS`): past it, older
turns are summarized. Generous for a conversation, and a small share of any current model's window."""

HINTS: dict[str, str] = {
    SLACK_IDENTITY: (
        "set SLACK_BOT_TOKEN to the app's Bot User OAuth Token (starts with xoxb-; api.slack.com/apps "
        "→ OAuth & Permissions) to serve one workspace, or SLACK_CLIENT_ID and SLACK_CLIENT_SECRET "
        "(Basic Information → App Credentials) to let many workspaces install the bot"
    ),
    SLACK_CONNECTION: (
        "set SLACK_APP_TOKEN to an app-level token (starts with xapp-; api.slack.com/apps → Basic "
        "Information → App-Level Tokens, scope connections:write) to connect in Socket Mode with no "
        "public URL, or set SLACK_SIGNING_SECRET (Basic Information → App Credentials) to serve "
        "Slack's HTTP requests with rubric-bot serve --http"
    ),
    "SLACK_BOT_TOKEN": (
        "set it to the app's Bot User OAuth Token (starts with xoxb-; "
        "api.slack.com/apps → OAuth & Permissions)"
    ),
    "SLACK_SIGNING_SECRET": (
        "set it to the app's Signing Secret (api.slack.com/apps → Basic Information → "
        "App Credentials); HTTP mode needs it to verify requests"
    ),
    "SLACK_APP_TOKEN": (
        "set it to an app-level token with the connections:write scope (starts with xapp-; "
        "Basic Information → App-Level Tokens), or unset it to run in HTTP mode"
    ),
    "SLACK_API_URL": "set it to an http(s) URL such as https://slack.com/api/, or unset it",
    "SLACK_CLIENT_ID": (
        "set it to the app's Client ID (api.slack.com/apps → Basic Information → App Credentials) "
        "to offer the bot to many workspaces, or unset it and set SLACK_BOT_TOKEN for one workspace"
    ),
    "SLACK_CLIENT_SECRET": (
        "set it to the app's Client Secret (Basic Information → App Credentials); installing "
        "the bot into a workspace with SLACK_CLIENT_ID needs it"
    ),
    "SLACK_OAUTH_REDIRECT_URL": (
        "set it to the https URL Slack sends installers back to, ending in /slack/oauth_redirect "
        "(as under OAuth & Permissions → Redirect URLs), or unset it to use the app's only one"
    ),
    "RUBRIC_BOT_SCOPES": (
        "set it to the bot scopes installations ask for, separated by commas, or unset it for "
        "those of the manifest (rubric-bot manifest)"
    ),
    "RUBRIC_BOT_MODEL": (
        'set it to the worker model as a langchain "provider:model" string, '
        "e.g. openai:gpt-4o-mini (and the provider's API key, e.g. OPENAI_API_KEY)"
    ),
    "RUBRIC_BOT_GRADER_MODEL": (
        'set it to a langchain "provider:model" string, or unset it to grade with the worker model'
    ),
    "RUBRIC_BOT_ALLOWED_MODELS": (
        'set it to the langchain "provider:model" ids a workspace admin may choose with /rubric admin, '
        "separated by commas, e.g. openai:gpt-4o-mini,openai:gpt-4.1; or unset it to allow only "
        "RUBRIC_BOT_MODEL and RUBRIC_BOT_GRADER_MODEL"
    ),
    "RUBRIC_BOT_MAX_ITERATIONS": "set it to a whole number of grader iterations, at least 1 (default 3)",
    "RUBRIC_BOT_MAX_GRADER_CALLS": (
        "set it to a whole number of grader model calls per iteration, evidence-tool rounds and "
        f"re-asks included, at least 1 (default {DEFAULT_MAX_GRADER_CALLS})"
    ),
    "RUBRIC_BOT_GRADER_SAMPLES": (
        "set it to the times the grader is asked per iteration, a whole number, at least 1 (default 1); "
        "each criterion's verdict is then the samples' majority and its confidence their share"
    ),
    "RUBRIC_BOT_ESCALATION_MODEL": (
        'set it to a langchain "provider:model" string that grades again the criteria on which the '
        "grader's samples disagree, or unset it for no escalation"
    ),
    "RUBRIC_BOT_DB": (
        f"set it to the path of the bot's SQLite file (default {DEFAULT_DB}) "
        "or to a PostgreSQL URL, postgresql://USER:PASSWORD@HOST:5432/DBNAME"
    ),
    "RUBRIC_BOT_THREAD_CONTEXT_CHARS": (
        "set it to the characters of a thread's earlier messages the worker may read when the bot is "
        f"called into the thread, at least 1 (default {DEFAULT_THREAD_CONTEXT_CHARS})"
    ),
    "RUBRIC_BOT_MAX_FILE_BYTES": (
        "set it to the bytes of the largest attached file the bot reads, at least 1 "
        f"(default {DEFAULT_MAX_FILE_BYTES})"
    ),
    "RUBRIC_BOT_LOG_LEVEL": "set it to DEBUG, INFO, WARNING or ERROR (default INFO)",
    "RUBRIC_BOT_DEBUG_LOGGERS": (
        "set it to logger names separated by commas (e.g. slack_sdk,procrastinate), or unset it"
    ),
    "RUBRIC_BOT_SHUTDOWN_GRACE": (
        "set it to the seconds a stopping bot lets running requests finish (default 25)"
    ),
    "RUBRIC_BOT_SLACK_RETRY_BACKOFF": (
        "set it to the seconds the first retry of a failed Slack call waits, more than 0 "
        f"(default {DEFAULT_SLACK_RETRY_BACKOFF:g})"
    ),
    "RUBRIC_BOT_DB_POOL_SIZE": (
        "set it to the PostgreSQL connections each process keeps for the bot's tables, 1 or more "
        f"(default {STORE_POOL_SIZE})"
    ),
    "RUBRIC_BOT_STALLED_AFTER": (
        "set it to the seconds without a heartbeat after which a PostgreSQL worker counts as dead and "
        f"its runs resume elsewhere, more than 0 (default {DEFAULT_STALLED_AFTER:g})"
    ),
    "RUBRIC_BOT_METRICS_PORT": (
        "set it to the TCP port (1-65535) of /healthz, /readyz and /metrics, one no other process on "
        f"the machine uses and other than serve's --port (default {DEFAULT_METRICS_PORT})"
    ),
    "RUBRIC_BOT_ALLOWED_TEAMS": "set it to workspace ids (T0123ABCD), comma-separated, or leave it unset",
    "RUBRIC_BOT_ALLOWED_ENTERPRISES": "set it to Enterprise Grid org ids (E0123ABCD), comma-separated",
    "RUBRIC_BOT_ENCRYPTION_KEY": "set it to Fernet keys, comma-separated (README: Tokens encrypted at rest)",
    "RUBRIC_BOT_MODEL_TIMEOUT": (
        f"set it to the seconds one model call may take, more than 0 (default {DEFAULT_MODEL_TIMEOUT:g})"
    ),
    "RUBRIC_BOT_DELIVERY_RETRY": (
        "set it to the seconds a run keeps retrying messages while Slack is unavailable, 0 or more "
        f"(default {DEFAULT_DELIVERY_RETRY:g})"
    ),
    "RUBRIC_BOT_DAILY_REQUESTS_PER_USER": (
        "set it to the requests one person may make per UTC day, a whole number; 0 for no limit "
        f"(default {DEFAULT_DAILY_REQUESTS_PER_USER})"
    ),
    "RUBRIC_BOT_DAILY_TOKENS_PER_CHANNEL": (
        "set it to the model tokens (worker plus grader) a channel may use per UTC day, a whole "
        "number; 0 or unset for no limit"
    ),
    "RUBRIC_BOT_RUBRIC_EDITORS": (
        "set it to Slack user ids (U…, W…) and user-group ids (S…), separated by commas, e.g. "
        "U012ABCDEF,S0123GROUP; or unset it to let anyone in a channel change its grading"
    ),
    "RUBRIC_BOT_REPLAY_COOLDOWN": (
        "set it to the seconds between two replays' starts in one channel, 0 or more "
        f"(default {DEFAULT_REPLAY_COOLDOWN:g})"
    ),
    "RUBRIC_BOT_REPLAY_MAX_CASES": f"set it to 1 or more (default {DEFAULT_REPLAY_MAX_CASES})",
    "RUBRIC_BOT_RUN_TIMEOUT": (
        "set it to the seconds one whole request may take, more than 0 "
        f"(default {RUN_TIMEOUT_FACTOR} times RUBRIC_BOT_MODEL_TIMEOUT)"
    ),
    "RUBRIC_BOT_RETENTION_DAYS": (
        "set it to the whole number of days, at least 1, after a thread's last activity when its data "
        "is deleted, or unset it to keep threads until they are purged"
    ),
    "RUBRIC_BOT_STREAMING": "set it to on or off (default on)",
    "RUBRIC_BOT_CONTEXT_TOKENS": (
        "set it to the tokens of thread history the worker is sent before older turns are summarized, "
        f"a whole number (default {DEFAULT_CONTEXT_TOKENS}; 0 never summarizes)"
    ),
    "RUBRIC_BOT_SUMMARY_MODEL": (
        'set it to a langchain "provider:model" string, or unset it to summarize with the worker model'
    ),
    "RUBRIC_BOT_AUDIT_MODEL": (
        'set it to a langchain "provider:model" string for the audit grader, or unset it for no audit'
    ),
    "RUBRIC_BOT_AUDIT_SHARE": (
        "set it to the share of finished runs the audit grader grades again, a number from 0 to 1 "
        f"(default {DEFAULT_AUDIT_SHARE:g} when RUBRIC_BOT_AUDIT_MODEL is set)"
    ),
    "RUBRIC_BOT_SHADOW_GRADER_MODEL": (
        'set it to a langchain "provider:model" string for the shadow grader, or unset it for none'
    ),
    "RUBRIC_BOT_SHADOW_SHARE": (
        "set it to the share of live grader iterations the shadow grader grades too, a number from 0 "
        f"to 1 (default {DEFAULT_SHADOW_SHARE:g} when RUBRIC_BOT_SHADOW_GRADER_MODEL is set)"
    ),
    "RUBRIC_BOT_TRUST_RISK": f"set it to a number strictly between 0 and 1 (default {DEFAULT_RISK:g})",
}
"""How to fix each setting, shown next to any problem with it."""


SLACK_IDS = {
    "rubric_editors": (entries.EDITOR_ID, "a user id or user-group id"),
    "allowed_teams": (entries.TEAM_ID, "a workspace id (T…)"),
    "allowed_enterprises": (entries.ENTERPRISE_ID, "an Enterprise Grid org id (E…)"),
}
"""What each list of Slack ids must hold, and how a wrong entry is named."""


class Settings(BaseSettings):
    """Everything the bot reads from its environment. Tokens are `SecretStr` so they never print."""

    model_config = SettingsConfigDict(
        env_file=ENV_FILE,
        env_ignore_empty=True,  # `SLACK_APP_TOKEN=` in .env means "not set", not "empty token"
        extra="ignore",  # .env also holds provider keys such as OPENAI_API_KEY
        validate_by_name=True,
        frozen=True,
        arbitrary_types_allowed=True,  # `Database`, parsed from the setting's text
    )

    slack_bot_token: SecretStr | None = Field(None, validation_alias="SLACK_BOT_TOKEN")
    slack_signing_secret: SecretStr | None = Field(None, validation_alias="SLACK_SIGNING_SECRET")
    slack_app_token: SecretStr | None = Field(None, validation_alias="SLACK_APP_TOKEN")
    slack_api_url: str = Field(DEFAULT_SLACK_API_URL, validation_alias="SLACK_API_URL")
    slack_client_id: str | None = Field(None, validation_alias="SLACK_CLIENT_ID")
    slack_client_secret: SecretStr | None = Field(None, validation_alias="SLACK_CLIENT_SECRET")
    oauth_redirect_url: str | None = Field(None, validation_alias="SLACK_OAUTH_REDIRECT_URL")
    # NoDecode: comma-separated keys, the one that encrypts first (see bot.workspaces.encryption).
    encryption_keys: Annotated[tuple[SecretStr, ...], NoDecode] = Field(
        (), validation_alias="RUBRIC_BOT_ENCRYPTION_KEY"
    )
    # NoDecode: comma-separated ids; both unset, any workspace may install (bot.workspaces.install_flow).
    allowed_teams: Annotated[tuple[str, ...], NoDecode] = Field(
        (), validation_alias="RUBRIC_BOT_ALLOWED_TEAMS"
    )
    allowed_enterprises: Annotated[tuple[str, ...], NoDecode] = Field(
        (), validation_alias="RUBRIC_BOT_ALLOWED_ENTERPRISES"
    )
    # NoDecode: a comma-separated list as Slack writes scopes, not JSON.
    scopes: Annotated[tuple[str, ...] | None, NoDecode] = Field(None, validation_alias="RUBRIC_BOT_SCOPES")
    worker_model: str | None = Field(None, validation_alias="RUBRIC_BOT_MODEL")
    grader_model_override: str | None = Field(None, validation_alias="RUBRIC_BOT_GRADER_MODEL")
    # NoDecode: a comma-separated list, not JSON.
    allowed_models_override: Annotated[tuple[str, ...], NoDecode] = Field(
        (), validation_alias="RUBRIC_BOT_ALLOWED_MODELS"
    )
    max_iterations: PositiveInt = Field(3, validation_alias="RUBRIC_BOT_MAX_ITERATIONS")
    max_grader_calls: PositiveInt = Field(
        DEFAULT_MAX_GRADER_CALLS, validation_alias="RUBRIC_BOT_MAX_GRADER_CALLS"
    )
    grader_samples: PositiveInt = Field(1, validation_alias="RUBRIC_BOT_GRADER_SAMPLES")
    escalation_model: str | None = Field(None, validation_alias="RUBRIC_BOT_ESCALATION_MODEL")
    # NoDecode: the setting is text for `Database.parse`, not JSON as for other non-scalar fields.
    database: Annotated[Database, NoDecode] = Field(
        Database.parse(DEFAULT_DB), validation_alias="RUBRIC_BOT_DB"
    )
    shutdown_grace: PositiveFloat = Field(25.0, validation_alias="RUBRIC_BOT_SHUTDOWN_GRACE")
    stalled_after: PositiveFloat = Field(DEFAULT_STALLED_AFTER, validation_alias="RUBRIC_BOT_STALLED_AFTER")
    db_pool_size: PositiveInt = Field(STORE_POOL_SIZE, validation_alias="RUBRIC_BOT_DB_POOL_SIZE")
    slack_retry_backoff: PositiveFloat = Field(
        DEFAULT_SLACK_RETRY_BACKOFF, validation_alias="RUBRIC_BOT_SLACK_RETRY_BACKOFF"
    )
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field(
        "INFO", validation_alias="RUBRIC_BOT_LOG_LEVEL"
    )
    # NoDecode: a comma-separated list, not JSON.
    debug_loggers: Annotated[tuple[str, ...], NoDecode] = Field(
        (), validation_alias="RUBRIC_BOT_DEBUG_LOGGERS"
    )
    metrics_port: Annotated[int, Field(ge=1, le=65535)] = Field(
        DEFAULT_METRICS_PORT, validation_alias="RUBRIC_BOT_METRICS_PORT"
    )
    model_timeout: PositiveFloat = Field(DEFAULT_MODEL_TIMEOUT, validation_alias="RUBRIC_BOT_MODEL_TIMEOUT")
    run_timeout_override: PositiveFloat | None = Field(None, validation_alias="RUBRIC_BOT_RUN_TIMEOUT")
    thread_context_chars: PositiveInt = Field(
        DEFAULT_THREAD_CONTEXT_CHARS, validation_alias="RUBRIC_BOT_THREAD_CONTEXT_CHARS"
    )
    max_file_bytes: PositiveInt = Field(DEFAULT_MAX_FILE_BYTES, validation_alias="RUBRIC_BOT_MAX_FILE_BYTES")
    delivery_retry: NonNegativeFloat = Field(
        DEFAULT_DELIVERY_RETRY, validation_alias="RUBRIC_BOT_DELIVERY_RETRY"
    )
    daily_requests_per_user: NonNegativeInt = Field(
        DEFAULT_DAILY_REQUESTS_PER_USER, validation_alias="RUBRIC_BOT_DAILY_REQUESTS_PER_USER"
    )
    daily_tokens_per_channel: NonNegativeInt = Field(
        0, validation_alias="RUBRIC_BOT_DAILY_TOKENS_PER_CHANNEL"
    )
    daily_tokens_per_workspace: NonNegativeInt = Field(
        0, validation_alias="RUBRIC_BOT_WORKSPACE_DAILY_TOKENS"
    )
    daily_tokens: NonNegativeInt = Field(0, validation_alias="RUBRIC_BOT_DAILY_TOKENS")
    daily_usd_per_channel: NonNegativeFloat = Field(0, validation_alias="RUBRIC_BOT_CHANNEL_DAILY_USD")
    daily_usd_per_workspace: NonNegativeFloat = Field(0, validation_alias="RUBRIC_BOT_WORKSPACE_DAILY_USD")
    daily_usd: NonNegativeFloat = Field(0, validation_alias="RUBRIC_BOT_DAILY_USD")
    run_token_estimate: NonNegativeInt = Field(
        DEFAULT_RUN_TOKEN_ESTIMATE, validation_alias="RUBRIC_BOT_RUN_TOKEN_ESTIMATE"
    )
    # NoDecode: a comma-separated list, not JSON.
    rubric_editors: Annotated[tuple[str, ...], NoDecode] = Field(
        (), validation_alias="RUBRIC_BOT_RUBRIC_EDITORS"
    )
    replay_cooldown: NonNegativeFloat = Field(
        DEFAULT_REPLAY_COOLDOWN, validation_alias="RUBRIC_BOT_REPLAY_COOLDOWN"
    )
    replay_max_cases: PositiveInt = Field(
        DEFAULT_REPLAY_MAX_CASES, validation_alias="RUBRIC_BOT_REPLAY_MAX_CASES"
    )
    retention_days: PositiveInt | None = Field(None, validation_alias="RUBRIC_BOT_RETENTION_DAYS")
    context_tokens: NonNegativeInt = Field(
        DEFAULT_CONTEXT_TOKENS, validation_alias="RUBRIC_BOT_CONTEXT_TOKENS"
    )
    summary_model_override: str | None = Field(None, validation_alias="RUBRIC_BOT_SUMMARY_MODEL")
    streaming: bool = Field(True, validation_alias="RUBRIC_BOT_STREAMING")
    """Whether runs stream their progress as a plan where Slack takes it (`bot.streaming`)."""
    audit_model: str | None = Field(None, validation_alias="RUBRIC_BOT_AUDIT_MODEL")
    audit_share_override: Annotated[float, Field(ge=0, le=1)] | None = Field(
        None, validation_alias="RUBRIC_BOT_AUDIT_SHARE"
    )
    shadow_grader_model: str | None = Field(None, validation_alias="RUBRIC_BOT_SHADOW_GRADER_MODEL")
    shadow_share_override: Annotated[float, Field(ge=0, le=1)] | None = Field(
        None, validation_alias="RUBRIC_BOT_SHADOW_SHARE"
    )
    trust_risk: float = Field(DEFAULT_RISK, gt=0, lt=1, validation_alias="RUBRIC_BOT_TRUST_RISK")

    @field_validator("slack_bot_token")
    @classmethod
    def _bot_token_shape(cls, value: SecretStr | None) -> SecretStr | None:
        return _require_prefix(value, "xoxb-")

    @field_validator("slack_app_token")
    @classmethod
    def _app_token_shape(cls, value: SecretStr | None) -> SecretStr | None:
        return _require_prefix(value, "xapp-")

    @field_validator("database", mode="before")
    @classmethod
    def _database_location(cls, value: object) -> object:
        return Database.parse(value) if isinstance(value, str) else value

    @field_validator("rubric_editors", "allowed_teams", "allowed_enterprises", mode="before")
    @classmethod
    def _slack_ids(cls, value: object, info: ValidationInfo) -> object:
        if not isinstance(value, str):
            return value
        ids = entries.comma_list(value)
        pattern, what = SLACK_IDS[str(info.field_name)]
        if wrong := entries.unmatched_entries(ids, pattern):
            raise ValueError(f"entry {wrong} is not {what}")
        return ids

    @field_validator("debug_loggers", mode="before")
    @classmethod
    def _logger_names(cls, value: object) -> object:
        return entries.logger_names(value) if isinstance(value, str) else value

    @field_validator("allowed_models_override", mode="before")
    @classmethod
    def _model_ids(cls, value: object) -> object:
        return entries.model_ids(value) if isinstance(value, str) else value

    @field_validator("oauth_redirect_url")
    @classmethod
    def _redirect_url_shape(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("https://", "http://")):
            raise ValueError("it is not an http(s) URL")
        return value

    @field_validator("encryption_keys", mode="before")
    @classmethod
    def _fernet_keys(cls, value: object) -> object:
        return entries.fernet_keys(value) if isinstance(value, str) else value

    @field_validator("scopes", mode="before")
    @classmethod
    def _scope_list(cls, value: object) -> object:
        return entries.scope_list(value) if isinstance(value, str) else value

    @field_validator("slack_api_url")
    @classmethod
    def _api_url_shape(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError("it is not an http(s) URL")
        # slack_sdk appends the method name to the base URL verbatim.
        return value if value.endswith("/") else value + "/"

    @property
    def run_timeout(self) -> float:
        """Seconds one run may take: its own setting, else `RUN_TIMEOUT_FACTOR` model timeouts."""
        return self.run_timeout_override or self.model_timeout * RUN_TIMEOUT_FACTOR

    def oauth_problems(self, *, socket_mode: bool) -> list[str]:
        """What keeps a distributed (OAuth) app from running with these settings, one line each;
        `socket_mode` says whether this process would connect in Socket Mode."""
        if self.slack_client_id is None:
            return []
        if self.slack_bot_token is not None:
            return [
                "SLACK_CLIENT_ID and SLACK_BOT_TOKEN are both set: unset SLACK_CLIENT_ID to serve the one "
                "workspace of SLACK_BOT_TOKEN, or unset SLACK_BOT_TOKEN to let workspaces install the bot "
                "with OAuth."
            ]
        problems = []
        if self.slack_client_secret is None:
            problems.append(problem("SLACK_CLIENT_SECRET", "is not set"))
        if socket_mode:
            problems.append(
                "SLACK_APP_TOKEN is set, but a bot installed with OAuth serves its install pages and "
                "Slack's requests over HTTP: unset SLACK_APP_TOKEN or run rubric-bot serve --http."
            )
        return problems

    @property
    def oauth(self) -> bool:
        """Whether the bot is offered to many workspaces: installed with OAuth, one token per
        installation, rather than serving the one workspace of `SLACK_BOT_TOKEN`."""
        return self.slack_bot_token is None and self.slack_client_id is not None

    @property
    def audit_share(self) -> float:
        """Share of finished runs the audit grader grades again: none without `RUBRIC_BOT_AUDIT_MODEL`,
        else `RUBRIC_BOT_AUDIT_SHARE` or `DEFAULT_AUDIT_SHARE`."""
        if not self.audit_model:
            return 0.0
        return DEFAULT_AUDIT_SHARE if self.audit_share_override is None else self.audit_share_override

    @property
    def shadow_share(self) -> float:
        """Share of live grader iterations the shadow grader grades too: none without
        `RUBRIC_BOT_SHADOW_GRADER_MODEL`, else `RUBRIC_BOT_SHADOW_SHARE` or `DEFAULT_SHADOW_SHARE`."""
        if not self.shadow_grader_model:
            return 0.0
        return DEFAULT_SHADOW_SHARE if self.shadow_share_override is None else self.shadow_share_override

    @property
    def grader_model(self) -> str | None:
        """The deployment's grader model: its own setting, else the worker's."""
        return self.grader_model_override or self.worker_model

    @property
    def allowed_models(self) -> tuple[str, ...]:
        """What a workspace admin may choose: `RUBRIC_BOT_ALLOWED_MODELS`, else the deployment's models."""
        if self.allowed_models_override:
            return self.allowed_models_override
        return tuple(dict.fromkeys(m for m in (self.worker_model, self.grader_model) if m))

    @property
    def socket_mode(self) -> bool:
        """Socket Mode is used whenever an app-level token is configured."""
        return self.slack_app_token is not None


def _require_prefix(value: SecretStr | None, prefix: str) -> SecretStr | None:
    if value is not None and not value.get_secret_value().startswith(prefix):
        raise ValueError(f'it does not start with "{prefix}"')
    return value


class ConfigError(Exception):
    """One or more settings are missing or invalid; `str()` is the whole message for the user:
    one line per problem, each naming the setting and how to fix it."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__(problems)
        self.problems = problems

    def __str__(self) -> str:
        return "\n".join(f"rubric-bot: {problem}" for problem in self.problems)


def problem(name: str, issue: str) -> str:
    """One line of a configuration report: what is wrong with `name` and how to fix it."""
    return f"{name} {issue}: {HINTS[name]}."


def load_settings(require: Collection[str] = ()) -> Settings:
    """Read the settings; raise `ConfigError` naming every problem, including unset `require` names.

    `require` holds environment names (e.g. "SLACK_BOT_TOKEN") the caller cannot work without; an
    entry "A or B" (such as `SLACK_CONNECTION`) is met by either. A value that still carries what an
    env file meant as its comment, quotes or padding (see `pasted_value_problem`) is one line naming
    its setting, instead of whatever the value would make of it later.
    """
    raw = raw_values()
    keys = {name: value for name, value in os.environ.items() if name.endswith(PROVIDER_KEY_SUFFIX)}
    pasted = {
        name: line
        for name, value in (raw | keys).items()
        if (line := pasted_value_problem(name, value)) is not None
    }
    problems: list[str] = list(pasted.values())
    try:
        settings = Settings()
    except ValidationError as exc:
        errors = exc.errors(include_input=False, include_url=False)
        problems += [_describe(error) for error in errors if _setting_of(error) not in pasted]
    problems += [problem(name, "is not set") for name in require if set(raw).isdisjoint(name.split(" or "))]
    if problems:
        raise ConfigError(problems)
    return settings


def _setting_of(error: ErrorDetails) -> str:
    return str(error["loc"][0]) if error["loc"] else "configuration"


def _describe(error: ErrorDetails) -> str:
    name = _setting_of(error)
    reason = error["msg"].removeprefix("Value error, ")
    if name not in HINTS:
        return f"{name}: {reason}."
    return problem(name, f"is invalid ({reason})")


def raw_values() -> dict[str, str]:
    """Each setting given a non-empty value, as written: the environment's, else `.env`'s."""
    aliases = {str(field.validation_alias) for field in Settings.model_fields.values()}
    values: dict[str, str] = {}
    for source in (DotEnvSettingsSource(Settings), EnvSettingsSource(Settings)):  # the environment wins
        values |= {name: str(value) for name, value in source().items() if name in aliases}
    return values
