"""Previewing the next fire times of a schedule, with DST adjustments marked."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from app.clock import iso_z
from app.scheduling.errors import ScheduleError
from app.scheduling.schedules import Schedule
from app.scheduling.timezones import ensure_utc, resolve_timezone

MAX_PREVIEW_COUNT = 1000


@dataclass(frozen=True, slots=True)
class PreviewItem:
    """One upcoming fire: the instant in UTC, the same instant in the job zone, and a DST note."""

    utc: datetime
    local: datetime
    note: str | None = None

    def to_json(self) -> dict[str, Any]:
        """``{"utc": "...Z", "local": "2026-03-08T03:00:00-04:00", "note": ... or None}``."""
        return {"utc": iso_z(self.utc), "local": self.local.isoformat(), "note": self.note}


def preview(schedule: Schedule, after: datetime, count: int) -> list[PreviewItem]:
    """The next ``count`` (1..1000) fires strictly after ``after``; fewer if the schedule ends."""
    if isinstance(count, bool) or not isinstance(count, int):
        raise ScheduleError(f"preview count must be a whole number, got {count!r}")
    if not 1 <= count <= MAX_PREVIEW_COUNT:
        raise ScheduleError(f"preview count must be between 1 and {MAX_PREVIEW_COUNT}, got {count}")
    zone = resolve_timezone(schedule.timezone)
    items: list[PreviewItem] = []
    current = ensure_utc(after, "after")
    while len(items) < count:
        fire = schedule.fire_after(current)
        if fire is None:
            break
        items.append(PreviewItem(fire.instant, fire.instant.astimezone(zone), fire.note))
        current = fire.instant
    return items
