"""app/sql is what the worker parent is to run its statements with, without SQLAlchemy, Flask or
the models (ADR 0012): importing every module of it must load none of them. The control probe
(app.store) shows the check sees them where they are loaded."""

import json
import pkgutil
import subprocess
import sys

import app.sql

KEPT_OUT = ("sqlalchemy", "flask", "flask_sqlalchemy", "app.models", "app.store", "app.extensions")


def loaded_of(modules: list[str]) -> list[str]:
    imports = "; ".join(f"import {module}" for module in modules)
    probe = (
        f"import sys, json; {imports}; "
        f"print(json.dumps(sorted(k for k in {KEPT_OUT!r} if any(m == k or m.startswith(k + '.') for m in sys.modules))))"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    return json.loads(result.stdout)


def test_the_statements_of_app_sql_load_neither_sqlalchemy_nor_flask_nor_the_models():
    modules = [f"app.sql.{info.name}" for info in pkgutil.iter_modules(app.sql.__path__)]
    assert {
        "app.sql.transport",
        "app.sql.heartbeats",
        "app.sql.control",
        "app.sql.leases",
        "app.sql.rows",
        "app.sql.turn",
        "app.sql.turn_postgresql",
        "app.sql.candidates",
    } <= set(modules)
    assert loaded_of(modules) == []


def test_the_probe_sees_what_the_store_loads():
    assert loaded_of(["app.store"]) == sorted(KEPT_OUT)
