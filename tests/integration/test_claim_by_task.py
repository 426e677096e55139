"""A worker's turn claims only runs of the tasks it advertises, on both databases: the task of a
run is a callback's own, a one-off run's own, otherwise its job's
(`COALESCE(e.callback_task, e.task, j.task)`), so a workflow step runs its own task; a workflow's
run itself (its occurrence) has no queue and is never claimed."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import select

from app.database import write_transaction
from app.models import Execution
from app.services.use_cases import one_off_runs
from app.sql import turn
from tests.factories import make_execution, make_job

NOW = datetime(2026, 12, 7, 9, 0, tzinfo=UTC)
LEASE = dict(lease_seconds=60, buffer_seconds=30)


def scenario(db) -> dict[str, int]:
    """One due run of each kind: {role: execution id}."""
    echo = make_job(name="echoes", now=NOW, task="echo", config={"message": "hi"}, overlap_policy="allow")
    succeed = make_job(name="succeeds", now=NOW, task="always_succeed", overlap_policy="allow")
    workflow = make_job(
        name="flow", now=NOW, task="always_fail", overlap_policy="allow", steps=[{"name": "a", "task": "echo"}]
    )
    ids = {
        "echo_job": make_execution(echo, "pending", now=NOW).id,
        "succeed_job": make_execution(succeed, "pending", now=NOW).id,
        # A callback of the echo job runs its own task, not the job's.
        "callback_elsewhere": make_execution(
            echo, "pending", now=NOW, trigger="callback", callback_task="always_succeed"
        ).id,
        "callback_echo": make_execution(succeed, "pending", now=NOW, trigger="callback", callback_task="echo").id,
        "workflow_run": make_execution(workflow, "pending", now=NOW).id,
        "workflow_step": make_execution(workflow, "pending", now=NOW, trigger="workflow").id,
    }
    # As the workflow engine stores them: the run without a queue, its step with its own task.
    table = Execution.__table__
    db.session.execute(table.update().where(table.c.id == ids["workflow_run"]).values(queue_id=None))
    db.session.execute(
        table.update()
        .where(table.c.id == ids["workflow_step"])
        .values(task="echo", step="a", workflow_run_id=ids["workflow_run"], exclusive=False)
    )
    db.session.commit()
    one_off = one_off_runs.create_run({"task": "always_succeed"}, now=NOW, actor="test").execution
    one_off_echo = one_off_runs.create_run({"task": "echo", "config": {"message": "x"}}, now=NOW, actor="test")
    db.session.execute(
        Execution.__table__.update()
        .where(Execution.id.in_([one_off.id, one_off_echo.execution.id]))
        .values(available_at=NOW)
    )
    db.session.commit()
    return {**ids, "one_off_elsewhere": one_off.id, "one_off_echo": one_off_echo.execution.id}


def claimed(db, ids: dict[str, int], tasks) -> list[str]:
    with write_transaction(db.engine) as conn:
        result = turn.record_and_claim(
            conn, [], worker_id="w-tasks", now=NOW, limit=20, queue_ids=None, tasks=tasks, **LEASE
        )
    role_of = {execution_id: role for role, execution_id in ids.items()}
    return sorted(role_of[item.id] for item, _ in result.started)


def statuses(db, ids: dict[str, int]) -> dict[str, str]:
    db.session.rollback()
    rows = db.session.execute(select(Execution.id, Execution.status).where(Execution.id.in_(ids.values())))
    role_of = {execution_id: role for role, execution_id in ids.items()}
    return {role_of[execution_id]: status for execution_id, status in rows}


def test_a_turn_claims_only_runs_of_the_tasks_it_is_given(db):
    ids = scenario(db)

    assert claimed(db, ids, ["echo"]) == ["callback_echo", "echo_job", "one_off_echo", "workflow_step"]
    waiting = {role for role, status in statuses(db, ids).items() if status == "pending"} - {"workflow_run"}
    assert waiting == {"succeed_job", "callback_elsewhere", "one_off_elsewhere"}

    assert claimed(db, ids, ["http_request"]) == []  # none of its task left
    assert claimed(db, ids, ["always_succeed", "http_request"]) == sorted(waiting)


def test_without_a_task_list_a_turn_claims_every_task(db):
    ids = scenario(db)
    assert claimed(db, ids, None) == sorted(set(ids) - {"workflow_run"})


def test_an_empty_task_list_claims_nothing(db):
    ids = scenario(db)
    assert claimed(db, ids, []) == []
