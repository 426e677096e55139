"""A channel's fields, checked one by one: what a new channel needs (`check_channel`) and what an
edit of some fields may change (`check_edit`).

One check per field, so creating (the CLI, the web form, the API's POST) and editing (the API's
PATCH, the web's edit form) refuse the same values with the same message. No database here: the
use cases (alert_channels.py) check that a name is free in its project.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from app.definitions import text_limits
from app.models import AlertChannel
from app.models.alerting import CHANNEL_KINDS, ENV_PREFIX, RECEIVABLE_KINDS, URL_CHANNEL_KINDS
from app.sensitive import is_own_secret
from app.services.errors import ValidationFailed
from app.services.use_cases import notify_routes

NAME_MAX, TARGET_MAX, SECRET_MAX = text_limits.CHANNEL_NAME.maximum, text_limits.CHANNEL_TARGET.maximum, 200
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,99}$")
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")

# What an edit may change; the other fields of a channel are fixed once it exists.
EDITABLE = ("name", "target", "secret", "kinds", "enabled", "group_minutes", "quiet", "quiet_timezone")
FIXED = {
    "kind": "cannot be changed: create a channel of the other kind, then delete this one",
    "project": "cannot be changed: create the channel in the other project, then delete this one",
    "project_id": "cannot be changed: create the channel in the other project, then delete this one",
    "id": "is read-only",
    "created_at": "is read-only",
    "unreadable": "is read-only",
}


def name_problem(name: str) -> str | None:
    if not name or len(name) > NAME_MAX or not name.isprintable():
        return f"must be 1-{NAME_MAX} printable characters"
    return None


def target_problem(kind: str, target: str) -> str | None:
    """What is wrong with `target` for a channel of `kind` (None: nothing)."""
    if not target or len(target) > TARGET_MAX or "\x00" in target:
        return f"is required (at most {TARGET_MAX} characters)"
    if kind in URL_CHANNEL_KINDS and target.startswith(ENV_PREFIX):
        variable = target[len(ENV_PREFIX) :]
        if not _ENV_NAME.match(variable):
            return "env:NAME needs an environment variable name (letters, digits, _)"
        if is_own_secret(variable):
            return f"{variable} holds Cronwell's own credentials and cannot be a channel's URL"
        return None
    if kind in URL_CHANNEL_KINDS:
        try:
            parts = urlsplit(target)
        except ValueError as exc:  # "Invalid IPv6 URL": an unclosed [ in the host
            return f"a {kind} channel needs an http:// or https:// URL ({exc})"
        if parts.scheme not in ("http", "https") or not parts.netloc or not target.isprintable():
            return f"a {kind} channel needs an http:// or https:// URL"
        return None
    if kind == "email" and not _EMAIL.match(target):
        return "must be an email address"
    return None


def secret_problem(secret: str) -> str | None:
    if len(secret) > SECRET_MAX or "\x00" in secret:
        return f"must be at most {SECRET_MAX} characters"
    return None


def kinds_problem(kinds: list[str]) -> str | None:
    unknown = [k for k in kinds if k not in RECEIVABLE_KINDS]
    if unknown:
        return f"unknown kind(s) {', '.join(unknown)}; known: {', '.join(RECEIVABLE_KINDS)}"
    return None


def check_channel(data: dict) -> dict:
    """Validate a new channel's fields; returns them cleaned. Errors are keyed by field."""
    errors: dict[str, str] = {}
    name = str(data.get("name") or "").strip()
    kind = str(data.get("kind") or "").strip()
    target = str(data.get("target") or "").strip()
    secret = data.get("secret")
    kinds = data.get("kinds") or []
    if isinstance(kinds, str):
        kinds = [k.strip() for k in kinds.split(",") if k.strip()]
    problems = {
        "name": name_problem(name),
        "kind": None if kind in CHANNEL_KINDS else f"must be one of {', '.join(CHANNEL_KINDS)}",
        "target": target_problem(kind, target),
        "secret": secret_problem(str(secret)) if secret is not None else None,
        "kinds": kinds_problem(kinds),
    }
    errors.update({field: problem for field, problem in problems.items() if problem})
    settings: dict = {}
    try:
        settings = notify_routes.clean_channel_settings(data)
    except ValidationFailed as exc:
        errors.update(exc.errors)
    if errors:
        raise ValidationFailed(errors)
    if kind == "webhook" and not secret:
        secret = secrets.token_urlsafe(32)
    cleaned = {
        "name": name,
        "kind": kind,
        "target": target,
        "secret": secret or None,
        "kinds": list(dict.fromkeys(kinds)),
    }
    return {**cleaned, **settings}


