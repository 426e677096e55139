"""`flask alerts list|resolve`."""

from __future__ import annotations

from app.clock import utcnow
from app.extensions import db as database
from app.models import Alert, DeadLetter
from tests.factories import make_alert, make_execution, make_job
from tests.helpers.cli import assert_error, assert_usage_error, cli_events, ok, ok_json, row_counts


def seed():
    job = make_job("flaky")
    failed = make_execution(job, "failed", attempts=3, error="boom")
    database.session.add(
        DeadLetter(execution_id=failed.id, job_id=job.id, reason="retries exhausted", created_at=utcnow())
    )
    database.session.commit()
    open_alert = make_alert(job, failed, message="flaky dead-lettered")
    old_alert = make_alert(job, None, message="an old one", resolved=True)
    return job, failed, open_alert, old_alert


def test_list_shows_open_alerts_and_dead_letters(cli):
    job, failed, open_alert, old_alert = seed()
    out = ok(cli("alerts", "list"))
    assert out.startswith("Open alerts:") and "flaky dead-lettered" in out and "an old one" not in out
    assert "Dead letters:" in out and "retries exhausted" in out and f"{job.id} flaky" in out
    assert "an old one" in ok(cli("alerts", "list", "--all"))


def test_list_json(cli):
    assert ok_json(cli("alerts", "list", "--json")) == {"alerts": [], "dead_letters": []}
    job, failed, open_alert, old_alert = seed()
    doc = ok_json(cli("alerts", "list", "--json"))
    [alert] = doc["alerts"]
    assert alert["id"] == open_alert.id and alert["job_name"] == "flaky" and alert["execution_id"] == failed.id
    assert alert["created_at"].endswith("Z") and alert["resolved_at"] is None
    [dead] = doc["dead_letters"]
    assert dead["execution_id"] == failed.id and dead["reason"] == "retries exhausted"
    everything = ok_json(cli("alerts", "list", "--all", "--json"))
    assert {a["id"] for a in everything["alerts"]} == {open_alert.id, old_alert.id}
    assert [a for a in everything["alerts"] if a["id"] == old_alert.id][0]["resolved_by"] == "someone"


def test_resolve_several_alerts(cli):
    job, failed, open_alert, old_alert = seed()
    another = make_alert(job, None, message="second")
    out = ok(cli("alerts", "resolve", open_alert.id, another.id, old_alert.id))
    assert out.strip() == "Resolved 2 alert(s); 1 already resolved"
    database.session.expire_all()
    assert {a.resolved_by for a in database.session.query(Alert)} == {"cli", "someone"}
    [event] = cli_events("alerts_resolved")
    assert event.payload["alert_ids"] == sorted([open_alert.id, another.id, old_alert.id])


def test_resolve_refuses_unknown_ids_and_resolves_nothing(cli):
    job, failed, open_alert, old_alert = seed()
    before = row_counts()
    assert_error(cli("alerts", "resolve", open_alert.id, "998", "999"), "alert 998, 999 does not exist")
    assert row_counts() == before
    database.session.expire_all()
    assert database.session.get(Alert, open_alert.id).resolved_at is None
    assert_usage_error(cli("alerts", "resolve"), "Missing argument")
    assert_usage_error(cli("alerts", "resolve", "four"), "'four' is not a valid integer")
