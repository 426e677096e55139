"""Workflow runs' statements: start an occurrence of a workflow job, lock a run and read its
steps' executions, write what became of them, end the run (app/services/engine/workflows.py
decides; these are its statements, on a SQLAlchemy or a bare DB-API connection alike)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from types import SimpleNamespace
from typing import Any

from app.domain.states import CLAIMABLE, IN_FLIGHT
from app.sql.statuses import sql_statuses
from app.sql.transport import DBConnection, Statement, execute, with_lists

# A workflow job's occurrence (its anchor) is never claimed by a worker: it has no queue
# (app/sql/rows.py), so no candidate query can match it. The scheduler starts the due ones: the
# jobs are locked first (SKIP LOCKED: another scheduler is starting them), then per job the
# waiting anchors in the order a worker would take them.
_LOCK_WORKFLOW_JOBS = f"""
SELECT j.id FROM jobs AS j
WHERE j.steps IS NOT NULL AND j.enabled
  AND EXISTS (SELECT 1 FROM executions AS e
              WHERE e.job_id = j.id AND e.status IN ({sql_statuses(CLAIMABLE)})
                AND e.workflow_run_id IS NULL AND e.callback_task IS NULL AND e.available_at <= :now)
ORDER BY j.id
LIMIT :limit
"""
LOCK_WORKFLOW_JOBS = Statement(
    _LOCK_WORKFLOW_JOBS + "FOR UPDATE OF j SKIP LOCKED", sqlite_text=_LOCK_WORKFLOW_JOBS, datetimes=("now",)
)
_DUE_ANCHORS = f"""
SELECT e.id, e.job_id, e.exclusive, e.priority, j.name AS job_name, j.steps, j.queue_id, j.max_attempts,
       EXISTS (SELECT 1 FROM executions AS busy
               WHERE busy.job_id = e.job_id AND busy.exclusive
                 AND busy.status IN ({sql_statuses(IN_FLIGHT)})) AS busy
FROM executions AS e JOIN jobs AS j ON j.id = e.job_id
WHERE e.job_id {{jobs}} AND e.status IN ({sql_statuses(CLAIMABLE)})
  AND e.workflow_run_id IS NULL AND e.callback_task IS NULL AND e.available_at <= :now
ORDER BY e.job_id, e.priority, e.available_at, e.id
"""
DUE_ANCHORS = with_lists(_DUE_ANCHORS, {"jobs": "bigint"}, datetimes=("now",), returns_documents=(5,))
_START_ANCHOR = f"""
UPDATE executions SET status = 'running', started_at = :now, updated_at = :now
WHERE id = :id AND status IN ({sql_statuses(CLAIMABLE)})
"""
START_ANCHOR = Statement(_START_ANCHOR, datetimes=("now",))
INSERT_RUN = Statement(
    """INSERT INTO workflow_runs (id, job_id, retry_of_id, retry_from, steps, state, created_at, updated_at)
       VALUES (:id, :job_id, :retry_of_id, :retry_from, :steps, :state, :now, :now)
       ON CONFLICT DO NOTHING""",
    datetimes=("now",),
    documents=("steps", "state"),
)
QUEUES_BY_NAME = with_lists(
    """SELECT q.name, q.id FROM queues AS q JOIN queues AS own ON own.project_id = q.project_id
       WHERE own.id = :queue_id AND q.name {names}""",
    {"names": "text"},
)

# Runs are locked in id order (two recorders ending steps of two runs never wait on each other
# in a cycle); the reads after the lock see every step recorded before it was granted.
_LOCK_RUNS = """
SELECT w.id, w.job_id, w.steps, w.state, w.finished_at, a.status AS anchor_status,
       a.cancel_requested_at IS NOT NULL AS cancelling, a.priority, j.queue_id, j.max_attempts,
       j.name AS job_name, j.enabled AS job_enabled
