"""POST /api/v1/runs on SQLite and PostgreSQL: one-off runs (no job) one at a time or as a list
of up to 1,000 in one transaction, with Idempotency-Key and `idempotency_key`, problem documents
naming the bad item, and the executions list, detail and explain for them."""

from __future__ import annotations

import time

from sqlalchemy import func, select

from app.extensions import db
from app.models import Execution
from tests.helpers.api import ApiClient


def count() -> int:
    db.session.rollback()
    return db.session.scalar(select(func.count()).select_from(Execution))


def operator(app, people) -> ApiClient:
    client = ApiClient(app)
    client.token = client.login("operator")["access_token"]
    return client


def test_a_run_is_created_with_no_job_and_found_in_the_lists(app, people):
    api = operator(app, people)
    answer = api.post("/api/v1/runs", json={"task": "echo", "config": {"message": "hi"}, "in": "30s"})
    assert answer.status_code == 201, answer.get_json()
    run = answer.get_json()
    assert (run["job_id"], run["job_name"], run["task"], run["one_off"]) == (None, "one-off", "echo", True)
    assert run["status"] == "pending" and run["config_override"] == {"message": "hi"}
    assert answer.headers["Location"].endswith(f"/api/v1/executions/{run['id']}")
    listed = api.get("/api/v1/executions?task=echo").get_json()["items"]
    assert [item["id"] for item in listed] == [run["id"]]
    assert api.get("/api/v1/executions?task=always_fail").get_json()["items"] == []
    assert api.get("/api/v1/executions?one_off=true").get_json()["items"][0]["id"] == run["id"]
    assert api.get(f"/api/v1/executions/{run['id']}").get_json()["task"] == "echo"
    explained = api.get(f"/api/v1/executions/{run['id']}/explain").get_json()
    assert explained["fate"] == "waiting" and "30s" not in explained["summary"], explained  # not yet available
    assert explained["execution"]["one_off"] is True


def test_a_bad_run_is_a_problem_with_field_messages(app, people):
    api = operator(app, people)
    answer = api.post("/api/v1/runs", json={"task": "sleep_for_seconds", "config": {"seconds": "x"}, "queue": "nope"})
    assert answer.status_code == 422 and answer.mimetype == "application/problem+json"
    errors = answer.get_json()["errors"]
    assert "config" in errors
    answer = api.post("/api/v1/runs", json={"task": "echo", "queue": "nope"})
    assert answer.status_code == 422 and "unknown queue 'nope'" in answer.get_json()["errors"]["queue"]
    assert api.post("/api/v1/runs", json="echo").status_code == 422
    assert count() == 0


def test_a_viewer_may_not_create_runs(app, people):
    client = ApiClient(app)
    client.token = client.login("viewer")["access_token"]
    assert client.post("/api/v1/runs", json={"task": "echo"}).status_code == 403
    assert count() == 0


def test_another_organizations_project_is_not_found(app, people, other_org):
    api = operator(app, people)
    answer = api.post("/api/v1/runs", json={"task": "echo", "project": "acme/main"})
    assert answer.status_code == 404
    assert count() == 0


def test_idempotency_key_in_the_body_and_the_header(app, people):
    api = operator(app, people)
    first = api.post("/api/v1/runs", json={"task": "echo", "idempotency_key": "user-42-report"})
    again = api.post("/api/v1/runs", json={"task": "echo", "idempotency_key": "user-42-report"})
    assert (first.status_code, again.status_code) == (201, 200)
    assert first.get_json()["id"] == again.get_json()["id"]
    headers = {"Idempotency-Key": "retry-1"}
    one = api.post("/api/v1/runs", json={"task": "echo"}, headers=headers)
    two = api.post("/api/v1/runs", json={"task": "echo"}, headers=headers)
    assert one.status_code == 201 and two.status_code == 201 and two.headers.get("Idempotent-Replayed") == "true"
    assert one.get_json()["id"] == two.get_json()["id"]
    assert count() == 2


def test_a_list_of_a_thousand_in_one_request_and_one_transaction(app, people):
    api = operator(app, people)
    items = [{"task": "echo", "config": {"message": str(n)}} for n in range(1000)]
    items[500] = {"task": "echo", "max_attempts": 0}
    refused = api.post("/api/v1/runs", json=items)
    assert refused.status_code == 422
    assert list(refused.get_json()["errors"]) == ["[500].max_attempts"]
    assert count() == 0
    items[500] = {"task": "echo"}
    started = time.perf_counter()
    answer = api.post("/api/v1/runs", json=items)
    elapsed = time.perf_counter() - started
    assert answer.status_code == 201, answer.get_json()
    body = answer.get_json()
    assert body["created"] == 1000 and len(body["items"]) == 1000
    assert count() == 1000
    print(f"\n[runs] 1,000 one-off runs in one request: {elapsed:.3f} s")
    assert api.post("/api/v1/runs", json=items + [{"task": "echo"}]).status_code == 422
    assert api.post("/api/v1/runs", json=[]).status_code == 422
