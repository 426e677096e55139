"""The channel resources of the API: an admin creates (201, Location, the signing secret once, the
URL masked and stored sealed), reads with an ETag, lists and deletes; invalid input is a 422
problem with the same per-field messages as `flask channel add`; operators and viewers may not
create or delete; a project of another organization is 404."""

from __future__ import annotations

from sqlalchemy import text

from app.clock import utcnow
from app.extensions import db
from app.services.errors import ValidationFailed
from app.services.use_cases import alert_channels, tenancy

URL = "https://hooks.example.com/cronwell/very-secret-path"


def create(api, **body):
    return api.post("/api/v1/channels", json={"name": "ops", "kind": "webhook", "target": URL, **body})


def service_errors(data: dict) -> dict:
    """The messages the use case (and so the CLI and the web form) gives for `data`."""
    try:
        alert_channels.check_channel(data)
    except ValidationFailed as exc:
        return exc.errors
    raise AssertionError("expected the data to be refused")


def test_an_admin_creates_reads_lists_and_deletes_a_channel(app, api, people):
    api.login("admin")
    answer = create(api, kinds=["dead_letter", "failure"], group_minutes=30, quiet="22:00-07:00")
    assert answer.status_code == 201, answer.get_json()
    created = answer.get_json()
    assert answer.headers["Location"] == f"/api/v1/channels/{created['id']}"
    assert created["target"] == "https://hooks.example.com/…path" and URL not in answer.get_data(as_text=True)
    assert len(created["secret"]) >= 32  # generated, shown in this answer only
    assert (created["kinds"], created["group_minutes"], created["quiet"]) == (
        ["dead_letter", "failure"],
        30,
        "22:00-07:00",
    )

    stored = db.session.execute(text("SELECT target, secret FROM alert_channels WHERE id = :id"), {"id": created["id"]})
    target, secret = stored.one()
    assert target.startswith("fernet:") and secret.startswith("fernet:") and created["secret"] not in secret

    one = api.get(answer.headers["Location"])
    assert one.status_code == 200 and one.headers["ETag"].startswith('"')
    assert "secret" not in one.get_json() and one.get_json()["target"] == created["target"]
    [listed] = api.get("/api/v1/channels").get_json()
    assert listed == one.get_json()

    gone = api.delete(f"/api/v1/channels/{created['id']}")
    assert gone.status_code == 204
    assert api.get(f"/api/v1/channels/{created['id']}").status_code == 404
    assert api.get("/api/v1/channels").get_json() == []
    assert api.delete(f"/api/v1/channels/{created['id']}").status_code == 404


def test_an_email_channel_and_an_env_reference_are_shown_as_they_are(app, api, people):
    api.login("admin")
    email = create(api, name="desk", kind="email", target="desk@example.com").get_json()
    assert (email["target"], email["secret"]) == ("desk@example.com", None)
    env = create(api, name="env", kind="slack", target="env:OPS_SLACK_URL").get_json()
    assert env["target"] == "env:OPS_SLACK_URL"


def test_invalid_fields_are_a_problem_with_the_services_messages(app, api, people):
    api.login("admin")
    bad = {"name": "x", "kind": "webhook", "target": "ftp://nope", "kinds": ["boom"], "quiet": "25:00-07:00"}
    answer = create(api, **bad)
    assert answer.status_code == 422 and answer.mimetype == "application/problem+json"
    errors = answer.get_json()["errors"]
    assert set(errors) == {"target", "kinds", "quiet"}
    assert errors == service_errors(bad)
    assert create(api, kind="pager").get_json()["errors"] == service_errors(
        {"name": "ops", "kind": "pager", "target": URL}
    )
    assert create(api, target="env:SECRET_KEY").get_json()["errors"]["target"].startswith("SECRET_KEY holds Cronwell")
    missing = api.post("/api/v1/channels", json={"kind": "webhook"}).get_json()
    assert set(missing["errors"]) == {"name", "target"}

    assert create(api).status_code == 201
    again = create(api)
    assert again.status_code == 422 and "already exists" in again.get_json()["errors"]["name"]
    assert len(api.get("/api/v1/channels").get_json()) == 1


def test_operators_and_viewers_may_not_create_or_delete(app, api, people):
    channel = alert_channels.add_channel({"name": "ops", "kind": "webhook", "target": URL}, now=utcnow(), actor="t")
    for role in ("operator", "viewer"):
        api.login(role)
        assert create(api, name=f"by-{role}").status_code == 403
        assert api.delete(f"/api/v1/channels/{channel.id}").status_code == 403
        assert [c["name"] for c in api.get("/api/v1/channels").get_json()] == ["ops"]


def test_a_project_is_named_and_another_organizations_is_not_found(app, api, people, other_org):
    api.login("admin")
    answer = create(api, project="default/default")
    assert answer.status_code == 201
    assert answer.get_json()["project_id"] == tenancy.find_project("default/default").id != other_org.id
    foreign = create(api, name="elsewhere", project="acme/main")
    assert foreign.status_code == 404 and foreign.mimetype == "application/problem+json"
    assert [c["name"] for c in api.get("/api/v1/channels").get_json()] == ["ops"]


def test_grouping_is_a_whole_number_of_minutes_within_the_limit(app, api, people):
    api.login("admin")
    for value in (1.5, "10", True, -1, 24 * 60 + 1):
        refused = create(api, group_minutes=value)
        assert refused.status_code == 422 and "group_minutes" in refused.get_json()["errors"], value
    assert create(api, group_minutes=24 * 60).get_json()["group_minutes"] == 24 * 60
