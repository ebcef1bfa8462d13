"""The bot's own tables, defined once for SQLite and PostgreSQL (SQLAlchemy Core).

Every table holding Slack data says which workspace a row belongs to, by ``enterprise`` and
``team`` (the posted ledger through its run, the dedupe claims in their keys), and every query of
`bot.db.store` filters by them.

Migrations in `bot/db/migrations` create and change them; this module is what the code reads and
writes, and a test checks that the two agree on both databases. Langgraph's checkpoint tables
are the checkpointer's own and are not described here.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Final

from slack_sdk.oauth.installation_store.sqlalchemy import AsyncSQLAlchemyInstallationStore
from slack_sdk.oauth.state_store.sqlalchemy import AsyncSQLAlchemyOAuthStateStore
from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    Table,
    Text,
    UniqueConstraint,
    false,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator, TypeEngine

from bot.vocabulary.workspace import NO_ENTERPRISE

FINAL_STEP: Final = "final"
"""The `posted.iteration` of a run's closing messages (its other rows hold iteration numbers)."""

STREAM_STEP: Final = "stream"
"""The `posted.iteration` of a run's streamed message (its plan of tasks, see `bot.streaming`):
recorded as the stream starts, so a resumed run puts its answer there instead of starting another."""


class UtcTimestamp(TypeDecorator[datetime]):
    """A timezone-aware moment, read back in UTC.

    PostgreSQL stores ``timestamptz``. SQLite has no date type: there it is fixed-width ISO-8601
    text in UTC, as the tables from before migrations hold it, which sorts in time order.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        if dialect.name == "sqlite":
            return dialect.type_descriptor(Text())
        return dialect.type_descriptor(DateTime(timezone=True))

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> Any:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("timestamps must be timezone-aware")
        moment = value.astimezone(UTC)
        return moment.isoformat(timespec="microseconds") if dialect.name == "sqlite" else moment

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        moment = datetime.fromisoformat(value) if isinstance(value, str) else value
        return moment.astimezone(UTC)


Document = JSON().with_variant(JSONB(), "postgresql")
"""A JSON document: ``jsonb`` on PostgreSQL, JSON text on SQLite."""

metadata = MetaData()
"""Every table of the bot's own."""

claims = Table(
    "claims",
    metadata,
    Column("key", Text, primary_key=True),
    Column("claimed_at", UtcTimestamp, nullable=False),
)
"""Dedupe keys of Slack deliveries already taken: a key's row exists once, whoever inserts it."""

threads = Table(
    "threads",
    metadata,
    Column("enterprise", Text, nullable=False, server_default=NO_ENTERPRISE),
    Column("team", Text, nullable=False),
    Column("channel", Text, nullable=False),
    Column("thread_ts", Text, nullable=False),
    Column("created_at", UtcTimestamp, nullable=False),
    Column("last_activity", UtcTimestamp, nullable=False),
    PrimaryKeyConstraint("enterprise", "team", "channel", "thread_ts"),
    Index("threads_by_activity", "last_activity"),
)
"""Threads the bot takes part in (it listens to every message there). ``last_activity`` is when the
bot last took a message there: retention deletes threads idle for longer than it keeps data."""

channel_rubrics = Table(
    "channel_rubrics",
    metadata,
    Column("enterprise", Text, nullable=False, server_default=NO_ENTERPRISE),
    Column("team", Text, nullable=False),
    Column("channel", Text, nullable=False),
    Column("rubric_text", Text, nullable=False),
    Column("set_by", Text, nullable=False),
    Column("updated_at", UtcTimestamp, nullable=False),
    PrimaryKeyConstraint("enterprise", "team", "channel"),
)
"""Each channel's default rubric for new conversations."""

