"""What counts as a secret in settings and environments: one definition for the log redaction
(app/logs.py) and for the environment task processes start with (app/executor/client.py).

Plain standard library, so the executor can use it without importing the logging machinery.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from urllib.parse import urlsplit

# Settings whose whole value is a secret.
SECRET_SETTINGS = ("SECRET_KEY", "SCHEDULER_CLI_SECRET", "METRICS_TOKEN", "DEV_ADMIN_PASSWORD", "CHANNEL_SECRET_KEY")
# Settings that are URLs which may carry a password (and name our databases).
URL_SETTINGS = ("DATABASE_URL", "DATABASE_LISTEN_URL", "REDIS_URL")
# The signing key of API tokens and the mail server's credentials, when a deployment sets them.
OTHER_OWN_SECRETS = ("JWT_SECRET_KEY", "SMTP_PASSWORD", "SMTP_USERNAME", "SMTP_USER", "PGPASSWORD", "PGPASSFILE")
# Every variable that holds Cronwell's own credentials: a task may never be given one.
OWN_SECRET_VARIABLES = frozenset((*SECRET_SETTINGS, *URL_SETTINGS, *OTHER_OWN_SECRETS))
# The deployer's list of variables whose values `http_request` may send as headers; the names
# are not secret, the values are.
HTTP_TASK_SECRETS = "HTTP_TASK_SECRETS"
# Field or variable names that look secret: PGPASSWORD, API_TOKEN, X_API_KEY, SESSION_COOKIE...
SECRET_NAME = re.compile(r"pass(word|wd)?$|secret|token|authori[sz]ation|cookie|api[_-]?key", re.IGNORECASE)
# `scheme://user:password@`: credentials inside any URL.
URL_CREDENTIALS = re.compile(r"(?P<prefix>\b[a-z][a-z0-9+.-]*://[^:/@\s]*:)[^@/\s]+@", re.IGNORECASE)
# Values that address a database or Redis, with or without a password.
DATABASE_URL_VALUE = re.compile(r"^\s*(postgres(ql)?|sqlite|redis|rediss|mysql|mariadb)(\+\w+)?://", re.IGNORECASE)


def secret_values(env: Mapping[str, str] | None = None) -> list[str]:
    """The secret strings in this environment: secret settings and passwords inside URLs."""
    env = os.environ if env is None else env
    found = [env.get(name) or "" for name in SECRET_SETTINGS]
    for name in URL_SETTINGS:
        try:
            found.append(urlsplit(env.get(name) or "").password or "")
        except ValueError:
            continue
    # Very short values would mask ordinary words; they are not secrets worth the name anyway.
    return sorted({value for value in found if len(value) >= 6}, key=len, reverse=True)


def is_sensitive_variable(name: str, value: str) -> bool:
    """Whether an environment variable must not reach a task: a secret setting, a database or
    Redis URL, a secret-looking name, or a value with credentials in a URL."""
    return (
        name in SECRET_SETTINGS
        or name in URL_SETTINGS
        or bool(SECRET_NAME.search(name))
        or bool(URL_CREDENTIALS.search(value))
        or bool(DATABASE_URL_VALUE.match(value))
    )


def task_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """`environ` (default os.environ) without the variables `is_sensitive_variable` names, except
    those the deployer listed in HTTP_TASK_SECRETS for the `http_request` task's secret headers
    (never one of Cronwell's own)."""
    environ = os.environ if environ is None else environ
    listed = http_task_secret_names(environ)
    return {
        name: value
        for name, value in environ.items()
        if name in listed or name == HTTP_TASK_SECRETS or not is_sensitive_variable(name, value)
    }


def http_task_secret_names(environ: Mapping[str, str] | None = None) -> frozenset[str]:
    """The variables HTTP_TASK_SECRETS lists (comma-separated), less Cronwell's own secrets."""
    environ = os.environ if environ is None else environ
    names = {name.strip() for name in (environ.get(HTTP_TASK_SECRETS) or "").split(",")}
    return frozenset(name for name in names if name and not is_own_secret(name))


def is_own_secret(name: str) -> bool:
    """Whether `name` is one of the variables that hold Cronwell's own credentials."""
    return name in OWN_SECRET_VARIABLES
