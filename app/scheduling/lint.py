"""Schedule lint: warnings about schedules that are valid but probably not what was meant.

Pure (no I/O, no Flask, no clock: `now` is a parameter). A warning never refuses a schedule; the
adapters show them beside the schedule (web), on stderr (CLI) and in the preview's result (API).

Checks:
- `uneven_step`: a step that does not divide its field (`*/7` minutes fires at :56 and then :00,
  four minutes later);
- `dst_gap` / `dst_fold`: a fixed-hour cron time that falls into a DST gap (runs at the first
  valid instant after it) or fold (runs once, at the first occurrence) of the job's zone within
  the next year;
- `denser_than_timeout`: fires closer together than the job's timeout, so runs overlap whenever a
  run takes long (the overlap policy then decides);
- `rare`: more than a year between two fires (Feb 29: every four years);
- `one_time_past`: a one-time run whose instant has passed (it will never fire).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from app.clock import iso_z
from app.scheduling.cron_fields import FIELD_NAMES, split_expression
from app.scheduling.schedules import CronSchedule, IntervalSchedule, OneTimeSchedule, Schedule
from app.scheduling.timezones import ensure_utc, resolve_timezone

RARE_GAP = timedelta(days=367)
LOOK_AHEAD = timedelta(days=366)
# How many fires the density check compares (cron gaps repeat within a day or a week).
DENSITY_SAMPLE = 200
_FIELD_SIZE = {"minute": 60, "hour": 24}


@dataclass(frozen=True, slots=True)
class LintWarning:
    """One warning: a stable code, the field it is about, and a sentence for people."""

    code: str
    field: str
    message: str

    def to_json(self) -> dict[str, Any]:
        return {"code": self.code, "field": self.field, "message": self.message}

    def __str__(self) -> str:
        return self.message


def lint_schedule(schedule: Schedule, *, now: datetime, timeout_seconds: int | None = None) -> list[LintWarning]:
    """Every warning for `schedule` as seen at `now` (timeout: the job's, when there is a job)."""
    now = ensure_utc(now, "now")
    warnings: list[LintWarning] = []
    if isinstance(schedule, OneTimeSchedule):
        if schedule.run_at <= now:
            warnings.append(
                LintWarning(
                    "one_time_past",
                    "schedule",
                    f"run_at {iso_z(schedule.run_at)} is in the past: this one-time job will never fire "
                    "(trigger it to run it now)",
                )
            )
        return warnings
    if isinstance(schedule, CronSchedule):
        warnings += _uneven_steps(schedule)
        warnings += _dst_warnings(schedule, now)
        warnings += _rare(schedule, now)
    if timeout_seconds:
        warnings += _denser_than_timeout(schedule, now, timeout_seconds)
    return warnings


def lint_json(warnings: list[LintWarning]) -> list[dict[str, Any]]:
    """The warnings as JSON objects (the API's `warnings`, `--json` consumers)."""
    return [warning.to_json() for warning in warnings]


# --- the checks ---------------------------------------------------------------------------


def _uneven_steps(schedule: CronSchedule) -> list[LintWarning]:
    _text, raw = split_expression(schedule.expression.text)
    found = []
    for name, written in zip(FIELD_NAMES, raw):
        size = _FIELD_SIZE.get(name)
        if size is None or "/" not in written:
            continue
        values = sorted(getattr(schedule.expression.fields, name + "s"))
        if len(values) < 2:
            continue
        gaps = [b - a for a, b in zip(values, values[1:])] + [values[0] + size - values[-1]]
        if len(set(gaps)) > 1:
            unit = "minutes" if name == "minute" else "hours"
            shown = ", ".join(map(str, values[:2])) + ", ..., " + str(values[-1])
            found.append(
                LintWarning(
                    "uneven_step",
                    "schedule",
                    f"'{written}' in the {name} field does not divide {size}: it fires at {shown} and again at "
                    f"{values[0]} after {gaps[-1]} {unit}, so the gaps are uneven "
                    f"({' and '.join(str(g) for g in sorted(set(gaps), reverse=True))} {unit}); "
                    f"use a step that divides {size}, or list the values",
                )
            )
    return found


def _transitions(zone_name: str, start: datetime, end: datetime) -> list[datetime]:
    """UTC instants in [start, end) where the zone's UTC offset changes (to the minute)."""
    zone = resolve_timezone(zone_name)
    found = []
    step = timedelta(hours=12)
    low = start
    while low < end:
        high = min(low + step, end)
        if low.astimezone(zone).utcoffset() != high.astimezone(zone).utcoffset():
            a, b = low, high
            while b - a > timedelta(minutes=1):
                mid = a + (b - a) / 2
                if a.astimezone(zone).utcoffset() == mid.astimezone(zone).utcoffset():
                    a = mid
                else:
                    b = mid
            found.append(b.replace(second=0, microsecond=0))
        low = high
    return found


def _dst_warnings(schedule: CronSchedule, now: datetime) -> list[LintWarning]:
    if not schedule.expression.fixed_hour:
        return []  # wildcard-hour jobs follow elapsed time through gaps and folds by design
    found: list[LintWarning] = []
    seen: set[str] = set()
    for transition in _transitions(schedule.timezone, now, now + LOOK_AHEAD):
        current = transition - timedelta(hours=6)
        until = transition + timedelta(hours=6)
        for _ in range(800):
            fire = schedule.fire_after(current)
            if fire is None or fire.instant > until:
                break
            current = fire.instant
            if fire.note and fire.note.startswith(("DST gap", "DST fold")):
                code = "dst_gap" if fire.note.startswith("DST gap") else "dst_fold"
                if code in seen:
                    continue
                seen.add(code)
                local = fire.instant.astimezone(resolve_timezone(schedule.timezone))
                found.append(
                    LintWarning(
                        code,
                        "schedule",
                        f"on {local:%Y-%m-%d} a fire time falls in a DST {code[4:]} of {schedule.timezone} "
                        f"({fire.note}); pick a time the change does not touch, or use UTC",
                    )
                )
    return found


def _rare(schedule: Schedule, now: datetime) -> list[LintWarning]:
    first = schedule.next_after(now)
    if first is None:
        return []
    second = schedule.next_after(first)
    if first - now > RARE_GAP or (second is not None and second - first > RARE_GAP):
        years = ((second or first) - (first if second else now)).days / 365.25
        return [
            LintWarning(
                "rare",
                "schedule",
                f"fires rarely: next at {iso_z(first)}"
                + (f", then {iso_z(second)}" if second else "")
                + f" (about every {years:.0f} years)",
            )
        ]
    return []


def _denser_than_timeout(schedule: Schedule, now: datetime, timeout_seconds: int) -> list[LintWarning]:
    timeout = timedelta(seconds=timeout_seconds)
    if isinstance(schedule, IntervalSchedule):
        shortest = schedule.every
    else:
        shortest = None
        current = schedule.next_after(now)
        for _ in range(DENSITY_SAMPLE):
            if current is None:
                break
            following = schedule.next_after(current)
            if following is None:
                break
            gap = following - current
            shortest = gap if shortest is None else min(shortest, gap)
            current = following
    if shortest is None or shortest >= timeout:
        return []
    return [
        LintWarning(
            "denser_than_timeout",
            "timeout_seconds",
            f"fires every {_seconds(shortest)} but a run may take up to {_seconds(timeout)} (timeout): "
            "runs will overlap whenever one runs long, and the overlap policy decides what happens",
        )
    ]


def _seconds(value: timedelta) -> str:
    total = int(value.total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if total >= size and total % size == 0:
            return f"{total // size}{unit}"
    return f"{total}s"