channel_rubric_versions = Table(
    "channel_rubric_versions",
    metadata,
    Column("enterprise", Text, nullable=False, server_default=NO_ENTERPRISE),
    Column("team", Text, nullable=False),
    Column("channel", Text, nullable=False),
    Column("version", Integer, nullable=False),
    Column("rubric_text", Text),
    Column("set_by", Text, nullable=False),
    Column("created_at", UtcTimestamp, nullable=False),
    Column("replay_summary", Text),
    PrimaryKeyConstraint("enterprise", "team", "channel", "version"),
)
"""Every change of a channel's default rubric, numbered from 1 per channel and never deleted: the
text set, or NULL where it was cleared. The newest one is what ``channel_rubrics`` holds.
``replay_summary``: the one line of the replay it was applied after (`bot.proposals`), or that the
replay was skipped; NULL where no replay was possible."""

channel_settings = Table(
    "channel_settings",
    metadata,
    Column("enterprise", Text, nullable=False, server_default=NO_ENTERPRISE),
    Column("team", Text, nullable=False),
    Column("channel", Text, nullable=False),
    Column("calibration", Boolean, nullable=False),
    Column("updated_at", UtcTimestamp, nullable=False),
    PrimaryKeyConstraint("enterprise", "team", "channel"),
)
"""Per-channel switches; a channel without a row has the defaults."""

channel_replays = Table(
    "channel_replays",
    metadata,
    Column("enterprise", Text, nullable=False, server_default=NO_ENTERPRISE),
    Column("team", Text, nullable=False),
    Column("channel", Text, nullable=False),
    Column("started_by", Text, nullable=False),
    Column("started_at", UtcTimestamp, nullable=False),
    PrimaryKeyConstraint("enterprise", "team", "channel"),
)
"""The latest `/rubric replay` started in each channel (its cooldown counts from then)."""

runs = Table(
    "runs",
    metadata,
    Column("run_id", Integer, primary_key=True, autoincrement=True),
    Column("thread_id", Text, nullable=False),
    Column("enterprise", Text, nullable=False, server_default=NO_ENTERPRISE),
    Column("team", Text, nullable=False),
    Column("channel", Text, nullable=False),
    Column("thread_ts", Text, nullable=False),
    Column("request_ts", Text, nullable=False),
    Column("status", Text),
    Column("started_at", UtcTimestamp, nullable=False),
    Column("finished_at", UtcTimestamp),
    Column("acknowledged", Boolean, nullable=False, server_default=false()),
    Column("undelivered", Boolean, nullable=False, server_default=false()),
    Column("thread_messages", Integer),
    Column("files_read", Document),
    Column("files_unread", Document),
    Column("requester", Text),
    Column("tokens", Integer),
    Column("lease", Text),
    Column("cost_usd", Float),
    Column("grader_cost_usd", Float),
    Column("cost_unpriced", Boolean, nullable=False, server_default=false()),
    Column("token_usage", Document),
    Column("charged_tokens", Integer, nullable=False, server_default="0"),
    Column("charged_usd", Float, nullable=False, server_default="0"),
    Column("stopped_by", Text),
    Index("runs_by_thread", "thread_id", "finished_at"),
    Index("runs_by_channel", "team", "channel", "started_at"),
    Index("runs_by_requester", "team", "requester", "started_at"),
)
"""Requests the bot started answering; an unfinished one outlived the process that ran it.
``acknowledged`` is set once the thread was told that the run was interrupted, ``undelivered``
when the run's closing message (its answer, or the notice of its failure) never reached Slack.
What the request shared, once read: ``thread_messages`` (earlier messages of the thread the worker
got), ``files_read`` (file names) and ``files_unread`` (``{"name", "reason"}`` of each file, or of
the thread, not read); NULL before the run read them. ``requester`` is the Slack user who asked
and ``tokens`` the worker's plus the grader's tokens the run used (both NULL on runs from before
they were kept; ``tokens`` also until the run ends). ``cost_usd`` is what the run's priced model
calls cost in US dollars (``grader_cost_usd`` the grader's share), ``cost_unpriced`` is set when a
model it used is not in the price table (its tokens are not in ``cost_usd``), and ``token_usage``
keeps the tokens it was priced from, per role: ``{"worker": {"model", "input_tokens",
"cached_input_tokens", "cache_write_tokens", "output_tokens", "usd"}, "grader": …, "summary": …}`` (see
`bot.limits.prices.RunCost`), with ``"audit": …`` and its money in ``cost_usd`` once the audit
grader graded the run (`bot.audit`); the three are NULL until the run ends and on runs from before
they were kept.
``lease`` names the attempt at the run that
may post in its thread (on PostgreSQL, where another process can take a run over; see
`bot.db.store.Store.take_run`). ``charged_tokens`` is what the run adds to the day's spend
counters (`daily_spend`): the estimate reserved at admission until it ends, then its ``tokens``;
``charged_usd`` likewise in money: the estimated cost reserved at admission, then its ``cost_usd``
(an audit adds what it used to both, having reserved and settled on the day it ran).
``stopped_by`` is the Slack user who asked to stop the run (Slack's Stop button or `/rubric stop`),
set once, while it runs or waits; whichever process runs it ends it (see `bot.sessions.stop`)."""

