"""Workflow runs: a job's occurrence run as a graph of steps, each step an execution.

A workflow job's occurrence (its *anchor*) is created like any other: by the scheduler, a
trigger, a backfill, so misfire, overlap, unique keys and the runs grid treat it as one run. It
has no queue, so no worker claims it: the scheduler starts it (`start_due`) once it is due and,
for an exclusive job (overlap skip or queue), once no other run of the job is in flight. Starting
moves it to running, writes its `workflow_runs` row (the steps as they are then) and creates the
roots' executions. Each step then runs like any job's run: claimed under a lease, retried, timed
out, recovered.

Decision: the hand-off happens in the transaction that records a step's final outcome (a worker's
turn, lease recovery, an operator's cancel), through `callbacks.after_final`, under the run row's
lock. So "the step ended but the next one was never created" cannot happen (both commit or
neither), and of two steps ending at once on two workers the one that locks second sees both
ended: a step that waits for both starts exactly once (its execution's idempotency key,
`workflow:<run>:<step>`, makes a second creation impossible anyway). The scheduler sweeps unfinished runs for
endings no recorder saw (a step expired by its queued TTL, or cancelled by disabling the job). When
every step has ended, the anchor ends with the run's outcome in the same transaction, and its
job's callbacks follow as for any run. What a hand-off writes is stamped no earlier than the step
ends it read (`not_before`). A disabled job's run starts no more steps: its waiting steps are
marked cancelled and it ends `cancelled` once its running steps have ended.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from itertools import groupby
from types import SimpleNamespace
from typing import Any

from app.domain.workflow import CANCELLED, UPSTREAM_FAILED, advance, nodes_of, step_statuses
from app.sql import follow_ups
from app.sql import workflows as statements
from app.sql.events import insert_event
from app.sql.transport import DBConnection

log = logging.getLogger("cronwell.workflows")

START_BATCH = 100  # workflow jobs started per scheduler pass
SWEEP_BATCH = 200  # unfinished runs looked at per sweep


@dataclass
class Moved:
    """What starting or advancing runs did: step executions created, runs (anchors) ended."""

    started_runs: list[int] = field(default_factory=list)
    steps: list[int] = field(default_factory=list)
    ended: list[int] = field(default_factory=list)
    job_ids: set[int] = field(default_factory=set)

    def add(self, other: Moved) -> None:
        self.started_runs += other.started_runs
        self.steps += other.steps
        self.ended += other.ended
        self.job_ids |= other.job_ids


def start_due(
    conn: DBConnection, *, now: datetime, job_ids: Sequence[int] | None = None, limit: int = START_BATCH
) -> Moved:
    """Start the due occurrences of workflow jobs (an exclusive job's one at a time): of
    `job_ids`, which the caller has locked (the scheduler's tick), or of every workflow job with
    one due that no other scheduler holds."""
    moved = Moved()
    if job_ids is None:
        job_ids = statements.lock_workflow_jobs(conn, now=now, limit=limit)
    anchors = statements.due_anchors(conn, job_ids, now=now)
    for _job_id, group in groupby(anchors, key=lambda anchor: anchor.job_id):
        busy = False
        for anchor in group:
            if anchor.exclusive and (busy or anchor.busy):
                break  # waits behind the run in flight, as an exclusive job's runs do
            if start(conn, anchor, now=now, moved=moved) and anchor.exclusive:
                busy = True
    return moved


def start_job_now(conn: DBConnection, job_id: int, *, now: datetime) -> Moved:
    """Start a workflow job's due runs at once (a trigger's), under its row's lock."""
    statements.lock_job(conn, job_id)
    return start_due(conn, now=now, job_ids=[job_id])


def start(conn: DBConnection, anchor: SimpleNamespace, *, now: datetime, moved: Moved) -> bool:
    """Start one occurrence: running, its run row (the job's steps as they are now, unless the
    row exists already: a retry wrote it with the steps it takes over), its first steps. False
    if it had moved on."""
    if not statements.start_anchor(conn, anchor.id, now=now):
        return False
    statements.insert_run(
        conn, run_id=anchor.id, job_id=anchor.job_id, steps=list(anchor.steps or []), state={}, now=now
    )
    [run] = statements.lock_runs(conn, [anchor.id])
    insert_event(
        conn,
        "workflow_started",
        now=now,
        job_id=anchor.job_id,
        execution_id=anchor.id,
        steps=len(run.steps),
        kept=sorted(run.state),
    )
    moved.started_runs.append(anchor.id)
    moved.job_ids.add(anchor.job_id)
    moved.add(_advance(conn, run, now=now))
    return True


def hand_off(conn: DBConnection, run_ids: Iterable[int], *, now: datetime) -> Moved:
    """After steps of `run_ids` ended (in this transaction): start what now may, mark what never
    will, and end the runs whose every step has ended."""
    moved = Moved()
    for run in statements.lock_runs(conn, sorted(set(run_ids))):
        moved.add(_advance(conn, run, now=now))
    return moved


def sweep(conn: DBConnection, *, now: datetime, limit: int = SWEEP_BATCH) -> Moved:
    """Advance unfinished runs nobody else holds: endings no recorder saw (expired steps)."""
    return hand_off(conn, statements.lock_unfinished(conn, limit=limit), now=now)


def _advance(conn: DBConnection, run: SimpleNamespace, *, now: datetime) -> Moved:
    moved = Moved()
    nodes = nodes_of(run.steps)
    state: dict[str, Any] = dict(run.state or {})
    referenced = [entry["execution_id"] for entry in state.values() if isinstance(entry.get("execution_id"), int)]
    rows = statements.executions(conn, referenced)
    statuses = step_statuses(nodes, state, {row.id: row.status for row in rows.values()})
    # A disabled job's run starts nothing more, as a cancelled one: disabling cancelled its
    # queued steps and lets the running ones finish; the rest never start.
    move = advance(nodes, statuses, cancelling=bool(run.cancelling) or not run.job_enabled)
    # What this pass writes (the steps it creates, the run's end) is stamped no earlier than the
    # steps it read had ended.
    at = not_before(now, rows.values())
    for name in move.upstream_failed:
        state[name] = {"state": UPSTREAM_FAILED}
    for name in move.cancelled:
        state[name] = {"state": CANCELLED}
    by_name = {step["name"]: step for step in run.steps}
    queues = statements.queues_by_name(
        conn, run.queue_id, [by_name[name]["queue"] for name in move.start if by_name[name].get("queue")]
    )
    new_rows = []
    for name in move.start:
        step = by_name[name]
        upstream = {up: _result(rows.get(state[up]["execution_id"])) for up in step.get("after") or ()}
        new_rows.append(_step_row(run, step, upstream, queues, now=at))
    created = follow_ups.insert_executions(conn, new_rows)  # a fan-out's steps in one statement
    for name in move.start:
        key = step_key(run.id, name)
        # Not created: it was already (its key is the run's and the step's).
        execution_id = created.get(key) or follow_ups.execution_by_key(conn, key)
        if execution_id is None:
            raise RuntimeError(f"workflow run {run.id}: step {name!r} was neither created nor found")
        state[name] = {"execution_id": execution_id}
        moved.steps.append(execution_id)
    if move.upstream_failed or move.start or move.cancelled or move.outcome:
        statements.write_state(conn, run.id, state, now=at, finished=at if move.outcome else None)
    if move.outcome is not None:
        failed = [name for name, status in statuses.items() if status not in ("succeeded", UPSTREAM_FAILED, CANCELLED)]
        error = f"step {', '.join(failed)} did not succeed" if move.outcome == "failed" and failed else ""
        if statements.end_anchor(conn, run.id, move.outcome, now=at, error=error):
            moved.ended.append(run.id)
        insert_event(
            conn,
            "workflow_finished",
            now=at,
            job_id=run.job_id,
            execution_id=run.id,
            status=move.outcome,
            upstream_failed=sorted(name for name, entry in state.items() if entry.get("state") == UPSTREAM_FAILED),
        )
        log.info(
            "workflow finished",
            extra={"event": "workflow_finished", "execution_id": run.id, "job_id": run.job_id, "status": move.outcome},
        )
    moved.job_ids.add(run.job_id)
    return moved


def not_before(now: datetime, steps: Iterable[SimpleNamespace]) -> datetime:
    """`now`, or the latest recorded finish of `steps` when that is later.

    The caller's `now` was read before its transaction waited for the run's lock, so a step that
    another recorder ended meanwhile may carry a later `finished_at` (that turn read its clock
    after this one). What follows it (a downstream step's creation, the run's end) is stamped no
    earlier than that finish: the history never shows a step created or due (so started: a claim
    takes only rows whose `available_at` has come) before a step it waited for had ended, nor a
    run that ended before one of its steps."""
    finishes: list[datetime] = [step.finished_at for step in steps if step.finished_at is not None]
    return max([now, *finishes])


def step_key(run_id: int, step: str) -> str:
    """A step execution's idempotency key: one execution per step per run."""
    return f"workflow:{run_id}:{step}"


def _step_row(
    run: SimpleNamespace, step: dict[str, Any], upstream: dict[str, Any], queues: dict[str, int], *, now: datetime
) -> dict[str, Any]:
    """A step's execution: its own task, config, attempts, timeout and queue (the job's where the
    step names none), not exclusive (the run as a whole is what overlaps), created and due at
    `now` (no earlier than its upstream's finish: `not_before`)."""
    queue_id = queues.get(step["queue"], run.queue_id) if step.get("queue") else run.queue_id
    return {
        "job_id": run.job_id,
        "scheduled_for": now,
        "trigger": "workflow",
        "idempotency_key": step_key(run.id, step["name"]),
        "status": "pending",
        "attempts": 0,
        "max_attempts": step.get("max_attempts") or run.max_attempts,
        "queue_id": queue_id,
        "priority": run.priority,
        "exclusive": False,
        "available_at": now,
        "output": "",
        "error": "",
        "task": step["task"],
        "timeout_seconds": step.get("timeout_seconds"),
        "config_override": dict(step.get("config") or {}),
        "workflow_run_id": run.id,
        "step": step["name"],
        "upstream_results": upstream,
        "created_at": now,
        "updated_at": now,
    }


def _result(row: SimpleNamespace | None) -> Any:
    if row is None or row.result is None:
        return None
    try:
        return json.loads(row.result)
    except ValueError:
        return None


def runs_of(executions: Sequence[SimpleNamespace]) -> list[int]:
    """The workflow runs that ended executions (rows with `workflow_run_id`) are steps of."""
    return sorted({row.workflow_run_id for row in executions if getattr(row, "workflow_run_id", None) is not None})
