"""Migration 0016 on both databases: on PostgreSQL the five foreign keys to executions become
triggers and come back on downgrade; a delete has exactly the effects the foreign keys had (the
same history deleted at 0015 and at 0016 leaves the same rows); SQLite keeps its foreign keys."""

from __future__ import annotations

from sqlalchemy import text

from tests.helpers import migrations
from tests.helpers.migrations import engine_for, flask_db, rows, seed_executions

fresh_url = migrations.fresh_url  # the fixture: an empty database on each backend

FOREIGN_KEYS = [
    ("alerts", "fk_alerts_execution_id_executions"),
    ("attempts", "fk_attempts_execution_id_executions"),
    ("dead_letters", "fk_dead_letters_execution_id_executions"),
    ("executions", "fk_executions_parent_id_executions"),
    ("executions", "fk_executions_retry_of_id_executions"),
]


def foreign_keys_to_executions(url: str) -> list[tuple[str, str]]:
    if url.startswith("postgresql"):
        sql = (
            "SELECT conrelid::regclass::text, conname FROM pg_constraint"
            " WHERE confrelid = 'executions'::regclass ORDER BY 1, 2"
        )
        return rows(url, sql)
    found = []
    for table in ("alerts", "attempts", "dead_letters", "executions"):
        for row in rows(url, f'SELECT "table", "from" FROM pragma_foreign_key_list(\'{table}\')'):
            if row[0] == "executions":
                found.append((table, row[1]))
    return sorted(found)


def triggers(url: str) -> list[str]:
    sql = "SELECT tgname FROM pg_trigger WHERE NOT tgisinternal AND tgname LIKE '%execution%' ORDER BY 1"
    return [name for (name,) in rows(url, sql)]


def delete_history(url: str) -> dict:
    """On the three seeded executions (1, 2, 3): attempts, a dead letter, alerts, a retry and a
    callback; then one statement deletes 1 and 2. Returns what is left."""
    engine = engine_for(url)
    with engine.begin() as conn:
        if url.startswith("sqlite"):
            conn.exec_driver_sql("PRAGMA foreign_keys=ON")
        ids = [row[0] for row in conn.execute(text("SELECT id FROM executions ORDER BY id"))]
        first, retry, callback = ids
        job = conn.execute(text("SELECT job_id FROM executions WHERE id = :x"), {"x": first}).scalar_one()
        for execution_id, number in ((first, 1), (first, 2), (retry, 1), (callback, 1)):
            conn.execute(
                text(
                    "INSERT INTO attempts (execution_id, number, worker_id, status, started_at, finished_at, output,"
                    " error) VALUES (:x, :n, 'w', 'failed', :at, :at, '', '')"
                ),
                {"x": execution_id, "n": number, "at": "2026-06-01 12:00:00"},
            )
        conn.execute(
            text("INSERT INTO dead_letters (execution_id, job_id, reason, created_at) VALUES (:x, :j, 'r', :at)"),
            {"x": first, "j": job, "at": "2026-06-01 12:00:00"},
        )
        for execution_id in ids:
            conn.execute(
                text(
                    "INSERT INTO alerts (execution_id, kind, message, created_at, occurrences)"
                    " VALUES (:x, 'k', 'm', :at, 1)"
                ),
                {"x": execution_id, "at": "2026-06-01 12:00:00"},
            )
        conn.execute(text("UPDATE executions SET retry_of_id = :a WHERE id = :b"), {"a": first, "b": retry})
        conn.execute(
            text("UPDATE executions SET parent_id = :a, retry_of_id = :b WHERE id = :c"),
            {"a": first, "b": retry, "c": callback},
        )
    with engine.begin() as conn:
        if url.startswith("sqlite"):
            conn.exec_driver_sql("PRAGMA foreign_keys=ON")
        conn.execute(text("DELETE FROM executions WHERE id IN (:a, :b)"), {"a": first, "b": retry})
    engine.dispose()
    name = {first: "first", retry: "retry", callback: "callback", None: None}  # ids differ between runs
    return {
        "attempts": [(name[x], n) for x, n in rows(url, "SELECT execution_id, number FROM attempts ORDER BY 1, 2")],
        "dead_letters": [name[x] for (x,) in rows(url, "SELECT execution_id FROM dead_letters")],
        "alerts": [name[x] for (x,) in rows(url, "SELECT execution_id FROM alerts ORDER BY id")],
        "executions": [
            tuple(name[x] for x in row) for row in rows(url, "SELECT id, retry_of_id, parent_id FROM executions")
        ],
    }


def forget_history(url: str) -> None:
    engine = engine_for(url)
    with engine.begin() as conn:
        for table in ("alerts", "dead_letters", "attempts", "executions", "jobs"):
            conn.execute(text(f"DELETE FROM {table}"))
    engine.dispose()


def test_0016_trades_the_foreign_keys_for_triggers_with_the_same_effects_and_back(fresh_url, tmp_path):
    postgres = fresh_url.startswith("postgresql")
    flask_db(fresh_url, tmp_path, "upgrade", "0015")
    assert foreign_keys_to_executions(fresh_url) == (FOREIGN_KEYS if postgres else _columns())
    seed_executions(fresh_url)
    with_foreign_keys = delete_history(fresh_url)
    forget_history(fresh_url)

    flask_db(fresh_url, tmp_path, "upgrade", "0016")
    if postgres:
        assert foreign_keys_to_executions(fresh_url) == []
        assert "executions_deleted" in triggers(fresh_url)
    else:
        assert foreign_keys_to_executions(fresh_url) == _columns()
    seed_executions(fresh_url)
    with_triggers = delete_history(fresh_url)
    assert with_triggers == with_foreign_keys
    assert with_triggers == {
        "attempts": [("callback", 1)],
        "dead_letters": [],
        "alerts": [None, None, "callback"],
        "executions": [("callback", None, None)],
    }

    flask_db(fresh_url, tmp_path, "downgrade", "0015")  # the constraints come back, checking the rows
    assert foreign_keys_to_executions(fresh_url) == (FOREIGN_KEYS if postgres else _columns())
    if postgres:
        assert triggers(fresh_url) == []
    flask_db(fresh_url, tmp_path, "upgrade", "head")


def _columns() -> list[tuple[str, str]]:
    """SQLite's foreign keys to executions, by referencing column."""
    return [
        ("alerts", "execution_id"),
        ("attempts", "execution_id"),
        ("dead_letters", "execution_id"),
        ("executions", "parent_id"),
        ("executions", "retry_of_id"),
    ]
