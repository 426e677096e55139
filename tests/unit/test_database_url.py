"""DATABASE_URL spellings: postgres:// and postgresql:// point at psycopg 3, and libpq's multi-host
form (a primary and its standbys) becomes SQLAlchemy's, which psycopg receives as host and port
lists (so `target_session_attrs=read-write` picks the current primary after a failover)."""

from sqlalchemy import create_engine

from config import normalise_database_url


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
