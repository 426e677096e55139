"""Migration 0014 on both databases: on PostgreSQL, executions and attempts get autovacuum
thresholds that stay small at 10M rows and ix_executions_queue_id carries trigger and status
(rebuilt concurrently, existing rows indexed); on both, ix_executions_queue_waiting appears; the
downgrade puts everything back and the rows stay."""

from __future__ import annotations

from tests.helpers import migrations
from tests.helpers.migrations import flask_db, rows, seed_executions

fresh_url = migrations.fresh_url  # the fixture: an empty database on each backend

OPTIONS = "SELECT relname, reloptions FROM pg_class WHERE relname IN ('executions', 'attempts') ORDER BY relname"


def storage_options(url: str) -> dict[str, set[str]]:
    return {name: set(options or []) for name, options in rows(url, OPTIONS)}


def queue_index(url: str) -> str:
    [(definition,)] = rows(url, "SELECT indexdef FROM pg_indexes WHERE indexname = 'ix_executions_queue_id'")
    return definition.split(" USING ", 1)[1]


def waiting_index(url: str) -> list[str]:
    if url.startswith("postgresql"):
        sql = "SELECT indexname FROM pg_indexes WHERE indexname = 'ix_executions_queue_waiting'"
    else:
        sql = "SELECT name FROM sqlite_master WHERE type = 'index' AND name = 'ix_executions_queue_waiting'"
    return [name for (name,) in rows(url, sql)]


def count_by_queue_and_trigger(url: str) -> tuple[int, str]:
    """The queue list's count filtered by trigger, and whether its plan needs the table."""
    sql = "SELECT count(*) FROM executions WHERE queue_id = 1 AND trigger = 'schedule'"
    [(count,)] = rows(url, sql)
    if not url.startswith("postgresql"):
        return count, ""
    from sqlalchemy import text

    from tests.helpers.migrations import engine_for

    engine = engine_for(url)
    with engine.connect() as conn:  # three rows: only a planner told to avoid the table uses an index
        conn.execute(text("SET enable_seqscan = off"))
        conn.execute(text("SET enable_bitmapscan = off"))
        plan = "\n".join(line for (line,) in conn.execute(text("EXPLAIN " + sql)))
    engine.dispose()
    return count, plan


def test_autovacuum_thresholds_up_and_down(fresh_url, tmp_path):
    instance = tmp_path / "instance"
    flask_db(fresh_url, instance, "upgrade", "0013")
    postgres = fresh_url.startswith("postgresql")
    if postgres:
        assert storage_options(fresh_url) == {"attempts": set(), "executions": set()}
    seed_executions(fresh_url)
    flask_db(fresh_url, instance, "upgrade", "0014")
    assert count_by_queue_and_trigger(fresh_url)[0] == 2
    assert waiting_index(fresh_url) == ["ix_executions_queue_waiting"]
    if postgres:
        assert queue_index(fresh_url) == "btree (queue_id, id) INCLUDE (trigger, status)"
        assert "Index Only Scan using ix_executions_queue_id" in count_by_queue_and_trigger(fresh_url)[1]
        assert storage_options(fresh_url) == {
            "executions": {
                "autovacuum_vacuum_scale_factor=0.02",
                "autovacuum_vacuum_threshold=1000",
                "autovacuum_analyze_scale_factor=0.01",
                "autovacuum_vacuum_cost_limit=2000",
            },
            "attempts": {"autovacuum_vacuum_scale_factor=0.05", "autovacuum_analyze_scale_factor=0.02"},
        }
    flask_db(fresh_url, instance, "downgrade", "0013")
    if postgres:
        assert storage_options(fresh_url) == {"attempts": set(), "executions": set()}
        assert queue_index(fresh_url) == "btree (queue_id, id)"
    assert waiting_index(fresh_url) == []
    flask_db(fresh_url, instance, "upgrade", "head")
    assert count_by_queue_and_trigger(fresh_url)[0] == 2
