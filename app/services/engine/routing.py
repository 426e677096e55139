"""Reading the routing tables for the engine: the routes of every project and job, and each
project's channels as the rules of app/domain/notify_routing.py see them.

Both tables are small (one row per project default, per job override, per channel), so a pass
reads them whole once and decides in memory.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from sqlalchemy import select
from sqlalchemy.engine import Connection

from app.domain.notify_routing import ChannelRules, Route, effective_route
from app.models import AlertChannel, NotificationRoute

channels_t, routes_t = AlertChannel.__table__, NotificationRoute.__table__


@dataclass
class RoutingTables:
    """Every route and every enabled channel, by project."""

    project_routes: dict[int, Route] = field(default_factory=dict)
    job_routes: dict[int, Route] = field(default_factory=dict)
    channels: dict[int, list[ChannelRules]] = field(default_factory=lambda: defaultdict(list))
    muted: set[int] = field(default_factory=set)  # jobs whose alerts and notices are muted now

    def route_for(self, job_id: int | None, project_id: int | None) -> Route:
        """The route a job's events follow (a job of no project: the built-in default)."""
        job_route = self.job_routes.get(job_id) if job_id is not None else None
        project_route = self.project_routes.get(project_id) if project_id is not None else None
        return effective_route(job_route, project_route)

    def success_projects(self) -> set[int]:
        """Projects whose default notifies every success."""
        return {pid for pid, route in self.project_routes.items() if "success" in route.events}

    def success_jobs(self) -> set[int]:
        """Jobs whose override notifies every success."""
        return {jid for jid, route in self.job_routes.items() if "success" in route.events}


def channel_rules(row: object) -> ChannelRules:
    """A channel row as the routing rules see it."""
    return ChannelRules(
        id=row.id,  # type: ignore[attr-defined]
        enabled=bool(row.enabled),  # type: ignore[attr-defined]
        kinds=tuple(row.kinds or ()),  # type: ignore[attr-defined]
        group_seconds=int(row.group_seconds or 0),  # type: ignore[attr-defined]
        quiet_start=row.quiet_start,  # type: ignore[attr-defined]
        quiet_end=row.quiet_end,  # type: ignore[attr-defined]
        quiet_timezone=row.quiet_timezone,  # type: ignore[attr-defined]
    )


def load(conn: Connection) -> RoutingTables:
    """Read every route and every enabled channel."""
    tables = RoutingTables()
    for row in conn.execute(select(routes_t)):
        channels = tuple(row.channel_ids) if row.channel_ids is not None else None
        route = Route(tuple(row.events or ()), channels, "job" if row.job_id is not None else "project")
        if row.job_id is None:
            tables.project_routes[row.project_id] = route
        else:
            tables.job_routes[row.job_id] = route
    for row in conn.execute(select(channels_t).where(channels_t.c.enabled).order_by(channels_t.c.id)):
        tables.channels[row.project_id].append(channel_rules(row))
    return tables
