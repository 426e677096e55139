"""Migration 0017 on both databases: on PostgreSQL ix_executions_job_id carries status,
finished_at and created_at (rebuilt concurrently, existing rows indexed), so the jobs list's last
outcome and 24 h success rate are read from the index alone, with the same answers; SQLite keeps
its plain index; the downgrade puts the plain index back and the rows stay."""

from __future__ import annotations

from sqlalchemy import text

from tests.helpers import migrations
from tests.helpers.migrations import engine_for, flask_db, rows, seed_executions

fresh_url = migrations.fresh_url  # the fixture: an empty database on each backend

# The jobs list's reads per job (app/services/read/console_lists.py): the status of the newest
# finished execution (also the last-outcome filter), and the finished and succeeded runs created
# since a moment (the 24 h success rate).
LAST_OUTCOME = (
    "SELECT jobs.id, (SELECT e.status FROM executions AS e WHERE e.job_id = jobs.id AND e.finished_at IS NOT NULL"
    " ORDER BY e.id DESC LIMIT 1) FROM jobs ORDER BY jobs.id"
)
SUCCESS_RATE = (
    "SELECT job_id, count(*), count(CASE WHEN status = 'succeeded' THEN 1 END) FROM executions"
    " WHERE job_id IN (1, 2) AND id >= 1 AND created_at >= '2026-06-01 12:00:30'"
    " AND finished_at IS NOT NULL GROUP BY job_id"
)


def job_index(url: str) -> str:
    if url.startswith("postgresql"):
        [(definition,)] = rows(url, "SELECT indexdef FROM pg_indexes WHERE indexname = 'ix_executions_job_id'")
        return definition.split(" USING ", 1)[1]
    [(definition,)] = rows(url, "SELECT sql FROM sqlite_master WHERE name = 'ix_executions_job_id'")
    return definition.split(" ON ", 1)[1]


def finish_two(url: str) -> None:
    """The seed's first two executions finish (succeeded, then failed); the third stays pending."""
    engine = engine_for(url)
    with engine.begin() as conn:
        for key, status in (("k0", "succeeded"), ("k1", "failed")):
            conn.execute(
                text(
                    "UPDATE executions SET status = :status, attempts = 1, started_at = created_at,"
                    " finished_at = created_at WHERE idempotency_key = :key"
                ),
                {"status": status, "key": key},
            )
    engine.dispose()


def answers_and_plans(url: str) -> tuple[list, list, str]:
    """Both reads' rows and, on PostgreSQL, the last outcome's plan with the table scans ruled out
    (three rows: only a planner told to avoid the table uses an index)."""
    engine = engine_for(url)
    with engine.connect() as conn:
        plans = ""
        if url.startswith("postgresql"):
            conn.execute(text("SET enable_seqscan = off"))
            conn.execute(text("SET enable_bitmapscan = off"))
            plans = "\n".join(line for (line,) in conn.execute(text("EXPLAIN " + LAST_OUTCOME)))
        last = [tuple(row) for row in conn.execute(text(LAST_OUTCOME))]
        rate = [tuple(row) for row in conn.execute(text(SUCCESS_RATE))]
    engine.dispose()
    return last, rate, plans


def test_job_index_covers_the_jobs_list_up_and_down(fresh_url, tmp_path):
    instance = tmp_path / "instance"
    postgres = fresh_url.startswith("postgresql")
    flask_db(fresh_url, instance, "upgrade", "0016")
    seed_executions(fresh_url)
    finish_two(fresh_url)
    *before, old_plan = answers_and_plans(fresh_url)
    before = tuple(before)
    if postgres:  # the index finds the row, the table says whether it finished and how
        assert "Index Scan Backward using ix_executions_job_id" in old_plan, old_plan
    # The newest finished run failed (the pending one is newer, not finished); since 12:00:30 one
    # run finished (k1, created 12:01) and none succeeded.
    assert before == ([(1, "failed")], [(1, 1, 0)])
    flask_db(fresh_url, instance, "upgrade", "0017")
    last, rate, plans = answers_and_plans(fresh_url)
    assert (last, rate) == before
    if postgres:
        assert job_index(fresh_url) == "btree (job_id, id) INCLUDE (status, finished_at, created_at)"
        # Before, the newest finished run was found through the index and its row read from the
        # table; now from the index alone. (The success rate's plan on three rows prefers the
        # date-range indexes; at 10M it is an index-only scan of this index: docs/performance.md.)
        assert "Index Only Scan Backward using ix_executions_job_id" in plans, plans
    else:
        assert job_index(fresh_url) == "executions (job_id, id)"
    flask_db(fresh_url, instance, "downgrade", "0016")
    if postgres:
        assert job_index(fresh_url) == "btree (job_id, id)"
    assert answers_and_plans(fresh_url)[:2] == before
    flask_db(fresh_url, instance, "upgrade", "head")
    assert answers_and_plans(fresh_url)[:2] == before