evaluations = Table(
    "evaluations",
    metadata,
    Column("grading_run_id", Text, nullable=False),
    Column("iteration", Integer, nullable=False),
    Column("enterprise", Text, nullable=False, server_default=NO_ENTERPRISE),
    Column("team", Text, nullable=False),
    Column("channel", Text, nullable=False),
    Column("thread_ts", Text, nullable=False),
    Column("message_ts", Text, nullable=False),
    Column("evaluation", Document, nullable=False),
    Column("rubric_text", Text, nullable=False),
    Column("created_at", UtcTimestamp, nullable=False),
    Column("provenance", Document),
    PrimaryKeyConstraint("grading_run_id", "iteration"),
    Index("evaluations_by_channel", "team", "channel", "created_at"),
)
"""Evaluation messages the bot posted, with the rubric they graded against and ``provenance``, what
produced them (`bot.vocabulary.provenance.EvaluationProvenance`; NULL on rows stored before it was kept)."""

reviews = Table(
    "reviews",
    metadata,
    Column("review_id", Integer, primary_key=True, autoincrement=True),
    Column("enterprise", Text, nullable=False, server_default=NO_ENTERPRISE),
    Column("team", Text, nullable=False),
    Column("channel", Text, nullable=False),
    Column("thread_ts", Text, nullable=False),
    Column("grading_run_id", Text, nullable=False),
    Column("iteration", Integer, nullable=False),
    Column("criterion", Text, nullable=False),
    Column("grader_verdict", Text, nullable=False),
    Column("reviewer_verdict", Text, nullable=False),
    Column("comment", Text, nullable=False),
    Column("reviewer", Text, nullable=False),
    Column("created_at", UtcTimestamp, nullable=False),
    Column("editor", Boolean, nullable=False, server_default=false()),
    Column("via", Text, nullable=False, server_default="form"),
    UniqueConstraint("grading_run_id", "iteration", "criterion", "reviewer", name="reviews_one_per_reviewer"),
    Index("reviews_by_channel", "team", "channel", "created_at"),
)
"""Teammates' verdicts on the grader's, one row per criterion, iteration and reviewer. ``review_id``
numbers them (a calibration example is known by the review it comes from; a review saved again is a
new row). ``editor`` is whether the reviewer could change the channel's grading when they reviewed
(`bot.governance.editors`): only such reviews, or two agreeing ones, calibrate the grader. ``via`` is
how the review was given (`bot.db.reviews.ReviewVia`): one click on *Agree*, the form pre-set to the
grader's verdicts, or the blind form (nothing pre-set, the grader's verdicts hidden)."""

calibration_drops = Table(
    "calibration_drops",
    metadata,
    Column("enterprise", Text, nullable=False, server_default=NO_ENTERPRISE),
    Column("team", Text, nullable=False),
    Column("channel", Text, nullable=False),
    Column("grading_run_id", Text, nullable=False),
    Column("iteration", Integer, nullable=False),
    Column("criterion", Text, nullable=False),
    Column("review_id", Integer, nullable=False),
    Column("dropped_by", Text, nullable=False),
    Column("created_at", UtcTimestamp, nullable=False),
    Column("replay_summary", Text),
    PrimaryKeyConstraint("grading_run_id", "iteration", "criterion"),
    Index("calibration_drops_by_channel", "team", "channel", "created_at"),
)
"""Reviewed cases an editor took out of calibration (`/rubric calibration drop N`): no review of that
criterion of that iteration is a calibration example again, whoever saves one. ``review_id`` is the
example's number when it was dropped. Kept, like rubric versions, as the channel's history, with the
one line of the replay it was applied after (``replay_summary``, as for rubric versions)."""

