"""`flask worker list|stop`: the worker registry and the order to drain or stop one.

What a worker does with the order runs with real processes in tests/integration/test_worker_control.py.
"""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import select

from app.clock import utcnow
from app.extensions import db
from app.models import Heartbeat, WorkerCommand
from tests.factories import make_execution, make_heartbeat, make_job
from tests.helpers.cli import assert_error, cli_events, ok, ok_json, row_counts


def beat(process_id: str, *, age_seconds: float = 1, **info) -> Heartbeat:
    row = make_heartbeat(process_id, "worker", age_seconds=age_seconds)
    row.info = {"slots": 4, "busy": 0, "queues": ["*"], "running": [], "executions": [], **info}
    db.session.commit()
    return row


def registry(app) -> tuple[str, int, int]:
    """The four kinds of worker; returns the busy one's start time, its execution's id and job's id."""
    now = utcnow().replace(microsecond=0)
    started = (now - timedelta(seconds=30)).isoformat().replace("+00:00", "Z")
    job = make_job("nightly")
    execution = make_execution(job, "running")
    execution.claimed_by = "w-busy"  # the registry lists only what the executions say is still in flight
    db.session.commit()
    beat(
        "w-busy",
        state="running",
        busy=1,
        queues=["default", "reports"],
        running=[execution.id],
        executions=[{"id": execution.id, "job_id": job.id, "job_name": "nightly", "attempt": 1, "started_at": started}],
    )
    beat("w-drain", state="draining", slots=2)
    beat("w-gone", state="stopped", age_seconds=5)
    beat("w-stale", state="running", age_seconds=app.config["HEARTBEAT_STALE_SECONDS"] + 10)
    make_heartbeat("scheduler-1", "scheduler", age_seconds=1)  # not a worker: never listed
    return started, execution.id, job.id


def test_list_json_shape_and_states(app, cli):
    started, execution_id, job_id = registry(app)
    docs = ok_json(cli("worker", "list", "--json"))
    assert [(d["id"], d["state"]) for d in docs] == [
        ("w-busy", "running"),
        ("w-drain", "draining"),
        ("w-stale", "stale"),
        ("w-gone", "stopped"),
    ]
    assert [d["status"] for d in docs] == ["alive", "alive", "lost", "stopped"]
    busy = docs[0]
    assert set(busy) == {
        "id",
        "host",
        "pid",
        "state",
        "status",
        "busy",
        "idle",
        "slots",
        "queues",
        "started_at",
        "last_seen",
        "age_seconds",
        "pending_command",
        "reloading",
        "tasks",
        "executions",
        "lost",
    }
    assert (busy["host"], busy["pid"], busy["slots"], busy["busy"], busy["idle"]) == ("host-a", 4242, 4, 1, False)
    assert busy["queues"] == ["default", "reports"] and busy["pending_command"] is None
    assert busy["executions"] == [
        {"id": execution_id, "job_id": job_id, "job_name": "nightly", "attempt": 1, "started_at": started}
    ]
    assert busy["last_seen"].endswith("Z") and busy["started_at"].endswith("Z")
    assert docs[1]["idle"] is True and docs[1]["slots"] == 2
    assert docs[3]["busy"] == 0 and docs[3]["executions"] == []


def test_list_text(app, cli):
    _, execution_id, _ = registry(app)
    lines = ok(cli("worker", "list")).splitlines()
    assert lines[0].split()[:6] == ["ID", "HOST", "PID", "STATUS", "STATE", "QUEUES"]
    statuses = {line.split()[0]: line.split()[3] for line in lines[1:]}
    assert statuses == {"w-busy": "alive", "w-drain": "alive", "w-stale": "lost", "w-gone": "stopped"}
    assert (
        "w-busy" in lines[1] and "default,reports" in lines[1] and "1/4" in lines[1] and f"{execution_id}@" in lines[1]
    )
    assert "w-drain" in lines[2] and "0/2 idle" in lines[2]
    assert [line.split()[0] for line in lines[1:]] == ["w-busy", "w-drain", "w-stale", "w-gone"]


def test_list_with_no_workers(app, cli):
    assert ok(cli("worker", "list")).strip() == "No workers have reported a heartbeat."
    assert ok_json(cli("worker", "list", "--json")) == []


def commands() -> list[tuple[str, str, str, bool]]:
    db.session.rollback()
    rows = db.session.scalars(select(WorkerCommand).order_by(WorkerCommand.id))
    return [(c.worker_id, c.command, c.issued_by, c.acted_at is not None) for c in rows]


