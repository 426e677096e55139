"""A backfill request, declared once for the web form, `flask job backfill` and the API.

What an operator gives: the window (`from`, `to`: ISO 8601 instants; without an offset, the job's
local time), at most how many runs (`max`), an overlap policy for these runs (`overlap`, default
the job's) and `dry_run`. `BackfillSchema(now=..., timezone=...)` parses all of it, once, with
errors keyed by those names; `window_errors` holds the rules about the window itself, which the
use case applies again to values given to it directly (tests, other services).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from marshmallow import EXCLUDE, Schema, ValidationError, post_load, validates_schema

from app.clock import iso_z
from app.definitions.fields import Choice, Flag, OptionalWholeNumber, Text, TextLength, shown
from app.domain.states import OverlapPolicy, values
from app.scheduling import ScheduleError
from app.scheduling.timezones import parse_instant, resolve_timezone

MAX_BACKFILL = 1000  # runs one request may create; run it again for the rest
MAX_WINDOW = timedelta(days=3660)


def window_errors(
    start: datetime, end: datetime, *, now: datetime, max_runs: int | None = None, overlap: str | None = None
) -> dict[str, str]:
    """What is wrong with a backfill window, keyed by the input at fault (none: it may run)."""
    errors: dict[str, str] = {}
    if end < start:
        errors["to"] = "the window ends before it starts"
    elif end > now:
        errors["to"] = f"a backfill covers the past: --to must not be after now ({iso_z(now)})"
    elif end - start > MAX_WINDOW:
        errors["to"] = f"a window may span at most {MAX_WINDOW.days} days"
    if max_runs is not None and not 1 <= max_runs <= MAX_BACKFILL:
        errors["max"] = f"must be between 1 and {MAX_BACKFILL}"
    if overlap is not None and overlap not in values(OverlapPolicy):
        errors["overlap"] = "must be allow, queue or skip"
    return errors


class BackfillSchema(Schema):
    """One backfill request. Construct with `now` and the job's `timezone`; `load` returns
    {"start", "end" (aware datetimes), "max_runs", "overlap", "dry_run"}."""

    class Meta:
        unknown = EXCLUDE

    start = Text(
        data_key="from",
        required=True,
        validate=TextLength(min=1, max=64),
        metadata=shown(
            "From",
            "Start of the past window (inclusive); without an offset, the job's local time.",
            metavar="ISO",
        ),
    )
    end = Text(
        data_key="to",
        required=True,
        validate=TextLength(min=1, max=64),
        metadata=shown("To", "End of the window (inclusive), not after now.", metavar="ISO"),
    )
    max_runs = OptionalWholeNumber(
        1,
        MAX_BACKFILL,
        data_key="max",
        load_default=None,
        metadata=shown("At most", f"Create at most this many runs (default {MAX_BACKFILL}).", metavar="N"),
    )
    overlap = Choice(
        OverlapPolicy,
        allow_none=True,
        load_default=None,
        metadata=shown(
            "Overlap policy",
            "Overlap policy for these runs (default: the job's). allow: run together; queue: one at a time, "
            "in order; skip: run the first, record the rest missed.",
        ),
    )
    dry_run = Flag(load_default=False, metadata=shown("Dry run", "List what would be created; write nothing."))

    def __init__(self, *, now: datetime | None, timezone: str = "UTC", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.now, self.timezone = now, timezone

    def _instant(self, text: str, key: str) -> datetime:
        return parse_instant(text, resolve_timezone(self.timezone), key)

    @validates_schema
    def _check(self, data: dict[str, Any], **kwargs: Any) -> None:
        errors: dict[str, str] = {}
        instants: dict[str, datetime] = {}
        for name, key in (("start", "from"), ("end", "to")):
            try:
                instants[name] = self._instant(data[name], key)
            except (ScheduleError, ValueError) as exc:
                errors[key] = str(exc)
        if not errors and self.now is not None:
            errors = window_errors(
                instants["start"], instants["end"], now=self.now, max_runs=data.get("max_runs"), overlap=None
            )
        if errors:
            raise ValidationError(errors)

    @post_load
    def _resolve(self, data: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return {
            "start": self._instant(data["start"], "from"),
            "end": self._instant(data["end"], "to"),
            "max_runs": data.get("max_runs"),
            "overlap": data.get("overlap") or None,
            "dry_run": bool(data.get("dry_run")),
        }
