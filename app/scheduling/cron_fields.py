"""Parsing and validating the five fields of a cron expression.

We parse the fields ourselves, rather than handing the text to croniter, so
that every refusal names the field at fault and so that croniter's lenient
extensions (seconds/years fields, ``L``, ``W``, ``#``, ``H``, ``?``, ranges that
wrap around) are refused instead of silently accepted. croniter then only
sees a canonical expression made of plain value lists (see ``CronFields``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from app.scheduling.errors import ScheduleError

FIELD_NAMES = ("minute", "hour", "day", "month", "weekday")
_FIELD_HELP = "cron expressions have 5 fields (minute hour day month weekday)"

MACROS = {
    "@hourly": "0 * * * *",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@weekly": "0 0 * * 0",
    "@monthly": "0 0 1 * *",
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
}

_MONTH_NAMES = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_DAY_NAMES = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
_MONTH_TITLES = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
# February counts 29 days: a job on Feb 29 fires in leap years and is valid.
_LONGEST_MONTH = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


@dataclass(frozen=True)
class _FieldSpec:
    name: str
    low: int
    high: int
    names: tuple[str, ...] = ()
    first_name_value: int = 0


_SPECS = (
    _FieldSpec("minute", 0, 59),
    _FieldSpec("hour", 0, 23),
    _FieldSpec("day", 1, 31),
    _FieldSpec("month", 1, 12, _MONTH_NAMES, 1),
    # 7 is accepted as a second spelling of Sunday, as in Vixie cron.
    _FieldSpec("weekday", 0, 7, _DAY_NAMES, 0),
)
_PART = re.compile(r"(?P<start>\*|[0-9a-z]+)(?:-(?P<end>[0-9a-z]+))?(?:/(?P<step>[0-9]+))?")
_UNSUPPORTED = {"l": "'L'", "w": "'W'", "#": "'#'", "h": "'H'", "?": "'?'"}


@dataclass(frozen=True)
class CronFields:
    """The validated value sets of a 5-field expression.

    ``day_restricted``/``weekday_restricted`` record whether the field was
    written as anything other than a bare ``*``; when both are restricted a
    date matches if *either* matches (the Vixie cron and croniter rule).
    """

    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday .. 6 = Saturday
    day_restricted: bool
    weekday_restricted: bool
    fixed_hour: bool

    def croniter_text(self) -> str:
        """A canonical expression for croniter: explicit value lists, no names or ranges."""
        days, weekdays = _joined(self.days, 1, 31), _joined(self.weekdays, 0, 6)
        if self.day_restricted and self.weekday_restricted and "*" in (days, weekdays):
            # croniter collapses a full list to "*" and would then AND the two
            # fields; under the OR rule a full list means "every day".
            days, weekdays = "*", "*"
        elif not self.day_restricted:
            days = "*"
        elif not self.weekday_restricted:
            weekdays = "*"
        return " ".join(
            (_joined(self.minutes, 0, 59), _joined(self.hours, 0, 23), days, _joined(self.months, 1, 12), weekdays)
        )


def split_expression(text: str) -> tuple[str, tuple[str, ...]]:
    """Return (normalised text, the five field strings), expanding macros."""
    if not isinstance(text, str):
        raise ScheduleError(f"cron expression must be a string, got {type(text).__name__}")
    normalised = " ".join(text.split())
    if not normalised:
        raise ScheduleError("cron expression is empty")
    if normalised.startswith("@"):
        normalised = normalised.lower()
        if normalised not in MACROS:
            raise ScheduleError(f"unknown cron macro '{normalised}'; supported: " + ", ".join(MACROS))
        return normalised, tuple(MACROS[normalised].split())
    fields = tuple(normalised.split(" "))
    if len(fields) in (6, 7):
        raise ScheduleError(f"{_FIELD_HELP}; got {len(fields)} — seconds and years are not supported")
    if len(fields) != 5:
        raise ScheduleError(f"{_FIELD_HELP}; got {len(fields)}")
    return normalised, fields


def parse_fields(fields: tuple[str, ...]) -> CronFields:
    """Validate five field strings and expand them to value sets."""
    values = [_parse_field(spec, text) for spec, text in zip(_SPECS, fields)]
    weekdays = frozenset(0 if day == 7 else day for day in values[4])
    parsed = CronFields(
        minutes=values[0],
        hours=values[1],
        days=values[2],
        months=values[3],
        weekdays=weekdays,
        day_restricted=fields[2] != "*",
        weekday_restricted=fields[4] != "*",
        # Vixie's rule for DST: an hour field starting with "*" ("*", "*/2")
        # follows elapsed time; anything else names wall-clock hours.
        fixed_hour=not fields[1].startswith("*"),
    )
    _check_can_fire(parsed, " ".join(fields))
    return parsed


def _parse_field(spec: _FieldSpec, text: str) -> frozenset[int]:
    def refuse(reason: str) -> ScheduleError:
        return ScheduleError(f"invalid {spec.name} field '{written}': {reason}")

    written, text = text, text.lower()
    for char, shown in _UNSUPPORTED.items():
        if char in text and not (spec.names and any(char in name for name in spec.names)):
            raise refuse(f"{shown} is not supported (standard 5-field cron only)")
    values: set[int] = set()
    for part in text.split(","):
        match = _PART.fullmatch(part)
        if not match:
            raise refuse(f"cannot read '{part}'" if part else "empty list item")
        start, end, step_text = match.group("start", "end", "step")
        step = 1 if step_text is None else _small_int(step_text, refuse)
        if step < 1:
            raise refuse(f"step must be at least 1, got {step}")
        if start == "*":
            if end is not None:
                raise refuse(f"cannot read '{part}'")
            low, high = spec.low, spec.high
        else:
            low = _value(spec, start, refuse)
            # "5/15" means "from 5 to the end, every 15", as in croniter.
            high = _value(spec, end, refuse) if end else (spec.high if step_text else low)
            if high < low:
                raise refuse(f"range {start}-{end} runs backwards; list both parts instead")
        values.update(range(low, high + 1, step))
    return frozenset(values)


def _small_int(digits: str, refuse) -> int:
    # int() refuses more than 4300 digits with a ValueError of its own; no field needs more than 2.
    if len(digits) > 9:
        raise refuse(f"{digits[:12]}... is far out of range")
    return int(digits)


def _value(spec: _FieldSpec, token: str, refuse) -> int:
    if token.isdigit():
        number = _small_int(token, refuse)
    elif token in spec.names:
        number = spec.names.index(token) + spec.first_name_value
    elif spec.names:
        raise refuse(f"'{token}' is not a number or a name ({spec.names[0]}..{spec.names[-1]})")
    else:
        raise refuse(f"'{token}' is not a number")
    if not spec.low <= number <= spec.high:
        raise refuse(f"{number} is out of range {spec.low}-{spec.high}")
    return number


def _check_can_fire(fields: CronFields, text: str) -> None:
    """Refuse day-of-month/month combinations that never occur (Feb 30, Apr 31)."""
    if fields.weekday_restricted and fields.day_restricted:
        return  # OR rule: the weekday alone matches at least weekly
    if not fields.day_restricted:
        return
    first_day = min(fields.days)
    if all(first_day > _LONGEST_MONTH[month - 1] for month in fields.months):
        days = sorted(fields.days)
        months = [_MONTH_TITLES[month - 1] for month in sorted(fields.months)]
        month_text = months[0] if len(months) == 1 else ", ".join(months[:-1]) + " or " + months[-1]
        if len(days) == 1:
            reason = f"day {days[0]} never occurs in {month_text}"
        else:
            day_text = ", ".join(map(str, days[:-1])) + f" and {days[-1]}"
            reason = f"days {day_text} never occur in {month_text}"
        raise ScheduleError(f"cron expression '{text}' can never fire: {reason}")


def _joined(values: frozenset[int], low: int, high: int) -> str:
    if values == frozenset(range(low, high + 1)):
        return "*"
    return ",".join(map(str, sorted(values)))
