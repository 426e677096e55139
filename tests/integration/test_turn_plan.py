"""The worker's turn is planned once per connection, and that one plan is a good one.

Planning the turn statement costs more than running it (about 1.7 ms against 1.1 ms at 4 per
batch), so the worker's connection uses generic plans for it (`GENERIC_TURN_PLANS` in
app/sql/turn_postgresql.py). These tests hold both halves of that bargain on PostgreSQL: once the
statement is prepared (at its first use), turns reuse one plan instead of planning each time; and
the generic plan, made without knowing `now`, walks the claimable index in order even with a large
backlog, so it never degrades into a scan and sort of every pending row.
"""

from __future__ import annotations

import re

import pytest
from sqlalchemy import text

from app.clock import utcnow
from app.database import write_transaction_on
from app.extensions import db
from app.sql.turn_postgresql import GENERIC_TURN_PLANS, _turn_statement
from app.store import store_for
from tests.factories import make_job

BACKLOG = 50_000


def _load_backlog(job_id: int) -> None:
    with db.engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO executions (job_id, scheduled_for, trigger, idempotency_key, status, attempts,"
                " max_attempts, queue_id, holds_slot, priority, exclusive, available_at, output, error,"
                " created_at, updated_at)"
                " SELECT :job, now() - make_interval(secs => g), 'manual', 'backlog-' || g, 'pending', 0, 1,"
                " (SELECT id FROM queues WHERE name = 'default'), false, 0, false, now() - make_interval(secs => g),"
                " '', '', now(), now() FROM generate_series(1, :n) AS g"
            ),
            {"job": job_id, "n": BACKLOG},
        )
        conn.exec_driver_sql("ANALYZE executions")


def _turn(conn, limit: int = 4, tasks=None):
    with write_transaction_on(conn) as tx:
        return store_for(tx).record_and_claim(
            tx,
            [],
            worker_id="plan-test",
            now=utcnow(),
            limit=limit,
            queue_ids=None,
            lease_seconds=60,
            buffer_seconds=0,
            tasks=tasks,
        )


# A worker's turn is filtered on the tasks it advertises; without a list, on none.
BY_TASK = pytest.mark.parametrize("tasks", [None, ["always_succeed", "echo"]], ids=["any-task", "by-task"])


@BY_TASK
def test_turns_on_one_connection_reuse_one_generic_plan(pg_app, tasks):
    job = make_job(overlap_policy="allow")
    _load_backlog(job.id)
    with db.engine.connect() as conn:
        started = [len(_turn(conn, tasks=tasks).started) for _ in range(8)]
        plans = conn.exec_driver_sql(
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement LIKE '%%WITH result AS%%'"
        ).all()
    assert started == [4] * 8
    assert len(plans) == 1, plans  # one prepared text for batches of 4
    generic, custom = plans[0]
    assert (generic, custom) == (8, 0), plans  # prepared at its first use: every turn ran the one plan


@BY_TASK
def test_the_generic_plan_walks_the_claimable_index_with_a_large_backlog(pg_app, tasks):
    job = make_job(overlap_policy="allow")
    _load_backlog(job.id)
    sql = _turn_statement(False, 4, tasks is not None)
    names = list(dict.fromkeys(re.findall(r"(?<![:\w]):([a-z_]\w*)", sql)))
    numbered = re.sub(r"(?<![:\w]):([a-z_]\w*)", lambda m: f"${names.index(m.group(1)) + 1}", sql)
    with db.engine.connect() as conn:
        conn.exec_driver_sql(GENERIC_TURN_PLANS)
        conn.exec_driver_sql(f"PREPARE turn_probe AS {numbered}")
        nulls = ", ".join(["NULL"] * len(names))
        plan = "\n".join(row[0] for row in conn.exec_driver_sql(f"EXPLAIN EXECUTE turn_probe({nulls})"))
        conn.exec_driver_sql("DEALLOCATE turn_probe")
    print(plan)
    assert "$" in plan  # a generic plan: the parameters stay unresolved
    assert "Index Scan using ix_executions_claimable on executions e" in plan, plan
    assert "Seq Scan on executions e " not in plan, plan
