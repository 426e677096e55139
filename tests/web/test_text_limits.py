"""Free-text fields at their maximum are accepted and one character more is refused, with the
limit in the message, through the web form, the CLI and the API alike (both databases); the
documented table matches the one declaration in app/definitions/text_limits.py; a long text does
not widen a list.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from app.clock import utcnow
from app.definitions import text_limits
from app.extensions import db
from app.models import Project, Queue
from app.services.caller import Caller
from app.services.use_cases import tokens
from tests.factories import make_execution, make_job, make_queue, make_user
from tests.helpers.api import ApiClient
from tests.helpers.web import signed_in_client

DOCS = Path(__file__).resolve().parents[2] / "docs" / "web.md"


def over(limit: text_limits.TextLimit) -> str:
    return "x" * (limit.maximum + 1)


def names_limit(text: str, limit: text_limits.TextLimit) -> bool:
    return f"at most {limit.maximum} characters" in text


@pytest.fixture
def api(app) -> ApiClient:
    admin = make_user("limits-admin", role="admin")
    secret = tokens.create_token(
        Caller.cli(), name="limits", project=None, role="admin", user_id=admin.id, now=utcnow()
    ).secret
    return ApiClient(app, token=secret)


@pytest.fixture
def cli(app):
    runner = app.test_cli_runner()
    return lambda *args: runner.invoke(args=[str(a) for a in args])


def test_every_declared_limit_is_documented_with_its_maximum():
    text = DOCS.read_text()
    for limit in text_limits.TEXT_LIMITS:
        assert re.search(rf"\| {re.escape(limit.field)} \| {limit.maximum:,} \|", text), limit


def test_a_pause_reason_one_past_its_limit_is_refused_everywhere_and_at_it_accepted(app, api, cli):
    limit = text_limits.PAUSE_REASON
    make_queue("reports")
    web = signed_in_client(app, "admin")
    response = web.post("/queues/reports/pause", {"reason": over(limit)})
    assert response.status_code == 400 and names_limit(response.get_data(as_text=True), limit)
    result = cli("queue", "pause", "reports", "--reason", over(limit))
    assert result.exit_code == 1 and names_limit(result.output, limit)
    queue_id = db.session.query(Queue.id).filter_by(name="reports").scalar()
    answer = api.post(f"/api/v1/queues/{queue_id}/pause", {"reason": over(limit)})
    assert answer.status_code == 422 and names_limit(answer.get_data(as_text=True), limit)
    db.session.rollback()
    assert db.session.query(Queue.paused).filter_by(name="reports").scalar() is False
    assert cli("queue", "pause", "reports", "--reason", "y" * limit.maximum).exit_code == 0


def test_a_queue_description_one_past_its_limit_is_refused_everywhere(app, api, cli):
    limit = text_limits.QUEUE_DESCRIPTION
    web = signed_in_client(app, "admin")
    response = web.post("/queues/new", {"name": "long", "description": over(limit), "priority": "0"})
    assert response.status_code == 400 and names_limit(response.get_data(as_text=True), limit)
    result = cli("queue", "add", "long", "--description", over(limit))
    assert result.exit_code == 1 and names_limit(result.output, limit)
    answer = api.post("/api/v1/queues", {"name": "long", "description": over(limit)})
    assert answer.status_code == 422 and names_limit(answer.get_data(as_text=True), limit)
    assert db.session.query(Queue).filter_by(name="long").count() == 0


def test_a_cancel_reason_one_past_its_limit_is_refused_by_the_cli_and_the_api(app, api, cli):
    limit = text_limits.CANCEL_REASON
    execution = make_execution(make_job("waiting"), "pending")
    result = cli("execution", "cancel", execution.id, "--reason", over(limit))
    assert result.exit_code == 1 and names_limit(result.output, limit)
    answer = api.post(f"/api/v1/executions/{execution.id}/cancel", {"reason": over(limit)})
    assert answer.status_code == 422 and names_limit(answer.get_data(as_text=True), limit)


def test_a_project_description_one_past_its_limit_is_refused_everywhere(app, api, cli):
    limit = text_limits.PROJECT_DESCRIPTION
    web = signed_in_client(app, "admin")
    response = web.post("/projects/new", {"name": "long", "description": over(limit)})
    assert response.status_code == 400 and names_limit(response.get_data(as_text=True), limit)
    result = cli("project", "add", "default", "long", "--description", over(limit))
    assert result.exit_code == 1 and names_limit(result.output, limit)
    answer = api.post("/api/v1/projects", {"organization": "default", "name": "long", "description": over(limit)})
    assert answer.status_code == 422 and names_limit(answer.get_data(as_text=True), limit)
    assert db.session.query(Project).filter_by(name="long").count() == 0


def test_a_long_pause_reason_is_clipped_on_the_list_and_whole_on_the_queue_page(app, cli):
    make_queue("reports")
    reason = "w" * text_limits.PAUSE_REASON.maximum
    assert cli("queue", "pause", "reports", "--reason", reason).exit_code == 0
    web = signed_in_client(app, "viewer")
    listed = web.get("/queues/").get_data(as_text=True)
    assert f'<span class="clip" title="{reason}">' in listed
    page = web.get("/queues/reports").get_data(as_text=True)
    assert f'<dd class="long-text">{reason}</dd>' in page
