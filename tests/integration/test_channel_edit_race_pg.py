"""Two edits of one channel made from the same read, on PostgreSQL: the edit's precondition (the
API's If-Match) is judged on the row as stored once it is held, so the second edit, which waited
for the first, sees the first one's change and is refused instead of overwriting it."""

from __future__ import annotations

import threading
import time

import pytest
from sqlalchemy import text

from app.clock import utcnow
from app.extensions import db
from app.services.errors import Conflict
from app.services.use_cases import alert_channels

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(60)]


@pytest.fixture
def backend():
    return "postgres"


def wait_for_a_lock_wait(timeout: float = 10.0) -> None:
    """Return once some session of this database waits for a row lock (the second edit)."""
    deadline = time.monotonic() + timeout
    with db.engine.connect() as conn:
        while time.monotonic() < deadline:
            waiting = conn.execute(
                text(
                    "SELECT count(*) FROM pg_stat_activity"
                    " WHERE datname = current_database() AND wait_event_type = 'Lock'"
                )
            ).scalar()
            if waiting:
                return
            conn.rollback()
            time.sleep(0.02)
    raise AssertionError("the second edit never waited for the first one's row lock")


def test_the_second_of_two_edits_from_one_read_is_refused(app):
    channel = alert_channels.add_channel(
        {"name": "ops", "kind": "webhook", "target": "https://hooks.example.com/a"}, now=utcnow(), actor="t"
    )
    read_name = channel.name
    holding, release = threading.Event(), threading.Event()
    outcome: dict[str, str] = {}

    def edit(name: str, hold: bool) -> None:
        with app.app_context():

            def unchanged_since_read(current) -> None:
                if current.name != read_name:
                    raise Conflict("changed since read")
                if hold:  # keep the row while the other edit starts
                    holding.set()
                    release.wait(10)

            try:
                alert_channels.change_channel(
                    channel.id, {"name": name}, now=utcnow(), actor="t", precondition=unchanged_since_read
                )
                outcome[name] = "changed"
            except Conflict:
                outcome[name] = "refused"
            finally:
                db.session.remove()

    first = threading.Thread(target=edit, args=("first", True))
    first.start()
    assert holding.wait(10)
    second = threading.Thread(target=edit, args=("second", False))
    second.start()
    wait_for_a_lock_wait()
    release.set()
    first.join(20)
    second.join(20)
    assert outcome == {"first": "changed", "second": "refused"}
    db.session.rollback()
    assert alert_channels.get_channel(channel.id).name == "first"
