"""The audit log: one row per change with the before/after of the changed fields only, written in
the change's own transaction, refused UPDATE/DELETE by the database, pruned by age."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import select, text
from sqlalchemy.exc import DatabaseError

from app.database import write_transaction
from app.extensions import db
from app.models import AuditEvent, Event
from app.services import audit_trail
from app.services.caller import Caller
from app.services.engine import retention
from app.services.errors import ValidationFailed
from app.services.use_cases import alerts, executions, jobs, queues, users, workers
from tests.factories import make_alert, make_execution, make_heartbeat, make_job


def rows(**filters) -> list[AuditEvent]:
    """Audit rows, oldest first, as a new transaction sees them."""
    db.session.rollback()
    return list(reversed(audit_trail.list_events(limit=1000, **filters)))


def only(action: str, kind: str) -> AuditEvent:
    found = [row for row in rows() if row.action == action and row.object_kind == kind]
    assert len(found) == 1, [(row.object_kind, row.action) for row in rows()]
    return found[0]


def test_creating_a_job_records_every_field_it_was_given(app, clock):
    job = make_job("nightly", now=clock(), every="5m", description="the nightly run")
    row = only("created", "job")
    assert (row.object_id, row.object_label, row.job_id) == (str(job.id), "nightly", job.id)
    assert (row.actor, row.source, row.created_at) == ("test", "cli", clock())
    assert row.changes["name"] == {"before": None, "after": "nightly"}
    assert row.changes["description"] == {"before": None, "after": "the nightly run"}
    assert row.changes["queue"] == {"before": None, "after": "default"}
    # What the system maintains (next_run_at, timestamps) is not "who changed what".
    assert not {"next_run_at", "updated_at", "created_at", "id"} & row.changes.keys()
    assert row.project_id is not None


def test_editing_two_fields_records_only_those_two(app, clock):
    job = make_job("edited", now=clock(), max_attempts=1)
    clock.advance(minutes=1)
    jobs.update_job(
        job.id,
        {"description": "now described", "max_attempts": 4, "name": "edited", "timeout_seconds": job.timeout_seconds},
        now=clock(),
        actor="web:alice",
    )
    row = only("updated", "job")
    assert row.changes == {
        "description": {"before": "", "after": "now described"},
        "max_attempts": {"before": 1, "after": 4},
    }
    assert (row.actor, row.source, row.created_at) == ("web:alice", "web", clock())


def test_an_edit_that_changes_nothing_records_nothing(app, clock):
    job = make_job("same", now=clock())
    jobs.update_job(job.id, {"name": "same"}, now=clock(), actor="cli")
    assert [row.action for row in rows()] == ["created"]


def test_enable_disable_trigger_and_delete_of_a_job(app, clock):
    job = make_job("toggled", now=clock())
    jobs.disable_job(job.id, now=clock(), actor="cli")
    jobs.enable_job(job.id, now=clock(), actor="cli")
    execution_id = jobs.trigger_job(job.id, now=clock(), actor="cli").id
    jobs.delete_job(job.id, now=clock(), actor="cli")
    assert [row.action for row in rows(job_id=job.id)] == ["created", "disabled", "enabled", "triggered", "deleted"]
    assert only("disabled", "job").changes == {"enabled": {"before": True, "after": False}}
    assert only("enabled", "job").changes == {"enabled": {"before": False, "after": True}}
    assert only("triggered", "job").changes == {"execution_id": {"before": None, "after": execution_id}}
    deleted = only("deleted", "job")
    assert deleted.changes["name"] == {"before": "toggled", "after": None}
    assert deleted.object_label == "toggled"  # the history outlives the job


def test_a_refused_change_leaves_no_audit_row(app, clock):
    make_job("taken", now=clock())
    with pytest.raises(ValidationFailed):
        make_job("taken", now=clock())
    db.session.rollback()
    assert len(rows()) == 1


def test_queue_create_edit_pause_resume_delete(app, clock):
    queues.add_queue({"name": "reports", "concurrency_limit": 2}, now=clock(), actor="cli")
    queues.edit_queue("reports", {"priority": 5}, now=clock(), actor="cli")
    queues.pause_queue("reports", now=clock(), actor="web:bob", reason="maintenance")
    queues.resume_queue("reports", now=clock(), actor="web:bob")
    queues.delete_queue("reports", now=clock(), actor="cli")
    assert [row.action for row in rows(object_kind="queue")] == ["created", "updated", "paused", "resumed", "deleted"]
    assert only("created", "queue").changes["concurrency_limit"] == {"before": None, "after": 2}
    assert only("updated", "queue").changes == {"priority": {"before": 0, "after": 5}}
    assert only("paused", "queue").changes == {
        "paused": {"before": False, "after": True},
        "paused_reason": {"before": None, "after": "maintenance"},
    }
    assert only("resumed", "queue").changes == {
        "paused": {"before": True, "after": False},
        "paused_reason": {"before": "maintenance", "after": None},
    }
    assert {row.object_label for row in rows(object_kind="queue")} == {"reports"}


def test_execution_retry_and_cancel(app, clock):
    job = make_job("runs", now=clock())
    failed = make_execution(job, "failed", now=clock())
    retried = executions.retry_execution(failed.id, now=clock(), actor="cli")
    executions.cancel_execution(retried.id, now=clock(), actor="cli", reason="not today")
    retry_row = only("retried", "execution")
    assert (retry_row.object_id, retry_row.job_id) == (str(failed.id), job.id)
    assert retry_row.changes == {"retry_execution_id": {"before": None, "after": retried.id}}
    cancel_row = only("cancelled", "execution")
    assert cancel_row.object_id == str(retried.id)
    assert cancel_row.changes == {
        "status": {"before": "pending", "after": "cancelled"},
        "reason": {"before": None, "after": "not today"},
    }
    # --job finds the job's own rows and those of its executions.
    assert [row.action for row in rows(job_id=job.id)] == ["created", "retried", "cancelled"]


def test_cancelling_a_running_execution_records_the_request(app, clock):
    job = make_job("long", now=clock())
    running = make_execution(job, "running", now=clock(), claimed_by="worker-1")
    executions.cancel_execution(running.id, now=clock(), actor="web:carol")
    row = only("cancel_requested", "execution")
    assert row.changes["cancel_requested_by"] == {"before": None, "after": "web:carol"}


def test_resolving_alerts_records_one_row_per_alert_that_changed(app, clock):
    job = make_job("alerting", now=clock())
    first, second = make_alert(job, now=clock()), make_alert(job, now=clock())
    already = make_alert(job, now=clock(), resolved=True)
    alerts.resolve_alerts([first.id, second.id, already.id], now=clock(), actor="web:dave")
    resolved = rows(object_kind="alert")
    assert [row.object_id for row in resolved] == [str(first.id), str(second.id)]
    assert resolved[0].changes["resolved_by"] == {"before": None, "after": "web:dave"}
    assert resolved[0].job_id == job.id


def test_creating_a_user_records_it_without_secrets(app, clock):
    users.ensure_dev_user(username="root", password="long enough words", debug=False, now=clock(), actor="cli")
    row = only("created", "user")
    assert row.object_label == "root"
    assert row.changes["username"] == {"before": None, "after": "root"}
    assert "long enough words" not in str(row.changes)


def test_stopping_a_worker_is_audited(app, clock):
    make_heartbeat("worker-a", "worker", age_seconds=1, now=clock())
    workers.stop_worker("worker-a", now=clock(), actor="cli")
    row = only("drain_requested", "worker")
    assert (row.object_id, row.changes["state"]) == ("worker-a", {"before": "running", "after": "draining"})


def test_a_caller_gives_source_address_and_organization(app, clock):
    caller = Caller(actor="api:erin", source="api", role="admin", organization_id=7, project_id=9, address="10.0.0.5")
    audit_trail.record_change(caller, "updated", "project", 9, {"name": "a"}, {"name": "b"}, now=clock())
    db.session.commit()
    row = only("updated", "project")
    assert (row.actor, row.source, row.address, row.organization_id, row.project_id) == (
        "api:erin",
        "api",
        "10.0.0.5",
        7,
        9,
    )
    # A caller confined to another organization does not see it.
    other = Caller(actor="web:x", source="web", role="viewer", organization_id=8)
    assert rows(caller=other) == []
    assert len(rows(caller=caller)) == 1


def test_secret_looking_config_values_are_hidden(app, clock):
    audit_trail.record_change(
        "cli",
        "updated",
        "job",
        1,
        {"config": {"api_token": "old-secret"}},
        {"config": {"api_token": "new-secret"}},
        now=clock(),
    )
    db.session.commit()
    (row,) = rows()
    assert "secret" not in str(row.changes)
    assert row.changes["config"]["before"] == {"api_token": audit_trail.REDACTED}


def test_the_database_refuses_to_update_or_delete_audit_rows(app, clock):
    make_job("kept", now=clock())
    for statement in (
        "UPDATE audit_events SET actor = 'someone else'",
        "DELETE FROM audit_events",
        "DELETE FROM audit_events WHERE id = (SELECT max(id) FROM audit_events)",
    ):
        with pytest.raises(DatabaseError, match="append-only"):
            with write_transaction(db.engine) as conn:
                conn.execute(text(statement))
    (row,) = rows()
    assert row.actor == "test"


def test_retention_prunes_audit_rows_by_age(app, clock):
    app.config["AUDIT_RETENTION_DAYS"] = 30
    start = clock()
    make_job("old", now=start)
    clock.advance(days=20)
    make_job("recent", now=clock())
    clock.advance(days=15)  # "old" is 35 days old, "recent" 15
    retention.prune_history(now=clock())
    assert [row.object_label for row in rows()] == ["recent"]
    db.session.expire_all()
    pruned = db.session.scalars(select(Event).where(Event.type == "audit_pruned")).all()
    assert [event.payload["deleted"] for event in pruned] == [1]
    # The gate the prune opened on SQLite is shut again; deletes are refused as before.
    with pytest.raises(DatabaseError, match="append-only"):
        with write_transaction(db.engine) as conn:
            conn.execute(text("DELETE FROM audit_events"))


def test_retention_zero_keeps_audit_rows_forever(app, clock):
    app.config["AUDIT_RETENTION_DAYS"] = 0
    make_job("ancient", now=clock())
    clock.advance(days=5000)
    retention.prune_history(now=clock())
    assert len(rows()) == 1


def test_the_default_retention_is_a_year(app, clock):
    assert app.config["AUDIT_RETENTION_DAYS"] == 365
    make_job("a-year-ago", now=clock())
    clock.advance(days=365, seconds=-1)
    retention.prune_history(now=clock())
    assert len(rows()) == 1
    clock.advance(seconds=2)
    retention.prune_history(now=clock())
    assert rows() == []


def test_filters(app, clock):
    first = make_job("one", now=clock())
    clock.advance(hours=1)
    jobs.disable_job(first.id, now=clock(), actor="web:alice")
    clock.advance(hours=1)
    second = make_job("two", now=clock())
    assert [r.object_label for r in rows(actor="web:alice")] == ["one"]
    assert [r.action for r in rows(job_id=first.id)] == ["created", "disabled"]
    assert [r.object_id for r in rows(object_kind="job", object_id=str(second.id))] == [str(second.id)]
    assert [r.action for r in rows(action="disabled")] == ["disabled"]
    since = clock() - timedelta(minutes=30)
    assert [r.object_label for r in rows(since=since)] == ["two"]
    assert [r.object_label for r in rows(until=since)] == ["one", "one"]


def test_organizations_projects_and_tokens_are_audited(app, clock):
    from app.services.use_cases import tenancy, tokens
    from tests.factories import make_user

    cli = Caller.cli()
    org = tenancy.add_organization("acme", now=clock(), caller=cli)
    project = tenancy.add_project("acme", "web", now=clock(), caller=cli, description="the site")
    created = only("created", "project")
    assert (created.object_label, created.organization_id, created.project_id) == ("acme/web", org.id, project.id)
    assert created.changes["description"] == {"before": None, "after": "the site"}
    assert only("created", "organization").organization_id == org.id
    owner = make_user("owner", role="admin", organization="acme")
    new = tokens.create_token(cli, name="deploy", project="acme/web", role="operator", now=clock(), user_id=owner.id)
    tokens.revoke_token(new.token.id, cli, now=clock())
    token_row = only("created", "token")
    assert token_row.changes["role"] == {"before": None, "after": "operator"}
    assert new.secret not in str(token_row.changes)
    assert only("revoked", "token").changes == {"revoked_at": {"before": None, "after": "2026-06-01T12:00:00Z"}}


def test_the_system_disabling_a_job_is_audited(app, clock):
    from app.models import Job
    from app.services.engine.scheduler import Scheduler

    job = make_job("flaky", now=clock(), every="1h", pause_after_failures=1)
    make_execution(db.session.get(Job, job.id), "failed", now=clock() + timedelta(minutes=1))
    later = clock() + timedelta(minutes=2)
    assert Scheduler(app, scheduler_id="audit-test", clock=lambda: later).evaluate_alerts(later).paused == [job.id]
    row = only("disabled", "job")
    assert (row.actor, row.source, row.object_label, row.job_id) == ("system", "system", "flaky", job.id)
    assert row.changes["enabled"] == {"before": True, "after": False}
    assert "auto-paused" in row.changes["reason"]["after"]
    assert row.organization_id is not None


def test_a_job_reaching_its_run_limit_is_audited(app, clock):
    from app.services.engine.scheduler import Scheduler
    from app.services.engine.worker import Worker

    job = make_job("limited", now=clock(), every="1s", max_runs=1)
    for _ in range(3):
        clock.advance(seconds=1)
        Scheduler(app, scheduler_id="audit-test", clock=clock).tick(clock())
        Worker(app, worker_id="audit-worker", clock=clock).run(burst=True)
    row = only("disabled", "job")
    assert (row.source, row.job_id) == ("system", job.id)
    assert row.changes["reason"]["after"].startswith("max_runs reached")


def test_user_management_is_audited(app, clock):
    from app.services.use_cases import tenancy

    org_id = tenancy.default_organization().id
    admin = Caller(actor="web:boss", source="web", role="admin", organization_id=org_id, address="10.1.1.1")
    users.create_user("frank", password="a long password", role="viewer", now=clock(), caller=admin)
    users.set_role("frank", "operator", now=clock(), caller=admin)
    users.set_active("frank", False, now=clock(), caller=admin)
    users.reset_password("frank", "another long password", now=clock(), caller=admin)
    found = rows(object_kind="user")
    assert [row.action for row in found] == ["created", "role_changed", "disabled", "password_reset"]
    assert found[1].changes == {"role": {"before": "viewer", "after": "operator"}}
    assert found[2].changes == {"active": {"before": True, "after": False}}
    assert {(row.actor, row.source, row.address, row.object_label) for row in found} == {
        ("web:boss", "web", "10.1.1.1", "frank")
    }
    assert "password" not in str([row.changes for row in found]).replace("password_reset", "")


def test_alert_channels_are_audited_without_their_secret(app, clock):
    from app.services.use_cases import alert_channels

    data = {"name": "ops", "kind": "webhook", "target": "http://127.0.0.1:9/hook", "secret": "hush-hush-123"}
    channel = alert_channels.add_channel(data, now=clock(), actor="cli")
    alert_channels.delete_channel(channel.id, now=clock(), actor="cli")
    created, deleted = rows(object_kind="channel")
    assert (created.action, deleted.action, created.object_label) == ("created", "deleted", "ops")
    # A channel URL is a credential too (Slack and Teams put theirs in the path): masked.
    assert created.changes["target"] == {"before": None, "after": "http://127.0.0.1/…hook"}
    assert created.changes["secret"] == {"before": None, "after": audit_trail.REDACTED}
    assert "hush-hush" not in str(created.changes) + str(deleted.changes)
    assert created.organization_id is not None
