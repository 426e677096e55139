"""Access rules (`app/web/access.py`): what anonymous visitors, viewers and operators may see and do."""

from __future__ import annotations

import pytest

from app.extensions import db
from app.models import Alert, Execution, Job
from tests.factories import make_alert, make_execution, make_job
from tests.helpers.web import WebClient, signed_in_client

PRIVATE_PAGES = ["/dashboard/", "/alerts/", "/health/", "/jobs/new", "/dashboard/panels/summary"]
PUBLIC_PAGES = ["/jobs/", "/executions/"]


@pytest.fixture
def seeded(app):
    job = make_job("nightly", config={})
    execution = make_execution(job, "failed", output="SECRET-OUTPUT-42", error="SECRET-ERROR-43")
    alert = make_alert(job, execution)
    return job, execution, alert


def test_home_is_public(app):
    response = WebClient(app).get("/")
    assert response.status_code == 200
    assert "Sign in" in response.get_data(as_text=True)


@pytest.mark.parametrize("url", PRIVATE_PAGES)
def test_private_pages_redirect_anonymous_visitors_to_sign_in(app, url):
    response = WebClient(app).get(url)
    assert response.status_code == 302
    assert response.headers["Location"].startswith("/auth/login?next=")


def test_private_detail_pages_need_sign_in(app, seeded):
    job, execution, _ = seeded
    client = WebClient(app)
    for url in (f"/executions/{execution.id}", f"/jobs/{job.id}/edit", f"/jobs/{job.id}/delete"):
        response = client.get(url)
        assert response.status_code == 302, url
        assert "/auth/login" in response.headers["Location"]


@pytest.mark.parametrize("url", PUBLIC_PAGES)
def test_public_lists_are_readable_anonymously(app, seeded, url):
    assert WebClient(app).get(url).status_code == 200


def test_public_pages_hide_output_config_and_detail_links(app, seeded):
    job, execution, _ = seeded
    client = WebClient(app)
    for url in ("/executions/", f"/jobs/{job.id}"):
        body = client.get(url).get_data(as_text=True)
        assert "SECRET-OUTPUT-42" not in body and "SECRET-ERROR-43" not in body
        assert f'href="/executions/{execution.id}"' not in body
        assert f"#{execution.id}" in body  # the row is there, just not linked
    detail = client.get(f"/jobs/{job.id}").get_data(as_text=True)
    assert "Config" not in detail
    assert "Run now" not in detail and "Delete" not in detail


def test_signed_in_users_see_detail_links_and_output(app, seeded):
    job, execution, _ = seeded
    client = signed_in_client(app)
    assert f'href="/executions/{execution.id}"' in client.get("/executions/").get_data(as_text=True)
    body = client.get(f"/executions/{execution.id}").get_data(as_text=True)
    assert "SECRET-OUTPUT-42" in body and "SECRET-ERROR-43" in body


def test_public_read_switch_off_requires_sign_in_for_lists_and_job_detail(app, seeded):
    app.config["WEBUI_PUBLIC_READ"] = False
    job, _, _ = seeded
    client = WebClient(app)
    for url in ("/jobs/", f"/jobs/{job.id}", "/executions/"):
        response = client.get(url)
        assert response.status_code == 302, url
        assert "/auth/login" in response.headers["Location"]
    assert client.get("/").status_code == 200
    assert "Browse jobs" not in client.get("/").get_data(as_text=True)
    signed = signed_in_client(app)
    for url in ("/jobs/", f"/jobs/{job.id}", "/executions/"):
        assert signed.get(url).status_code == 200


def test_auth_off_opens_everything_including_actions(app, seeded):
    app.config["WEBUI_AUTH"] = False
    job, execution, alert = seeded
    client = WebClient(app)
    for url in ("/dashboard/", "/alerts/", "/health/", f"/executions/{execution.id}", "/jobs/new"):
        assert client.get(url).status_code == 200, url
    response = client.post(f"/jobs/{job.id}/disable")
    assert response.status_code == 303
    db.session.rollback()
    assert db.session.get(Job, job.id).enabled is False
    event_actor = db.session.execute(db.text("SELECT actor FROM events WHERE type = 'job_disabled'")).scalar()
    assert event_actor == "web:anonymous"
    assert client.get("/auth/login").status_code == 302  # nothing to sign in to


@pytest.mark.parametrize("url", ["/dashboard/panels/summary", "/dashboard/panels/activity", "/jobs/preview?cron=x"])
def test_anonymous_htmx_fragments_get_401_with_a_sign_in_link(app, url):
    response = WebClient(app).get(url, htmx=True, headers={"HX-Current-URL": "http://localhost/dashboard/"})
    assert response.status_code == 401
    body = response.get_data(as_text=True)
    assert 'href="/auth/login?next=/dashboard/"' in body
    assert "<html" not in body  # a fragment, not a whole page


def test_anonymous_htmx_request_to_public_page_gets_401(app, seeded):
    assert WebClient(app).get("/executions/", htmx=True).status_code == 401


def test_anonymous_posts_change_nothing(app, seeded):
    job, execution, alert = seeded
    client = WebClient(app)
    attempts = [
        (f"/jobs/{job.id}/disable", {}),
        (f"/jobs/{job.id}/trigger", {}),
        (f"/jobs/{job.id}/delete", {"confirm_name": job.name}),
        (f"/executions/{execution.id}/retry", {}),
        (f"/alerts/{alert.id}/resolve", {}),
        ("/alerts/resolve", {"alert_ids": str(alert.id)}),
        ("/jobs/new", {"name": "sneaky", "task": "always_succeed", "schedule_type": "interval", "every": "5m"}),
    ]
    for url, data in attempts:
        response = client.post(url, data)
        assert response.status_code == 302, url
        assert "/auth/login" in response.headers["Location"]
    db.session.rollback()
    assert db.session.get(Job, job.id).enabled is True
    assert db.session.query(Execution).count() == 1
    assert db.session.get(Alert, alert.id).resolved_at is None
    assert db.session.query(Job).count() == 1


def test_viewer_can_look_but_not_change(app, seeded):
    job, execution, alert = seeded
    viewer = signed_in_client(app, role="viewer")
    assert viewer.get("/dashboard/").status_code == 200
    assert viewer.get(f"/executions/{execution.id}").status_code == 200
    body = viewer.get(f"/jobs/{job.id}").get_data(as_text=True)
    assert "Run now" not in body
    for url in (f"/jobs/{job.id}/disable", f"/alerts/{alert.id}/resolve", f"/executions/{execution.id}/retry"):
        assert viewer.post(url).status_code == 403, url
    assert viewer.get("/jobs/new").status_code == 403
    db.session.rollback()
    assert db.session.get(Job, job.id).enabled is True


def test_operator_can_change(app, seeded):
    job, _, _ = seeded
    operator = signed_in_client(app, role="operator")
    assert operator.post(f"/jobs/{job.id}/disable").status_code == 303
    db.session.rollback()
    assert db.session.get(Job, job.id).enabled is False


def test_refused_post_sends_back_to_the_page_it_came_from(app, seeded):
    job, _, _ = seeded
    client = WebClient(app)
    response = client.post(f"/jobs/{job.id}/disable", headers={"Referer": f"http://localhost/jobs/{job.id}"})
    assert response.headers["Location"] == f"/auth/login?next=/jobs/{job.id}"
    elsewhere = client.post(f"/jobs/{job.id}/disable", headers={"Referer": "https://evil.example/x"})
    assert elsewhere.headers["Location"] == "/auth/login?next=/dashboard/"
