"""The http_request task run the way production runs it: a job, the worker, its real fork server
(whose task processes start without Cronwell's secrets but with the variables HTTP_TASK_SECRETS
lists), and a loopback server on the far end."""

from __future__ import annotations

import json
import logging

import pytest
from sqlalchemy import select

from app.clock import utcnow
from app.executor import ForkServer
from app.extensions import db
from app.models import Attempt, Execution, Job
from app.services.engine.worker import Worker
from app.services.use_cases import jobs
from tests.factories import make_job
from tests.helpers.http_origin import Origin

pytestmark = pytest.mark.timeout(120)
PARTNER_TOKEN = "partner-token-77e0c3"


@pytest.fixture
def origin():
    with Origin() as server:
        yield server


@pytest.fixture
def deployment(monkeypatch):
    """The worker's environment: loopback allowed, one listed secret, and Cronwell's own."""
    monkeypatch.setenv("HTTP_TASK_ALLOW", "127.0.0.1")
    monkeypatch.setenv("HTTP_TASK_SECRETS", "PARTNER_TOKEN")
    monkeypatch.setenv("PARTNER_TOKEN", PARTNER_TOKEN)
    monkeypatch.setenv("SECRET_KEY", "flask-secret-key-4b2e")


def run_job(app, config: dict, **fields) -> Execution:
    job = make_job(now=utcnow(), task="http_request", config=config, **fields)
    execution = jobs.trigger_job(job.id, now=utcnow(), actor="test")
    Worker(app, worker_id="http-test", executor=ForkServer(kill_grace_seconds=0.5)).run(burst=True)
    db.session.rollback()
    return db.session.get(Execution, execution.id)


@pytest.mark.usefixtures("deployment")
def test_the_secret_header_reaches_the_server_and_no_record(app, origin, caplog):
    caplog.set_level(logging.DEBUG)
    config = {
        "url": origin.url("/echo"),
        "method": "POST",
        "json": {"ping": 1},
        "secret_headers": {"X-Key": "PARTNER_TOKEN"},
    }

    row = run_job(app, config)

    assert row.status == "succeeded", row.error
    assert origin.requests[-1].headers["x-key"] == PARTNER_TOKEN
    assert f"POST {origin.url('/echo')} -> 200 OK" in row.output
    attempts = db.session.scalars(select(Attempt).where(Attempt.execution_id == row.id)).all()
    recorded = " ".join(attempt.output + attempt.error for attempt in attempts)
    assert recorded and PARTNER_TOKEN not in row.output + row.error + row.result + recorded + caplog.text
    assert json.loads(row.result)["status"] == 200  # what the task returned is the result, not output
    assert PARTNER_TOKEN not in str(db.session.get(Job, row.job_id).config)


@pytest.mark.usefixtures("deployment")
def test_an_unexpected_status_fails_the_attempt_with_the_status(app, origin):
    row = run_job(app, {"url": origin.url("/status/500")}, max_attempts=1)

    assert row.status in ("failed", "dead"), row.status
    assert "answered 500 Internal Server Error, expected 2xx: 'status 500 body" in row.error


def test_without_the_allowance_the_worker_refuses_loopback(app, origin, monkeypatch):
    monkeypatch.delenv("HTTP_TASK_ALLOW", raising=False)
    row = run_job(app, {"url": origin.url("/echo", host="localhost")}, max_attempts=1)

    assert row.status in ("failed", "dead"), row.status
    assert "is a loopback address (rule 'loopback'" in row.error
    assert origin.requests == []
