"""Migration 0028 on both databases: up adds the (started_at, id) index the executions list sorted
by start reads; down removes it."""

from __future__ import annotations

from sqlalchemy import inspect

from tests.helpers import migrations
from tests.helpers.migrations import engine_for, flask_db

fresh_url = migrations.fresh_url  # the fixture: an empty database on each backend
SORT_INDEXES = {"ix_executions_started_id": ["started_at", "id"]}


def _indexes(url: str) -> dict[str, list[str]]:
    engine = engine_for(url)
    try:
        return {index["name"]: index["column_names"] for index in inspect(engine).get_indexes("executions")}
    finally:
        engine.dispose()


def test_0028_adds_the_sort_indexes_and_a_downgrade_removes_them(fresh_url, tmp_path):
    flask_db(fresh_url, tmp_path, "upgrade", "0027")
    assert not set(SORT_INDEXES) & set(_indexes(fresh_url))
    flask_db(fresh_url, tmp_path, "upgrade", "0028")
    found = _indexes(fresh_url)
    assert {name: found.get(name) for name in SORT_INDEXES} == SORT_INDEXES
    flask_db(fresh_url, tmp_path, "downgrade", "0027")
    assert not set(SORT_INDEXES) & set(_indexes(fresh_url))
    assert "ix_executions_finished_at" in _indexes(fresh_url)  # the older index stays
