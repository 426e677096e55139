"""Field types for the definitions, and the metadata that tells each adapter how to show a field.

Each type parses what operators type (text from a form or a CLI option, JSON from an API) with the
messages they already know, and states its limits as marshmallow validators (Length, Range, OneOf,
Regexp), so an OpenAPI document generated from a schema shows them as maxLength, minimum/maximum,
enum and pattern. `kind` names the type for the adapters (CLI options, form fields).
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Mapping
from datetime import datetime
from enum import Enum
from typing import Any, cast

from marshmallow import ValidationError, fields, validate

from app.clock import iso_z
from app.domain.states import values
from app.tasks import UnknownTaskError, get_task

# Metadata keys an adapter reads. `description` is also the OpenAPI description.
ADAPTER_KEYS = frozenset(
    {
        "label",  # short human name: the form label
        "description",  # what the field means: CLI --help, form help, OpenAPI description
        "cli",  # True: an option of `job add` and `job edit`; "argument": positional on add, option on edit
        "cli_help",  # CLI help when it should differ from the description
        "cli_edit_help",  # help of the option on `job edit` for an argument of `job add`
        "metavar",  # CLI metavar
        "form",  # shown in the web form
        "form_widget",  # "text" (default), "textarea", "select", "checkbox"
        "form_attrs",  # extra HTML attributes of the control
        "form_help",  # form help when it should differ from the description
        "form_default",  # the form's initial value when the field has no load default
        "choice_labels",  # {value: label} for a select
        "inputs",  # the schedule field: per SCHEDULE_INPUTS option, its label, help and attributes
    }
)


def shown(
    label: str, description: str, *, cli: bool | str = True, form: bool = True, **adapters: Any
) -> dict[str, Any]:
    """The metadata of a field: its label and help, and which adapters show it and how."""
    unknown = set(adapters) - ADAPTER_KEYS
    if unknown:
        raise TypeError(f"unknown adapter metadata: {', '.join(sorted(unknown))}")
    return {"label": label, "description": description, "cli": cli, "form": form, **adapters}


# --- validators ---------------------------------------------------------------------------------


class TextLength(validate.Length):
    """Length with the messages operators see: `must be at most 200 characters (got 201)`."""

    message_min = "must have at least {min} characters"
    message_max = "must be at most {max} characters (got {length})"

    def __init__(self, min: int | None = None, max: int | None = None) -> None:
        super().__init__(min=min, max=max)
        if min == 1:
            self.message_min = "must not be empty"

    def __call__(self, value: Any) -> Any:
        # One message per bound (marshmallow's Length says "between" for both when both are set).
        if self.min is not None and len(value) < self.min:
            raise ValidationError(self._format_error(value, self.message_min))
        if self.max is not None and len(value) > self.max:
            raise ValidationError(self._format_error(value, self.message_max))
        return value

    def _format_error(self, value: Any, message: str) -> str:
        return message.format(input=value, min=self.min, max=self.max, equal=self.equal, length=len(value))


def printable(text: str) -> str:
    """Refuse control, format (invisible) and surrogate characters."""
    if any(unicodedata.category(ch) in {"Cc", "Cf", "Cs"} for ch in text):
        raise ValidationError("must not contain control or invisible characters")
    return text


def no_nul(text: str) -> str:
    """PostgreSQL cannot store a NUL character in text or JSONB."""
    if "\x00" in text:
        raise ValidationError("must not contain NUL characters")
    return text


def whole_number_range(low: int, high: int) -> validate.Range:
    return validate.Range(min=low, max=high, error="must be between {min} and {max}, got {input}")


# --- fields -------------------------------------------------------------------------------------


class Text(fields.String):
    """Text, stripped unless `strip=False`; with `blank_default` an empty value loads as the default."""

    kind = "text"
    default_error_messages = {"invalid": "must be text", "required": "is required"}

    def __init__(self, *, strip: bool = True, blank_default: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.strip = strip
        self.blank_default = blank_default
        self.validators.append(no_nul)

    def _deserialize(self, value: Any, attr: str | None, data: Mapping[str, Any] | None, **kwargs: Any) -> str:
        if not isinstance(value, str):
            raise self.make_error("invalid")
        text = value.strip() if self.strip else value
        if self.blank_default and not text:
            default: str = self.load_default
            return default
        return text


class WholeNumber(fields.Integer):
    """A whole number within [low, high], given as a number or as text (`"15"`)."""

    kind = "number"
    default_error_messages = {"invalid": "must be a whole number", "required": "is required"}

    def __init__(self, low: int, high: int, **kwargs: Any) -> None:
        super().__init__(validate=whole_number_range(low, high), **kwargs)
        self.low, self.high = low, high

    def _deserialize(self, value: Any, attr: str | None, data: Mapping[str, Any] | None, **kwargs: Any) -> int:
        if isinstance(value, bool):
            raise self.make_error("invalid")
        if isinstance(value, str):
            try:
                return int(value.strip())
            except ValueError:
                raise ValidationError(f"must be a whole number, got {value!r}") from None
        if not isinstance(value, int):
            raise self.make_error("invalid")
        return value


class Choice(fields.String):
    """One of an enum's values."""

    kind = "choice"
    default_error_messages = {"required": "is required"}

    def __init__(self, enum_type: type[Enum], **kwargs: Any) -> None:
        self.choices = values(enum_type)
        super().__init__(
            validate=validate.OneOf(self.choices, error="must be one of {choices}, got {input!r}"), **kwargs
        )

    def _deserialize(self, value: Any, attr: str | None, data: Mapping[str, Any] | None, **kwargs: Any) -> Any:
        return value  # OneOf refuses anything else, naming what was given


