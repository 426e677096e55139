"""One-off runs: executions of a task without a job (`flask task run`, `POST /api/v1/runs`).

A one-off run has no job to read its policies from. What it carries itself (task, config,
queue, priority, max_attempts, timeout and TTLs) is on its row; the rest of what a job would
give is fixed here, once, as the job definition's defaults (tests/unit/test_one_off_runs.py
checks they agree). The worker's turn, lease recovery and the dead-letter path read a one-off
run's "job" columns as these values (`job_column_sql`).
"""

from __future__ import annotations

from typing import Any

LABEL = "one-off"  # what lists, pages and the CLI show in place of a job's name

# The job columns the engine reads of an execution, as a one-off run has them.
JOB_VALUES: dict[str, Any] = {
    "enabled": True,  # nothing disables a one-off run; cancel it instead
    "retry_backoff_seconds": 10,
    "retry_kind": "exponential",
    "retry_max_delay_seconds": None,
    "retry_jitter": 0.0,
    "alert_mode": "web",
    "isolation": "process",
    "on_success": None,
    "on_failure": None,
    "config": None,  # its whole config is the run's config_override
}

# The job columns a one-off run has on its own row instead (same column name on executions); a
# workflow step carries them too, over its job's.
OWN_COLUMNS: frozenset[str] = frozenset({"task", "timeout_seconds"})


def _literal(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    return "'" + str(value).replace("'", "''") + "'"


def job_column_sql(column: str, *, execution_alias: str, job_alias: str) -> str:
    """A job column of an execution's job in SQL (PostgreSQL and SQLite alike), read from the
    one-off run itself when the execution has no job (the job joined with LEFT JOIN)."""
    if column == "name":
        fallback = f"('{LABEL} ' || {execution_alias}.task)"
    elif column in OWN_COLUMNS:
        # A job's run may carry its own value too (a workflow step's task and timeout): it wins.
        own = f"{execution_alias}.{column}"
        return f"CASE WHEN {execution_alias}.job_id IS NULL THEN {own} ELSE COALESCE({own}, {job_alias}.{column}) END"
    elif column in JOB_VALUES:
        fallback = _literal(JOB_VALUES[column])
    else:
        raise KeyError(f"a one-off run has no value for the job column {column!r}")
    return f"CASE WHEN {execution_alias}.job_id IS NULL THEN {fallback} ELSE {job_alias}.{column} END"