audits = Table(
    "audits",
    metadata,
    Column("run_id", Integer, primary_key=True, autoincrement=False),
    Column("enterprise", Text, nullable=False, server_default=NO_ENTERPRISE),
    Column("team", Text, nullable=False),
    Column("channel", Text, nullable=False),
    Column("thread_ts", Text, nullable=False),
    Column("grading_run_id", Text, nullable=False),
    Column("iterations", Integer, nullable=False),
    Column("loop_passed", Boolean, nullable=False),
    Column("model", Text, nullable=False),
    Column("prompt_hash", Text),
    Column("verdict", Text),
    Column("reason", Text),
    Column("evaluation", Document),
    Column("tokens", Integer),
    Column("created_at", UtcTimestamp, nullable=False),
    Index("audits_by_channel", "team", "channel", "created_at"),
)
"""Finished runs whose final answer the audit grader graded again (`bot.audit`), one row per run:
written as the audit starts (so a run is audited once) and completed with its ``verdict`` (``pass``,
``fail``, or ``error`` when the audit grader failed; NULL while it runs), ``reason``, the audit
``evaluation`` and ``tokens``. ``iterations`` and ``loop_passed`` say how the loop's own grader ended
the run; ``model`` is the audit model as it answered (or as asked, when it did not say)."""

posted = Table(
    "posted",
    metadata,
    Column("run_id", Integer, ForeignKey("runs.run_id"), nullable=False),
    Column("iteration", Text, nullable=False),
    Column("part", Integer, nullable=False),
    Column("message_ts", Text, nullable=False),
    Column("posted_at", UtcTimestamp, nullable=False),
    PrimaryKeyConstraint("run_id", "iteration", "part"),
    Index("posted_by_message", "message_ts"),
)
"""Thread messages a run posted, by iteration number (or 'final') and part of a long message; a
resumed run posts only what is missing here. Found by message too: the export reads the run (and its
cost) of each evaluation message."""

asker_feedback = Table(
    "asker_feedback",
    metadata,
    Column("run_id", Integer, ForeignKey("runs.run_id"), nullable=False),
    Column("person", Text, nullable=False),
    Column("enterprise", Text, nullable=False, server_default=NO_ENTERPRISE),
    Column("team", Text, nullable=False),
    Column("channel", Text, nullable=False),
    Column("thread_ts", Text, nullable=False),
    Column("positive", Boolean, nullable=False),
    Column("created_at", UtcTimestamp, nullable=False),
    PrimaryKeyConstraint("run_id", "person"),
    Index("asker_feedback_by_channel", "team", "channel", "created_at"),
)
"""People's 👍/👎 on a run's final answer (Slack's ``feedback_buttons``), one row per run and person:
a second click replaces the first (``created_at`` is then the later click's). It judges the answer,
not the grader: it is never a review (`reviews`)."""

uploaded_files = Table(
    "uploaded_files",
    metadata,
    Column("file_id", Text, primary_key=True),
    Column("enterprise", Text, nullable=False, server_default=NO_ENTERPRISE),
    Column("team", Text, nullable=False),
    Column("channel", Text, nullable=False),
    Column("purpose", Text, nullable=False),
    Column("digest", Text),
    Column("created_at", UtcTimestamp, nullable=False),
    Index("uploaded_files_by_channel", "team", "channel", "purpose", "digest"),
)
"""Files the bot uploaded to Slack: its agreement charts (the Home tab's, `/rubric report`'s,
`/rubric replay`'s), which show a channel's criterion names and figures. Each is deleted from Slack
(``files.delete``) with the data it shows: a purge of its channel or workspace, uninstall, and
retention once it is older than the retention period. ``purpose`` says which surface uploaded it;
``digest`` names the report state a Home chart was drawn from, so that it is reused while that
state lasts."""

