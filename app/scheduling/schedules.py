"""The three schedule kinds behind one interface, and building them from stored JSON.

A schedule only answers "when is the first fire strictly after this instant?";
it never asks what time it is. Stored form (``Job.schedule``), per type:

* ``one_time``: ``{"run_at": "2026-01-01T12:00:00Z"}``
* ``interval``: ``{"every": "5m", "start_at": "2026-01-01T12:00:00Z"}``
* ``cron``: ``{"expression": "0 9 * * 1-5"}`` (timezone kept beside it on the job)
"""

from __future__ import annotations

import abc
import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, ClassVar

from app.clock import iso_z
from app.scheduling.cron import CronExpression, Fire
from app.scheduling.durations import format_interval, parse_interval
from app.scheduling.errors import ScheduleError
from app.scheduling.timezones import ensure_utc, parse_instant, resolve_timezone

SCHEDULE_TYPES = ("one_time", "interval", "cron")


@dataclass(frozen=True)
class ScheduleInput:
    """How an operator gives one schedule type: the key of its stored value, and the option
    (CLI `--every`, form input `every`) that carries that value as text."""

    key: str
    option: str

    @property
    def flag(self) -> str:
        """The option as a CLI flag: `--run-at`."""
        return "--" + self.option.replace("_", "-")


# The one map from schedule type to its input, in the order forms and messages list them.
SCHEDULE_INPUTS: dict[str, ScheduleInput] = {
    "interval": ScheduleInput(key="every", option="every"),
    "cron": ScheduleInput(key="expression", option="cron"),
    "one_time": ScheduleInput(key="run_at", option="run_at"),
}


class Schedule(abc.ABC):
    """When a job fires. Implementations are immutable and never read the clock."""

    schedule_type: ClassVar[str]
    timezone: str  # IANA name the schedule is interpreted (and displayed) in

    @abc.abstractmethod
    def fire_after(self, instant: datetime) -> Fire | None:
        """The first fire strictly after ``instant`` with its DST note, or None if none remain."""

    def next_after(self, instant: datetime) -> datetime | None:
        """The first fire instant (aware UTC) strictly after ``instant``, or None."""
        fire = self.fire_after(instant)
        return None if fire is None else fire.instant

    @abc.abstractmethod
    def describe(self) -> str:
        """A one-line human description, e.g. ``every 5m from 2026-01-01T12:00:00Z``."""

    @abc.abstractmethod
    def to_json(self) -> dict[str, Any]:
        """The normalised storage form; ``parse_schedule`` of it gives an equal schedule."""

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Schedule):
            return NotImplemented
        return (self.schedule_type, self.timezone, self.to_json()) == (
            other.schedule_type,
            other.timezone,
            other.to_json(),
        )

    def __hash__(self) -> int:
        return hash((self.schedule_type, self.timezone, json.dumps(self.to_json(), sort_keys=True)))

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.to_json()} {self.timezone}>"


class OneTimeSchedule(Schedule):
    """Fires once, at ``run_at``."""

    schedule_type = "one_time"

    def __init__(self, run_at: datetime, timezone: str = "UTC") -> None:
        self.timezone = resolve_timezone(timezone).key
        self.run_at = ensure_utc(run_at, "run_at")

    def fire_after(self, instant: datetime) -> Fire | None:
        return Fire(self.run_at) if self.run_at > ensure_utc(instant) else None

    def describe(self) -> str:
        local = self.run_at.astimezone(resolve_timezone(self.timezone))
        text = f"once at {iso_z(self.run_at)}"
        if self.timezone != "UTC":
            text += f" ({local:%Y-%m-%d %H:%M} {local.tzname()}, {self.timezone})"
        return text

    def to_json(self) -> dict[str, Any]:
        return {"run_at": iso_z(self.run_at)}


class IntervalSchedule(Schedule):
    """Fires at ``start_at + k * every`` for k >= 0, in real elapsed time (no drift)."""

    schedule_type = "interval"

    def __init__(self, every: timedelta, start_at: datetime, timezone: str = "UTC") -> None:
        if not isinstance(every, timedelta) or every <= timedelta(0):
            raise ScheduleError(f"interval must be a positive timedelta, got {every!r}")
        self.every = every
        self.start_at = ensure_utc(start_at, "start_at")
        # Kept for display only: elapsed time has no zone.
        self.timezone = resolve_timezone(timezone).key

    def fire_after(self, instant: datetime) -> Fire | None:
        instant = ensure_utc(instant)
        if instant < self.start_at:
            return Fire(self.start_at)
        # Whole intervals elapsed since the anchor; timedelta // timedelta is
        # exact integer arithmetic on microseconds, so there is no float drift.
        elapsed = (instant - self.start_at) // self.every
        try:
            return Fire(self.start_at + (elapsed + 1) * self.every)
        except OverflowError:
            return None  # past year 9999

    def describe(self) -> str:
        return f"every {format_interval(self.every)} from {iso_z(self.start_at)}"

    def to_json(self) -> dict[str, Any]:
        return {"every": format_interval(self.every), "start_at": iso_z(self.start_at)}


