"""Renaming and deleting organizations and projects over the API: admins only, another
organization's are 404, a delete with work left is 409 until `cascade=true`; ids never change."""

from __future__ import annotations

from sqlalchemy import select

from app.extensions import db
from app.models import AuditEvent
from tests.factories import make_user
from tests.helpers.api import PASSWORD, ApiClient


def signed_in(app, username: str, role: str, organization: str = "default") -> ApiClient:
    make_user(username, PASSWORD, role=role, organization=organization)
    client = ApiClient(app)
    client.login(username)
    return client


def test_rename_and_delete_a_project(app, other_org):
    admin = signed_in(app, "boss", "admin")
    created = admin.post("/api/v1/projects", {"organization": "default", "name": "reports"}).get_json()
    renamed = admin.patch(f"/api/v1/projects/{created['id']}", {"name": "finance"})
    assert renamed.status_code == 200
    assert (renamed.get_json()["id"], renamed.get_json()["full_name"]) == (created["id"], "default/finance")
    assert admin.patch(f"/api/v1/projects/{created['id']}", {"name": "default"}).status_code == 422  # taken
    operator = signed_in(app, "op", "operator")
    assert operator.patch(f"/api/v1/projects/{created['id']}", {"name": "x"}).status_code == 403
    assert operator.delete(f"/api/v1/projects/{created['id']}").status_code == 403
    assert admin.delete(f"/api/v1/projects/{created['id']}").get_json()["projects"] == ["default/finance"]
    assert admin.get(f"/api/v1/projects/{created['id']}").status_code == 404
    # another organization's project is not there for this admin
    assert admin.patch(f"/api/v1/projects/{other_org.id}", {"name": "mine"}).status_code == 404
    assert admin.delete(f"/api/v1/projects/{other_org.id}?cascade=true").status_code == 404
    db.session.rollback()
    actions = {(a.object_kind, a.action) for a in db.session.scalars(select(AuditEvent))}
    assert {("project", "renamed"), ("project", "deleted")} <= actions


def test_delete_with_work_is_a_conflict_until_cascade(app, other_org):
    acme = signed_in(app, "acme-boss", "admin", organization="acme")
    job = acme.post(
        "/api/v1/jobs",
        {
            "name": "acme job",
            "task": "always_succeed",
            "schedule_type": "interval",
            "schedule": {"every": "1h"},
            "project": "acme/main",
        },
    )
    assert job.status_code == 201, job.get_data(as_text=True)
    refused = acme.delete("/api/v1/organizations/acme")
    assert refused.status_code == 409 and "cascade" in refused.get_json()["detail"]
    renamed = acme.patch("/api/v1/organizations/acme", {"name": "acme-corp"}).get_json()
    assert renamed["name"] == "acme-corp"
    assert acme.get(f"/api/v1/jobs/{job.get_json()['id']}").status_code == 200  # same id, same job
    assert [p["full_name"] for p in acme.get("/api/v1/projects").get_json()] == ["acme-corp/main"]
    outsider = signed_in(app, "boss", "admin")
    assert outsider.delete("/api/v1/organizations/acme-corp?cascade=true").status_code == 404
    done = acme.delete("/api/v1/organizations/acme-corp?cascade=true")
    assert done.status_code == 200 and done.get_json()["jobs"] == 1
    assert acme.get(f"/api/v1/jobs/{job.get_json()['id']}").status_code in (
        401,
        403,
        404,
    )  # no longer a member of anything
