"""Names differing only in case are one name within a project, and the
database only knows exact names: on PostgreSQL two creators could each check before either
inserts. The job use case locks the project row before it checks; proved here with a real
`flask job add` process that must wait for a transaction holding that lock, then see its job."""

from __future__ import annotations

import pytest
from sqlalchemy import select, text

from app.extensions import db
from app.models import Job, Queue
from app.services.use_cases import tenancy
from tests.helpers.processes import wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.timeout(120)]


@pytest.fixture
def backend() -> str:
    """PostgreSQL only: SQLite runs one writer at a time (BEGIN IMMEDIATE) and shows no lock wait."""
    return "postgres"


def waiting_on_a_lock(pid_of_other: int) -> bool:
    with db.engine.connect() as conn:
        return bool(
            conn.scalar(
                text(
                    "SELECT count(*) FROM pg_stat_activity WHERE pid <> :me AND wait_event_type = 'Lock'"
                    " AND datname = current_database() AND query LIKE '%FOR NO KEY UPDATE%'"
                ),
                {"me": pid_of_other},
            )
        )


def test_a_case_variant_created_meanwhile_waits_for_the_first_and_is_refused(app, flask_processes):
    project = tenancy.working_project(None)
    queue_id = db.session.scalar(select(Queue.id).where(Queue.project_id == project.id, Queue.name == "default"))
    db.session.rollback()
    with db.engine.connect() as first:  # a creator of `Backup`, between its check and its commit
        first.begin()
        first.execute(text("SELECT id FROM projects WHERE id = :p FOR NO KEY UPDATE"), {"p": project.id})
        me = first.scalar(text("SELECT pg_backend_pid()"))
        second = flask_processes.start("job", "add", "backup", "always_succeed", "interval", "--every", "5m")
        wait_for(lambda: waiting_on_a_lock(me), within=60, what=second.describe)
        first.execute(
            text(
                "INSERT INTO jobs (name, task, config, schedule_type, schedule, queue_id, project_id, created_at,"
                " updated_at) VALUES ('Backup', 'always_succeed', '{}', 'interval', '{\"every\": \"5m\"}', :q, :p,"
                " now(), now())"
            ),
            {"q": queue_id, "p": project.id},
        )
        first.commit()
    assert second.wait_exit(60) == 1, second.describe()
    assert "a job named 'backup' already exists in this project ('Backup'" in second.output()
    assert list(db.session.scalars(select(Job.name))) == ["Backup"]