class TaskName(fields.String):
    """The name of a registered task (the catalog changes at run time, so no enum here)."""

    kind = "task"
    default_error_messages = {"required": "is required"}

    def _deserialize(self, value: Any, attr: str | None, data: Mapping[str, Any] | None, **kwargs: Any) -> str:
        try:
            return get_task(value).name
        except UnknownTaskError as exc:
            raise ValidationError(str(exc)) from None


class OptionalTaskName(TaskName):
    """A registered task's name, or nothing (blank or null: no task), e.g. a job's callbacks."""

    kind = "text"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(allow_none=True, **kwargs)

    def _deserialize(self, value: Any, attr: str | None, data: Mapping[str, Any] | None, **kwargs: Any) -> str | None:  # type: ignore[override]  # a field that allows none loads None; marshmallow types the result without it
        if not isinstance(value, str):
            raise ValidationError("must be a registered task name")
        if not value.strip():
            return None
        return super()._deserialize(value.strip(), attr, data, **kwargs)


def _has_nul(value: Any) -> bool:
    """Whether a JSON value holds a NUL character anywhere."""
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_has_nul(key) or _has_nul(item) for key, item in value.items())
    if isinstance(value, list):
        return any(_has_nul(item) for item in value)
    return False


class JsonObject(fields.Dict):
    """A JSON object, given as a mapping or as JSON text; empty text is `{}`."""

    kind = "json"
    default_error_messages = {"required": "is required"}

    def __init__(self, what: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.what = what

    def _deserialize(
        self, value: Any, attr: str | None, data: Mapping[str, Any] | None, **kwargs: Any
    ) -> dict[str, Any]:
        if isinstance(value, str) and not value.strip():
            value = {}
        elif isinstance(value, str):
            try:
                value = json.loads(value)
            except json.JSONDecodeError as exc:
                raise ValidationError(
                    f"{self.what} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
                ) from None
            if not isinstance(value, dict):
                raise ValidationError(f"{self.what} must be a JSON object, got {type(value).__name__}")
        elif not isinstance(value, dict):
            raise ValidationError(f"{self.what} must be a JSON object")
        if _has_nul(value):
            raise ValidationError(f"{self.what} must not contain NUL characters (\\u0000)")
        return cast("dict[str, Any]", value)  # a JSON object: its keys are text


class ScheduleValue(JsonObject):
    """A schedule's stored value (`{"every": "5m"}`); checked against its type in the schema."""

    kind = "schedule"


class Flag(fields.Boolean):
    """true or false, nothing else."""

    kind = "flag"
    default_error_messages = {"invalid": "must be true or false", "required": "is required"}

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(truthy={True}, falsy={False}, **kwargs)


class Instant(fields.DateTime):
    """An aware instant, shown as ISO 8601 UTC with `Z` (`2026-06-01T12:00:00Z`)."""

    kind = "instant"

    def _serialize(self, value: datetime | None, attr: str | None, obj: Any, **kwargs: Any) -> str | None:
        return iso_z(value)


# --- optional values (run limits, TTLs, no-limit timeouts) ----------------------------------------

# What an operator types for "no value": `--timeout-seconds none`, an empty form field.
NONE_WORDS = frozenset({"", "none", "null"})


class OptionalWholeNumber(WholeNumber):
    """A whole number within [low, high], or none: blank, `none` or null loads as None (no limit)."""

    optional = True

    def __init__(self, low: int, high: int, **kwargs: Any) -> None:
        super().__init__(low, high, allow_none=True, **kwargs)

    def _deserialize(self, value: Any, attr: str | None, data: Mapping[str, Any] | None, **kwargs: Any) -> int | None:  # type: ignore[override]  # a field that allows none loads None; marshmallow types the result without it
        if isinstance(value, str) and value.strip().lower() in NONE_WORDS:
            return None
        return super()._deserialize(value, attr, data, **kwargs)

    def _validate(self, value: Any) -> None:
        if value is not None:
            super()._validate(value)


class Fraction(fields.Float):
    """A fraction between 0 and 1 (`0.25`), given as a number or as text."""

    kind = "fraction"
    default_error_messages = {"invalid": "must be a number between 0 and 1", "required": "is required"}

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(
            validate=validate.Range(min=0, max=1, error="must be between {min} and {max}, got {input}"), **kwargs
        )

    def _deserialize(self, value: Any, attr: str | None, data: Mapping[str, Any] | None, **kwargs: Any) -> float:
        if isinstance(value, bool):
            raise self.make_error("invalid")
        try:
            number = float(value.strip()) if isinstance(value, str) else float(value)
        except (TypeError, ValueError):
            raise ValidationError(f"must be a number between 0 and 1, got {value!r}") from None
        if number != number:  # NaN
            raise self.make_error("invalid")
        return number


class OptionalInstant(Instant):
    """An instant given as ISO 8601 text (or a datetime), or none (blank, `none`, null). Text
    without an offset comes back naive; the schema reads it in the job's timezone."""

    optional = True
    default_error_messages = {"invalid": "must be an ISO 8601 date and time, e.g. 2026-01-01T12:00:00Z"}

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(allow_none=True, **kwargs)

    def _deserialize(  # type: ignore[override]  # a field that allows none loads None; marshmallow types the result without it
        self, value: Any, attr: str | None, data: Mapping[str, Any] | None, **kwargs: Any
    ) -> datetime | None:
        if isinstance(value, datetime):
            return value
        if not isinstance(value, str):
            raise self.make_error("invalid")
        text = value.strip()
        if text.lower() in NONE_WORDS:
            return None
        try:
            return datetime.fromisoformat(text[:-1] + "+00:00" if text[-1:] in ("Z", "z") else text)
        except ValueError:
            raise ValidationError(
                f"must be an ISO 8601 date and time, e.g. 2026-01-01T12:00:00Z, got {value!r}"
            ) from None