def test_stop_stores_an_order_once_and_audits_it(app, cli):
    registry(app)
    out = ok(cli("worker", "stop", "w-busy"))
    assert "Worker w-busy told to drain" in out and "finishes 1 running" in out
    assert commands() == [("w-busy", "drain", "cli", False)]
    [event] = cli_events("worker_drain_requested")
    assert event.payload["worker_id"] == "w-busy" and event.payload["busy"] == 1
    # Until the worker takes it, the registry shows the order waiting.
    [busy] = [d for d in ok_json(cli("worker", "list", "--json")) if d["id"] == "w-busy"]
    assert busy["pending_command"] == "drain"
    before = row_counts()
    assert_error(cli("worker", "stop", "w-busy"), "worker w-busy is already draining or stopping; use --now")
    assert_error(cli("worker", "stop", "w-drain"), "worker w-drain is already draining or stopping")
    assert row_counts() == before
    # Escalating to stop now is allowed, once.
    doc = ok_json(cli("worker", "stop", "w-busy", "--now", "--json"))
    assert doc["id"] == "w-busy" and doc["pending_command"] == "stop"
    assert_error(cli("worker", "stop", "w-busy", "--now"), "worker w-busy has already been told to stop")
    assert commands() == [("w-busy", "drain", "cli", False), ("w-busy", "stop", "cli", False)]
    assert [e.type for e in cli_events()] == ["worker_drain_requested", "worker_stop_requested"]


def test_stop_refuses_unknown_stopped_and_stale_workers(app, cli):
    registry(app)
    before = row_counts()
    assert_error(cli("worker", "stop", "nope"), "worker nope does not exist")
    assert_error(cli("worker", "stop", "scheduler-1"), "worker scheduler-1 does not exist")
    assert_error(cli("worker", "stop", "bad\x00id"), "does not exist")
    assert_error(cli("worker", "stop", "x" * 300), "does not exist")
    assert_error(cli("worker", "stop", "w-gone", "--now"), "worker w-gone is already stopped")
    assert_error(cli("worker", "stop", "w-stale"), "worker w-stale is stale (no heartbeat for")
    assert row_counts() == before and commands() == []


def test_reload_stores_an_order_for_one_worker_or_every_running_one(app, cli):
    registry(app)
    out = ok(cli("worker", "reload", "--worker-id", "w-busy"))
    assert out.strip() == "Worker w-busy told to reload: it finishes 1 running, then restarts its fork server"
    assert commands() == [("w-busy", "reload", "cli", False)]
    [event] = cli_events("worker_reload_requested")
    assert event.payload["worker_id"] == "w-busy"
    [busy] = [d for d in ok_json(cli("worker", "list", "--json")) if d["id"] == "w-busy"]
    assert busy["pending_command"] == "reload"
    assert_error(cli("worker", "reload", "--worker-id", "w-busy"), "worker w-busy has already been told to reload")
    # Without an id: every running worker that has no order waiting (none is left here).
    assert_error(cli("worker", "reload"), "no running worker to reload")
    beat("w-two", state="running")
    docs = ok_json(cli("worker", "reload", "--json"))
    assert [d["id"] for d in docs] == ["w-two"] and docs[0]["pending_command"] == "reload"


def test_reload_refuses_unknown_stopped_stale_and_draining_workers(app, cli):
    registry(app)
    before = row_counts()
    for worker_id, message in (
        ("nope", "worker nope does not exist"),
        ("scheduler-1", "worker scheduler-1 does not exist"),
        ("w-gone", "worker w-gone is stopped"),
        ("w-stale", "worker w-stale is stale"),
        ("w-drain", "worker w-drain is draining or stopping"),
    ):
        assert_error(cli("worker", "reload", "--worker-id", worker_id), message)  # one line, exit 1
    assert row_counts() == before and commands() == []


def test_a_stopped_worker_does_not_count_as_alive(app, cli):
    from app.services.read.health import readiness

    app.config["READYZ_REQUIRE_WORKER_HEARTBEAT"] = True
    beat("w-gone", state="stopped", age_seconds=1)
    assert_error(cli("check-heartbeat", "worker", "--any-host"), "no worker heartbeat from any host")
    assert readiness()["checks"]["worker_heartbeat"]["ok"] is False
    beat("w-live", state="running", age_seconds=1)
    assert "worker w-live alive" in ok(cli("check-heartbeat", "worker", "--any-host"))
    db.session.rollback()
    assert readiness()["checks"]["worker_heartbeat"]["ok"] is True
