"""A deployer's task module, run for real: on PYTHONPATH, named by CRONWELL_TASK_MODULES, preloaded
by the fork server and run by a real worker, on SQLite and PostgreSQL. Declared secrets, async
tasks, results and a callback's view of its parent's result."""

from __future__ import annotations

import json

import pytest

from app.clock import utcnow
from app.executor import ForkServer
from app.extensions import db
from app.models import Execution
from app.services.engine.task_env import declared_names
from app.services.engine.worker import Worker
from app.services.use_cases import jobs
from app.tasks import load_catalog
from app.tasks.loading import preload_modules
from tests.factories import make_job
from tests.helpers.task_modules import install_acme

pytestmark = pytest.mark.timeout(180)

TOKEN = "acme-token-5f1e9c"


@pytest.fixture
def acme(tmp_path_factory, monkeypatch):
    """The acme module on this process's path and on the fork server's (PYTHONPATH)."""
    directory = tmp_path_factory.getbasetemp() / "acme-tasks"
    name = install_acme(directory)
    monkeypatch.setenv("PYTHONPATH", str(directory))
    load_catalog(name)
    return name


def run(app, acme_module: str, task: str, config: dict | None = None, **fields) -> Execution:
    job = make_job(now=utcnow(), task=task, config=config or {}, **fields)
    execution = jobs.trigger_job(job.id, now=utcnow(), actor="test")
    executor = ForkServer(
        preload=preload_modules(acme_module), kill_grace_seconds=0.5, withhold=declared_names(), result_max_bytes=1000
    )
    Worker(app, worker_id="acme-worker", executor=executor).run(burst=True)
    db.session.rollback()
    return db.session.get(Execution, execution.id)


def test_a_sync_task_returns_a_dict_as_the_result_apart_from_its_output(app, acme):
    row = run(app, acme, "acme_greet", {"who": "ops"})

    assert row.status == "succeeded", row.error
    assert row.output == "hello ops\n"
    assert json.loads(row.result) == {"greeted": "ops", "attempt": 1}
    assert row.task_version.startswith("sha256:")


def test_a_string_result_stays_a_string_and_none_stores_nothing(app, acme):
    text = run(app, acme, "acme_returns", {"kind": "string"})
    nothing = run(app, acme, "acme_returns", {})

    assert json.loads(text.result) == "plain text"
    assert nothing.status == "succeeded" and nothing.result is None


def test_a_result_over_the_cap_or_not_serialisable_fails_the_attempt_clearly(app, acme):
    big = run(app, acme, "acme_returns", {"kind": "big", "size": 2000}, max_attempts=1)
    odd = run(app, acme, "acme_returns", {"kind": "object"}, max_attempts=1)

    assert big.status == "failed" and big.result is None
    assert "over RESULT_MAX_BYTES (1000)" in big.error and "2002 bytes" in big.error
    assert odd.status == "failed" and odd.result is None
    assert "not JSON-serialisable" in odd.error and "object" in odd.error


def test_an_async_task_is_awaited_and_its_result_recorded(app, acme):
    row = run(app, acme, "acme_async", {"seconds": 0.05, "answer": "awaited"})

    assert row.status == "succeeded", row.error
    assert json.loads(row.result) == "awaited"


def test_the_hard_timeout_still_ends_an_async_task(app, acme):
    row = run(app, acme, "acme_async", {"seconds": 60}, timeout_seconds=1, max_attempts=1)

    assert row.status == "timed_out"
    assert "timed out after 1 s" in row.error


def test_a_declared_secret_reaches_its_task_alone_and_is_scrubbed_from_what_is_stored(app, acme, monkeypatch):
    monkeypatch.setenv("ACME_TOKEN", TOKEN)
    monkeypatch.setenv("ACME_OTHER", "not-declared-value")
    monkeypatch.setenv("SECRET_KEY", "flask-secret-key-4b2e")
    monkeypatch.setenv("DATABASE_URL", "postgresql://cronwell:db-pass-8f3a@db.internal/cronwell")

    row = run(app, acme, "acme_secret")

    assert row.status == "succeeded", row.error
    seen = json.loads(row.result)
    assert seen["token_length"] == len(TOKEN)  # the task got the value
    assert "ACME_TOKEN" in seen["names"]
    assert set(seen["names"]) <= {"ACME_TOKEN", "PATH", "HOME", "LANG", "TZ"}  # nothing else
    assert row.output == "calling the partner with [redacted]\n"
    assert TOKEN not in row.output + row.error + row.result


def test_the_fork_server_and_so_every_other_task_starts_without_a_declared_variable(acme, monkeypatch):
    monkeypatch.setenv("ACME_TOKEN", TOKEN)
    monkeypatch.setenv("ACME_OTHER", "not-declared-value")

    with ForkServer(preload=preload_modules(acme), withhold=declared_names()) as executor:
        with open(f"/proc/{executor.zygote_pid}/environ", "rb") as environ:
            names = {entry.split(b"=", 1)[0].decode() for entry in environ.read().split(b"\0") if entry}

    assert "ACME_TOKEN" not in names  # built-in tasks inherit this environment
    assert "ACME_OTHER" in names


def test_a_declared_variable_missing_on_the_worker_fails_with_one_line(app, acme, monkeypatch):
    monkeypatch.delenv("ACME_TOKEN", raising=False)

    row = run(app, acme, "acme_secret", max_attempts=1)

    assert row.status == "failed"
    assert row.error == "task acme_secret needs environment variable ACME_TOKEN, not set on worker acme-worker"


def test_a_callback_gets_its_parents_execution_id_and_result(app, acme):
    parent = run(app, acme, "acme_greet", {"who": "parent"}, on_success="acme_callback")
    Worker(
        app, worker_id="acme-worker", executor=ForkServer(preload=preload_modules(acme), kill_grace_seconds=0.5)
    ).run(burst=True)
    db.session.rollback()
    callback = db.session.query(Execution).filter(Execution.parent_id == parent.id).one()

    assert callback.status == "succeeded", callback.error
    assert json.loads(callback.result) == {
        "parent_execution_id": parent.id,
        "parent_result": {"greeted": "parent", "attempt": 1},
    }
