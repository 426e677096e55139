"""Who may do what: the one table of roles and actions.

Every web route, CLI command and API operation names the `Action` it needs and asks `allows`;
nothing else compares role names. Pure: no Flask, no SQL.

- viewer: reads everything of its organization;
- operator: also runs the work (jobs, runs, batches, alerts, queue pause/resume, worker stop);
- admin: also shapes the organization (users, projects, queues, tokens, alert channels);
- a site superuser may do everything in every organization.
"""

from __future__ import annotations

from enum import Enum

from app.domain.states import Role


class Action(str, Enum):
    READ = "read"  # see objects of the organization: lists, details, statistics, audit log
    OPERATE = "operate"  # create/edit/trigger jobs, retry/cancel runs, batches, pause queues, resolve alerts
    ADMINISTER = "administer"  # users, roles, projects, queues, API tokens, alert channels


_RANK = {Role.VIEWER: 0, Role.OPERATOR: 1, Role.ADMIN: 2}
_NEEDS = {Action.READ: Role.VIEWER, Action.OPERATE: Role.OPERATOR, Action.ADMINISTER: Role.ADMIN}


def allows(role: Role | str | None, action: Action, *, superuser: bool = False) -> bool:
    """Whether `role` (in the organization the object belongs to) may perform `action`."""
    if superuser:
        return True
    if role is None:
        return False
    return _RANK[Role(role)] >= _RANK[_NEEDS[action]]


def at_most(granted: Role | str, holder: Role | str) -> bool:
    """Whether a role `granted` (to an API token, an invited user) is no higher than `holder`'s."""
    return _RANK[Role(granted)] <= _RANK[Role(holder)]
