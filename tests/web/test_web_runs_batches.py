"""The "Run now / Run later" and batch forms on the job page (inline errors, CSRF), the /batches/
pages, and the links both ways between callbacks, batches and their parents."""

from __future__ import annotations

import html
import json
import re
from datetime import timedelta

import pytest
from sqlalchemy import func, select

from app.clock import utcnow
from app.extensions import db
from app.models import Batch, Execution
from app.services.engine.worker import Worker
from app.services.use_cases import batches, runs
from tests.factories import make_job
from tests.helpers.web import WebClient, signed_in_client


def errors(body: str) -> list[str]:
    return [html.unescape(e) for e in re.findall(r'class="error-text"[^>]*>([^<]*)<', body)]


def executions_count() -> int:
    db.session.rollback()
    return db.session.scalar(select(func.count()).select_from(Execution))


@pytest.fixture
def operator(app):
    return signed_in_client(app, role="operator")


def test_run_later_with_an_override_creates_a_delayed_run(app, operator):
    job = make_job(task="echo", every="1h")
    response = operator.post(
        f"/jobs/{job.id}/trigger", {"run_in": "10m", "run_at": "", "config_override": '{"message": "web"}'}
    )
    assert response.status_code == 303
    db.session.rollback()
    execution = db.session.scalars(select(Execution).where(Execution.job_id == job.id)).one()
    assert execution.config_override == {"message": "web"} and execution.available_at > utcnow() + timedelta(minutes=9)
    page = operator.get(f"/jobs/{job.id}").get_data(as_text=True)
    assert "scheduled for" in page
    detail = operator.get(f"/executions/{execution.id}").get_data(as_text=True)
    assert "Config override" in detail and "&#34;message&#34;: &#34;web&#34;" in detail or '"message": "web"' in detail


def test_the_bare_run_now_button_still_runs_now(app, operator):
    job = make_job(task="echo", every="1h")
    assert operator.post(f"/jobs/{job.id}/trigger").status_code == 303
    db.session.rollback()
    execution = db.session.scalars(select(Execution).where(Execution.job_id == job.id)).one()
    assert execution.config_override is None and execution.available_at <= utcnow()


@pytest.mark.parametrize(
    "data, message",
    [
        ({"config_override": '{"seconds": 3}'}, "invalid config for task 'echo'"),
        ({"config_override": "{oops"}, "not valid JSON"),
        ({"run_in": "whenever"}, "whenever"),
        ({"run_in": "5m", "run_at": "2030-01-01T00:00:00Z"}, "not both"),
        ({"run_at": "<script>alert(1)</script>"}, "ISO 8601"),
    ],
)
def test_a_refused_run_shows_the_form_with_the_error_inline(app, operator, data, message):
    job = make_job(task="echo", every="1h")
    response = operator.post(f"/jobs/{job.id}/trigger", {"run_in": "", "run_at": "", "config_override": "", **data})
    body = response.get_data(as_text=True)
    assert response.status_code == 400
    assert any(message in error for error in errors(body)), errors(body)
    assert "<script>alert(1)</script>" not in body  # escaped
    assert executions_count() == 0


def test_run_forms_need_csrf_and_an_operator(app, operator):
    job = make_job(task="echo", every="1h")
    assert operator.post(f"/jobs/{job.id}/trigger", {"run_in": "1m"}, csrf=False).status_code in (303, 400)
    viewer = signed_in_client(app, role="viewer")
    assert viewer.post(f"/jobs/{job.id}/trigger", {"run_in": "1m"}).status_code == 403
    assert viewer.post(f"/jobs/{job.id}/batches", {"items": "[{}]"}).status_code == 403
    assert executions_count() == 0
    assert "Run now / Run later" not in viewer.get(f"/jobs/{job.id}").get_data(as_text=True)


