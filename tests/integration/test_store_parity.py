"""One scenario table through both backends (`app` runs every test on SQLite and PostgreSQL):
each step must give the same result on both, which is the one written next to it."""

from app.store import store_for
from app.store.interface import Store
from tests.helpers.store_scenario import FINAL, SCENARIO, new_run, snapshot


def test_the_scenario_gives_the_same_results_on_both_backends(app, backend):
    from app.extensions import db

    assert type(store_for(db.engine)).__name__ == {"sqlite": "SqliteStore", "postgres": "PostgresStore"}[backend]
    run = new_run()
    results = []
    for name, action, expected, _ in SCENARIO:
        results.append((name, action(run)))
        assert results[-1] == (name, expected)
    assert snapshot(run) == FINAL


def test_the_scenario_calls_every_operation_of_the_interface(app):
    run = new_run()
    for _, action, _, _ in SCENARIO:
        action(run)
    operations = {name for name in vars(Store) if not name.startswith("_") and callable(getattr(Store, name))}
    assert operations - run.store.called == set()
