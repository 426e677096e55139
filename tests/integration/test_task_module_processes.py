"""Task modules in real processes: `flask task list|show|check` and `flask worker run --once` with
a module on PYTHONPATH named by CRONWELL_TASK_MODULES, the example package installed with pip and
found through its `cronwell.tasks` entry point, and the one-line refusal of a broken module or a
task defined twice."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from app.clock import utcnow
from app.extensions import db
from app.models import Execution
from app.services.use_cases import jobs
from app.tasks import load_catalog
from tests.factories import make_job
from tests.helpers.processes import PROJECT_ROOT, flask_env
from tests.helpers.task_modules import ACME_MODULE, install_acme, write_module

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]


def flask(app_env, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "flask", *args],
        cwd=PROJECT_ROOT,
        env=flask_env(app_env, env),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def acme_env(tmp_path_factory):
    directory = tmp_path_factory.getbasetemp() / "acme-tasks"
    install_acme(directory)
    load_catalog(ACME_MODULE)  # so this process can create jobs of its tasks
    return {"CRONWELL_TASK_MODULES": ACME_MODULE, "PYTHONPATH": str(directory)}


def test_a_module_named_by_the_variable_is_listed_shown_checked_and_run_by_a_worker(app, app_env, acme_env):
    listed = flask(app_env, "task", "list", "--json", env=acme_env)
    assert listed.returncode == 0, listed.stderr
    by_name = {task["name"]: task for task in json.loads(listed.stdout)}
    assert by_name["acme_greet"]["module"] == ACME_MODULE and by_name["acme_async"]["async"] is True
    assert by_name["acme_secret"]["env"] == [{"name": "ACME_TOKEN", "set": False}]
    assert "http_request" in by_name  # the built-ins are still there

    shown = flask(app_env, "task", "show", "acme_greet", "--json", env=acme_env)
    assert shown.returncode == 0 and json.loads(shown.stdout)["example"] == {"who": "world"}

    missing = flask(app_env, "task", "check", env=acme_env)
    assert missing.returncode == 1
    assert missing.stderr.strip().splitlines() == [
        f"Error: task acme_secret ({ACME_MODULE}) needs environment variable ACME_TOKEN, not set here"
    ]
    checked = flask(app_env, "task", "check", env={**acme_env, "ACME_TOKEN": "t0ken-value"})
    assert checked.returncode == 0 and checked.stdout.startswith("ok:"), checked.stderr

    job = make_job(now=utcnow(), task="acme_greet", config={"who": "worker"})
    execution = jobs.trigger_job(job.id, now=utcnow(), actor="test")
    worked = flask(app_env, "worker", "run", "--once", env=acme_env)
    assert worked.returncode == 0, worked.stdout + worked.stderr
    db.session.rollback()
    row = db.session.get(Execution, execution.id)
    assert row.status == "succeeded", row.error
    assert json.loads(row.result) == {"greeted": "worker", "attempt": 1}


def test_the_example_package_installed_with_pip_is_found_through_its_entry_point(app, app_env, tmp_path):
    target = tmp_path / "site"
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), "examples/tasks"],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert installed.returncode == 0, installed.stderr
    env = {"PYTHONPATH": str(target)}

    listed = flask(app_env, "task", "list", "--json", env=env)
    assert listed.returncode == 0, listed.stderr
    by_name = {task["name"]: task for task in json.loads(listed.stdout)}
    assert {"example_word_count", "example_wait", "example_notify", "example_fetch_json"} <= set(by_name)
    assert by_name["example_word_count"]["version"] == "0.1.0"  # the distribution's version
    assert by_name["example_wait"]["async"] is True
    assert by_name["example_notify"]["env"] == [{"name": "EXAMPLE_WEBHOOK_URL", "set": False}]

    sys.path.insert(0, str(target))
    try:
        load_catalog("cronwell_example_tasks.tasks")
        job = make_job(now=utcnow(), task="example_word_count", config={"text": "one two three"})
        execution = jobs.trigger_job(job.id, now=utcnow(), actor="test")
    finally:
        sys.path.remove(str(target))
    worked = flask(app_env, "worker", "run", "--once", env=env)
    assert worked.returncode == 0, worked.stdout + worked.stderr
    db.session.rollback()
    row = db.session.get(Execution, execution.id)
    assert row.status == "succeeded", row.error
    assert json.loads(row.result) == {"words": 3, "longest": "three"}
    assert row.task_version == "0.1.0"


@pytest.mark.parametrize("command", [("task", "list"), ("worker", "run", "--once"), ("job", "list")])
def test_a_module_that_fails_to_import_stops_the_process_with_one_line(app_env, tmp_path, command):
    write_module(tmp_path / "mods", "cronwell_test_broken", "import no_such_library_here\n")
    env = {"CRONWELL_TASK_MODULES": "cronwell_test_broken", "PYTHONPATH": str(tmp_path / "mods")}

    done = flask(app_env, *command, env=env)

    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "Error: task module cronwell_test_broken failed to import: ModuleNotFoundError: "
        "No module named 'no_such_library_here'"
    ]


def test_a_task_defined_twice_is_refused_naming_the_task_and_both_modules(app_env, tmp_path):
    source = 'from app.tasks import task\n\n@task("twin", description="x")\ndef twin(config, ctx):\n    pass\n'
    write_module(tmp_path / "mods", "cronwell_test_twin_a", source)
    write_module(tmp_path / "mods", "cronwell_test_twin_b", source)
    shadow = 'from app.tasks import task\n\n@task("echo", description="x")\ndef echo(config, ctx):\n    pass\n'
    write_module(tmp_path / "mods", "cronwell_test_shadow", shadow)
    path = {"PYTHONPATH": str(tmp_path / "mods")}

    twins = flask(
        app_env, "task", "list", env={**path, "CRONWELL_TASK_MODULES": "cronwell_test_twin_a,cronwell_test_twin_b"}
    )
    shadowed = flask(app_env, "task", "list", env={**path, "CRONWELL_TASK_MODULES": "cronwell_test_shadow"})

    assert twins.returncode == 1 and twins.stderr.strip().splitlines() == [
        "Error: task module cronwell_test_twin_b: task 'twin' is defined in both "
        "cronwell_test_twin_a and cronwell_test_twin_b"
    ]
    assert shadowed.returncode == 1 and shadowed.stderr.strip().splitlines() == [
        "Error: task module cronwell_test_shadow: task 'echo' is defined in both "
        "app.tasks.catalog.demo and cronwell_test_shadow"
    ]


def test_task_check_lists_every_problem(app_env, tmp_path):
    write_module(tmp_path / "mods", "cronwell_test_broken", "raise RuntimeError('boom')\n")
    bad_schema = (
        'from app.tasks import task\n\n@task("bad_schema", description="x", schema={"type": "nope"})\n'
        "def bad(config, ctx):\n    pass\n"
    )
    write_module(tmp_path / "mods", "cronwell_test_bad_schema", bad_schema)
    env = {
        "PYTHONPATH": str(tmp_path / "mods"),
        "CRONWELL_TASK_MODULES": "cronwell_test_broken,cronwell_test_bad_schema",
    }

    done = flask(app_env, "task", "check", env=env)

    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert lines[0] == "Error: task module cronwell_test_broken failed to import: RuntimeError: boom"
    assert lines[1].startswith("Error: task bad_schema (cronwell_test_bad_schema): its schema is not valid JSON Schema")
    assert len(lines) == 2
