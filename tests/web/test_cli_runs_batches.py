"""`flask job trigger --in/--at/--config-override`, `flask job add --on-success/--on-failure`,
`flask batch submit|list|inspect|cancel` and `flask execution inspect` of callbacks: one JSON
document with --json, one `Error:` line and exit 1 for bad input, nothing stored then."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import func, select

from app.clock import utcnow
from app.extensions import db
from app.models import Batch, Execution
from app.services.engine.worker import Worker
from tests.factories import make_job
from tests.helpers.cli import assert_error, ok, ok_json


def count(model) -> int:
    db.session.rollback()
    return db.session.scalar(select(func.count()).select_from(model))


def test_trigger_later_with_an_override(cli):
    job = make_job(task="echo", every="1h")
    document = ok_json(cli("job", "trigger", job.id, "--in", "10m", "--config-override", '{"message": "x"}', "--json"))
    assert document["status"] == "pending" and document["trigger"] == "manual"
    assert document["config_override"] == {"message": "x"}
    assert document["available_at"] > document["created_at"]
    text = ok(cli("job", "trigger", job.id, "--at", "2030-01-01T00:00:00Z"))
    assert "scheduled for 2030-01-01" in text
    inspected = ok(cli("execution", "inspect", document["id"]))
    assert 'override: {"message": "x"}' in " ".join(inspected.split())


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["--config-override", "{bad"], "not valid JSON"),
        (["--config-override", '{"seconds": 1}'], "invalid config for task 'echo'"),
        (["--in", "later"], "later"),
        (["--in", "1m", "--at", "2099-01-01T00:00:00Z"], "not both"),
        (["--at", "yesterday-ish"], "ISO 8601"),
    ],
)
def test_bad_triggers_say_why_in_one_line_and_store_nothing(cli, args, fragment):
    job = make_job(task="echo", every="1h")
    assert_error(cli("job", "trigger", job.id, *args), fragment)
    assert count(Execution) == 0


def test_job_callbacks_from_the_cli(cli):
    document = ok_json(
        cli(
            "job", "add", "cb", "echo", "interval", "--every", "1h",
            "--on-success", "echo", "--on-success-config", '{"message": "ok"}',
            "--on-failure", "always_fail", "--json",
        )
    )  # fmt: skip
    assert (document["on_success"], document["on_success_config"]) == ("echo", {"message": "ok"})
    assert document["on_failure"] == "always_fail" and document["on_failure_config"] == {}
    edited = ok_json(cli("job", "edit", document["id"], "--on-failure", "", "--json"))
    assert edited["on_failure"] is None
    assert_error(cli("job", "edit", document["id"], "--on-success", "sleep_for_seconds"), "'seconds' is required")


def test_batch_submit_list_inspect_and_cancel(cli, app):
    job = make_job(task="echo", every="1h", max_attempts=1)
    items = json.dumps([{"message": "a"}, {"message": "b", "fail": True}, {}])
    batch = ok_json(cli("batch", "submit", job.id, "--items", "-", "--on-complete", "echo", "--json", input=items))
    assert (batch["status"], batch["items"], batch["counts"]["pending"]) == ("running", 3, 3)
    assert batch["job_id"] == job.id and batch["on_complete"] == "echo"
    Worker(app, worker_id="w-cli").run(burst=True)
    db.session.rollback()  # each `flask` command is a new process; here they share one session
    listed = ok_json(cli("batch", "list", "--json"))
    assert [(b["id"], b["status"]) for b in listed] == [(batch["id"], "partially_failed")]
    inspected = ok_json(cli("batch", "inspect", batch["id"], "--json"))
    assert {k: v for k, v in inspected["counts"].items() if v} == {"succeeded": 2, "failed": 1}
    assert [e["config_override"] for e in inspected["executions"]] == [
        {"message": "a"},
        {"message": "b", "fail": True},
        {},
    ]
    callback = ok_json(cli("execution", "inspect", inspected["callback_execution_id"], "--json"))
    assert callback["trigger"] == "callback" and callback["batch_id"] == batch["id"]
    assert callback["config_override"]["parent"]["status"] == "partially_failed"
    text = ok(cli("batch", "inspect", batch["id"]))
    assert "partially_failed" in text and "succeeded 2, failed 1" in text
    assert "partially_failed" in ok(cli("batch", "list"))
    assert_error(cli("batch", "cancel", batch["id"]), "already completed")


def test_batch_cancel_stops_what_has_not_started(cli, tmp_path):
    job = make_job(task="echo", every="1h")
    path = tmp_path / "items.json"
    path.write_text("[{}, {}]")
    batch = ok_json(cli("batch", "submit", job.id, "--items", str(path), "--json"))
    cancelled = ok_json(cli("batch", "cancel", batch["id"], "--json"))
    assert cancelled["status"] == "cancelled" and cancelled["cancelled_executions"] == 2
    assert cancelled["counts"]["cancelled"] == 2 and cancelled["completed_at"] is not None
    assert_error(cli("batch", "cancel", batch["id"]), "already cancelled")


@pytest.mark.parametrize(
    "items, fragment",
    [
        ('[{"message": "ok"}, {"oops": true}]', "1 of 2 items refused, nothing stored: item 2:"),
        ("not json", "not valid JSON"),
        ("{}", "must be a JSON list"),
        ("[]", "at least one item"),
    ],
)
def test_batch_items_are_all_or_nothing(cli, items, fragment):
    job = make_job(task="echo", every="1h")
    assert_error(cli("batch", "submit", job.id, "--items", "-", input=items), fragment)
    assert count(Batch) == 0 and count(Execution) == 0


def test_batch_errors(cli):
    job = make_job(task="echo", every="1h")
    assert_error(cli("batch", "inspect", 4242), "batch 4242 does not exist")
    assert_error(cli("batch", "submit", 4242, "--items", "-", input="[{}]"), "job 4242 does not exist")
    assert_error(cli("batch", "submit", job.id, "--items", "-", "--on-complete", "nope", input="[{}]"), "unknown task")
    assert "No batches yet" in ok(cli("batch", "list"))
    assert ok_json(cli("batch", "list", "--job", job.id, "--json")) == []
    assert utcnow()  # the clock is the app's
