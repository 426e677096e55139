"""`flask queue ...`, and queue names everywhere a person types one (job add/edit, worker run)."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import select

from app.clock import utcnow
from app.extensions import db as database
from app.models import Execution, Queue
from app.services.use_cases import jobs
from tests.factories import make_execution, make_job, make_queue
from tests.helpers.cli import assert_error, assert_usage_error, cli_events, ok, ok_json, row_counts


def queue_row(name: str) -> Queue:
    database.session.expire_all()
    return database.session.scalar(select(Queue).where(Queue.name == name))


def test_add_edit_and_list_a_queue(cli):
    created = ok_json(
        cli(
            "queue",
            "add",
            "reports",
            "--concurrency-limit",
            "2",
            "--priority",
            "5",
            "--description",
            "nightly",
            "--json",
        )
    )
    assert (created["name"], created["concurrency_limit"], created["priority"], created["paused"]) == (
        "reports",
        2,
        5,
        False,
    )
    assert created["stats"]["pending"] == 0 and created["created_at"].endswith("Z")
    edited = ok_json(cli("queue", "edit", "reports", "--no-limit", "--priority", "-3", "--json"))
    assert (edited["concurrency_limit"], edited["priority"], edited["description"]) == (None, -3, "nightly")
    listed = ok_json(cli("queue", "list", "--json"))
    assert [q["name"] for q in listed] == ["default", "reports"]
    assert "reports" in ok(cli("queue", "list"))
    assert [e.payload["queue"] for e in cli_events()] == ["reports", "reports"]


def test_bad_queue_input_is_refused_with_nothing_written(cli):
    make_queue("reports")
    before = row_counts()
    assert_error(cli("queue", "add", "reports"), "already exists")
    assert_error(cli("queue", "add", "Bad Name!"), "lower-case letters")
    assert_usage_error(cli("queue", "add", "x", "--concurrency-limit", "0"), "--concurrency-limit")
    assert_usage_error(cli("queue", "edit", "reports", "--concurrency-limit", "2", "--no-limit"), "not both")
    assert_error(
        cli("queue", "edit", "nope", "--priority", "1"), "unknown queue 'nope'; known queues: default, reports"
    )
    assert_error(cli("queue", "stats", "nope"), "known queues: default, reports")
    assert row_counts() == before


def test_stats_count_waiting_running_and_finished_work(cli):
    make_queue("reports")
    job = make_job("nightly", queue="reports")
    now = utcnow()
    make_execution(job, "pending", now=now)
    make_execution(job, "pending", now=now, available_at=now + timedelta(hours=1))
    make_execution(job, "running", now=now)
    make_execution(job, "succeeded", now=now)
    make_execution(job, "failed", now=now, attempts=3)
    doc = ok_json(cli("queue", "stats", "reports", "--json"))
    stats = doc["stats"]
    assert (stats["pending"], stats["scheduled_later"], stats["running"]) == (1, 1, 1)
    assert (stats["succeeded_last_hour"], stats["failed_last_hour"]) == (1, 1)
    assert stats["oldest_pending_seconds"] >= 60 and stats["throughput_per_minute"] > 0
    assert "Running" in ok(cli("queue", "stats", "reports"))
    assert ok_json(cli("queue", "stats", "default", "--json"))["stats"]["pending"] == 0


def test_pause_and_resume_say_who_and_why(cli):
    make_queue("reports")
    assert "paused: disk full" in ok(cli("queue", "pause", "reports", "--reason", "disk full"))
    queue = queue_row("reports")
    assert (queue.paused, queue.paused_by, queue.paused_reason) == (True, "cli", "disk full")
    assert "paused since" in ok(cli("queue", "stats", "reports"))
    ok(cli("queue", "resume", "reports"))
    queue = queue_row("reports")
    assert (queue.paused, queue.paused_at, queue.paused_reason) == (False, None, None)
    assert [e.type for e in cli_events()] == ["queue_paused", "queue_resumed"]


def test_delete_is_refused_while_a_job_uses_the_queue(cli):
    job = make_job("nightly", queue="reports")
    assert_usage_error(cli("queue", "delete", "reports"), "--yes")
    assert_error(cli("queue", "delete", "reports", "--yes"), "used by 1 job")
    jobs.update_job(job.id, {"queue": "default"}, now=utcnow(), actor="test")
    ok(cli("queue", "delete", "reports", "--yes"))
    assert queue_row("reports") is None


def test_delete_refuses_the_default_queue_and_changes_nothing(cli):
    before = row_counts()
    assert_error(cli("queue", "delete", "default", "--yes"), "the default queue cannot be deleted")
    assert queue_row("default") is not None
    assert row_counts() == before


def test_job_add_and_edit_refuse_an_unknown_queue_and_list_the_known_ones(cli):
    make_queue("reports")
    before = row_counts()
    result = cli("job", "add", "typo", "always_succeed", "interval", "--every", "5m", "--queue", "reprots")
    assert_error(result, "unknown queue 'reprots'; known queues: default, reports")
    assert row_counts() == before
    job = make_job("nightly")
    assert_error(cli("job", "edit", str(job.id), "--queue", "reprots"), "known queues: default, reports")
    moved = ok_json(cli("job", "edit", str(job.id), "--queue", "reports", "--json"))
    assert moved["queue"] == "reports"


def test_a_job_takes_its_queue_priority_unless_it_names_its_own(cli):
    make_queue("urgent", priority=-10)
    inherited = ok_json(
        cli("job", "add", "a", "always_succeed", "interval", "--every", "5m", "--queue", "urgent", "--json")
    )
    own = ok_json(
        cli(
            "job",
            "add",
            "b",
            "always_succeed",
            "interval",
            "--every",
            "5m",
            "--queue",
            "urgent",
            "--priority",
            "3",
            "--json",
        )
    )
    assert (inherited["priority"], own["priority"]) == (-10, 3)


def test_moving_a_job_moves_its_waiting_runs_with_it(cli):
    make_queue("reports")
    job = make_job("nightly")
    waiting = make_execution(job, "pending")
    done = make_execution(job, "succeeded")
    ok(cli("job", "edit", str(job.id), "--queue", "reports"))
    database.session.expire_all()
    assert database.session.get(Execution, waiting.id).queue == "reports"
    assert database.session.get(Execution, done.id).queue == "default"


def test_worker_run_refuses_an_unknown_queue_before_starting(cli):
    result = cli("worker", "run", "--once", "--queues", "default,nope,other")
    assert_error(result, "unknown queues 'nope', 'other'; known queues: default")
