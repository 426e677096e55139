"""Migration 0029 on both databases: up adds `events.worker_id`, copied from the payloads of the
events already stored, and its partial (worker_id, id) index; down removes both and keeps the rows."""

from __future__ import annotations

from tests.helpers import migrations
from tests.helpers.migrations import columns_and_indexes, engine_for, flask_db, rows

fresh_url = migrations.fresh_url  # the fixture: an empty database on each backend
PAYLOADS = {
    "lease_recovered": '{"worker_id": "w-1", "from_status": "running"}',
    "worker_lost": '{"worker_id": "w-2", "runs_in_flight": 0}',
    "execution_cancelled": '{"worker_id": null, "how": "cancelled while queued"}',
    "worker_reloaded": '{"worker_id": ""}',
    "retry_scheduled": '{"attempt": 1}',
}


def test_0029_copies_the_named_workers_out_of_the_payloads_and_a_downgrade_removes_the_column(fresh_url, tmp_path):
    flask_db(fresh_url, tmp_path, "upgrade", "0028")
    engine = engine_for(fresh_url)
    with engine.begin() as conn:
        for kind, payload in PAYLOADS.items():
            conn.exec_driver_sql(
                "INSERT INTO events (type, actor, payload, created_at) VALUES (%s, 'system', %s, '2026-06-01 12:00:00')"
                if fresh_url.startswith("postgresql")
                else "INSERT INTO events (type, actor, payload, created_at) VALUES (?, 'system', ?, '2026-06-01 12:00:00')",
                (kind, payload),
            )
    engine.dispose()
    columns, indexes = columns_and_indexes(fresh_url, "events", "events")
    assert "worker_id" not in columns and "ix_events_worker_id_id" not in indexes

    flask_db(fresh_url, tmp_path, "upgrade", "0029")
    columns, indexes = columns_and_indexes(fresh_url, "events", "events")
    assert "worker_id" in columns and indexes["ix_events_worker_id_id"] == ["worker_id", "id"]
    assert dict(rows(fresh_url, "SELECT type, worker_id FROM events")) == {
        "lease_recovered": "w-1",
        "worker_lost": "w-2",
        "execution_cancelled": None,  # a JSON null and an empty id name no worker, as `worker_named` reads them
        "worker_reloaded": None,
        "retry_scheduled": None,
    }

    flask_db(fresh_url, tmp_path, "downgrade", "0028")
    columns, indexes = columns_and_indexes(fresh_url, "events", "events")
    assert "worker_id" not in columns and "ix_events_worker_id_id" not in indexes
    assert len(rows(fresh_url, "SELECT id FROM events")) == len(PAYLOADS)
    assert indexes["ix_events_job_id_type_id"] == ["job_id", "type", "id"]  # the older indexes stay
