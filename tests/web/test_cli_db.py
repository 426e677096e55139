"""`flask db ...` (Flask-Migrate, set up by cli/db.py), and that only `flask db` loads Alembic.

Real `flask` processes: what a process imports is only visible in a fresh interpreter (this one
has Alembic loaded by the fixtures), and `flask db` is run exactly as deploys run it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from app.extensions import MIGRATIONS_DIR
from tests.helpers.databases import CHANNEL_SECRET_KEY
from tests.helpers.processes import PROJECT_ROOT

pytestmark = pytest.mark.slow  # real processes, about a second each

# Alembic and what it brings with it: about 11 MB no long-running process needs.
MIGRATION_MODULES = ("alembic", "mako", "pygments", "flask_migrate")

# A `sitecustomize` for `flask ARGS...`: report, on the last stderr line, which of
# MIGRATION_MODULES the process imported. Every interpreter imports it at start, so it also
# reports for `python -m app.worker_process`, which `flask worker run` execs.
_PROBE = f"""
import atexit, json, sys
def report():
    loaded = sorted({{name.split(".")[0] for name in sys.modules}} & set({MIGRATION_MODULES!r}))
    sys.stderr.write("\\nMIGRATION_MODULES " + json.dumps(loaded) + "\\n")
atexit.register(report)
"""


def _env(tmp_path, database_url: str) -> dict:
    return {
        **os.environ,
        "FLASK_APP": "app",
        "DATABASE_URL": database_url,
        "INSTANCE_DIR": str(tmp_path / "instance"),
        "LOG_FORMAT": "text",
        "LOG_LEVEL": "WARNING",
        "DEBUG": "0",
        "SECRET_KEY": "test-secret-key",
        "CHANNEL_SECRET_KEY": CHANNEL_SECRET_KEY,
        "LISTEN_NOTIFY": "0",
    }


def flask(env: dict, *args: str, probe: bool = False) -> subprocess.CompletedProcess:
    if probe:
        probe_dir = Path(env["INSTANCE_DIR"]).parent / "probe"
        probe_dir.mkdir(exist_ok=True)
        (probe_dir / "sitecustomize.py").write_text(_PROBE)
        env = {**env, "PYTHONPATH": str(probe_dir)}
    command = [sys.executable, "-m", "flask", *args]
    return subprocess.run(command, env=env, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120)


def imported_migration_modules(result: subprocess.CompletedProcess) -> list[str]:
    assert result.returncode == 0, f"exit {result.returncode}\nstdout: {result.stdout}\nstderr: {result.stderr}"
    marker = [line for line in result.stderr.splitlines() if line.startswith("MIGRATION_MODULES ")]
    assert marker, result.stderr
    return json.loads(marker[-1].split(" ", 1)[1])


@pytest.fixture
def migrated_env(sqlite_template, tmp_path) -> dict:
    path = tmp_path / "cronwell.sqlite3"
    shutil.copyfile(sqlite_template, path)
    return _env(tmp_path, f"sqlite:///{path}")


@pytest.fixture
def empty_env(tmp_path) -> dict:
    return _env(tmp_path, f"sqlite:///{tmp_path / 'empty.sqlite3'}")


@pytest.mark.parametrize(
    "args",
    [("worker", "run", "--once"), ("scheduler", "run", "--once"), ("--help",), ("health",)],
    ids=["worker", "scheduler", "cli-startup", "readiness-check"],
)
def test_processes_do_not_import_alembic(migrated_env, args):
    assert imported_migration_modules(flask(migrated_env, *args, probe=True)) == []


def test_flask_db_imports_alembic_only_when_it_runs(migrated_env):
    assert "alembic" in imported_migration_modules(flask(migrated_env, "db", "current", probe=True))


def code_head() -> str:
    from alembic.script import ScriptDirectory

    return ScriptDirectory(str(MIGRATIONS_DIR)).get_current_head()


def test_upgrade_current_downgrade_on_an_empty_database(empty_env):
    head = code_head()
    assert flask(empty_env, "db", "current").stdout == ""  # nothing applied yet

    upgraded = flask(empty_env, "db", "upgrade")
    assert upgraded.returncode == 0, upgraded.stderr
    assert "Running upgrade  -> 0001" in upgraded.stderr
    assert flask(empty_env, "db", "current").stdout.strip() == f"{head} (head)"
    assert flask(empty_env, "db", "check").returncode == 0  # the migrations build what the models say

    assert flask(empty_env, "db", "downgrade", "-1").returncode == 0  # a relative step is a revision
    assert flask(empty_env, "db", "current").stdout.strip() == f"{int(head) - 1:04d}"
    assert flask(empty_env, "db", "downgrade", "base").returncode == 0
    assert flask(empty_env, "db", "current").stdout == ""
    assert flask(empty_env, "db", "upgrade").returncode == 0
    assert flask(empty_env, "db", "current").stdout.strip() == f"{head} (head)"


def test_heads_and_history_list_the_shipped_migrations(migrated_env):
    head = code_head()
    assert flask(migrated_env, "db", "heads").stdout.strip() == f"{head} (head)"
    history = flask(migrated_env, "db", "history", "-i").stdout
    assert "<base> -> 0001, initial schema" in history and "(current)" in history


@pytest.mark.parametrize(
    "args,message",
    [
        (("upgrade", "nope"), "Can't locate revision identified by 'nope'"),
        (("downgrade", "nope"), "Can't locate revision identified by 'nope'"),
        (("history", "-r", "nope:head"), "Can't locate revision identified by 'nope'"),
    ],
)
def test_an_unknown_revision_is_one_error_line_and_exit_1(migrated_env, args, message):
    result = flask(migrated_env, "db", *args)
    assert result.returncode == 1 and result.stdout == ""
    assert "Traceback" not in result.stderr
    # Alembic's INFO progress lines may come first; the error itself is the one last line.
    assert result.stderr.splitlines()[-1] == f"Error: {message}"
    assert not any(line.startswith("Error") for line in result.stderr.splitlines()[:-1])


def test_downgrade_needs_a_revision(migrated_env):
    result = flask(migrated_env, "db", "downgrade")
    assert result.returncode == 2 and "Missing argument 'REVISION'" in result.stderr


def test_an_unreachable_database_is_one_error_line(tmp_path):
    env = _env(tmp_path, "postgresql://postgres@127.0.0.1:1/none")
    result = flask(env, "db", "current")
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.splitlines()[-1].startswith("Error: database error: ")
    assert "Traceback" not in result.stderr
