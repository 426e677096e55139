"""What a deployer's task process receives from the worker's environment, and keeping it secret.

A task from the deployer's own modules runs with exactly the variables it declares
(`@task(..., env=[...])`) plus a small base (`BASE_VARIABLES`), taken from the worker's
environment when the attempt starts: the request carries that whole environment and the task
process replaces its own with it. The fork server starts without any declared variable, so no
other task (built-in ones included) sees them. A declared variable that is not set on the worker
fails the attempt with one line, without calling the task. The values never reach the database:
they are scrubbed from the attempt's output, error and result before they are recorded.

Built-in tasks keep the fork server's environment: the worker's, less every secret
(app/sensitive.py).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from app.tasks.registry import TaskSpec, all_tasks

BASE_VARIABLES = ("PATH", "HOME", "LANG", "TZ")
REDACTED = "[redacted]"
# A value shorter than this would mask ordinary words in the output; it is still withheld from
# every other task, only not searched for.
MIN_SCRUBBED_CHARS = 4


def declared_names() -> frozenset[str]:
    """Every variable a deployer's task declares: the fork server starts without them."""
    return frozenset(name for spec in all_tasks() if not spec.builtin for name in spec.env)


def request_environment(
    spec: TaskSpec | None, environ: Mapping[str, str], *, worker_id: str
) -> tuple[dict[str, str] | None, str | None]:
    """(the environment the task process gets, or None to keep the fork server's; the one-line
    reason the attempt fails without running, or None)."""
    if spec is None or spec.builtin:
        return None, None
    missing = [name for name in spec.env if not environ.get(name)]
    if missing:
        names = ", ".join(missing)
        plural = "s" if len(missing) > 1 else ""
        return None, f"task {spec.name} needs environment variable{plural} {names}, not set on worker {worker_id}"
    env = {name: environ[name] for name in BASE_VARIABLES if name in environ}
    env.update((name, environ[name]) for name in spec.env)
    return env, None


def secret_values(spec: TaskSpec | None, environ: Mapping[str, str]) -> list[str]:
    """The values of `spec`'s declared variables worth searching for, longest first."""
    if spec is None or not spec.env:
        return []
    values = {environ.get(name) or "" for name in spec.env}
    return sorted((value for value in values if len(value) >= MIN_SCRUBBED_CHARS), key=len, reverse=True)


def scrub(text: str, values: list[str]) -> str:
    """`text` with every one of `values` replaced by REDACTED."""
    for value in values:
        if value in text:
            text = text.replace(value, REDACTED)
    return text


def result_text(result: Any, values: list[str]) -> str | None:
    """The JSON text stored as an execution's result (None for none), scrubbed of `values`.

    A value is looked for both as written and as JSON escapes it inside a string."""
    if result is None:
        return None
    text = json.dumps(result, ensure_ascii=False)
    if values:
        escaped = [json.dumps(value, ensure_ascii=False)[1:-1] for value in values]
        text = scrub(text, sorted(set(values) | set(escaped), key=len, reverse=True))
    return text
