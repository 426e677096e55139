"""`flask execution list|inspect|retry|cancel`."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import select

from app.extensions import db as database
from app.models import Attempt, Execution
from tests.factories import make_execution, make_job
from tests.helpers.cli import assert_error, assert_usage_error, cli_events, ok, ok_json, row_counts


def status_of(execution_id: int) -> str:
    database.session.expire_all()
    return database.session.get(Execution, execution_id).status


@pytest.fixture
def history(app):
    """Two jobs with executions in several states."""
    a, b = make_job("job-a"), make_job("job-b")
    return {
        "a_ok": make_execution(a, "succeeded", attempts=1, output="done"),
        "a_failed": make_execution(a, "failed", attempts=3, error="Traceback: boom", attempt_rows=False),
        "b_pending": make_execution(b, "pending"),
        "b_running": make_execution(b, "running", attempts=1, claimed_by="worker-1"),
        "a": a,
        "b": b,
    }


def test_list_is_newest_first_and_filters(cli, history):
    lines = ok(cli("execution", "list")).splitlines()
    assert lines[0].split()[:4] == ["ID", "JOB", "STATUS", "TRIGGER"]
    assert [int(line.split()[0]) for line in lines[1:]] == [
        history[k].id for k in ("b_running", "b_pending", "a_failed", "a_ok")
    ]
    assert "1 job-a" in lines[-1] and "succeeded" in lines[-1] and "1/3" in lines[-1]
    failed = ok(cli("execution", "list", "--status", "failed")).splitlines()
    assert len(failed) == 2 and "Traceback" not in failed[1]
    assert len(ok(cli("execution", "list", "--job", history["b"].id)).splitlines()) == 3
    assert len(ok(cli("execution", "list", "--limit", "1")).splitlines()) == 2
    assert ok(cli("execution", "list", "--status", "missed")).strip() == "No executions match."


def test_list_json_leaves_out_output(cli, history):
    docs = ok_json(cli("execution", "list", "--job", history["a"].id, "--json"))
    assert [d["id"] for d in docs] == [history["a_failed"].id, history["a_ok"].id]
    assert docs[0]["status"] == "failed" and docs[0]["job_name"] == "job-a"
    assert docs[0]["scheduled_for"].endswith("Z") and docs[0]["finished_at"].endswith("Z")
    assert "output" not in docs[0] and "error" not in docs[0]


def test_list_errors(cli, history):
    assert_usage_error(cli("execution", "list", "--status", "exploded"), "'exploded' is not one of")
    assert_usage_error(cli("execution", "list", "--limit", "0"))
    assert_error(cli("execution", "list", "--job", "999"), "job 999 does not exist")


def test_inspect_shows_attempts_output_and_error(cli, history):
    execution = history["a_failed"]
    start = execution.started_at
    for number, status in ((1, "failed"), (2, "failed")):
        database.session.add(
            Attempt(
                execution_id=execution.id,
                number=number,
                worker_id=f"w{number}",
                pid=100 + number,
                status=status,
                started_at=start,
                finished_at=start + timedelta(seconds=2),
                exit_code=1,
                output=f"try {number}",
                error=f"error {number}",
            )
        )
    database.session.commit()
    out = ok(cli("execution", "inspect", execution.id))
    assert f"execution:     {execution.id}" in out and "job-a" in out and "status:" in out and "failed" in out
    assert "Attempts:" in out and "w1" in out and "w2" in out
    assert out.rstrip().endswith("Error:\nTraceback: boom")
    doc = ok_json(cli("execution", "inspect", execution.id, "--json"))
    assert doc["id"] == execution.id and doc["status"] == "failed" and doc["attempts"] == 3
    assert doc["error"] == "Traceback: boom" and doc["output"] == ""
    assert [a["number"] for a in doc["attempt_history"]] == [1, 2]
    assert doc["attempt_history"][0]["duration_seconds"] == 2.0 and doc["attempt_history"][1]["error"] == "error 2"


def test_inspect_of_a_missing_execution(cli):
    assert_error(cli("execution", "inspect", "31337"), "execution 31337 does not exist")


def test_retry_creates_a_new_execution_and_keeps_the_old(cli, history):
    old = history["a_failed"]
    out = ok(cli("execution", "retry", old.id))
    [new] = database.session.scalars(select(Execution).where(Execution.retry_of_id == old.id)).all()
    assert f"Execution {new.id} created to retry execution {old.id}" in out
    assert (new.trigger, new.status, status_of(old.id)) == ("retry", "pending", "failed")
    doc = ok_json(cli("execution", "retry", old.id, "--json"))
    assert doc["retry_of_id"] == old.id and doc["status"] == "pending"
    assert [e.payload["retry_of"] for e in cli_events("execution_retried")] == [old.id, old.id]


@pytest.mark.parametrize(
    "key,message",
    [
        ("a_ok", "is succeeded; only failed"),
        ("b_pending", "is pending; only failed"),
        ("b_running", "is running; only failed"),
    ],
)
def test_retry_refuses_unfinished_or_succeeded(cli, history, key, message):
    before = row_counts()
    assert_error(cli("execution", "retry", history[key].id), message)
    assert row_counts() == before


def test_retry_refuses_when_the_job_is_disabled_or_the_execution_missing(cli, history):
    history["a"].enabled = False
    database.session.commit()
    before = row_counts()
    assert_error(cli("execution", "retry", history["a_failed"].id), "is disabled; enable it before retrying")
    assert_error(cli("execution", "retry", "4040"), "execution 4040 does not exist")
    assert row_counts() == before


def test_cancel_a_queued_execution(cli, history):
    pending = history["b_pending"]
    assert f"Execution {pending.id} cancelled" in ok(cli("execution", "cancel", pending.id))
    assert status_of(pending.id) == "cancelled"
    [event] = cli_events("execution_cancelled")
    assert event.execution_id == pending.id
    retry_scheduled = make_execution(history["a"], "retry_scheduled", attempts=1)
    doc = ok_json(cli("execution", "cancel", retry_scheduled.id, "--json"))
    assert doc["status"] == "cancelled" and doc["finished_at"].endswith("Z")


@pytest.mark.parametrize(
    "key,message",
    [
        ("a_ok", "is succeeded; only pending, retry_scheduled, claimed or running"),
        ("a_failed", "is failed; only pending"),
    ],
)
def test_cancel_refuses_finished(cli, history, key, message):
    before = row_counts()
    assert_error(cli("execution", "cancel", history[key].id), message)
    assert row_counts() == before
    assert status_of(history[key].id) == history[key].status


def test_cancel_of_a_missing_execution(cli):
    assert_error(cli("execution", "cancel", "8"), "execution 8 does not exist")


def test_cancel_of_a_running_execution_asks_its_worker(cli, history):
    """The row stays running with the request stamped; its worker kills the task and records
    `cancelled` (tests/integration/test_worker_control.py runs that with real processes)."""
    running = history["b_running"]
    out = ok(cli("execution", "cancel", running.id, "--reason", "wrong input"))
    assert f"Execution {running.id} is running on worker-1; asked it to cancel the task" in out
    database.session.expire_all()
    row = database.session.get(Execution, running.id)
    assert (row.status, row.cancel_requested_by, row.reason) == ("running", "cli", "cancelled by cli: wrong input")
    assert row.cancel_requested_at is not None
    [event] = cli_events("execution_cancel_requested")
    assert event.execution_id == running.id
    assert event.payload == {"worker_id": "worker-1", "reason": "wrong input"}
    before = row_counts()
    assert_error(cli("execution", "cancel", running.id), "is already being cancelled (asked by cli at ")
    assert row_counts() == before


def test_cancel_json_shows_the_request_and_bad_reasons_are_refused(cli, history):
    running = history["b_running"]
    before = row_counts()
    assert_error(cli("execution", "cancel", running.id, "--reason", "x" * 501), "reason: must be at most 500")
    assert_error(cli("execution", "cancel", running.id, "--reason", "a\x00b"), "without NUL")
    assert row_counts() == before and status_of(running.id) == "running"
    doc = ok_json(cli("execution", "cancel", running.id, "--json"))
    assert doc["status"] == "running" and doc["cancel_requested_by"] == "cli"
    assert doc["cancel_requested_at"].endswith("Z") and doc["reason"] == "cancelled by cli"
