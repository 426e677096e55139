"""Queues pages: the list with live statistics, a queue's page, create, edit, pause and resume;
who may do what, CSRF, inline errors, and the effect of each action on the rows."""

from __future__ import annotations

import re

import pytest
from sqlalchemy import select

from app.extensions import db
from app.models import Event, Queue
from tests.factories import make_execution, make_job, make_queue
from tests.helpers.web import WebClient, signed_in_client


@pytest.fixture
def operator(app):
    return signed_in_client(app, role="operator")


@pytest.fixture
def admin(app):
    """Creating and editing queues is an admin's (pause and resume an operator's)."""
    return signed_in_client(app, role="admin")


@pytest.fixture
def viewer(app):
    return signed_in_client(app, role="viewer")


def stored(name: str) -> Queue | None:
    db.session.rollback()  # read what the request committed, not this session's cached rows
    return db.session.scalar(select(Queue).where(Queue.name == name))


def events_of(kind: str) -> list[Event]:
    db.session.rollback()
    return list(db.session.scalars(select(Event).where(Event.type == kind)))


# --- reading -------------------------------------------------------------------------------------


def test_the_list_shows_every_queue_with_its_statistics(app, viewer):
    job = make_job("reporter", queue="reports")
    for _ in range(3):
        make_execution(job, "pending")
    make_execution(job, "running")
    make_execution(job, "succeeded")
    make_queue("idle-one", concurrency_limit=4, priority=-5, description="rarely busy")
    body = viewer.get("/queues/").get_data(as_text=True)
    row = body.split('id="queue-reports"', 1)[1].split("</tr>", 1)[0]
    cells = [cell.split(">", 1)[1].strip() for cell in row.split("<td")[1:]]
    assert cells[2].startswith("1 / ∞")  # running / no limit
    assert cells[4].startswith("3")  # pending
    assert cells[7].startswith("1")  # succeeded in the last hour
    idle = body.split('id="queue-idle-one"', 1)[1].split("</tr>", 1)[0]
    assert "0 / 4" in idle and "-5" in idle and "rarely busy" in idle
    assert 'id="queue-default"' in body


def test_the_list_polls_like_a_dashboard_panel_and_htmx_gets_the_fragment(app, viewer):
    make_queue("polled")
    page = viewer.get("/queues/").get_data(as_text=True)
    assert 'data-poll hx-get="/queues/"' in page and "cronwell:resume" in page
    fragment = viewer.get("/queues/", htmx=True)
    body = fragment.get_data(as_text=True)
    assert fragment.status_code == 200 and 'id="queues-table"' in body
    assert "<html" not in body and 'id="queue-polled"' in body


def test_an_anonymous_htmx_poll_gets_the_sign_in_fragment(app):
    response = WebClient(app).get("/queues/", htmx=True)
    assert response.status_code == 401 and "/auth/login" in response.get_data(as_text=True)


def test_a_queue_page_shows_settings_and_polls_its_statistics(app, viewer):
    make_queue("nightly", concurrency_limit=2, description="the nightly batch")
    page = viewer.get("/queues/nightly")
    body = page.get_data(as_text=True)
    assert page.status_code == 200 and "the nightly batch" in body and "0 / 2" in body
    assert 'hx-get="/queues/nightly"' in body
    assert "/executions/?queue=nightly" in body
    fragment = viewer.get("/queues/nightly", htmx=True).get_data(as_text=True)
    assert 'id="queue-stats"' in fragment and "<html" not in fragment


@pytest.mark.parametrize("path", ["/queues/nope", "/queues/nope/edit", "/queues/UPPER", "/queues/" + "a" * 65])
def test_unknown_or_impossible_names_are_the_404_page(app, admin, path):
    response = admin.get(path)
    assert response.status_code == 404
    assert "<html" in response.get_data(as_text=True)


@pytest.mark.parametrize("action", ["pause", "resume", "edit"])
def test_actions_on_an_unknown_queue_are_404_and_change_nothing(app, admin, action):
    response = admin.post(f"/queues/nope/{action}", {"priority": "1"})
    assert response.status_code == 404
    assert stored("nope") is None


