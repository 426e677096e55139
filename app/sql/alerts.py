"""The statements of alerts that don't flood (app/services/engine/alert_grouping.py explains the
rule): a job's open alert of a kind is opened once under its dedup key, and each repeat is
counted on it; nothing is opened or counted while the job is muted."""

from __future__ import annotations

from datetime import datetime

from app.sql.transport import DBConnection, Statement, execute, read_datetime

OPENED, REPEATED, MUTED = "opened", "repeated", "muted"

MUTED_UNTIL = Statement("SELECT until FROM alert_mutes WHERE job_id = :job_id", returns_datetimes=(0,))

COUNT_REPEAT = Statement(
    """
    UPDATE alerts SET occurrences = occurrences + 1, last_seen_at = :now, message = :message,
        execution_id = :execution_id
    WHERE dedup_key = :key AND resolved_at IS NULL
    """,
    datetimes=("now",),
)

# The partial unique index uq_alerts_open_dedup_key allows one open alert per key: a worker that
# loses the race to open it inserts nothing here and counts a repeat instead. The alert belongs
# to the job's project, through its queue; a one-off run's (no job) to the run's own project.
OPEN_ALERT = Statement(
    """
    INSERT INTO alerts (job_id, execution_id, project_id, kind, message, created_at, last_seen_at,
                        occurrences, dedup_key)
    SELECT :job_id, :execution_id,
           COALESCE((SELECT q.project_id FROM jobs AS j JOIN queues AS q ON q.id = j.queue_id WHERE j.id = :job_id),
                    (SELECT e.project_id FROM executions AS e WHERE e.id = :execution_id)),
           :kind, :message, :now, :now, 1, :key
    WHERE true
    ON CONFLICT (dedup_key) WHERE resolved_at IS NULL AND dedup_key IS NOT NULL DO NOTHING
    RETURNING id
    """,
    datetimes=("now",),
)


def job_key(kind: str, job_id: int) -> str:
    """The dedup key of a job's alert of `kind`."""
    return f"{kind}:job:{job_id}"


def run_key(kind: str, execution_id: int) -> str:
    """The dedup key of a one-off run's alert of `kind` (it has no job to group by)."""
    return f"{kind}:run:{execution_id}"


def is_muted(conn: DBConnection, job_id: int, now: datetime) -> bool:
    until = read_datetime(execute(conn, MUTED_UNTIL, {"job_id": job_id}).scalar())
    return until is not None and until > now


def raise_job_alert(
    conn: DBConnection, *, kind: str, job_id: int | None, message: str, now: datetime, execution_id: int | None = None
) -> str:
    """Open the job's alert of `kind`, or count a repeat on the open one: OPENED, REPEATED or
    MUTED (nothing written). A one-off run (`job_id` None, `execution_id` given) has an alert of
    its own, never muted (mutes are per job)."""
    if job_id is None:
        if execution_id is None:
            raise ValueError("an alert without a job needs its execution")
        key = run_key(kind, execution_id)
    elif is_muted(conn, job_id, now):
        return MUTED
    else:
        key = job_key(kind, job_id)
    params = {"key": key, "message": message[:2000], "now": now, "execution_id": execution_id}
    if execute(conn, COUNT_REPEAT, params).rowcount:
        return REPEATED
    if execute(conn, OPEN_ALERT, {**params, "job_id": job_id, "kind": kind}).rows:
        return OPENED
    execute(conn, COUNT_REPEAT, params)  # another worker opened it since: this is a repeat
    return REPEATED
