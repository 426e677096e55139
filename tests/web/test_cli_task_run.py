"""`flask task run TASK`: a one-off run from the command line, on SQLite and PostgreSQL; `--wait`
against a real worker process prints the outcome and exits 0 on success, 1 otherwise; bad input
is one `Error:` line and exit 1 with nothing stored."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import func, select

from app.extensions import db
from app.models import Execution
from tests.helpers.cli import assert_error, ok, ok_json


def count() -> int:
    db.session.rollback()
    return db.session.scalar(select(func.count()).select_from(Execution))


def test_run_prints_the_created_run_and_json_names_it_one_off(cli):
    document = ok_json(cli("task", "run", "echo", "--config", '{"message": "x"}', "--in", "30s", "--json"))
    assert (document["job_id"], document["job_name"], document["task"]) == (None, "one-off", "echo")
    assert document["created"] is True and document["status"] == "pending"
    text = ok(cli("task", "run", "always_succeed", "--priority", "3", "--max-attempts", "2"))
    assert text.startswith("One-off run of always_succeed created: execution ")
    listed = ok(cli("execution", "list", "--task", "echo"))
    assert "one-off (echo)" in listed and "always_succeed" not in listed
    inspected = " ".join(ok(cli("execution", "inspect", document["id"])).split())
    assert "job: one-off" in inspected and "task: echo" in inspected and 'config: {"message": "x"}' in inspected
    explained = ok(cli("execution", "explain", document["id"]))
    assert "waiting" in explained


def test_the_same_idempotency_key_runs_once(cli):
    first = ok_json(cli("task", "run", "echo", "--idempotency-key", "nightly-42", "--json"))
    again = ok_json(cli("task", "run", "echo", "--idempotency-key", "nightly-42", "--json"))
    assert first["id"] == again["id"] and (first["created"], again["created"]) == (True, False)
    assert "not run again" in ok(cli("task", "run", "echo", "--idempotency-key", "nightly-42"))
    assert count() == 1


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["no_such_task"], "task"),
        (["echo", "--config", "{bad"], "not valid JSON"),
        (["sleep_for_seconds", "--config", '{"seconds": "long"}'], "config"),
        (["echo", "--queue", "nowhere"], "unknown queue 'nowhere'"),
        (["echo", "--in", "30s", "--at", "2030-01-01T00:00:00Z"], "not both"),
        (["echo", "--in", "soon"], "in"),
        (["echo", "--max-attempts", "0"], "max_attempts"),
        (["echo", "--project", "nobody/nothing"], "does not exist"),
    ],
)
def test_bad_input_is_one_error_line_and_nothing_is_stored(cli, args, fragment):
    assert_error(cli("task", "run", *args), fragment)
    assert count() == 0


@pytest.mark.timeout(120)
def test_wait_follows_the_run_on_a_real_worker_to_its_end(cli, flask_processes):
    worker = flask_processes.start_worker("--workers", "2", "--worker-id", "task-run-wait")
    try:
        succeeded = cli("task", "run", "echo", "--config", '{"message": "done here"}', "--wait")
        assert succeeded.exit_code == 0, (succeeded.stdout, succeeded.stderr, worker.output())
        assert json.loads(succeeded.stdout) == {"message": "done here"}  # the run's output (echo prints its config)
        assert "succeeded after 1 of 3 attempts" in succeeded.stderr
        failed = cli("task", "run", "echo", "--config", '{"message": "broke", "fail": true}', "--max-attempts", "1")
        assert failed.exit_code == 0  # without --wait it only creates the run
        waited = cli(
            "task",
            "run",
            "echo",
            "--config",
            '{"message": "broke", "fail": true}',
            "--max-attempts",
            "1",
            "--wait",
            "--json",
        )
        assert waited.exit_code == 1, (waited.stdout, waited.stderr)
        document = json.loads(waited.stdout)
        assert document["status"] == "failed" and document["job_id"] is None
        assert [attempt["status"] for attempt in document["attempt_history"]] == ["failed"]
    finally:
        flask_processes.cleanup()
