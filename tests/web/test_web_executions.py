"""Execution pages: list with filters and pagination, detail with attempts and output, retry, cancel."""

from __future__ import annotations

import pytest

from app.clock import utcnow
from app.extensions import db
from app.models import Execution
from tests.factories import make_execution, make_job
from tests.helpers.web import WebClient, rows, signed_in_client


@pytest.fixture
def operator(app):
    return signed_in_client(app, role="operator")


def test_list_paginates_at_50_newest_first(app):
    job = make_job("many")
    for _ in range(75):
        make_execution(job, "succeeded")
    client = WebClient(app)
    first = client.get("/executions/").get_data(as_text=True)
    assert rows(first) == 50 and "#75" in first and "Page 1 of 2" in first
    second = client.get("/executions/?page=2").get_data(as_text=True)
    assert rows(second) == 25 and "#1<" in second
    assert client.get("/executions/?page=zzz").status_code == 200


def test_filters_by_status_and_job_and_keeps_them_in_page_links(app):
    a, b = make_job("alpha"), make_job("beta")
    for _ in range(55):
        make_execution(a, "failed")
    make_execution(a, "succeeded")
    make_execution(b, "failed")
    client = WebClient(app)
    body = client.get(f"/executions/?status=failed&job={a.id}").get_data(as_text=True)
    assert rows(body) == 50 and "beta" not in body.split("<tbody>")[1]
    assert f'href="/executions/?page=2&amp;status=failed&amp;job={a.id}"' in body
    page2 = client.get(f"/executions/?status=failed&job={a.id}&page=2").get_data(as_text=True)
    assert rows(page2) == 5
    assert rows(client.get("/executions/?status=succeeded").get_data(as_text=True)) == 1
    assert rows(client.get(f"/executions/?job={b.id}").get_data(as_text=True)) == 1


@pytest.mark.parametrize(
    "query,message",
    [
        ("status=exploded", "must be one of"),
        ("job=abc", "no job is named"),  # a name is searched; none matches
        ("job=999", "does not exist"),
        ("job=99999999999999999999999", "job 99999999999999999999999 does not exist"),  # beyond the column
    ],
)
def test_bad_filters_are_explained_not_500(app, query, message):
    response = WebClient(app).get(f"/executions/?{query}")
    assert response.status_code == 400
    assert message in response.get_data(as_text=True)


def test_filter_controls_have_labels(app):
    body = WebClient(app).get("/executions/").get_data(as_text=True)
    assert '<label for="status">Status</label>' in body and '<label for="job">Job</label>' in body


def test_detail_shows_attempts_output_and_error(app):
    job = make_job("detail")
    execution = make_execution(job, "failed", output="hello from the task", error="Traceback: boom")
    body = signed_in_client(app).get(f"/executions/{execution.id}").get_data(as_text=True)
    assert "hello from the task" in body and "Traceback: boom" in body
    assert "worker-test" in body and "Attempts" in body
    assert "Retry as a new execution" in body and ">Cancel<" not in body
    assert "hx-trigger" not in body.split('id="execution-body"', 1)[1].split(">", 1)[0]  # finished: no polling


def test_in_flight_detail_polls_and_htmx_gets_the_fragment(app):
    job = make_job("live")
    execution = make_execution(job, "running")
    client = signed_in_client(app)
    page = client.get(f"/executions/{execution.id}").get_data(as_text=True)
    assert 'hx-trigger="every 2s, cronwell:resume"' in page and "data-poll" in page
    fragment = client.get(f"/executions/{execution.id}", htmx=True).get_data(as_text=True)
    assert fragment.lstrip().startswith('<div id="execution-body"') and "<html" not in fragment


def test_a_pending_run_says_why_it_waits_naming_a_task_no_live_worker_offers(app):
    from tests.factories import make_heartbeat

    job = make_job("waits", task="echo", config={"message": "hi"})
    execution = make_execution(job, "pending")
    worker = make_heartbeat("w-old-code", "worker", age_seconds=1)
    worker.tasks = {"always_succeed": "sha256:aaaaaaaaaaaa"}
    db.session.commit()
    client = signed_in_client(app)
    fragment = client.get(f"/executions/{execution.id}", htmx=True).get_data(as_text=True)
    notice = fragment.split('id="execution-waiting"', 1)[1].split("</p>", 1)[0]
    assert 'data-fate="no_worker_for_task"' in notice and "offers task &#39;echo&#39;" in notice
    worker.tasks = {"echo": "sha256:bbbbbbbbbbbb"}
    db.session.commit()
    page = client.get(f"/executions/{execution.id}").get_data(as_text=True)
    assert 'data-fate="waiting"' in page and "free worker slot" in page
    done = make_execution(job, "succeeded")
    assert 'id="execution-waiting"' not in client.get(f"/executions/{done.id}").get_data(as_text=True)


def test_missing_execution_is_404(app):
    assert signed_in_client(app).get("/executions/12345").status_code == 404


def test_retry_failed_execution(app, operator):
    job = make_job("retry")
    failed = make_execution(job, "failed")
    response = operator.post(f"/executions/{failed.id}/retry")
    assert response.status_code == 303
    db.session.rollback()
    retry = db.session.query(Execution).filter_by(retry_of_id=failed.id).one()
    assert retry.trigger == "retry" and retry.status == "pending"
    assert response.headers["Location"] == f"/executions/{retry.id}"


def test_retry_of_succeeded_execution_is_refused_with_a_message(app, operator):
    job = make_job("no-retry")
    done = make_execution(job, "succeeded")
    response = operator.post(f"/executions/{done.id}/retry")
    assert response.status_code == 303
    assert "only failed" in operator.get(response.headers["Location"]).get_data(as_text=True)
    assert db.session.query(Execution).count() == 1


def test_cancel_pending_execution(app, operator):
    job = make_job("cancel")
    pending = make_execution(job, "pending")
    page = operator.get(f"/executions/{pending.id}").get_data(as_text=True)
    assert ">Cancel<" in page
    assert operator.post(f"/executions/{pending.id}/cancel").status_code == 303
    db.session.rollback()
    assert db.session.get(Execution, pending.id).status == "cancelled"


def test_cancel_finished_execution_is_refused(app, operator):
    job = make_job("cancel-done")
    done = make_execution(job, "succeeded")
    response = operator.post(f"/executions/{done.id}/cancel")
    assert "only pending" in operator.get(response.headers["Location"]).get_data(as_text=True)
    db.session.rollback()
    assert db.session.get(Execution, done.id).status == "succeeded"


def test_actions_on_missing_execution_do_not_500(app, operator):
    for action in ("retry", "cancel"):
        response = operator.post(f"/executions/777/{action}")
        assert response.status_code == 303
        assert operator.get(response.headers["Location"]).status_code == 404


def test_list_counts_stop_at_the_cap_and_say_more_than(app, monkeypatch):
    from app.services.use_cases import jobs as job_service
    from app.web import pagination

    monkeypatch.setattr(pagination, "COUNT_CAP", 3)
    job = make_job(now=utcnow())
    for _ in range(5):
        job_service.trigger_job(job.id, now=utcnow(), actor="test")
    response = app.test_client().get("/executions/")
    assert response.status_code == 200
    assert "of more than 3" in response.get_data(as_text=True)