def test_a_viewer_sees_no_forms_and_is_refused_every_action(app, viewer):
    make_queue("watched")
    body = viewer.get("/queues/watched").get_data(as_text=True)
    assert "/queues/watched/pause" not in body and "/queues/watched/edit" not in body
    assert "/queues/new" not in viewer.get("/queues/").get_data(as_text=True)
    for path, data in (
        ("/queues/watched/pause", {"reason": "mine"}),
        ("/queues/watched/resume", {}),
        ("/queues/watched/edit", {"priority": "3"}),
        ("/queues/new", {"name": "sneaky", "priority": "0"}),
    ):
        assert viewer.post(path, data).status_code == 403, path
    queue = stored("watched")
    assert not queue.paused and queue.priority == 0 and stored("sneaky") is None


# --- create and edit -----------------------------------------------------------------------------


def test_create_from_the_list_page(app, admin):
    page = admin.get("/queues/").get_data(as_text=True)
    assert 'action="/queues/new"' in page
    response = admin.post(
        "/queues/new", {"name": "exports", "concurrency_limit": "3", "priority": "-2", "description": "CSV exports"}
    )
    assert response.status_code == 303 and response.headers["Location"].endswith("/queues/exports")
    queue = stored("exports")
    assert (queue.concurrency_limit, queue.priority, queue.description) == (3, -2, "CSV exports")
    assert events_of("queue_created")[-1].actor.startswith("web:admin")


def test_create_with_a_blank_limit_means_no_limit(app, admin):
    assert admin.post("/queues/new", {"name": "open", "concurrency_limit": "", "priority": "0"}).status_code == 303
    assert stored("open").concurrency_limit is None


@pytest.mark.parametrize(
    "data,field_message",
    [
        ({"name": "Bad Name", "priority": "0"}, "lower-case letters"),
        ({"name": "ok", "priority": "zero"}, "whole number between -1000 and 1000"),
        ({"name": "ok", "priority": "0", "concurrency_limit": "0"}, "whole number between 1 and 100000"),
        ({"name": "ok", "priority": "0", "description": "x\x00y"}, "without NUL"),
        ({"name": "default", "priority": "0"}, "already exists"),
    ],
)
def test_create_errors_are_shown_beside_the_field(app, admin, data, field_message):
    response = admin.post("/queues/new", data)
    body = response.get_data(as_text=True)
    assert response.status_code == 400
    assert 'class="error-text"' in body and field_message in body
    assert 'aria-invalid="true"' in body
    assert stored("ok") is None


def test_edit_changes_limit_priority_and_description(app, admin):
    make_queue("tuned", concurrency_limit=5)
    response = admin.post(
        "/queues/tuned/edit", {"concurrency_limit": "2", "priority": "7", "description": "slower now"}
    )
    assert response.status_code == 303
    queue = stored("tuned")
    assert (queue.concurrency_limit, queue.priority, queue.description) == (2, 7, "slower now")
    changed = events_of("queue_updated")[-1].payload["changed"]
    assert changed["concurrency_limit"] == [5, 2]


def test_edit_with_a_blank_limit_removes_it_and_a_missing_one_keeps_it(app, admin):
    make_queue("capped", concurrency_limit=3)
    assert admin.post("/queues/capped/edit", {"priority": "1"}).status_code == 303
    assert stored("capped").concurrency_limit == 3  # not in the post: left alone
    assert admin.post("/queues/capped/edit", {"priority": "1", "concurrency_limit": " "}).status_code == 303
    assert stored("capped").concurrency_limit is None


def test_edit_form_shows_stored_values(app, admin):
    make_queue("shown", concurrency_limit=9, priority=4, description="shown here")
    body = admin.get("/queues/shown/edit").get_data(as_text=True)
    assert re.search(r'<input [^>]*name="concurrency_limit" [^>]*value="9"', body)
    assert re.search(r'<input [^>]*name="priority" [^>]*value="4"', body) and "shown here</textarea>" in body


