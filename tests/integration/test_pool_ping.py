"""In the scheduler process, pooled PostgreSQL connections are pinged only after
PING_AFTER_IDLE_SECONDS in the pool: a connection the server closed meanwhile is replaced at
checkout, one used more recently is handed out unpinged (a statement on it then fails and the
pool starts afresh). Every other process kind keeps SQLAlchemy's ping before each checkout."""

import psycopg
import pytest
from sqlalchemy import exc, text

from app import create_app, database
from app.extensions import db
from tests.helpers.databases import app_env_for
from tests.helpers.pg import plain_url

pytestmark = [pytest.mark.postgres]


@pytest.fixture
def scheduler_app(pg_url, tmp_path):
    application = create_app({"TESTING": True}, env=app_env_for(pg_url, tmp_path / "instance"), kind="scheduler")
    with application.app_context():
        yield application
        db.engine.dispose()


def backend_pid() -> int:
    with db.engine.connect() as conn:
        return conn.execute(text("SELECT pg_backend_pid()")).scalar_one()


def terminate(pg_url: str, pid: int) -> None:
    with psycopg.connect(plain_url(pg_url), autocommit=True) as admin:
        assert admin.execute("SELECT pg_terminate_backend(%s)", (pid,)).fetchone()[0]


def test_an_idle_connection_closed_by_the_server_is_replaced_at_checkout(scheduler_app, pg_url, monkeypatch):
    first = backend_pid()
    terminate(pg_url, first)
    monkeypatch.setattr(database, "PING_AFTER_IDLE_SECONDS", 0.0)  # every connection counts as idle
    assert backend_pid() != first  # no error: the ping found it dead and a fresh one took over


def test_a_recently_used_connection_is_not_pinged(scheduler_app, pg_url, monkeypatch):
    first = backend_pid()
    terminate(pg_url, first)
    monkeypatch.setattr(database, "PING_AFTER_IDLE_SECONDS", 3600.0)  # every connection counts as recent
    with pytest.raises(exc.OperationalError):
        backend_pid()  # handed out as it was: the statement finds it closed
    assert backend_pid() != first  # the failure invalidated it; the next checkout connects afresh


def test_the_web_kind_pings_every_checkout(pg_app, pg_url, monkeypatch):
    first = backend_pid()
    terminate(pg_url, first)
    monkeypatch.setattr(database, "PING_AFTER_IDLE_SECONDS", 3600.0)  # not used by this kind
    assert backend_pid() != first
