"""The /audit/ page: signed-in readers only, filters, pagination, and changes made through the web
recorded with source `web` and the client's address."""

from __future__ import annotations

from datetime import timedelta

import pytest

from app.extensions import db
from app.models import AuditEvent
from app.services import audit_trail
from app.services.use_cases import jobs, queues
from tests.factories import make_job, make_queue
from tests.helpers.web import WebClient, rows, signed_in_client


@pytest.fixture
def viewer(app):
    return signed_in_client(app, role="viewer")


def test_anonymous_visitors_are_sent_to_sign_in(app):
    response = WebClient(app).get("/audit/")
    assert response.status_code == 302 and "/auth/login" in response.headers["Location"]


def test_a_viewer_reads_the_log(app, viewer, clock):
    job = make_job("visible", now=clock(), description="before")
    jobs.update_job(job.id, {"description": "after <b>bold</b>"}, now=clock(), actor="cli")
    response = viewer.get("/audit/")
    body = response.get_data(as_text=True)
    assert response.status_code == 200
    assert rows(body) == 2
    assert "visible" in body and "before" in body
    assert "&lt;b&gt;bold&lt;/b&gt;" in body and "<b>bold</b>" not in body  # escaped


def test_the_page_has_no_way_to_change_the_log(app, viewer, clock):
    make_job("kept", now=clock())
    body = viewer.get("/audit/").get_data(as_text=True)
    assert 'method="post"' not in body.split("<main", 1)[1].split("</main>", 1)[0]
    for url in ("/audit/", "/audit/1", "/audit/1/delete"):
        assert viewer.post(url).status_code in (404, 405)
    db.session.rollback()
    assert db.session.query(AuditEvent).count() == 1


def test_filters(app, viewer, clock):
    first = make_job("first-job", now=clock())
    clock.advance(hours=2)
    jobs.disable_job(first.id, now=clock(), actor="web:alice")
    make_queue("reports", now=clock())
    clock.advance(hours=2)
    second = make_job("second-job", now=clock())

    def listed(query: str) -> tuple[int, str]:
        response = viewer.get(f"/audit/?{query}")
        assert response.status_code == 200, response.get_data(as_text=True)
        body = response.get_data(as_text=True)
        return rows(body), body

    assert listed("actor=web:alice")[0] == 1
    assert listed("kind=queue")[0] == 1
    assert listed(f"job={first.id}")[0] == 2
    count, body = listed(f"kind=job&object={second.id}")
    assert count == 1 and "second-job" in body
    assert listed("action=disabled")[0] == 1
    assert listed(f"object_kind=job&object_id={second.id}")[0] == 1  # the JSON's names work too
    assert listed(f"job_id={first.id}")[0] == 2
    since = (clock() - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    count, body = listed(f"since={since}")
    assert count == 1 and "second-job" in body
    assert listed(f"until={since}")[0] == 3
    assert listed(f"since={clock().date().isoformat()}&until=2999-01-01")[0] == 4
    # The filter choices offer what the log holds.
    assert '<option value="queue">' in body and '<option value="disabled">' in body


def test_a_deleted_jobs_history_stays_reachable(app, viewer, clock):
    job = make_job("short-lived", now=clock())
    jobs.delete_job(job.id, now=clock(), actor="cli")
    body = viewer.get(f"/audit/?job={job.id}").get_data(as_text=True)
    assert rows(body) == 2 and "short-lived" in body


@pytest.mark.parametrize(
    "query, message",
    [
        ("job=abc", "Job ID must be a whole number"),
        ("job=99999999999999999999", "out of range"),
        ("since=yesterday", "since: must be an ISO 8601"),
        ("until=2026-13-01", "until: must be an ISO 8601"),
        ("actor=" + "x" * 300, "too long"),
        ("object=a%00b", "NUL"),
    ],
)
def test_bad_filters_are_shown_inline(app, viewer, query, message):
    response = viewer.get(f"/audit/?{query}")
    assert response.status_code == 400
    assert message in response.get_data(as_text=True)


def test_pages_of_fifty(app, viewer, clock):
    project_id = queues.default_project().id  # the viewer's organization's
    for number in range(55):
        audit_trail.record_change(
            "cli", "updated", "job", number, {"x": 0}, {"x": 1}, now=clock(), project_id=project_id
        )
    db.session.commit()
    first = viewer.get("/audit/").get_data(as_text=True)
    assert rows(first) == 50 and "Page 1 of 2" in first
    second = viewer.get("/audit/?page=2&kind=job").get_data(as_text=True)
    assert rows(second) == 5


def test_changes_made_on_the_web_record_source_and_address(app, clock):
    operator = signed_in_client(app, role="operator")
    job = make_job("from-the-web", now=clock())
    response = operator.post(f"/jobs/{job.id}/disable")
    assert response.status_code in (302, 303), response.get_data(as_text=True)
    db.session.rollback()
    row = db.session.query(AuditEvent).filter_by(action="disabled").one()
    assert (row.source, row.address, row.object_id) == ("web", "127.0.0.1", str(job.id))  # the test client's
    assert row.actor.startswith("web:operator-")
    assert row.organization_id is not None
    # The address does not stay behind for changes made afterwards outside a request.
    jobs.enable_job(job.id, now=clock(), actor="cli")
    db.session.rollback()
    enabled = db.session.query(AuditEvent).filter_by(action="enabled").one()
    assert (enabled.source, enabled.address) == ("cli", None)


def test_the_nav_links_to_the_log_for_signed_in_users(app, viewer):
    assert 'href="/audit/"' in viewer.get("/dashboard/").get_data(as_text=True)
    assert 'href="/audit/"' not in WebClient(app).get("/").get_data(as_text=True)


def test_changes_made_through_the_api_record_source_api_and_are_listed_there(app, clock):
    from tests.factories import make_user
    from tests.helpers.api import PASSWORD, ApiClient, job_body

    make_user("robot", PASSWORD, role="operator")
    api = ApiClient(app)
    api.login("robot")
    response = api.post("/api/v1/jobs", job_body("from-the-api"))
    assert response.status_code == 201, response.get_data(as_text=True)
    job_id = response.get_json()["id"]
    row = db.session.query(AuditEvent).filter_by(object_kind="job", object_id=str(job_id)).one()
    assert (row.source, row.address, row.action) == ("api", "127.0.0.1", "created")
    assert "robot" in row.actor
    listed = api.get(f"/api/v1/audit-events?job={job_id}")
    assert listed.status_code == 200, listed.get_data(as_text=True)
    items = listed.get_json()["items"]
    assert [(item["action"], item["object_id"]) for item in items] == [("created", str(job_id))]


def test_editing_two_fields_in_the_web_form_records_only_those_two(app, clock):
    from tests.helpers.web import job_form

    operator = signed_in_client(app, role="operator")
    job = make_job("edited-on-the-web", every="5m")
    data = job_form(name="edited-on-the-web", every="5m", description="now described", max_attempts="5")
    response = operator.post(f"/jobs/{job.id}/edit", data)
    assert response.status_code in (302, 303), response.get_data(as_text=True)
    db.session.rollback()
    row = db.session.query(AuditEvent).filter_by(action="updated").one()
    assert row.changes == {
        "description": {"before": "", "after": "now described"},
        "max_attempts": {"before": 3, "after": 5},
    }
    assert (row.source, row.address) == ("web", "127.0.0.1")
