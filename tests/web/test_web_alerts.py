"""Alerts page: open and all alerts, dead letters, resolve one, bulk resolve, HTMX resolve."""

from __future__ import annotations

import pytest

from app.clock import utcnow
from app.extensions import db
from app.models import Alert, DeadLetter
from tests.factories import make_alert, make_execution, make_job
from tests.helpers.web import signed_in_client


@pytest.fixture
def operator(app):
    return signed_in_client(app, role="operator")


def _open_ids() -> set[int]:
    db.session.rollback()
    return {a.id for a in db.session.query(Alert).filter(Alert.resolved_at.is_(None))}


def test_list_shows_open_alerts_and_dead_letters(app, operator):
    job = make_job("alerting")
    execution = make_execution(job, "failed")
    open_alert = make_alert(job, execution, message="retries exhausted")
    make_alert(job, message="old news", resolved=True)
    db.session.add(
        DeadLetter(execution_id=execution.id, job_id=job.id, reason="3 attempts failed", created_at=utcnow())
    )
    db.session.commit()
    body = operator.get("/alerts/").get_data(as_text=True)
    assert "retries exhausted" in body and "old news" not in body
    assert "3 attempts failed" in body
    assert f'value="{open_alert.id}"' in body and f'aria-label="Select alert {open_alert.id}"' in body
    everything = operator.get("/alerts/?show=all").get_data(as_text=True)
    assert "old news" in everything and "resolved" in everything


def test_resolve_one(app, operator):
    a, b = make_alert(message="a"), make_alert(message="b")
    response = operator.post(f"/alerts/{a.id}/resolve")
    assert response.status_code == 303
    assert _open_ids() == {b.id}
    db.session.rollback()
    assert db.session.get(Alert, a.id).resolved_by.startswith("web:operator")


def test_bulk_resolve_selected(app, operator):
    a, b, c = make_alert(), make_alert(), make_alert()
    response = operator.client.post(
        "/alerts/resolve", data={"alert_ids": [str(a.id), str(c.id)], "csrf_token": operator.csrf_token()}
    )
    assert response.status_code == 303
    assert _open_ids() == {b.id}
    assert "2 alert(s) resolved." in operator.get("/alerts/").get_data(as_text=True)


@pytest.mark.parametrize(
    "data,message",
    [
        ({}, "select at least one alert"),
        ({"alert_ids": "999"}, "does not exist"),
        ({"alert_ids": "abc"}, "not alert ids"),
    ],
)
def test_bulk_resolve_bad_input_is_explained(app, operator, data, message):
    alert = make_alert()
    response = operator.post("/alerts/resolve", data)
    assert response.status_code == 303
    assert message in operator.get("/alerts/").get_data(as_text=True)
    assert _open_ids() == {alert.id}


def test_resolve_from_dashboard_with_htmx_returns_the_panel(app, operator):
    a, b = make_alert(message="first"), make_alert(message="second")
    response = operator.post(f"/alerts/{a.id}/resolve", htmx=True)
    assert response.status_code == 200
    body = response.get_data(as_text=True)
    assert 'id="panel-alerts"' in body and "1 alert(s) resolved." in body
    assert "second" in body and "first" not in body
    assert _open_ids() == {b.id}


def test_resolving_a_missing_alert_is_not_500(app, operator):
    response = operator.post("/alerts/4242/resolve")
    assert response.status_code == 303
    assert "does not exist" in operator.get("/alerts/").get_data(as_text=True)


def test_resolve_is_post_only(app, operator):
    alert = make_alert()
    assert operator.get(f"/alerts/{alert.id}/resolve").status_code == 405
