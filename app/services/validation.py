"""Validation of job fields shared by create and edit, the CLI and the web forms.

Returns cleaned values or raises ValidationFailed with one message per field, so the web can
show each error inline and the CLI can print one line.
"""

from __future__ import annotations

import json
import re
import unicodedata
from datetime import datetime
from typing import Any

from app.domain.states import AlertMode, MisfirePolicy, OverlapPolicy, ScheduleType, values
from app.scheduling import ScheduleError, parse_schedule
from app.services.errors import ValidationFailed
from app.tasks import TaskConfigError, UnknownTaskError, get_task, validate_config

# field -> (minimum, maximum)
INT_BOUNDS: dict[str, tuple[int, int]] = {
    "misfire_grace_seconds": (0, 7 * 86400),
    "max_attempts": (1, 100),
    "retry_backoff_seconds": (0, 7 * 86400),
    "timeout_seconds": (1, 86400),
    "retention_count": (0, 10_000_000),
    "retention_days": (0, 36500),
    "priority": (-1000, 1000),
}
CHOICES: dict[str, tuple[str, ...]] = {
    "overlap_policy": values(OverlapPolicy),
    "misfire_policy": values(MisfirePolicy),
    "alert_mode": values(AlertMode),
    "schedule_type": values(ScheduleType),
}
QUEUE_RE = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,63}$")
NAME_MAX = 200
DESCRIPTION_MAX = 2000


def clean_name(raw: Any) -> str:
    if not isinstance(raw, str):
        raise ValueError("must be text")
    name = raw.strip()
    if not name:
        raise ValueError("must not be empty")
    if len(name) > NAME_MAX:
        raise ValueError(f"must be at most {NAME_MAX} characters (got {len(name)})")
    if any(unicodedata.category(ch) in {"Cc", "Cf", "Cs"} for ch in name):
        raise ValueError("must not contain control or invisible characters")
    return name


def clean_int(field: str, raw: Any) -> int:
    low, high = INT_BOUNDS[field]
    if isinstance(raw, bool):
        raise ValueError("must be a whole number")
    if isinstance(raw, str):
        try:
            raw = int(raw.strip())
        except ValueError:
            raise ValueError(f"must be a whole number, got {raw!r}") from None
    if not isinstance(raw, int):
        raise ValueError("must be a whole number")
    if not low <= raw <= high:
        raise ValueError(f"must be between {low} and {high}, got {raw}")
    return raw


def parse_json_object(raw: Any, what: str) -> dict:
    """Accept a dict or a JSON text holding an object."""
    if isinstance(raw, dict):
        return raw
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return {}
    if not isinstance(raw, str):
        raise ValueError(f"{what} must be a JSON object")
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{what} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    if not isinstance(value, dict):
        raise ValueError(f"{what} must be a JSON object, got {type(value).__name__}")
    return value


def _has_nul(value: Any) -> bool:
    """Whether a JSON value holds a NUL character anywhere: PostgreSQL cannot store one in text or JSONB."""
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_has_nul(key) or _has_nul(item) for key, item in value.items())
    if isinstance(value, list):
        return any(_has_nul(item) for item in value)
    return False


def clean_job_fields(data: dict, *, now: datetime, current: dict | None = None) -> dict:
    """Validate the job fields present in `data`, merged over `current` (the stored job, for edits).

    Returns only the cleaned fields that were given plus derived ones (`schedule` normalised).
    """
    merged = {**(current or {}), **data}
    errors: dict[str, str] = {}
    cleaned: dict[str, Any] = {}

    def attempt(field: str, fn) -> None:
        try:
            cleaned[field] = fn()
        except (ValueError, TaskConfigError, UnknownTaskError, ScheduleError) as exc:
            errors[field] = str(exc)

    if "name" in data:
        attempt("name", lambda: clean_name(data["name"]))
    if "description" in data:

        def _description():
            text = str(data["description"] or "")
            if len(text) > DESCRIPTION_MAX:
                raise ValueError(f"must be at most {DESCRIPTION_MAX} characters")
            if "\x00" in text:
                raise ValueError("must not contain NUL characters")
            return text

        attempt("description", _description)
    for field, choices in CHOICES.items():
        if field in data:

            def _choice(field=field, choices=choices):
                if data[field] not in choices:
                    raise ValueError(f"must be one of {', '.join(choices)}, got {data[field]!r}")
                return data[field]

            attempt(field, _choice)
    for field in INT_BOUNDS:
        if field in data:
            attempt(field, lambda field=field: clean_int(field, data[field]))
    if "queue" in data:

        def _queue():
            if not isinstance(data["queue"], str) or not QUEUE_RE.match(data["queue"]):
                raise ValueError("must be 1-64 characters: lower-case letters, digits, '_', '-', '.'")
            return data["queue"]

        attempt("queue", _queue)

    if "task" in data or "config" in data:

        def _config():
            config = parse_json_object(merged.get("config"), "config")
            if _has_nul(config):
                raise ValueError("config must not contain NUL characters (\\u0000)")
            return validate_config(merged["task"], config)

        if "task" in data:
            attempt("task", lambda: get_task(data["task"]).name)
        if "task" not in errors:
            attempt("config", _config)

    if {"schedule_type", "schedule", "timezone"} & set(data) and "schedule_type" not in errors:

        def _schedule():
            value = merged.get("schedule")
            if isinstance(value, str):
                value = parse_json_object(value, "schedule")
            schedule = parse_schedule(
                merged["schedule_type"], value or {}, merged.get("timezone") or "UTC", anchor=now.replace(microsecond=0)
            )
            return schedule

        try:
            schedule = _schedule()
            cleaned["schedule"] = schedule.to_json()
            cleaned["timezone"] = merged.get("timezone") or "UTC"
            if "schedule_type" in data:
                cleaned["schedule_type"] = merged["schedule_type"]
            cleaned["_schedule"] = schedule
        except (ValueError, ScheduleError) as exc:
            field = (
                "timezone" if "timezone" in str(exc).lower() and "unknown timezone" in str(exc).lower() else "schedule"
            )
            errors[field] = str(exc)

    if errors:
        raise ValidationFailed(errors)
    return cleaned
