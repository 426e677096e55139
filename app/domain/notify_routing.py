"""Notification routing rules: which events a job notifies, to which channels, and when a
channel's next message may go (grouping and quiet windows).

Pure: rows in as plain values, decisions out. No I/O, no Flask, no SQLAlchemy, no clock (every
instant is a parameter).

- A job's override, when it has one, replaces its project's default; a project without a
  default notifies DEFAULT_EVENTS to every channel of the project.
- A route names its channels, or none (every channel of the project; a job's override without
  channels: the project default's channels). A channel limited to some kinds receives only those.
- Grouping: one message per channel, job and event per `group_seconds`; what happens in between
  is counted on the next message, sent when the window since the last one has passed.
- A quiet window ("22:00"-"07:00" in a time zone) holds a message due inside it until it ends.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

EVENTS = ("failure", "dead_letter", "overdue", "recovery", "success")
# What a project notifies before anyone sets its routing: what needs a person, and the all-clear.
DEFAULT_EVENTS = ("dead_letter", "overdue", "recovery")
# The alert kinds that are routing events (the other alert kinds go to every channel as before).
ROUTED_ALERT_KINDS = ("dead_letter", "overdue")


@dataclass(frozen=True)
class Route:
    """The events notified and the channels (ids) they go to; None: every channel of the project."""

    events: tuple[str, ...]
    channel_ids: tuple[int, ...] | None
    source: str  # "job", "project" or "default": where the route came from


@dataclass(frozen=True)
class ChannelRules:
    """What routing needs of a channel."""

    id: int
    enabled: bool
    kinds: tuple[str, ...]  # empty: every kind
    group_seconds: int
    quiet_start: str | None
    quiet_end: str | None
    quiet_timezone: str | None


def effective_route(job_route: Route | None, project_route: Route | None) -> Route:
    """The route a job's events follow: its override, else its project's default, else DEFAULT_EVENTS."""
    base = project_route or Route(DEFAULT_EVENTS, None, "default")
    if job_route is None:
        return base
    channels = job_route.channel_ids if job_route.channel_ids is not None else base.channel_ids
    return Route(job_route.events, channels, "job")


def routed_channels(route: Route, event: str, channels: Iterable[ChannelRules]) -> list[ChannelRules]:
    """The channels an `event` of a job following `route` goes to."""
    if event not in route.events:
        return []
    wanted = None if route.channel_ids is None else set(route.channel_ids)
    return [
        c for c in channels if c.enabled and (wanted is None or c.id in wanted) and (not c.kinds or event in c.kinds)
    ]


def parse_events(text: str | Sequence[str]) -> tuple[str, ...]:
    """Events from "failure,recovery" (or a list); "none" (or nothing) is no event. Raises
    ValueError naming what is unknown."""
    items = [e.strip() for e in (text.split(",") if isinstance(text, str) else text) if e and e.strip()]
    if items == ["none"]:
        return ()
    unknown = [e for e in items if e not in EVENTS]
    if unknown:
        raise ValueError(f"unknown event(s) {', '.join(unknown)}; known: {', '.join(EVENTS)} (or none)")
    return tuple(e for e in EVENTS if e in items)


def _clock_time(text: str) -> time:
    hours, _, minutes = text.partition(":")
    if not (hours.isdigit() and minutes.isdigit() and len(hours) <= 2 and len(minutes) == 2):
        raise ValueError(f"{text!r} is not a time of day (HH:MM)")
    if int(hours) > 23 or int(minutes) > 59:
        raise ValueError(f"{text!r} is not a time of day (HH:MM)")
    return time(int(hours), int(minutes))


def parse_quiet(text: str) -> tuple[str, str] | None:
    """A quiet window from "22:00-07:00" as ("22:00", "07:00"); "off" (or nothing) is none.
    Raises ValueError for anything else."""
    text = text.strip()
    if text in ("", "off", "none"):
        return None
    start, sep, end = text.partition("-")
    if not sep:
        raise ValueError(f"{text!r} is not a quiet window (HH:MM-HH:MM, or off)")
    first, last = _clock_time(start.strip()), _clock_time(end.strip())
    if first == last:
        raise ValueError("a quiet window needs different start and end times")
    return first.strftime("%H:%M"), last.strftime("%H:%M")


def check_timezone(name: str) -> str:
    """`name` if it is an IANA time zone; raises ValueError otherwise."""
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError) as exc:  # OSError: a name no file could have
        raise ValueError(f"unknown time zone {name!r}") from exc
    return name


def quiet_until(now: datetime, start: str | None, end: str | None, zone: str | None) -> datetime | None:
    """The instant (UTC) a quiet window holding `now` ends, or None when `now` is outside it."""
    if not start or not end:
        return None
    tz = ZoneInfo(zone or "UTC")
    local = now.astimezone(tz)
    first, last, at = _clock_time(start), _clock_time(end), local.time()
    inside = first <= at < last if first < last else (at >= first or at < last)
    if not inside:
        return None
    day = local.date() if at < last else local.date() + timedelta(days=1)
    return datetime.combine(day, last, tzinfo=tz).astimezone(UTC)


def send_at(now: datetime, channel: ChannelRules, *, last_message_at: datetime | None) -> datetime:
    """When a new message of a group may go to `channel`: now, or when the grouping window since
    the group's last message ends, moved past the channel's quiet window."""
    at = now
    if last_message_at is not None and channel.group_seconds:
        at = max(at, last_message_at + timedelta(seconds=channel.group_seconds))
    held = quiet_until(at, channel.quiet_start, channel.quiet_end, channel.quiet_timezone)
    return held or at
