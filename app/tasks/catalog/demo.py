"""Demo tasks: sleeping, succeeding, failing, failing exactly once to show retries, and echoing a config."""

from __future__ import annotations

import json
import os
import time

from app.tasks.registry import TaskContext, task

MAX_SLEEP_SECONDS = 300
MAX_MESSAGE_LENGTH = 1000


@task(
    "sleep_for_seconds",
    description=(
        "Sleep for `seconds` (a number, more than 0 and at most 300) and report it. "
        "Useful to see overlap policies and timeouts in action."
    ),
    schema={
        "type": "object",
        "properties": {
            "seconds": {"type": "number", "exclusiveMinimum": 0, "maximum": MAX_SLEEP_SECONDS},
        },
        "required": ["seconds"],
        "additionalProperties": False,
    },
)
def sleep_for_seconds(config: dict, ctx: TaskContext) -> None:
    """Sleep for the configured number of seconds."""
    seconds = config["seconds"]
    time.sleep(seconds)
    print(f"slept for {seconds:g} s")


@task(
    "always_succeed",
    description=(
        "Succeed immediately, printing `message` (optional string, at most 1000 characters; "
        "default 'ok'). Cheap enough for throughput benchmarks."
    ),
    schema={
        "type": "object",
        "properties": {"message": {"type": "string", "maxLength": MAX_MESSAGE_LENGTH}},
        "additionalProperties": False,
    },
)
def always_succeed(config: dict, ctx: TaskContext) -> None:
    """Print the message and succeed; does nothing else, so benchmarks measure the machinery."""
    print(config.get("message", "ok"))


@task(
    "always_fail",
    description=(
        "Fail every attempt with `message` (optional string, at most 1000 characters). "
        "Useful to see retries, dead letters and alerts."
    ),
    schema={
        "type": "object",
        "properties": {"message": {"type": "string", "maxLength": MAX_MESSAGE_LENGTH}},
        "additionalProperties": False,
    },
)
def always_fail(config: dict, ctx: TaskContext) -> None:
    """Raise RuntimeError with the configured message."""
    raise RuntimeError(config.get("message", "always_fail failed on purpose"))


@task(
    "fail_once_then_succeed",
    description=(
        "Fail the first attempt of an execution and succeed on the retry (set max_attempts >= 2). "
        "Takes no config. A marker file per idempotency key in MARKER_DIR remembers the failure and "
        "is removed on success, so a later run with the same key fails once again. Demo only: not "
        "safe for concurrent runs of the same key."
    ),
)
def fail_once_then_succeed(config: dict, ctx: TaskContext) -> None:
    """First attempt leaves a marker and fails; the next attempt finds it, removes it, succeeds."""
    # Imported here, in the task process: hashlib initialises OpenSSL (about 4 MB), and the zygote
    # every task is forked from imports this module, so a module-level import grows every worker.
    import hashlib

    os.makedirs(ctx.marker_dir, exist_ok=True)
    # Hash the key: it is operator-influenced text and must not become a path by itself.
    digest = hashlib.sha256(ctx.idempotency_key.encode("utf-8")).hexdigest()
    marker = os.path.join(ctx.marker_dir, f"fail-once-{digest}")
    try:
        # O_EXCL: creating the marker and learning it was absent are one step.
        fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        os.remove(marker)
        print(f"attempt {ctx.attempt}: marker found, succeeding (marker removed)")
        return
    os.close(fd)
    raise RuntimeError(f"attempt {ctx.attempt}: failing once on purpose; the next attempt will succeed")


@task(
    "echo",
    description=(
        "Print its whole config as JSON (sorted keys), so what a run was given - the job's config, "
        "an ad-hoc run's or a batch item's override, a callback's `parent` outcome - shows in its "
        "output; then fail with `message` when `fail` is true. Optional keys: `message` (string, at "
        "most 1000 characters), `fail` (boolean, default false)."
    ),
    schema={
        "type": "object",
        "properties": {
            "message": {"type": "string", "maxLength": MAX_MESSAGE_LENGTH},
            "fail": {"type": "boolean"},
        },
        "additionalProperties": False,
    },
)
def echo(config: dict, ctx: TaskContext) -> None:
    """Print the config; raise RuntimeError(message) when `fail` is true."""
    print(json.dumps(config, sort_keys=True, default=str))
    if config.get("fail"):
        raise RuntimeError(config.get("message") or "echo failed on purpose (fail: true)")