trust_levels = Table(
    "trust_levels",
    metadata,
    Column("change_id", Integer, primary_key=True, autoincrement=True),
    Column("enterprise", Text, nullable=False, server_default=NO_ENTERPRISE),
    Column("team", Text, nullable=False),
    Column("channel", Text, nullable=False),
    Column("target", Float),
    Column("set_by", Text, nullable=False),
    Column("created_at", UtcTimestamp, nullable=False),
    Index("trust_levels_by_channel", "team", "channel", "created_at"),
)
"""Each change of a channel's trust level (`/rubric trust`), kept as its history: the agreement with
the team the grader's acted-on verdicts must reach (``target``; NULL: trust off), who set it when.
The channel's level is its latest row (none: off)."""

trust_thresholds = Table(
    "trust_thresholds",
    metadata,
    Column("enterprise", Text, nullable=False, server_default=NO_ENTERPRISE),
    Column("team", Text, nullable=False),
    Column("channel", Text, nullable=False),
    Column("grader_model", Text, nullable=False),
    Column("criterion_text", Text, nullable=False),
    Column("name", Text, nullable=False),
    Column("target", Float, nullable=False),
    Column("risk", Float, nullable=False),
    Column("threshold", Float),
    Column("reviews", Integer, nullable=False),
    Column("updated_at", UtcTimestamp, nullable=False),
    PrimaryKeyConstraint("enterprise", "team", "channel", "grader_model", "criterion_text"),
)
"""Per pass/fail criterion of a channel (its normalized text, per grader model as it answered), the
confidence from which the grader's verdicts are acted on, recalibrated from the channel's trusted
reviews (``reviews`` of them) at ``target`` and ``risk`` whenever one is saved; NULL ``threshold``:
no threshold can be promised yet (the criterion runs as without trust)."""

review_modes = Table(
    "review_modes",
    metadata,
    Column("change_id", Integer, primary_key=True, autoincrement=True),
    Column("enterprise", Text, nullable=False, server_default=NO_ENTERPRISE),
    Column("team", Text, nullable=False),
    Column("channel", Text, nullable=False),
    Column("blind", Boolean, nullable=False),
    Column("double_share", Float, nullable=False),
    Column("set_by", Text, nullable=False),
    Column("created_at", UtcTimestamp, nullable=False),
    Index("review_modes_by_channel", "team", "channel", "created_at"),
)
"""Each change of how a channel's iterations are reviewed (`/rubric review`), kept as its history:
``blind`` (the form opens with nothing pre-set and the grader's verdicts hidden) and the share of
reviewed iterations a second person is asked to review (``double_share``, 0 for none), who set them
when. The channel's modes are its latest row (none: not blind, no double review)."""

replay_spend = Table(
    "replay_spend",
    metadata,
    Column("spend_id", Integer, primary_key=True, autoincrement=True),
    Column("enterprise", Text, nullable=False, server_default=NO_ENTERPRISE),
    Column("team", Text, nullable=False),
    Column("channel", Text, nullable=False),
    Column("tokens", BigInteger, nullable=False),
    Column("usd", Float, nullable=False),
    Column("created_at", UtcTimestamp, nullable=False),
    Index("replay_spend_by_channel", "team", "channel", "created_at"),
)
"""What each grader call of a `/rubric replay` used, as it was settled: the replays' part of the
cost history (`/rubric usage`, Home, ``rubric-bot usage``), which runs alone do not hold. Erased with
the channel's settings and replay record."""