@pytest.mark.parametrize(
    "data,message",
    [
        ({"priority": "1001"}, "between -1000 and 1000"),
        ({"priority": ""}, "whole number"),
        ({"priority": "0", "concurrency_limit": "-1"}, "between 1 and 100000"),
        ({"priority": "0", "concurrency_limit": "99999999999999999999"}, "between 1 and 100000"),
    ],
)
def test_edit_errors_are_inline_and_nothing_changes(app, admin, data, message):
    make_queue("strict", concurrency_limit=2, priority=3)
    response = admin.post("/queues/strict/edit", data)
    body = response.get_data(as_text=True)
    assert response.status_code == 400
    assert message in body and 'aria-invalid="true"' in body
    queue = stored("strict")
    assert (queue.concurrency_limit, queue.priority) == (2, 3)


# --- pause and resume ----------------------------------------------------------------------------


def test_pause_with_a_reason_then_resume(app, operator):
    make_queue("batch")
    response = operator.post("/queues/batch/pause", {"reason": "database maintenance"})
    assert response.status_code == 303
    queue = stored("batch")
    assert queue.paused and queue.paused_reason == "database maintenance"
    assert queue.paused_by.startswith("web:operator") and queue.paused_at is not None
    listed = operator.get("/queues/").get_data(as_text=True)
    assert "paused" in listed and "database maintenance" in listed
    page = operator.get("/queues/batch").get_data(as_text=True)
    assert "/queues/batch/resume" in page and "/queues/batch/pause" not in page

    assert operator.post("/queues/batch/resume").status_code == 303
    queue = stored("batch")
    assert not queue.paused and queue.paused_reason is None and queue.paused_by is None
    assert [e.type for e in events_of("queue_paused")] == ["queue_paused"]
    assert [e.type for e in events_of("queue_resumed")] == ["queue_resumed"]


def test_pause_without_a_reason(app, operator):
    make_queue("quiet")
    assert operator.post("/queues/quiet/pause", {"reason": "  "}).status_code == 303
    queue = stored("quiet")
    assert queue.paused and queue.paused_reason is None


@pytest.mark.parametrize(("reason", "message"), [("x" * 501, "at most 500 characters"), ("nul\x00here", "without NUL")])
def test_a_bad_reason_is_shown_inline_and_the_queue_stays_active(app, operator, reason, message):
    make_queue("careful")
    response = operator.post("/queues/careful/pause", {"reason": reason})
    body = response.get_data(as_text=True)
    assert response.status_code == 400
    assert message in body and 'aria-invalid="true"' in body
    assert not stored("careful").paused


@pytest.mark.parametrize(
    "path", ["/queues/new", "/queues/default/edit", "/queues/default/pause", "/queues/default/resume"]
)
def test_every_action_refuses_a_post_without_the_csrf_token(app, operator, path):
    response = operator.post(path, {"name": "tokenless", "priority": "9", "reason": "no"}, csrf=False)
    assert response.status_code == 400 and "security token" in response.get_data(as_text=True)
    queue = stored("default")
    assert not queue.paused and queue.priority == 0 and stored("tokenless") is None


def test_anonymous_visitors_are_sent_to_sign_in(app):
    client = WebClient(app)
    response = client.get("/queues/")
    assert response.status_code == 302 and "/auth/login" in response.headers["Location"]
    response = client.post("/queues/default/pause", {"reason": "drive-by"})
    assert response.status_code == 302 and "/auth/login" in response.headers["Location"]
    assert not stored("default").paused


def test_nav_links_to_queues_and_workers_when_signed_in(app, viewer):
    body = viewer.get("/dashboard/").get_data(as_text=True)
    assert 'href="/queues/"' in body and 'href="/workers/"' in body
    anonymous = WebClient(app).get("/").get_data(as_text=True)
    assert 'href="/queues/"' not in anonymous


# --- the executions list's queue filter ----------------------------------------------------------


def test_the_executions_list_filters_by_queue(app, viewer):
    reports = make_job("reporter", queue="reports")
    other = make_job("other")
    mine = [make_execution(reports, "succeeded").id for _ in range(2)]
    theirs = make_execution(other, "succeeded").id
    response = viewer.get("/executions/?queue=reports")
    body = response.get_data(as_text=True)
    assert response.status_code == 200
    assert all(f'href="/executions/{i}"' in body for i in mine) and f'href="/executions/{theirs}"' not in body
    assert 'in queue <a href="/queues/reports">reports</a>' in body
    assert 'name="queue" placeholder="any queue" spellcheck="false" type="text" value="reports"' in body
    combined = viewer.get("/executions/?queue=reports&status=failed").get_data(as_text=True)
    assert "No executions match" in combined


