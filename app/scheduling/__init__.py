"""Cronwell's pure schedule engine.

Rule for this package: no I/O, no Flask, no SQLAlchemy and no ``datetime.now()``.
Every function takes the instants it needs as parameters; every instant in or
out is a timezone-aware UTC datetime (naive datetimes are refused with
ValueError). Timezones are IANA names resolved with ``zoneinfo``; cron fields
are matched with ``croniter`` on local wall-clock times, and Cronwell's DST rule
(Vixie cron's, see ``cron.py`` and docs/adr/0005-dst-rule.md) is applied on top.
"""

from app.scheduling.cron import CronExpression, Fire
from app.scheduling.durations import format_interval, parse_interval
from app.scheduling.errors import ScheduleError
from app.scheduling.preview import PreviewItem, preview
from app.scheduling.schedules import (
    SCHEDULE_INPUTS,
    SCHEDULE_TYPES,
    CronSchedule,
    IntervalSchedule,
    OneTimeSchedule,
    Schedule,
    ScheduleInput,
    occurrences_between,
    parse_schedule,
    schedule_value_from_options,
)

__all__ = [
    "SCHEDULE_INPUTS",
    "SCHEDULE_TYPES",
    "CronExpression",
    "CronSchedule",
    "Fire",
    "IntervalSchedule",
    "OneTimeSchedule",
    "PreviewItem",
    "Schedule",
    "ScheduleError",
    "ScheduleInput",
    "format_interval",
    "occurrences_between",
    "parse_interval",
    "parse_schedule",
    "preview",
    "schedule_value_from_options",
]
