"""Job field validation for the services: the job definition's schema, with its errors raised as
ValidationFailed (one message per field, so the web shows each inline and the CLI prints one line).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from flask import current_app, has_app_context
from marshmallow import ValidationError

from app.definitions.job import defaults_from, field_messages, load_job
from app.services.errors import ValidationFailed


def clean_job_fields(data: dict, *, now: datetime, current: dict[str, Any] | None = None) -> dict[str, Any]:
    """A create's fields with their defaults (`current` None), or an edit's given fields checked
    against the stored ones (`current`); the schedule comes back in its stored form. A create's
    defaults for the timeout and the TTLs are the settings (DEFAULT_JOB_TIMEOUT_SECONDS, ...)."""
    defaults = defaults_from(current_app.config) if current is None and has_app_context() else None
    try:
        return load_job(data, now=now, current=current, defaults=defaults)
    except ValidationError as exc:
        raise ValidationFailed(field_messages(exc)) from None
