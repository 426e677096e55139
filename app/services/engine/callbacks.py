"""Callbacks and batch completion: what follows a run's final outcome.

When a run ends for good (succeeded; or failed, timed out or dead-lettered after its last attempt),
its job's `on_success` / `on_failure` task runs as a new execution: trigger `callback`, `parent_id`
the run, the callback's own task (`callback_task`) with its config plus the parent's outcome under
`parent` (with what the parent returned as `result`, the callback's `ctx.parent_result`), one attempt, not exclusive, in the job's queue. When a batch's last item ends, the batch is
marked complete and its `on_complete` task runs the same way (`batch_id` set, no parent execution).

Decision: callbacks are created in the same transaction that records the parent's final outcome (the
worker's turn; lease recovery; an operator's cancel), and each has a unique idempotency key
(`callback:<kind>:execution:<id>` / `callback:<kind>:batch:<id>`) inserted with ON CONFLICT DO NOTHING.
The first makes "the parent ended but its callback was never created" impossible: both commit or
neither does, so a crash between them cannot lose one. The second makes a second creation harmless,
should two paths ever both see the same final outcome (a result recorded by a worker whose lease was
also being recovered: only one of them records it, but the key does not rely on that). A batch is
completed under its row's lock (`Store.complete_batches`), so exactly one recorder creates its
on-complete callback; the scheduler sweeps open batches once a minute for endings no recorder saw
(items cancelled by disabling the job, or expired).

Callbacks never trigger callbacks, and nothing here ever changes the parent: a failing callback is
dead-lettered and alerts like any run with no attempts left.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from app.clock import iso_z
from app.domain.batches import batch_status, full_counts
from app.domain.states import ExecutionStatus as S
from app.services.engine import workflows
from app.sql import follow_ups
from app.sql.events import insert_event
from app.sql.rows import callback_row

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection  # or a bare DB-API connection (app/sql/transport.py)

log = logging.getLogger("cronwell.callbacks")

SUCCESS = frozenset({S.SUCCEEDED.value})
# A run that ended without succeeding through its own attempts: on_failure. A cancelled, missed or
# expired run did not fail, so it fires neither callback.
FAILURE = frozenset({S.FAILED.value, S.TIMED_OUT.value, S.DEAD_LETTERED.value})
ERROR_CHARS = 2000  # of the parent's error, in the callback's context


@dataclass
class FollowUps:
    """What `after_final` created: callback and workflow step execution ids, and batches completed."""

    callbacks: list[int] = field(default_factory=list)
    batches: list[int] = field(default_factory=list)
    steps: list[int] = field(default_factory=list)  # workflow steps that may start now
    job_ids: set[int] = field(default_factory=set)


def callback_kind(is_callback: bool, status: str) -> str | None:
    """Which of its job's callbacks a run ending in `status` fires: on_success, on_failure or none.
    A callback (or an operator's retry of one: it keeps its `callback_task`) fires none."""
    if is_callback:
        return None  # callbacks never trigger callbacks
    if status in SUCCESS:
        return "on_success"
    if status in FAILURE:
        return "on_failure"
    return None


def may_follow(
    *,
    is_callback: bool,
    batch_id: int | None,
    status: str,
    on_success: str | None,
    on_failure: str | None,
    workflow_run_id: int | None = None,
) -> bool:
    """Whether a run ending in `status` may need a follow-up (a cheap test on what the worker
    already holds, so a turn with nothing to follow stays one statement)."""
    if batch_id is not None or workflow_run_id is not None:
        return True
    kind = callback_kind(is_callback, status)
    return (kind == "on_success" and bool(on_success)) or (kind == "on_failure" and bool(on_failure))


def after_final(conn: Connection, execution_ids: Iterable[int], *, now: datetime) -> FollowUps:
    """For executions that just reached a terminal status (in this transaction): create their
    jobs' callbacks and complete the batches whose last item they were."""
    ids = sorted(set(execution_ids))
    done = FollowUps()
    if not ids:
        return done
    rows = follow_ups.ended_with_jobs(conn, ids)
    new_rows = []
    for row in rows:
        if row.workflow_run_id is not None:
            continue  # a step: its run's end fires the job's callbacks, once
        kind = callback_kind(row.callback_task is not None, row.status)
        task = getattr(row, kind) if kind else None
        if not kind or not task:
            continue
        config = dict(getattr(row, f"{kind}_config") or {})
        config["parent"] = {
            "id": row.id,
            "job_id": row.job_id,
            "job": row.job_name,
            "status": row.status,
            "exit_code": row.exit_code,
            "error": (row.error or "")[-ERROR_CHARS:],
            "attempts": row.attempts,
            "trigger": row.trigger,
            "finished_at": iso_z(row.finished_at),
            "result": _decoded(row.result),  # the callback's ctx.parent_result
        }
        new_rows.append(callback_row(_job(row), kind=kind, task=task, config=config, now=now, parent_id=row.id))
    done.callbacks += _create(conn, new_rows, now=now)
    done.job_ids |= {row.job_id for row in rows}
    run_ids = workflows.runs_of(rows)
    if run_ids:
        moved = workflows.hand_off(conn, run_ids, now=now)
        done.steps += moved.steps
        done.job_ids |= moved.job_ids
        if moved.ended:  # the runs' anchors ended: their job's callbacks follow
            more = after_final(conn, moved.ended, now=now)
            done.callbacks += more.callbacks
            done.steps += more.steps
            done.job_ids |= more.job_ids
    batch_ids = sorted({row.batch_id for row in rows if row.batch_id is not None and row.trigger == "batch"})
    if batch_ids:
        more = settle_batches(conn, now=now, batch_ids=batch_ids)
        done.callbacks += more.callbacks
        done.batches += more.batches
        done.job_ids |= more.job_ids
    return done


def settle_batches(conn: Connection, *, now: datetime, batch_ids: Sequence[int] | None = None) -> FollowUps:
    """Complete the open batches (of `batch_ids`, or every one: the sweep) whose items have all
    ended, and create their on-complete callbacks."""
    done = FollowUps()
    completed = follow_ups.complete_batches(conn, now=now, batch_ids=batch_ids)
    if not completed:
        return done
    counts = follow_ups.batch_counts(conn, [batch.id for batch in completed])
    jobs = follow_ups.jobs_for_callbacks(conn, [batch.job_id for batch in completed])
    new_rows = []
    for batch in completed:
        tally = full_counts(counts.get(batch.id, {}))
        status = batch_status(tally, cancelled=batch.cancelled_at is not None).value
        done.batches.append(batch.id)
        done.job_ids.add(batch.job_id)
        insert_event(conn, "batch_completed", now=now, job_id=batch.job_id, batch_id=batch.id, status=status)
        log.info(
            "batch completed",
            extra={"event": "batch_completed", "batch_id": batch.id, "job_id": batch.job_id, "status": status},
        )
        if not batch.on_complete:
            continue
        job = jobs[batch.job_id]
        config = dict(batch.on_complete_config or {})
        config["parent"] = {
            "batch_id": batch.id,
            "job_id": batch.job_id,
            "job": job.name,
            "status": status,
            "counts": {key: value for key, value in tally.items() if value},
            "items": sum(tally.values()),
        }
        new_rows.append(
            callback_row(job, kind="on_complete", task=batch.on_complete, config=config, now=now, batch_id=batch.id)
        )
    done.callbacks += _create(conn, new_rows, now=now)
    return done


def _create(conn: Connection, rows: list[dict[str, Any]], *, now: datetime) -> list[int]:
    """Insert callback rows one by one (few: one per ended parent), skipping any whose key exists,
    with an event naming each one created."""
    created = []
    for row in rows:
        execution_id = follow_ups.insert_execution(conn, row)
        if execution_id is not None:
            created.append(execution_id)
            insert_event(
                conn,
                "callback_created",
                now=now,
                job_id=row["job_id"],
                execution_id=execution_id,
                parent_id=row["parent_id"],
                batch_id=row["batch_id"],
                kind=row["idempotency_key"].split(":")[1],
                task=row["callback_task"],
            )
            log.info(
                "callback created",
                extra={"event": "callback_created", "execution_id": execution_id, "job_id": row["job_id"]},
            )
    return created


def _decoded(result: str | None) -> Any:
    """A stored result (JSON text) as its value; None for none."""
    if result is None:
        return None
    try:
        return json.loads(result)
    except ValueError:
        return None


def _job(row: Any) -> SimpleNamespace:
    """What a row builder needs of the parent's job."""
    return SimpleNamespace(
        id=row.job_id,
        queue_id=row.queue_id,
        priority=row.priority,
        max_attempts=row.max_attempts,
        overlap_policy=row.overlap_policy,
    )
