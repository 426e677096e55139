"""The REST API on job names per project (migration 0012), on both databases: two
organizations each create `nightly`; the same name again, in any case, is a 422 field error about
the caller's own project; a client cannot move a job to another project by sending project_id."""

from __future__ import annotations

from app.extensions import db
from app.models import Job
from tests.factories import make_user
from tests.helpers.api import PASSWORD, ApiClient, job_body


def test_two_organizations_create_the_same_name_and_a_duplicate_is_a_field_error(app, api, people, other_org):
    make_user("acme-operator", PASSWORD, role="operator", organization="acme")
    acme = ApiClient(app)
    acme.login("acme-operator")
    api.login("operator")

    ours = api.post("/api/v1/jobs", job_body("nightly"))
    theirs = acme.post("/api/v1/jobs", job_body("nightly"))
    assert (ours.status_code, theirs.status_code) == (201, 201)
    assert theirs.get_json()["project_id"] == other_org.id != ours.get_json()["project_id"]

    for client, name in ((acme, "nightly"), (acme, "NightLy"), (api, "NIGHTLY")):
        refused = client.post("/api/v1/jobs", job_body(name))
        assert refused.status_code == 422 and refused.content_type == "application/problem+json"
        message = refused.get_json()["errors"]["name"]
        assert message.startswith(f"a job named '{name}' already exists in this project"), message
        assert "acme" not in refused.get_data(as_text=True) and "default" not in message
    assert db.session.query(Job).filter(Job.name == "nightly").count() == 2
    # Each organization sees its own `nightly` only.
    assert [job["id"] for job in acme.get("/api/v1/jobs").get_json()["items"]] == [theirs.get_json()["id"]]


def test_project_id_is_read_only(app, api, people, other_org):
    api.login("operator")
    job = api.post("/api/v1/jobs", job_body("stays")).get_json()
    moved = api.patch(f"/api/v1/jobs/{job['id']}", {"project_id": other_org.id})
    assert moved.status_code == 422 and moved.get_json()["errors"] == {"project_id": "is read-only"}
    assert api.get(f"/api/v1/jobs/{job['id']}").get_json()["project_id"] == job["project_id"]
