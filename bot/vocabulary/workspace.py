"""Which workspace a row, a request or a job belongs to: the key that keeps tenants apart.

Pure value types, no Slack client: the store, the job queue and the listeners all speak them.
"""

from __future__ import annotations

from dataclasses import dataclass

NO_ENTERPRISE = ""
"""The `enterprise` of a workspace outside any Enterprise Grid org (stored as text, never NULL, so
that it can be part of a primary key and compared with ``=``)."""


@dataclass(frozen=True)
class Workspace:
    """A Slack workspace, and the Enterprise Grid org it is part of if any.

    Every row the bot keeps is filed under one, and every query filters by it: two workspaces on one
    database never see each other's rows, even where their channel ids collide.
    """

    team: str
    enterprise: str = NO_ENTERPRISE


@dataclass(frozen=True)
class Organization:
    """Every workspace of one Enterprise Grid org: what an org-wide installation serves, and what its
    uninstall deletes."""

    enterprise: str


Tenant = Workspace | Organization
"""Whose data a purge deletes: one workspace's, or every workspace's of an org."""


def tenant_words(tenant: Tenant | None) -> str:
    """How a log line names a workspace or org: "team T0123" (of org E0456), "Enterprise Grid org E0456"."""
    if isinstance(tenant, Organization):
        return f"Enterprise Grid org {tenant.enterprise}"
    if tenant is None:
        return "every workspace"
    org = f" of Enterprise Grid org {tenant.enterprise}" if tenant.enterprise else ""
    return f"team {tenant.team}{org}"