@pytest.mark.parametrize("value", ["nope", "Bad Name", "x\x00y", "q" * 500])
def test_an_unknown_queue_in_the_filter_is_an_inline_message(app, viewer, value):
    make_queue("known-one")
    response = viewer.get("/executions/", query_string={"queue": value})
    body = response.get_data(as_text=True)
    assert response.status_code == 400
    assert "unknown queue" in body and "known-one" in body and 'class="error-text"' in body


def test_the_queue_filter_is_public_like_the_list(app):
    make_execution(make_job("public", queue="open-q"), "succeeded")
    response = WebClient(app).get("/executions/?queue=open-q")
    assert response.status_code == 200 and "in queue open-q" in response.get_data(as_text=True)


def test_an_operator_pauses_and_resumes_but_may_not_create_or_edit(app):
    operator = signed_in_client(app, role="operator")
    make_queue("ops")
    assert operator.post("/queues/new", {"name": "mine", "priority": "0"}).status_code == 403
    assert operator.post("/queues/ops/edit", {"priority": "5"}).status_code == 403
    assert stored("mine") is None and stored("ops").priority == 0
    body = operator.get("/queues/ops").get_data(as_text=True)
    assert "/queues/ops/pause" in body and "/queues/ops/edit" not in body
    assert operator.post("/queues/ops/pause", {"reason": "maintenance"}).status_code == 303
    assert stored("ops").paused
    assert operator.post("/queues/ops/resume").status_code == 303
    assert not stored("ops").paused


def test_a_rate_limit_is_set_shown_with_its_window_and_refused_inline_when_malformed(app, admin):
    make_queue("partner", priority=0)
    assert admin.post("/queues/partner/edit", {"priority": "0", "rate_limit": "10 / minutes"}).status_code == 303
    assert stored("partner").rate_limit == "10/minute"
    page = admin.get("/queues/partner").get_data(as_text=True)
    assert "Rate limit 10/minute: started in window" in page and "(room 10)" in page
    refused = admin.post("/queues/partner/edit", {"priority": "0", "rate_limit": "10/day"})
    assert refused.status_code == 400
    assert "must be N/second, N/minute or N/hour" in refused.get_data(as_text=True)
    assert stored("partner").rate_limit == "10/minute"
    assert admin.post("/queues/partner/edit", {"priority": "0", "rate_limit": ""}).status_code == 303
    assert stored("partner").rate_limit is None


def test_an_admin_deletes_an_unused_queue_on_the_web_and_a_used_one_says_why_not(app):
    from tests.helpers.web import signed_in_client

    admin = signed_in_client(app, "admin")
    make_queue("spare")
    make_job("user-of-busy", queue="busy")
    page = admin.get("/queues/spare").get_data(as_text=True)
    assert 'action="/queues/spare/delete"' in page
    response = admin.post("/queues/spare/delete")
    assert response.status_code == 303 and response.headers["Location"].endswith("/queues/")
    db.session.rollback()
    assert db.session.query(Queue).filter_by(name="spare").count() == 0
    refused = admin.post("/queues/busy/delete", follow_redirects=True).get_data(as_text=True)
    assert "is used by 1 job" in refused
    assert db.session.query(Queue).filter_by(name="busy").count() == 1
    operator = signed_in_client(app, "operator")
    assert operator.post("/queues/busy/delete").status_code == 403


def test_the_default_queue_is_not_deleted_on_the_web_and_the_page_says_why(app, admin):
    refused = admin.post("/queues/default/delete")
    assert refused.status_code == 303 and refused.headers["Location"].endswith("/queues/default")
    page = admin.get(refused.headers["Location"]).get_data(as_text=True)
    assert "the default queue cannot be deleted" in page
    assert stored("default") is not None
    assert events_of("queue_deleted") == []
