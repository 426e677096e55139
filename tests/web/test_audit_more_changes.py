"""Audit rows for changes that once went unaudited: web and API sign-out, invitations made and
used, alert-channel test sends, and the engine's own alert resolutions (source `system`). Each
row says who (actor, source), what (object kind, id, label) and the before/after."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import select

from app.clock import utcnow
from app.database import write_transaction
from app.extensions import db
from app.models import AlertChannel, AuditEvent, User, WebSession
from app.services.engine import alerting
from app.services.engine.dead_letters import dead_letter
from tests.factories import make_execution, make_job, make_user, utc
from tests.helpers.api import PASSWORD, ApiClient
from tests.helpers.web import WebClient, signed_in_client

NOW = utc(2026, 6, 1, 20, 42)


def audit_rows(action: str, kind: str) -> list[AuditEvent]:
    db.session.rollback()
    query = select(AuditEvent).where(AuditEvent.action == action, AuditEvent.object_kind == kind)
    return list(db.session.scalars(query.order_by(AuditEvent.id)))


def user_named(username: str) -> User:
    db.session.rollback()
    return db.session.scalars(select(User).where(User.username == username)).one()


def test_web_sign_out_is_audited_with_the_session_it_ended(app):
    make_user("alice")
    client = WebClient(app)
    assert client.login("alice").status_code == 302
    db.session.rollback()
    started = db.session.scalars(select(WebSession.created_at)).one()
    assert audit_rows("signed_out", "user") == []

    assert client.post("/auth/logout").status_code == 302

    (row,) = audit_rows("signed_out", "user")
    alice = user_named("alice")
    assert (row.actor, row.source, row.object_id, row.object_label) == ("web:alice", "web", str(alice.id), "alice")
    assert row.changes == {"session_started_at": {"before": started.isoformat().replace("+00:00", "Z"), "after": None}}
    assert row.address == "127.0.0.1" and row.organization_id is not None
    # Signing out again (an old form, a replayed cookie) ends nothing and writes nothing.
    client.post("/auth/logout")
    assert len(audit_rows("signed_out", "user")) == 1


def test_api_sign_out_is_audited_once(app):
    make_user("bob", PASSWORD, role="operator")
    api = ApiClient(app)
    api.login("bob")
    assert api.post("/api/v1/auth/logout").status_code == 204

    (row,) = audit_rows("signed_out", "user")
    assert (row.actor, row.source, row.object_label) == ("api:bob", "api", "bob")
    assert row.changes == {"revoked_tokens": {"before": None, "after": ["access", "refresh"]}}
    assert row.organization_id is not None


def test_an_invitation_is_audited_when_made_and_when_used(app):
    make_user("admin", PASSWORD, role="admin")
    api = ApiClient(app)
    api.login("admin")
    invitation = api.post("/api/v1/users/invitations", {"role": "operator"}).get_json()

    (made,) = audit_rows("created", "invitation")
    assert (made.actor, made.source, made.object_label) == ("api:admin", "api", "operator invitation")
    assert made.changes["role"] == {"before": None, "after": "operator"}
    assert made.changes["expires_at"]["after"] == invitation["expires_at"]
    assert invitation["invitation"] not in str(made.changes) + made.object_id  # the token never: it admits

    joined = api.post(
        "/api/v1/auth/register",
        {"username": "carol", "password": "carol-secret-1", "invitation": invitation["invitation"]},
        token="",
    )
    assert joined.status_code == 201
    (used,) = audit_rows("used", "invitation")
    assert used.object_id == made.object_id and used.organization_id == made.organization_id
    assert (used.actor, used.source) == ("api:carol", "api")
    assert used.changes == {
        "used_by": {"before": None, "after": "carol"},
        "invited_by": {"before": None, "after": "api:admin"},
    }


def test_a_channel_test_send_is_audited_with_its_delivery(app, cli):
    client = signed_in_client(app, "admin")
    created = client.post(
        "/alerts/channels/new", {"name": "ops", "kind": "webhook", "target": "https://example.com/hook", "kinds": ""}
    )
    assert created.status_code in (302, 303)
    db.session.rollback()
    channel = db.session.scalars(select(AlertChannel)).one()

    assert client.post(f"/alerts/channels/{channel.id}/test").status_code in (302, 303)
    assert cli("alerts", "channel", "test", channel.id).exit_code == 0

    web, terminal = audit_rows("tested", "channel")
    assert (web.source, web.object_id, web.object_label) == ("web", str(channel.id), "ops")
    assert web.actor.startswith("web:admin") and web.changes["kind"] == {"before": None, "after": "webhook"}
    assert (terminal.actor, terminal.source) == ("cli", "cli")
    assert web.changes["delivery_id"]["after"] != terminal.changes["delivery_id"]["after"]


def _dead_letter(job, at):
    db.session.rollback()
    execution = make_execution(job, "failed", now=at, attempts=job.max_attempts)
    with write_transaction(db.engine) as conn:
        dead_letter(
            conn,
            execution_id=execution.id,
            job_id=job.id,
            job_name=job.name,
            alert_mode=job.alert_mode,
            status="failed",
            reason="attempts exhausted",
            now=at,
        )


SETTINGS = {"ALERT_QUEUE_BACKLOG_SECONDS": 0, "HEARTBEAT_STALE_SECONDS": 60}


def test_the_engine_resolving_an_alert_after_a_success_is_audited_as_system(app):
    job = make_job("recovers", max_attempts=1)
    _dead_letter(job, NOW)
    db.session.rollback()
    make_execution(job, "succeeded", now=NOW + timedelta(minutes=3))
    with write_transaction(db.engine) as conn:
        alerting.evaluate_alerts(conn, now=NOW + timedelta(minutes=4), settings=SETTINGS)

    (row,) = audit_rows("resolved", "alert")
    assert (row.actor, row.source, row.object_label, row.job_id) == ("system", "system", "dead_letter", job.id)
    assert row.created_at == NOW + timedelta(minutes=4) and row.organization_id is not None
    assert row.changes == {
        "resolved_at": {"before": None, "after": "2026-06-01T20:46:00Z"},
        "resolved_by": {"before": None, "after": "system"},
    }
    # A pass with nothing to resolve writes nothing.
    with write_transaction(db.engine) as conn:
        alerting.evaluate_alerts(conn, now=NOW + timedelta(minutes=5), settings=SETTINGS)
    assert len(audit_rows("resolved", "alert")) == 1


def test_the_engine_resolving_a_cleared_condition_is_audited_as_system(app):
    # A condition the pass watches (a late job, a lost worker, a backlog) clears: the pass
    # resolves its alert by key (alerting.resolve_alert).
    now = utcnow()
    with write_transaction(db.engine) as conn:
        key = "overdue:job:1"
        alerting.open_alert(conn, key=key, now=now, kind="overdue", message="late")
        assert alerting.resolve_alert(conn, key=key, now=now + timedelta(seconds=1))
        assert not alerting.resolve_alert(conn, key=key, now=now + timedelta(seconds=2))
    (row,) = audit_rows("resolved", "alert")
    assert (row.actor, row.source, row.object_label) == ("system", "system", "overdue")
    assert row.changes["resolved_by"] == {"before": None, "after": "system"}
