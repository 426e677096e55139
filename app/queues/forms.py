"""The queue forms: create or edit a queue, and pause one with a reason.

Values are read as text and handed to the queues use case, which owns validation (the CLI and the
web give the same messages); its per-field errors are then shown next to each control.
"""

from __future__ import annotations

from typing import Any

from flask_wtf import FlaskForm
from wtforms import StringField, TextAreaField

from app.services.use_cases.queues import DESCRIPTION_MAX, LIMIT_RANGE, NAME_RULE, PAUSE_REASON_MAX, PRIORITY_RANGE

_NUMBER = {"inputmode": "numeric", "pattern": "-?[0-9]*"}


class QueueForm(FlaskForm):
    """Create a queue (all four fields) or edit one (the name is fixed; rename with the CLI)."""

    name = StringField("Name", description=f"Jobs and workers (flask worker run --queues) name it; it {NAME_RULE}.")
    concurrency_limit = StringField(
        "Concurrency limit",
        render_kw={**_NUMBER, "placeholder": "no limit"},
        description=f"At most this many running at once across all workers ({LIMIT_RANGE[0]}-{LIMIT_RANGE[1]}); "
        "empty means no limit.",
    )
    rate_limit = StringField(
        "Rate limit",
        render_kw={"placeholder": "no limit", "autocomplete": "off"},
        description="At most N starts per period across all workers: N/second, N/minute or N/hour "
        "(e.g. 10/minute); empty means no limit. Runs beyond it wait.",
    )
    priority = StringField(
        "Priority",
        render_kw=_NUMBER,
        description=f"Default priority of its jobs, {PRIORITY_RANGE[0]} to {PRIORITY_RANGE[1]}; lower runs first.",
    )
    description = TextAreaField("Description", render_kw={"rows": 2, "maxlength": DESCRIPTION_MAX})

    def service_data(self, *, creating: bool) -> dict:
        """The form as the use case's input: text values (the use case validates them; a blank
        priority is refused). A blank limit means no limit; a limit or description the post does
        not carry at all is left as it is, so a partial post never removes a limit by omission."""
        data: dict[str, Any] = {"priority": (self.priority.data or "").strip()}
        if creating:
            data["name"] = (self.name.data or "").strip()
        if self.description.raw_data:
            data["description"] = self.description.data or ""
        if self.concurrency_limit.raw_data:
            limit = (self.concurrency_limit.data or "").strip()
            if limit:
                data["concurrency_limit"] = limit
            elif not creating:
                data["no_limit"] = True
        if self.rate_limit.raw_data:
            data["rate_limit"] = (self.rate_limit.data or "").strip() or "none"
        return data

    def attach_errors(self, errors: dict[str, str]) -> None:
        """Show the use case's per-field messages next to the fields; others at the top."""
        for field, message in errors.items():
            if field in self._fields and field != "csrf_token":
                self[field].errors = [*self[field].errors, message]
            else:
                self.form_errors.append(f"{field}: {message}")


def initial_values(queue) -> dict:
    """A stored queue's settings as the edit form shows them."""
    return {
        "name": queue.name,
        "concurrency_limit": "" if queue.concurrency_limit is None else str(queue.concurrency_limit),
        "rate_limit": queue.rate_limit or "",
        "priority": str(queue.priority),
        "description": queue.description or "",
    }


NEW_QUEUE = {"priority": "0"}  # what the create form shows before anything is typed


class PauseForm(FlaskForm):
    """Pause with an optional reason, shown on the queues page until someone resumes."""

    reason = StringField(
        "Reason",
        render_kw={"maxlength": PAUSE_REASON_MAX, "placeholder": "why (optional)"},
        description=f"Shown beside the queue until it is resumed; at most {PAUSE_REASON_MAX} characters.",
    )


class ConfirmForm(FlaskForm):
    """A bare POST form (resume): only the CSRF token."""