def check_edit(channel: AlertChannel, data: dict[str, Any]) -> dict[str, Any]:
    """Validate an edit of some of `channel`'s fields (JSON values, as the API's PATCH sends them);
    returns the columns to set. Every field sent is checked and all errors come at once, keyed by
    field; a field not sent stays as it is."""
    errors: dict[str, str] = {}
    values: dict[str, Any] = {}
    for key in data:
        if key in FIXED:
            errors[key] = FIXED[key]
        elif key not in EDITABLE:
            errors[key] = f"is not a field of a channel; the editable ones: {', '.join(EDITABLE)}"
    _check_text(data, "name", name_problem, errors, values)
    _check_text(data, "target", lambda target: target_problem(channel.kind, target), errors, values)
    if "secret" in data:
        secret = data["secret"].strip() if isinstance(data["secret"], str) else ""
        if channel.kind != "webhook":
            errors["secret"] = f"only a webhook channel has a signing secret (this one is {channel.kind})"
        elif not secret:
            errors["secret"] = f"a webhook signs with its secret: give a new one (1-{SECRET_MAX} characters)"
        elif secret_problem(secret):
            errors["secret"] = secret_problem(secret) or ""
        else:
            values["secret"] = secret
    if "kinds" in data:
        kinds = data["kinds"]
        if not isinstance(kinds, list) or not all(isinstance(k, str) for k in kinds):
            errors["kinds"] = f"must be a list of kinds (empty: every kind); known: {', '.join(RECEIVABLE_KINDS)}"
        elif kinds_problem(kinds):
            errors["kinds"] = kinds_problem(kinds) or ""
        else:
            values["kinds"] = list(dict.fromkeys(kinds))
    if "enabled" in data:
        if isinstance(data["enabled"], bool):
            values["enabled"] = data["enabled"]
        else:
            errors["enabled"] = "must be true or false"
    errors.update(_settings_problems(data, values))
    if errors:
        raise ValidationFailed(errors)
    return values


def _check_text(
    data: dict[str, Any],
    key: str,
    problem_of: Callable[[str], str | None],
    errors: dict[str, str],
    values: dict[str, Any],
) -> None:
    """The text field `key` of an edit, if sent, stripped (a value that is not a string counts as
    empty): its problem goes to `errors`, or the text to `values`."""
    if key not in data:
        return
    text = data[key].strip() if isinstance(data[key], str) else ""
    problem = problem_of(text)
    if problem:
        errors[key] = problem
    else:
        values[key] = text


def _settings_problems(data: dict[str, Any], values: dict[str, Any]) -> dict[str, str]:
    """Check the grouping and quiet window sent (JSON types first, then their values, with the
    same messages as a new channel's); adds the columns to `values`, returns the errors."""
    errors: dict[str, str] = {}
    settings: dict[str, Any] = {}
    if "group_minutes" in data:
        minutes = data["group_minutes"]
        if isinstance(minutes, int) and not isinstance(minutes, bool):
            settings["group_minutes"] = minutes
        else:
            settings["group_minutes"] = "not a number"  # refused below, with the usual message
    if "quiet" in data:
        quiet = data["quiet"]
        if quiet is None or isinstance(quiet, str):
            settings["quiet"] = "off" if quiet is None else quiet
        else:
            errors["quiet"] = "must be a daily window HH:MM-HH:MM, or off (null: none)"
    if "quiet_timezone" in data:
        zone = data["quiet_timezone"]
        if zone is None or isinstance(zone, str):
            settings["quiet_timezone"] = zone or ""
        else:
            errors["quiet_timezone"] = "must be a time zone name such as Europe/Paris (null: UTC)"
    try:
        values.update(notify_routes.clean_channel_settings(settings))
    except ValidationFailed as exc:
        errors.update(exc.errors)
    return errors
