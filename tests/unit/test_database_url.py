"""DATABASE_URL spellings: postgres:// and postgresql:// point at psycopg 3, and libpq's multi-host
form (a primary and its standbys) becomes SQLAlchemy's, which psycopg receives as host and port
lists (so `target_session_attrs=read-write` picks the current primary after a failover)."""

import pytest
from sqlalchemy import create_engine

from app import create_app
from app.sql.connections import sqlite_path
from config import APP_INSTANCE_PATH, absolute_sqlite_url, load_settings, normalise_database_url


def test_single_host_urls():
    assert normalise_database_url("postgres://u:p@db:5432/cron") == "postgresql+psycopg://u:p@db:5432/cron"
    assert normalise_database_url("postgresql://u@db/cron?sslmode=require") == (
        "postgresql+psycopg://u@db/cron?sslmode=require"
    )
    assert normalise_database_url("sqlite:///x.sqlite3") == "sqlite:///x.sqlite3"


def test_a_multi_host_url_reaches_psycopg_as_host_lists():
    url = normalise_database_url("postgresql://u:p@a:5432,b:5433/cron?target_session_attrs=read-write")
    assert url == "postgresql+psycopg://u:p@/cron?host=a:5432&host=b:5433&target_session_attrs=read-write"
    engine = create_engine(url)
    _, kwargs = engine.dialect.create_connect_args(engine.url)
    assert (kwargs["host"], kwargs["port"], kwargs["target_session_attrs"]) == ("a,b", "5432,5433", "read-write")
    assert (kwargs["user"], kwargs["password"], kwargs["dbname"]) == ("u", "p", "cron")


def test_a_relative_sqlite_path_is_the_instance_folders_for_every_process(tmp_path, monkeypatch):
    """Flask-SQLAlchemy opens `sqlite:///x.db` in the app's instance folder; the worker process
    (sqlite3) and a task's own engine must open that same file, whatever their working directory."""
    monkeypatch.chdir(tmp_path)
    settings = load_settings({"DATABASE_URL": "sqlite:///x.sqlite3?timeout=5"})
    assert settings["SQLALCHEMY_DATABASE_URI"] == f"sqlite:///{APP_INSTANCE_PATH / 'x.sqlite3'}?timeout=5"
    app = create_app(env={"DATABASE_URL": "sqlite:///x.sqlite3", "SECRET_KEY": "k"})
    with app.app_context():
        from app.extensions import db

        assert db.engine.url.database == str(APP_INSTANCE_PATH / "x.sqlite3")
    assert sqlite_path(app.config["SQLALCHEMY_DATABASE_URI"]) == str(APP_INSTANCE_PATH / "x.sqlite3")


@pytest.mark.parametrize(
    "url",
    [
        "sqlite:////srv/cron.db",
        "sqlite://",
        "sqlite:///:memory:",
        "sqlite:///file:x.db?mode=ro&uri=true",
        "postgresql+psycopg://u@db/x",
    ],
)
def test_absolute_memory_uri_and_server_urls_are_left_alone(url):
    assert absolute_sqlite_url(url) == url