class CronSchedule(Schedule):
    """Fires on a cron expression evaluated in ``timezone`` under the DST policy of ``cron``."""

    schedule_type = "cron"

    def __init__(self, expression: CronExpression | str, timezone: str = "UTC") -> None:
        self._zone = resolve_timezone(timezone)
        if not isinstance(expression, CronExpression):
            expression = CronExpression.parse(expression)
        self.expression = expression
        self.timezone = self._zone.key

    def fire_after(self, instant: datetime) -> Fire | None:
        return self.expression.fire_after(instant, self._zone)

    def describe(self) -> str:
        kind = "fixed hour" if self.expression.fixed_hour else "elapsed time"
        return f"cron '{self.expression.text}' in {self.timezone} ({kind} DST rule)"

    def to_json(self) -> dict[str, Any]:
        return {"expression": self.expression.text}


# Keys a stored value may hold besides its type's input key.
_OPTIONAL_KEYS = {"interval": {"start_at"}}


def parse_schedule(
    schedule_type: str,
    value: dict[str, Any] | str,
    timezone: str = "UTC",
    *,
    anchor: datetime | None = None,
) -> Schedule:
    """Build a validated schedule from its type and stored/user value (dict or JSON text).

    For ``interval`` values without ``start_at`` the caller passes ``anchor``
    (the creation instant); the schedule then starts one interval later
    (``start_at = anchor + every``) and its ``to_json`` records that start_at,
    so the phase is fixed from then on.
    """
    _check_type(schedule_type)
    zone = resolve_timezone(timezone)
    value = _as_mapping(value)
    required, optional = {SCHEDULE_INPUTS[schedule_type].key}, _OPTIONAL_KEYS.get(schedule_type, set())
    unknown = sorted(str(key) for key in value if key not in required | optional)
    if unknown:
        allowed = ", ".join(sorted(required | optional))
        raise ScheduleError(
            f"unknown key{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))} "
            f"in {schedule_type} schedule; allowed: {allowed}"
        )
    missing = sorted(required - value.keys())
    if missing:
        raise ScheduleError(f"{schedule_type} schedule needs {', '.join(map(repr, missing))}")

    if schedule_type == "one_time":
        return OneTimeSchedule(parse_instant(value["run_at"], zone, "run_at"), timezone)
    if schedule_type == "cron":
        return CronSchedule(CronExpression.parse(value["expression"]), timezone)
    every = parse_interval(value["every"])
    if "start_at" in value:
        start_at = parse_instant(value["start_at"], zone, "start_at")
    elif anchor is not None:
        try:
            start_at = ensure_utc(anchor, "anchor") + every
        except OverflowError:
            raise ScheduleError("interval schedule would start after the year 9999") from None
    else:
        raise ScheduleError("interval schedule needs 'start_at' (or an anchor when it is created)")
    return IntervalSchedule(every, start_at, timezone)


def schedule_value_from_options(
    schedule_type: str,
    *,
    schedule_value: dict[str, Any] | str | None = None,
    **texts: str | None,
) -> dict[str, Any]:
    """Build a schedule value from CLI/form options (`every=`, `cron=`, `run_at=`: the options of
    SCHEDULE_INPUTS, None when not given), refusing missing or contradictory ones."""
    unknown = sorted(set(texts) - {i.option for i in SCHEDULE_INPUTS.values()})
    if unknown:
        raise TypeError(f"unknown schedule option(s): {', '.join(unknown)}")
    _check_type(schedule_type)
    given = {i.flag: texts[i.option] for i in SCHEDULE_INPUTS.values() if texts.get(i.option) is not None}
    if schedule_value is not None:
        if given:
            raise ScheduleError(f"--schedule-value cannot be combined with {', '.join(given)}")
        return _as_mapping(schedule_value)
    for kind, schedule_input in SCHEDULE_INPUTS.items():
        if schedule_input.flag in given and kind != schedule_type:
            raise ScheduleError(f"{schedule_input.flag} is only valid for {kind} schedules")
    needed = SCHEDULE_INPUTS[schedule_type]
    if needed.flag not in given:
        raise ScheduleError(f"{schedule_type} schedules need {needed.flag} (or --schedule-value)")
    return {needed.key: given[needed.flag]}


def occurrences_between(
    schedule: Schedule,
    after_exclusive: datetime,
    until_inclusive: datetime,
    limit: int | None = None,
) -> list[datetime]:
    """Fire instants in (after_exclusive, until_inclusive], at most ``limit`` of them."""
    until = ensure_utc(until_inclusive, "until_inclusive")
    found: list[datetime] = []
    current = ensure_utc(after_exclusive, "after_exclusive")
    while limit is None or len(found) < limit:
        current = schedule.next_after(current)
        if current is None or current > until:
            break
        found.append(current)
    return found


def _as_mapping(value: dict[str, Any] | str) -> dict[str, Any]:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as error:
            raise ScheduleError(f"schedule value is not valid JSON: {error.msg} (at character {error.pos})") from None
    if not isinstance(value, dict):
        raise ScheduleError(f"schedule value must be a JSON object, got {type(value).__name__}")
    return value


def _check_type(schedule_type: str) -> None:
    if schedule_type not in SCHEDULE_TYPES:
        raise ScheduleError(f"unknown schedule type {schedule_type!r}; use one_time, interval or cron")
