"""Interval durations: parsing what operators type, and formatting for display.

Accepted forms (all positive, whole seconds, at most ``MAX_INTERVAL``):

* a number of seconds: ``30``, ``1.5e3``, ``"30"``;
* a string with units: ``"45s"``, ``"2m"``, ``"1h"``, ``"1d"``, ``"2w"``, ``"1.5h"``,
  ``"90 seconds"``, ``"5 minutes"``, and compounds such as ``"1h30m"`` (the
  form ``format_interval`` writes, so display and storage round-trip);
* a mapping: ``{"minutes": 5}``, ``{"seconds": 10, "minutes": 1}`` with keys
  seconds, minutes, hours, days, weeks.
"""

from __future__ import annotations

import json
import math
import re
from datetime import timedelta
from typing import Any

from app.scheduling.errors import ScheduleError

# Beyond ten years an interval is a one-off in disguise, and the bound keeps
# anchor + k * every far away from datetime's year-9999 overflow.
MAX_INTERVAL = timedelta(days=3650)

_UNIT_SECONDS = {"seconds": 1, "minutes": 60, "hours": 3600, "days": 86400, "weeks": 604800}
_UNIT_ALIASES = {
    **dict.fromkeys(("s", "sec", "secs", "second", "seconds"), "seconds"),
    **dict.fromkeys(("m", "min", "mins", "minute", "minutes"), "minutes"),
    **dict.fromkeys(("h", "hr", "hrs", "hour", "hours"), "hours"),
    **dict.fromkeys(("d", "day", "days"), "days"),
    **dict.fromkeys(("w", "wk", "wks", "week", "weeks"), "weeks"),
}
_NUMBER = r"\d+(?:\.\d+)?|\.\d+"
_PART = re.compile(rf"\s*({_NUMBER})\s*([a-z]+)\s*")
_BARE_NUMBER = re.compile(rf"\s*({_NUMBER})\s*")
_SHOWN_UNITS = (("w", 604800), ("d", 86400), ("h", 3600), ("m", 60))


def parse_interval(value: Any) -> timedelta:
    """Parse an interval given as seconds, a unit string or a mapping into a timedelta."""
    shown = _show(value)
    if isinstance(value, bool):
        # bool is an int subclass: True would silently mean one second.
        raise ScheduleError(f'interval must be a duration such as "30s" or {{"minutes": 5}}, got the boolean {shown}')
    if value is None:
        raise ScheduleError("interval is empty")
    if isinstance(value, (int, float)):
        seconds = value
    elif isinstance(value, str):
        seconds = _seconds_from_text(value, shown)
    elif isinstance(value, dict):
        seconds = _seconds_from_mapping(value, shown)
    else:
        raise ScheduleError(
            f'interval must be a number of seconds, a string like "30s" or a mapping like '
            f'{{"minutes": 5}}, got {type(value).__name__}'
        )
    return _checked(seconds, shown)


def format_interval(interval: timedelta) -> str:
    """Format a positive timedelta compactly, largest unit first: ``1h30m``, ``45s``."""
    if not isinstance(interval, timedelta):
        raise TypeError(f"interval must be a timedelta, got {type(interval).__name__}")
    if interval <= timedelta(0):
        return "0s" if interval == timedelta(0) else "-" + format_interval(-interval)
    whole, micro = divmod(interval // timedelta(microseconds=1), 1_000_000)
    parts = []
    for suffix, size in _SHOWN_UNITS:
        count, whole = divmod(whole, size)
        if count:
            parts.append(f"{count}{suffix}")
    if whole or micro:
        # Fractions only occur for timedeltas built elsewhere; parse_interval refuses them.
        seconds = f"{whole}.{micro:06d}".rstrip("0") if micro else str(whole)
        parts.append(f"{seconds}s")
    return "".join(parts)


def _seconds_from_text(text: str, shown: str) -> float:
    cleaned = text.strip().lower()
    if not cleaned:
        raise ScheduleError("interval is empty")
    if cleaned.startswith("-"):
        raise ScheduleError(f"interval must be positive, got {shown}")
    if cleaned in ("inf", "+inf", "infinity", "nan"):
        raise ScheduleError(f"interval must be a finite duration, got {shown}")
    bare = _BARE_NUMBER.fullmatch(cleaned)
    if bare:
        return float(bare.group(1))
    total = 0.0
    seen: set[str] = set()
    position = 0
    for part in _PART.finditer(cleaned):
        if part.start() != position:
            break
        position = part.end()
        number, unit_text = part.groups()
        unit = _UNIT_ALIASES.get(unit_text)
        if unit is None:
            raise ScheduleError(
                f'unknown interval unit "{unit_text}" in {shown}; use s, m, h, d or w (or seconds, minutes, hours, days, weeks)'
            )
        if unit in seen:
            raise ScheduleError(f"interval {shown} gives {unit} more than once")
        seen.add(unit)
        total += float(number) * _UNIT_SECONDS[unit]
    if position != len(cleaned) or not seen:
        raise ScheduleError(f'interval {shown} is not a duration; write e.g. "30s", "5m", "1h30m" or "2 days"')
    return total


def _seconds_from_mapping(mapping: dict, shown: str) -> float:
    if not mapping:
        raise ScheduleError("interval is empty")
    unknown = sorted(str(key) for key in mapping if key not in _UNIT_SECONDS)
    if unknown:
        names = ", ".join(f"'{key}'" for key in unknown)
        raise ScheduleError(
            f"unknown interval key{'s' if len(unknown) > 1 else ''} {names}; use seconds, minutes, hours, days or weeks"
        )
    total = 0.0
    for unit, amount in mapping.items():
        if isinstance(amount, bool) or not isinstance(amount, (int, float)):
            raise ScheduleError(f"interval {unit} must be a number, got {_show(amount)}")
        if not math.isfinite(amount):
            raise ScheduleError(f"interval {unit} must be a finite number, got {_show(amount)}")
        if amount < 0:
            raise ScheduleError(f"interval {unit} must not be negative, got {_show(amount)}")
        total += amount * _UNIT_SECONDS[unit]
    return total


def _checked(seconds: float, shown: str) -> timedelta:
    if not math.isfinite(seconds):
        raise ScheduleError(f"interval must be a finite duration, got {shown}")
    if seconds <= 0:
        raise ScheduleError(f"interval must be positive, got {shown}")
    if seconds > MAX_INTERVAL.total_seconds():
        raise ScheduleError(f"interval must be at most {MAX_INTERVAL.days} days, got {shown}")
    # Schedules are stored and compared at one-second resolution; "1.5s" would
    # be silently truncated, so refuse it instead. Round away float noise first
    # ("0.1h" is 360.00000000000006 seconds as a float); a tiny positive float
    # such as 1e-120 rounds to 0 seconds, which is no interval either.
    rounded = round(seconds)
    if rounded < 1 or abs(seconds - rounded) > 1e-6:
        raise ScheduleError(f"interval must be a whole number of seconds, got {shown}")
    return timedelta(seconds=rounded)


def _show(value: Any) -> str:
    """Render a value as the operator wrote it, JSON-style: "0s", 0, {"minutes": 0}."""
    try:
        return json.dumps(value, allow_nan=True)
    except (TypeError, ValueError):
        return repr(value)