shadow_grades = Table(
    "shadow_grades",
    metadata,
    Column("grading_run_id", Text, nullable=False),
    Column("iteration", Integer, nullable=False),
    Column("enterprise", Text, nullable=False, server_default=NO_ENTERPRISE),
    Column("team", Text, nullable=False),
    Column("channel", Text, nullable=False),
    Column("thread_ts", Text, nullable=False),
    Column("model", Text, nullable=False),
    Column("prompt_hash", Text),
    Column("result", Text, nullable=False),
    Column("evaluation", Document, nullable=False),
    Column("tokens", BigInteger, nullable=False),
    Column("usd", Float),
    Column("created_at", UtcTimestamp, nullable=False),
    PrimaryKeyConstraint("grading_run_id", "iteration"),
    Index("shadow_grades_by_channel", "team", "channel", "created_at"),
)
"""Live grader iterations the shadow grader (`bot.shadow`) graded too, one row each: its ``model`` as
it answered (as asked when it did not say), the hash of its instructions, its ``result`` and whole
``evaluation`` (``grader_error`` when it failed: no verdicts), and what it used (``tokens``; ``usd``
NULL when the price table does not know the model). Never shown in the thread; erased with it."""

shadow_verdicts = Table(
    "shadow_verdicts",
    metadata,
    Column("grading_run_id", Text, nullable=False),
    Column("iteration", Integer, nullable=False),
    Column("criterion", Text, nullable=False),
    Column("enterprise", Text, nullable=False, server_default=NO_ENTERPRISE),
    Column("team", Text, nullable=False),
    Column("channel", Text, nullable=False),
    Column("thread_ts", Text, nullable=False),
    Column("verdict", Text, nullable=False),
    Column("live_verdict", Text),
    PrimaryKeyConstraint("grading_run_id", "iteration", "criterion"),
)
"""The shadow grader's verdict per criterion of a graded iteration (``pass``, ``fail``, ``1``–``5`` or
``cannot_tell``), beside the live grader's on the same iteration (``live_verdict``; NULL when the live
grader gave that criterion none). Its provenance is its `shadow_grades` row."""
change_proposals = Table(
    "change_proposals",
    metadata,
    Column("proposal_id", Integer, primary_key=True, autoincrement=True),
    Column("enterprise", Text, nullable=False, server_default=NO_ENTERPRISE),
    Column("team", Text, nullable=False),
    Column("channel", Text, nullable=False),
    Column("kind", Text, nullable=False),
    Column("candidate", Text),
    Column("base", Text),
    Column("proposed_by", Text, nullable=False),
    Column("status", Text, nullable=False),
    Column("summary", Text),
    Column("message_ts", Text),
    Column("decided_by", Text),
    Column("created_at", UtcTimestamp, nullable=False),
    Column("decided_at", UtcTimestamp),
    Index("change_proposals_by_channel", "team", "channel", "created_at"),
)
"""Changes of how a channel is graded held until an editor applies them (`bot.proposals`): a rubric
(``candidate`` its text), a workspace's grader model (its ``provider:model``, NULL for the
deployment's) or a calibration drop (the review id), proposed in ``channel`` against ``base`` (the
rubric version, grader model in force, or NULL); ``status`` from ``replaying`` to ``pending`` (the
replay's ``summary`` and the message with Apply/Cancel, ``message_ts``, posted) to ``applied``,
``cancelled``, ``stale`` or ``stopped``, with who decided and when. Kept, so a pending one outlives a
restart; erased with the channel's settings."""

workspace_settings = Table(
    "workspace_settings",
    metadata,
    Column("enterprise", Text, nullable=False, server_default=""),
    Column("team", Text, nullable=False),
    Column("worker_model", Text),
    Column("grader_model", Text),
    Column("daily_requests_per_user", Integer),
    Column("daily_tokens_per_channel", Integer),
    Column("daily_tokens_per_workspace", Integer),
    Column("rubric_editors", Document),
    Column("grader_samples", Integer),
    Column("updated_by", Text, nullable=False),
    Column("updated_at", UtcTimestamp, nullable=False),
    PrimaryKeyConstraint("enterprise", "team"),
)
"""What a workspace's admins set with `/rubric admin` over the deployment's defaults, and who set it
when. A NULL setting (or a workspace without a row) takes the deployment's; ``enterprise`` is the
Enterprise Grid org, "" outside one. ``rubric_editors`` is a JSON list of user and user-group ids;
``grader_samples`` the times the grader is asked per iteration (``RUBRIC_BOT_GRADER_SAMPLES``)."""

