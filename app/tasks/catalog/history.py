"""Tasks that read or prune execution history through their own database connection.

A task runs in a process forked from the worker's zygote: it inherits no Flask app context and
must not reuse a pooled connection from its parent. Each task opens one short-lived connection from
`ctx.database_url` (NullPool, so nothing outlives the task) and imports SQLAlchemy only then. They
are registered with `needs_database=True`: no other task is given the database URL.
"""

from __future__ import annotations

from datetime import timedelta

from app.clock import utcnow
from app.tasks.registry import TaskContext, task

DEFAULT_REPORT_HOURS = 24
MAX_REPORT_HOURS = 720
TOP_FAILING_JOBS = 5
# The settings' defaults, for a context without `retention` (a task run outside a worker).
AUDIT_RETENTION_DAYS = 365
SESSION_MAX_AGE_HOURS = 168
EVENT_RETENTION_DAYS = 90
# Terminal statuses that count as a failure of the job in the report.
FAILURE_STATUSES = ("failed", "timed_out", "dead_lettered")

# Plain SQL valid on SQLite and PostgreSQL; the cutoff is computed in Python and bound.
COUNT_EXECUTIONS_BY_STATUS = """
    SELECT status, COUNT(*) AS executions
    FROM executions
    WHERE created_at >= :cutoff
    GROUP BY status
    ORDER BY status
"""
TOP_FAILING_JOBS_SQL = """
    SELECT jobs.name, COUNT(*) AS failures
    FROM executions JOIN jobs ON jobs.id = executions.job_id
    WHERE executions.created_at >= :cutoff
      AND executions.status IN :statuses
    GROUP BY jobs.id, jobs.name
    ORDER BY failures DESC, jobs.name
    LIMIT :limit
"""


@task(
    "generate_report",
    description=(
        "Print a text report of recent activity: executions created in the last `hours` "
        "(integer 1-720, default 24) counted by status, and the 5 jobs with the most failed, "
        "timed-out or dead-lettered executions. `title` (optional string) heads the report."
    ),
    schema={
        "type": "object",
        "properties": {
            "title": {"type": "string", "minLength": 1, "maxLength": 200},
            "hours": {"type": "integer", "minimum": 1, "maximum": MAX_REPORT_HOURS, "default": DEFAULT_REPORT_HOURS},
        },
        "additionalProperties": False,
    },
    needs_database=True,
)
def generate_report(config: dict, ctx: TaskContext) -> None:
    """Count recent executions by status and list the jobs that failed most."""
    from sqlalchemy import DateTime, bindparam, create_engine, text
    from sqlalchemy.pool import NullPool

    hours = int(config.get("hours", DEFAULT_REPORT_HOURS))
    title = config.get("title", "Cronwell report")
    now = utcnow()
    cutoff = now - timedelta(hours=hours)
    # Typed bind: SQLite gets the same text format SQLAlchemy's DateTime stores there.
    cutoff_param = bindparam("cutoff", type_=DateTime(timezone=True))

    engine = create_engine(ctx.database_url, poolclass=NullPool)
    try:
        with engine.connect() as connection:
            if connection.dialect.name == "postgresql":
                # Stored times are UTC; make naive `timestamp` columns compare as UTC too.
                connection.execute(text("SET TIME ZONE 'UTC'"))
            by_status = connection.execute(
                text(COUNT_EXECUTIONS_BY_STATUS).bindparams(cutoff_param), {"cutoff": cutoff}
            ).all()
            top_failing = connection.execute(
                text(TOP_FAILING_JOBS_SQL).bindparams(cutoff_param, bindparam("statuses", expanding=True)),
                {"cutoff": cutoff, "statuses": FAILURE_STATUSES, "limit": TOP_FAILING_JOBS},
            ).all()
    finally:
        engine.dispose()

    print(title)
    print(f"Executions created since {cutoff:%Y-%m-%d %H:%M} UTC (last {hours} h):")
    for status, count in by_status:
        print(f"  {status:<16}{count:>8}")
    print(f"  {'total':<16}{sum(count for _, count in by_status):>8}")
    print(f"Top {TOP_FAILING_JOBS} failing jobs:")
    for name, failures in top_failing:
        print(f"  {name:<40}{failures:>8}")
    if not top_failing:
        print("  none")


@task(
    "cleanup_old_runs",
    description=(
        "Apply each job's retention (retention_count executions and retention_days of age; 0 "
        "disables that limit), delete audit events older than AUDIT_RETENTION_DAYS and web "
        "sessions older than SESSION_MAX_AGE_HOURS, and print what was removed. With `dry_run` "
        "true (default false) only report what would be removed."
    ),
    schema={
        "type": "object",
        "properties": {"dry_run": {"type": "boolean", "default": False}},
        "additionalProperties": False,
    },
    needs_database=True,
)
def cleanup_old_runs(config: dict, ctx: TaskContext) -> None:
    """Prune execution history, old audit events and expired web sessions with the same rules
    and settings as `flask prune-history` (the worker passes the settings in `ctx.retention`)."""
    from app.domain.pacing import DUTY_CYCLE, ROWS_PER_SECOND
    from app.services.engine.retention import prune_with_url

    dry_run = config.get("dry_run", False)
    settings = ctx.retention or {}
    summary = prune_with_url(
        ctx.database_url,
        now=utcnow(),
        dry_run=dry_run,
        audit_retention_days=settings.get("audit_retention_days", AUDIT_RETENTION_DAYS),
        session_max_age_hours=settings.get("session_max_age_hours", SESSION_MAX_AGE_HOURS),
        event_retention_days=settings.get("event_retention_days", EVENT_RETENTION_DAYS),
        rows_per_second=settings.get("rows_per_second", ROWS_PER_SECOND),
        duty_cycle=settings.get("duty_cycle", DUTY_CYCLE),
    )
    print("retention dry run (nothing deleted):" if dry_run else "retention applied:")
    for key, value in sorted(summary.items()):
        print(f"  {key}: {value}")
