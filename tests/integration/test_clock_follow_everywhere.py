"""Every process stamps rows on the database's clock, not only the scheduler and workers: a
one-shot `flask job trigger` on a host whose clock is 30 s ahead (or behind) creates a run that is
due now, not 30 s from now (or already 30 s overdue). The clock is measured on every new
connection (`app.database.follow_database_clock`); PostgreSQL only, since SQLite has one host.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from sqlalchemy import text

from app.extensions import db
from tests.factories import make_job
from tests.helpers.databases import app_env_for
from tests.helpers.processes import PROJECT_ROOT, flask_env

pytestmark = [pytest.mark.postgres]


@pytest.mark.parametrize("offset", ["30", "-30"])
def test_a_skewed_host_triggers_a_run_due_on_the_databases_clock(pg_app, pg_url, tmp_path, offset):
    job = make_job("skewed-trigger", every="1h")
    env = {**app_env_for(pg_url, tmp_path / "instance"), "CRONWELL_CLOCK_OFFSET_SECONDS": offset}
    result = subprocess.run(
        [sys.executable, "-m", "flask", "job", "trigger", str(job.id)],
        cwd=PROJECT_ROOT,
        env=flask_env(env),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    with db.engine.connect() as conn:
        created_lag, available_lag = conn.execute(
            text(
                "SELECT extract(epoch FROM now() - created_at), extract(epoch FROM now() - available_at)"
                " FROM executions WHERE job_id = :job"
            ),
            {"job": job.id},
        ).one()
    # Stamped within the seconds the command took, on the database's clock: never 30 s off.
    assert 0 <= created_lag < 20, (offset, created_lag)
    assert 0 <= available_lag < 20, (offset, available_lag)