message_changes = Table(
    "message_changes",
    metadata,
    Column("change_id", Integer, primary_key=True, autoincrement=True),
    Column("enterprise", Text, nullable=False, server_default=NO_ENTERPRISE),
    Column("team", Text, nullable=False),
    Column("channel", Text, nullable=False),
    Column("thread_ts", Text, nullable=False),
    Column("kind", Text, nullable=False),
    Column("change", Document, nullable=False),
    Column("received_at", UtcTimestamp, nullable=False),
)
"""Deletions and edits of people's messages not applied yet, kept only where jobs live in memory
(SQLite): a process stopping or dying before it applies one leaves it here for the next to apply.
``kind`` names the job (``forget`` or ``revise``) and ``change`` is its message change; the row goes
once the change is applied."""

daily_spend = Table(
    "daily_spend",
    metadata,
    Column("day", Text, nullable=False),
    Column("level", Text, nullable=False),
    Column("enterprise", Text, nullable=False, server_default=NO_ENTERPRISE),
    Column("team", Text, nullable=False, server_default=""),
    Column("subject", Text, nullable=False, server_default=""),
    Column("requests", Integer, nullable=False, server_default="0"),
    Column("tokens", BigInteger, nullable=False, server_default="0"),
    Column("usd", Float, nullable=False, server_default="0"),
    PrimaryKeyConstraint("day", "level", "enterprise", "team", "subject"),
)
"""What each budget level spent on one UTC ``day`` (``YYYY-MM-DD``), counted as runs are admitted
and settled (`bot.db.spend`): ``level`` is ``person`` (``subject`` the user), ``channel``
(``subject`` the channel), ``workspace`` or ``deployment`` (no enterprise or team). ``requests`` are
the runs admitted, ``tokens`` their worker and grader tokens, reserved estimates of the runs still
going included, and the replays' grader tokens; ``usd`` what the finished runs cost at list prices
(added as each run ends; see `bot.limits.prices`)."""

# -- OAuth mode: Bolt's installation and state stores --------------------------------------------
# Their tables are the slack_sdk stores' own definitions, built into this metadata so that the
# bot's migrations create them and the schema check covers them.

INSTALLATIONS_TABLE = "slack_installations"
"""Bolt's record of each installation (one row per install or reinstall, the latest wins)."""

INSTALLED_BOTS_TABLE = "slack_bots"
"""Bolt's record of each installation's bot token (refreshed in place when tokens rotate)."""

OAUTH_STATES_TABLE = "slack_oauth_states"
"""Bolt's OAuth states: one per install page shown, consumed when the installer comes back."""

installations = AsyncSQLAlchemyInstallationStore.build_installations_table(metadata, INSTALLATIONS_TABLE)
"""Installations of the app, by enterprise and team (an org-wide one has no team)."""

installed_bots = AsyncSQLAlchemyInstallationStore.build_bots_table(metadata, INSTALLED_BOTS_TABLE)
"""The bot token of each installation."""

INSTALLATION_TOKENS = ("bot_token", "bot_refresh_token", "user_token", "user_refresh_token")
"""The secrets of an installation (attributes of slack_sdk's `Installation`, columns of its table)."""

BOT_TOKENS = ("bot_token", "bot_refresh_token")
"""The secrets of an installed bot (attributes of slack_sdk's `Bot`, columns of its table)."""

# Unbounded, not slack_sdk's 200 characters: a token may be stored encrypted (about twice as long;
# see bot.workspaces.encryption and migration 0017).
for _table, _tokens in ((installations, INSTALLATION_TOKENS), (installed_bots, BOT_TOKENS)):
    for _name in _tokens:
        _table.c[_name].type = Text()

oauth_states = AsyncSQLAlchemyOAuthStateStore.build_oauth_states_table(metadata, OAUTH_STATES_TABLE)
"""OAuth states used at the redirect (one row each, until it expires): see bot.workspaces.install_flow."""

Index("slack_oauth_states_state", oauth_states.c.state, unique=True)
