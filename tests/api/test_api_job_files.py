"""The job file over the REST API, on both databases: its JSON Schema, plan and apply by role,
all-or-nothing with per-job field errors, another organization's project answering 404."""

from __future__ import annotations

import jsonschema
from sqlalchemy import select

from app.extensions import db
from app.models import Job
from tests.factories import make_user
from tests.helpers.api import PASSWORD, ApiClient, job_body

APPLY = "/api/v1/projects/default/default/apply"


def names() -> set[str]:
    db.session.rollback()
    return set(db.session.scalars(select(Job.name)))


def test_the_schema_is_published_and_validates_a_document(app, api, people):
    api.login("viewer")
    response = api.get("/api/v1/jobs/schema")
    assert response.status_code == 200
    validator = jsonschema.Draft202012Validator(response.get_json())
    assert list(validator.iter_errors({"project": "default/default", "jobs": [job_body("a")]})) == []
    assert list(validator.iter_errors({"jobs": [job_body("a", schedule_typ="cron")]}))
    assert api.get("/api/v1/jobs/schema", token="").status_code == 401


def test_a_viewer_may_plan_but_only_an_operator_applies(app, api, people):
    document = {"jobs": [job_body("a"), job_body("b")]}
    api.login("viewer")
    planned = api.post(APPLY, {**document, "dry_run": True})
    assert planned.status_code == 200, planned.get_json()
    assert [item["name"] for item in planned.get_json()["created"]] == ["a", "b"]
    assert names() == set()
    assert api.post(APPLY, document).status_code == 403
    assert names() == set()

    api.login("operator")
    applied = api.post(APPLY, {**document, "source": "deploy:web"})
    assert applied.status_code == 200 and applied.get_json()["changed"] is True
    db.session.rollback()
    assert {j.managed_by for j in db.session.scalars(select(Job))} == {"deploy:web"}

    # Prune only touches this source's jobs: a job the API created by hand stays.
    assert api.post("/api/v1/jobs", job_body("by-hand")).status_code == 201
    pruned = api.post(APPLY, {"jobs": [job_body("a")], "prune": True, "source": "deploy:web"})
    assert [item["name"] for item in pruned.get_json()["deleted"]] == ["b"]
    assert names() == {"a", "by-hand"}


def test_one_bad_job_is_a_422_naming_it_and_nothing_changes(app, api, people):
    api.login("operator")
    document = {"jobs": [job_body("a"), job_body("b", schedule_type="cron", schedule={"expression": "61 * * * *"})]}
    refused = api.post(APPLY, document)
    assert refused.status_code == 422 and refused.content_type == "application/problem+json"
    errors = refused.get_json()["errors"]
    assert list(errors) == ["jobs[1].schedule"] and "(job 'b')" in errors["jobs[1].schedule"]
    assert names() == set()
    bad_flag = api.post(APPLY, {"jobs": [], "dry_run": "yes"})
    assert bad_flag.status_code == 422 and bad_flag.get_json()["errors"] == {"dry_run": "must be true or false"}


def test_another_organizations_project_is_not_found(app, api, people, other_org):
    make_user("acme-operator", PASSWORD, role="operator", organization="acme")
    acme = ApiClient(app)
    acme.login("acme-operator")
    assert acme.post(APPLY, {"jobs": [job_body("x")]}).status_code == 404
    assert acme.post("/api/v1/projects/acme/main/apply", {"jobs": [job_body("x")]}).status_code == 200
    api.login("operator")
    assert api.post("/api/v1/projects/acme/main/apply", {"jobs": [], "dry_run": True}).status_code == 404
    db.session.rollback()
    assert [j.project_id for j in db.session.scalars(select(Job))] == [other_org.id]


def test_declared_queue_changes_need_an_admin_but_anyone_may_plan_them(app, api, people):
    document = {"queues": [{"name": "reports", "concurrency_limit": 3}], "jobs": [job_body("a", queue="reports")]}
    api.login("viewer")
    planned = api.post(APPLY, {**document, "dry_run": True})
    assert planned.status_code == 200 and planned.get_json()["queues"]["created"] == ["reports"]
    api.login("operator")
    refused = api.post(APPLY, document)
    assert refused.status_code == 403 and names() == set()
    api.login("admin")
    assert api.post(APPLY, document).status_code == 200
    assert names() == {"a"}