def test_submitting_a_batch_from_the_job_page(app, operator):
    job = make_job(task="echo", every="1h")
    response = operator.post(
        f"/jobs/{job.id}/batches", {"items": '[{"message": "a"}, {"message": "b"}]', "on_complete": "echo"}
    )
    assert response.status_code == 303
    db.session.rollback()
    batch = db.session.scalars(select(Batch)).one()
    assert response.headers["Location"].endswith(f"/batches/{batch.id}")
    page = operator.get(f"/batches/{batch.id}").get_data(as_text=True)
    assert "Batch #" in page and "running" in page and page.count("/executions/") >= 2


def test_a_refused_batch_keeps_nothing_and_says_which_items(app, operator):
    job = make_job(task="echo", every="1h")
    response = operator.post(
        f"/jobs/{job.id}/batches",
        {"items": '[{"message": "ok"}, {"nope": 1}]', "on_complete": "", "on_complete_config": ""},
    )
    assert response.status_code == 400
    assert any("item 2:" in error and "nothing stored" in error for error in errors(response.get_data(as_text=True)))
    db.session.rollback()
    assert db.session.scalar(select(func.count()).select_from(Batch)) == 0 and executions_count() == 0


def test_batch_pages_show_status_counts_and_link_both_ways(app, operator):
    job = make_job(task="echo", every="1h", max_attempts=1, on_success="echo")
    batch = batches.submit_batch(
        job.id, {"items": [{}, {"fail": True}], "on_complete": "echo"}, now=utcnow(), actor="test"
    )
    Worker(app, worker_id="w-web").run(burst=True)
    db.session.rollback()
    listing = operator.get("/batches/").get_data(as_text=True)
    assert f"/batches/{batch.id}" in listing and "partially_failed" in listing.replace(
        "partially failed", "partially_failed"
    )
    page = operator.get(f"/batches/{batch.id}").get_data(as_text=True)
    callback = db.session.scalars(
        select(Execution).where(Execution.batch_id == batch.id, Execution.trigger == "callback")
    ).one()
    assert f"/executions/{callback.id}" in page  # batch -> its on-complete run
    callback_page = operator.get(f"/executions/{callback.id}").get_data(as_text=True)
    assert f"/batches/{batch.id}" in callback_page  # and back
    # A succeeded item fired the job's on_success: parent <-> callback links.
    item = db.session.scalars(
        select(Execution).where(
            Execution.batch_id == batch.id, Execution.trigger == "batch", Execution.status == "succeeded"
        )
    ).one()
    child = db.session.scalars(select(Execution).where(Execution.parent_id == item.id)).one()
    assert f"/executions/{child.id}" in operator.get(f"/executions/{item.id}").get_data(as_text=True)
    assert f"/executions/{item.id}" in operator.get(f"/executions/{child.id}").get_data(as_text=True)
    assert json.loads(db.session.get(Execution, child.id).output)["parent"]["id"] == item.id


def test_cancelling_a_batch_from_its_page(app, operator):
    job = make_job(task="echo", every="1h")
    batch = batches.submit_batch(job.id, {"items": "[{}, {}]"}, now=utcnow(), actor="test")
    assert operator.post(f"/batches/{batch.id}/cancel").status_code == 303
    page = operator.get(f"/batches/{batch.id}").get_data(as_text=True)
    assert "cancelled" in page and "Cancel (items not started yet)" not in page
    assert operator.post(f"/batches/{batch.id}/cancel", csrf=False).status_code in (303, 400)


def test_unknown_batches_are_404_and_the_list_needs_sign_in(app, operator):
    assert operator.get("/batches/999999").status_code == 404
    assert operator.get("/batches/abc").status_code == 404
    assert WebClient(app).get("/batches/").status_code in (302, 401, 403)
    assert operator.get("/batches/?job=nonsense").status_code == 200


def test_a_delayed_run_can_be_cancelled_from_its_page(app, operator):
    job = make_job(task="echo", every="1h")
    execution = runs.trigger_run(job.id, {"in": "1h"}, now=utcnow(), actor="test")
    assert operator.post(f"/executions/{execution.id}/cancel").status_code == 303
    db.session.rollback()
    assert db.session.get(Execution, execution.id).status == "cancelled"
