"""Acting on many rows: a confirmation that says exactly how many rows will
change, CSRF, operators only, and one audit entry per row; on both databases."""

from __future__ import annotations

import re

from sqlalchemy import select

from app.extensions import db
from app.models import Execution, Job
from tests.factories import make_execution, make_job
from tests.helpers.web import signed_in_client


def _audit_rows(action: str, kind: str) -> list:
    from app.models import AuditEvent

    db.session.rollback()
    return list(
        db.session.scalars(select(AuditEvent).where(AuditEvent.action == action, AuditEvent.object_kind == kind))
    )


def test_bulk_retry_confirms_the_exact_count_then_retries_each_row(app):
    job = make_job("bulk")
    failed = [make_execution(job, "failed") for _ in range(3)]
    ok = make_execution(job, "succeeded")
    operator = signed_in_client(app, "operator")
    ids = [str(e.id) for e in failed] + [str(ok.id)]
    body = operator.post("/executions/bulk", {"action": "retry", "ids": ids, "back": "/executions/"})
    text = body.get_data(as_text=True)
    assert body.status_code == 200 and "Retry 3 executions?" in text
    assert f"#{ok.id} is succeeded" in text and "1 selected will not change" in text
    db.session.rollback()
    assert db.session.scalar(select(db.func.count()).select_from(Execution)) == 4  # nothing done yet

    done = operator.post(
        "/executions/bulk",
        {"action": "retry", "ids": [str(e.id) for e in failed], "confirm": "1", "back": "/executions/"},
    )
    assert done.status_code == 303 and done.headers["Location"] == "/executions/"
    db.session.rollback()
    retries = db.session.scalars(select(Execution).where(Execution.retry_of_id.in_([e.id for e in failed]))).all()
    assert len(retries) == 3


def test_bulk_enable_and_disable_jobs_audits_each_row(app):
    a, b, c = make_job("a"), make_job("b"), make_job("c", enabled=False)
    operator = signed_in_client(app, "operator")
    page = operator.post("/jobs/bulk", {"action": "disable", "ids": [str(a.id), str(b.id), str(c.id)]})
    assert "Disable 2 jobs?" in page.get_data(as_text=True)
    operator.post("/jobs/bulk", {"action": "disable", "ids": [str(a.id), str(b.id)], "confirm": "1"})
    db.session.rollback()
    assert [j.enabled for j in db.session.scalars(select(Job).order_by(Job.id))] == [False, False, False]
    # One audit entry per row changed, none for the one already disabled.
    audited = {row.object_id for row in _audit_rows("disabled", "job")}
    assert audited == {str(a.id), str(b.id)}


def test_bulk_needs_an_operator_and_csrf_and_refuses_odd_input(app):
    job = make_job("guarded")
    execution = make_execution(job, "failed")
    viewer = signed_in_client(app, "viewer")
    assert viewer.post("/executions/bulk", {"action": "retry", "ids": [str(execution.id)]}).status_code == 403
    operator = signed_in_client(app, "operator")
    assert (
        operator.post("/executions/bulk", {"action": "retry", "ids": [str(execution.id)]}, csrf=False).status_code
        == 400
    )
    for data in (
        {"action": "explode", "ids": [str(execution.id)]},
        {"action": "retry"},
        {"action": "retry", "ids": ["x"]},
    ):
        response = operator.post("/executions/bulk", data, follow_redirects=True)
        assert response.status_code == 200, data
        assert re.search(r"no bulk action|Select at least one row", response.get_data(as_text=True)), data


def test_the_lists_offer_checkboxes_and_the_bar_to_operators_only(app):
    job = make_job("listed")
    make_execution(job, "failed")
    operator = signed_in_client(app, "operator")
    for path in ("/executions/", "/jobs/"):
        body = operator.get(path).get_data(as_text=True)
        assert 'id="bulk-form"' in body and 'name="ids"' in body and 'form="bulk-form"' in body, path
    viewer = signed_in_client(app, "viewer")
    for path in ("/executions/", "/jobs/"):
        body = viewer.get(path).get_data(as_text=True)
        assert 'id="bulk-form"' not in body and 'name="ids"' not in body, path