FROM workflow_runs AS w JOIN executions AS a ON a.id = w.id JOIN jobs AS j ON j.id = w.job_id
WHERE w.id {ids} AND w.finished_at IS NULL AND a.status = 'running'
ORDER BY w.id
"""
LOCK_RUNS = with_lists(
    _LOCK_RUNS + "FOR UPDATE OF w",
    {"ids": "bigint"},
    sqlite_text=_LOCK_RUNS,
    returns_documents=(2, 3),
    returns_datetimes=(4,),
)
_LOCK_UNFINISHED = """
SELECT w.id FROM workflow_runs AS w WHERE w.finished_at IS NULL ORDER BY w.id LIMIT :limit
"""
LOCK_UNFINISHED = Statement(_LOCK_UNFINISHED + "FOR UPDATE SKIP LOCKED", sqlite_text=_LOCK_UNFINISHED)
EXECUTIONS = with_lists(
    "SELECT id, status, result, started_at, finished_at FROM executions WHERE id {ids}",
    {"ids": "bigint"},
    returns_datetimes=(3, 4),
)
WRITE_STATE = Statement(
    "UPDATE workflow_runs SET state = :state, updated_at = :now, finished_at = :finished WHERE id = :id",
    datetimes=("now", "finished"),
    documents=("state",),
)
END_ANCHOR = Statement(
    """UPDATE executions SET status = :status, finished_at = :now, updated_at = :now, error = :error
       WHERE id = :id AND status = 'running'""",
    datetimes=("now",),
)
LOCK_JOB = Statement("SELECT id FROM jobs WHERE id = :id FOR UPDATE", sqlite_text="SELECT id FROM jobs WHERE id = :id")
HAS_WORKFLOWS = Statement("SELECT 1 FROM jobs WHERE steps IS NOT NULL LIMIT 1")
LIVE_STEPS = with_lists(
    f"""SELECT id, status FROM executions
        WHERE workflow_run_id {{ids}} AND status IN ({sql_statuses(CLAIMABLE | IN_FLIGHT)})""",
    {"ids": "bigint"},
)


def lock_job(conn: DBConnection, job_id: int) -> None:
    """Lock a workflow job's row, as the scheduler's tick does before it starts its runs."""
    execute(conn, LOCK_JOB, {"id": job_id})


def has_workflows(conn: DBConnection) -> bool:
    """Whether any job is a workflow (a partial index answers it: the passes skip otherwise)."""
    return execute(conn, HAS_WORKFLOWS).scalar() is not None


def lock_workflow_jobs(conn: DBConnection, *, now: datetime, limit: int) -> list[int]:
    """Ids of enabled workflow jobs with an occurrence due to start, locked (skipping locked ones)."""
    return [row[0] for row in execute(conn, LOCK_WORKFLOW_JOBS, {"now": now, "limit": limit}).rows]


def due_anchors(conn: DBConnection, job_ids: Sequence[int], *, now: datetime) -> list[SimpleNamespace]:
    """The due, waiting occurrences of `job_ids`, each with its job's steps and whether an
    exclusive run of its job is in flight, in the order they start."""
    if not job_ids:
        return []
    return execute(conn, DUE_ANCHORS, {"jobs": sorted(set(job_ids)), "now": now}).records()


def start_anchor(conn: DBConnection, execution_id: int, *, now: datetime) -> bool:
    """Move a waiting occurrence to running (it runs as its steps); False if it had moved on."""
    return execute(conn, START_ANCHOR, {"id": execution_id, "now": now}).rowcount == 1


def insert_run(
    conn: DBConnection,
    *,
    run_id: int,
    job_id: int,
    steps: list[dict[str, Any]],
    state: dict[str, Any],
    now: datetime,
    retry_of_id: int | None = None,
    retry_from: str | None = None,
) -> None:
    execute(
        conn,
        INSERT_RUN,
        {
            "id": run_id,
            "job_id": job_id,
            "retry_of_id": retry_of_id,
            "retry_from": retry_from,
            "steps": steps,
            "state": state,
            "now": now,
        },
    )


def queues_by_name(conn: DBConnection, queue_id: int, names: Sequence[str]) -> dict[str, int]:
    """{name: id} of the queues called `names` in the project of queue `queue_id`."""
    if not names:
        return {}
    return dict(execute(conn, QUEUES_BY_NAME, {"queue_id": queue_id, "names": sorted(set(names))}).rows)


def lock_runs(conn: DBConnection, run_ids: Sequence[int]) -> list[SimpleNamespace]:
    """The unfinished runs of `run_ids`, locked, in id order, with their anchor's status and
    whether their job is enabled."""
    if not run_ids:
        return []
    return execute(conn, LOCK_RUNS, {"ids": sorted(set(run_ids))}).records()


def lock_unfinished(conn: DBConnection, *, limit: int) -> list[int]:
    """Ids of unfinished runs nobody else holds (the sweep)."""
    return [row[0] for row in execute(conn, LOCK_UNFINISHED, {"limit": limit}).rows]


def executions(conn: DBConnection, ids: Sequence[int]) -> dict[int, SimpleNamespace]:
    """{id: (id, status, result, started_at, finished_at)} of the executions `ids`."""
    if not ids:
        return {}
    return {row.id: row for row in execute(conn, EXECUTIONS, {"ids": sorted(set(ids))}).records()}


def write_state(
    conn: DBConnection, run_id: int, state: Mapping[str, Any], *, now: datetime, finished: datetime | None
) -> None:
    execute(conn, WRITE_STATE, {"id": run_id, "state": dict(state), "now": now, "finished": finished})


def end_anchor(conn: DBConnection, run_id: int, status: str, *, now: datetime, error: str = "") -> bool:
    """The occurrence ends with its run (running -> `status`); False if it was not running."""
    return execute(conn, END_ANCHOR, {"id": run_id, "status": status, "now": now, "error": error}).rowcount == 1


def live_steps(conn: DBConnection, run_ids: Sequence[int]) -> list[SimpleNamespace]:
    """The step executions of `run_ids` that wait or run: (id, status)."""
    if not run_ids:
        return []
    return execute(conn, LIVE_STEPS, {"ids": sorted(set(run_ids))}).records()
