"""The channel resources of the API: an admin creates (201, Location, the signing secret once, the
URL masked and stored sealed), reads with an ETag, edits some fields (PATCH, If-Match: a stale
one is 412 and changes nothing), lists and deletes; invalid input is a 422 problem with the same
per-field messages as `flask channel add` and changes nothing; operators and viewers may not
create, edit or delete; a project of another organization is 404."""

from __future__ import annotations

import json

from sqlalchemy import select, text

from app.clock import utcnow
from app.extensions import db
from app.models import AuditEvent
from app.services.errors import ValidationFailed
from app.services.use_cases import alert_channels, tenancy
from tests.helpers.channel_keys import OTHER_KEY, channel_key, damage
from tests.helpers.channel_keys import stored as stored_row

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
    assert env["name"] == "env"  # the channel's own name, not its variable's


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


# --- PATCH ---------------------------------------------------------------------------------------


def channel_audit(channel_id: int) -> list[AuditEvent]:
    db.session.rollback()
    query = select(AuditEvent).where(AuditEvent.object_kind == "channel", AuditEvent.object_id == str(channel_id))
    return list(db.session.scalars(query.order_by(AuditEvent.id)))


def test_an_admin_edits_some_fields_with_the_etag_and_gets_the_new_one(app, api, people):
    api.login("admin")
    created = create(api, kinds=["failure"]).get_json()
    path = f"/api/v1/channels/{created['id']}"
    etag = api.get(path).headers["ETag"]
    new_url = "https://hooks.example.com/cronwell/another-secret-path"
    answer = api.patch(
        path,
        json={
            "target": new_url,
            "kinds": ["dead_letter"],
            "enabled": False,
            "group_minutes": 0,
            "quiet": "22:00-06:00",
        },
        headers={"If-Match": etag},
    )
    assert answer.status_code == 200, answer.get_json()
    edited = answer.get_json()
    assert (edited["kinds"], edited["enabled"], edited["group_minutes"], edited["quiet"]) == (
        ["dead_letter"],
        False,
        0,
        "22:00-06:00",
    )
    assert edited["target"] == "https://hooks.example.com/…path" and new_url not in answer.get_data(as_text=True)
    assert "secret" not in edited and edited["unreadable"] is None
    assert answer.headers["ETag"] not in (etag, None)
    assert api.get(path).headers["ETag"] == answer.headers["ETag"]  # what a read answers now
    assert api.get(path).get_json() == edited
    row = stored_row(created["id"])
    assert row["target"].startswith("fernet:") and "another-secret-path" not in row["target"]
    assert alert_channels.get_channel(created["id"]).target == new_url

    [_, updated] = channel_audit(created["id"])
    assert updated.action == "updated" and updated.actor == "api:admin"
    assert updated.changes["enabled"] == {"before": True, "after": False}
    # The new URL looks the same masked; the audit row still says it changed, without either URL.
    assert "target" not in updated.changes and edited["target"] == created["target"]
    assert updated.changes["fields"]["after"] == [
        "enabled",
        "group_seconds",
        "kinds",
        "quiet_end",
        "quiet_start",
        "target",
    ]
    assert new_url not in json.dumps(updated.changes) and URL not in json.dumps(updated.changes)


def test_a_stale_if_match_is_412_and_changes_nothing(app, api, people):
    api.login("admin")
    created = create(api).get_json()
    path = f"/api/v1/channels/{created['id']}"
    first = api.get(path).headers["ETag"]
    # Another admin changes the URL to one that looks the same masked (same host, same last four
    # characters): the ETag still moves, so the first reader's edit is refused.
    assert api.patch(path, json={"target": URL.replace("cronwell", "elsewhere")}).status_code == 200
    assert api.get(path).get_json()["target"] == created["target"]
    before, audit_rows = stored_row(created["id"]), len(channel_audit(created["id"]))

    stale = api.patch(path, json={"name": "renamed", "kinds": ["overdue"]}, headers={"If-Match": first})
    assert stale.status_code == 412 and stale.mimetype == "application/problem+json"
    assert "changed since you read it" in stale.get_json()["detail"]
    assert stored_row(created["id"]) == before and len(channel_audit(created["id"])) == audit_rows

    current = api.get(path).headers["ETag"]
    fresh = api.patch(path, json={"name": "renamed"}, headers={"If-Match": current})
    assert fresh.status_code == 200 and fresh.get_json()["name"] == "renamed"


def test_invalid_fields_are_422_per_field_and_change_nothing(app, api, people):
    api.login("admin")
    created = create(api, kinds=["failure"]).get_json()
    create(api, name="taken")
    path = f"/api/v1/channels/{created['id']}"
    before, audit_rows = stored_row(created["id"]), len(channel_audit(created["id"]))
    bad = {
        "target": "ftp://nope",
        "kinds": ["boom"],
        "enabled": "yes",
        "group_minutes": "30",
        "quiet": "25:00-07:00",
        "quiet_timezone": "Mars/Olympus",
        "kind": "slack",
        "project": "acme/main",
        "colour": "red",
    }
    answer = api.patch(path, json=bad)
    assert answer.status_code == 422 and answer.mimetype == "application/problem+json"
    errors = answer.get_json()["errors"]
    assert set(errors) == set(bad)
    # The same messages as for a new channel, field by field.
    assert {k: errors[k] for k in ("target", "kinds", "quiet")} == {
        k: v
        for k, v in service_errors({**bad, "name": "ops", "kind": "webhook"}).items()
        if k in ("target", "kinds", "quiet")
    }
    assert errors["enabled"] == "must be true or false"
    assert errors["group_minutes"].startswith("must be a whole number of minutes")
    assert "unknown time zone" in errors["quiet_timezone"]
    assert errors["kind"].startswith("cannot be changed") and errors["project"].startswith("cannot be changed")
    assert errors["colour"].startswith("is not a field of a channel")

    taken = api.patch(path, json={"name": "taken", "kinds": ["overdue"]})
    assert taken.status_code == 422 and "already exists" in taken.get_json()["errors"]["name"]
    for body in ({"name": ""}, {"target": None}, {"secret": ""}, {"kinds": "overdue"}, {"group_minutes": -1}):
        refused = api.patch(path, json=body)
        assert refused.status_code == 422 and set(refused.get_json()["errors"]) == set(body), body
    not_an_object = api.patch(path, json=["name"])
    assert not_an_object.status_code == 422 and not_an_object.get_json()["errors"] == {
        "_schema": "must be a JSON object"
    }
    assert stored_row(created["id"]) == before and len(channel_audit(created["id"])) == audit_rows


def test_a_webhooks_secret_is_replaced_and_never_answered(app, api, people):
    api.login("admin")
    created = create(api).get_json()
    answer = api.patch(f"/api/v1/channels/{created['id']}", json={"secret": "  the-new-signing-secret  "})
    assert answer.status_code == 200 and "the-new-signing-secret" not in answer.get_data(as_text=True)
    assert alert_channels.get_channel(created["id"]).secret == "the-new-signing-secret"
    assert "the-new-signing-secret" not in stored_row(created["id"])["secret"]
    [_, updated] = channel_audit(created["id"])
    assert updated.changes["secret"] == {"before": "(hidden)", "after": "(hidden)"}
    assert updated.changes["fields"]["after"] == ["secret"]
    slack = create(api, name="chat", kind="slack", target="https://hooks.slack.com/services/T0/B0/XXXX").get_json()
    refused = api.patch(f"/api/v1/channels/{slack['id']}", json={"secret": "s"})
    assert refused.status_code == 422 and "only a webhook channel" in refused.get_json()["errors"]["secret"]


def test_an_edit_that_changes_nothing_keeps_the_etag_and_writes_no_audit_row(app, api, people):
    api.login("admin")
    created = create(api, kinds=["failure"]).get_json()
    path = f"/api/v1/channels/{created['id']}"
    etag = api.get(path).headers["ETag"]
    same = api.patch(path, json={"kinds": ["failure"], "enabled": True, "target": URL}, headers={"If-Match": etag})
    assert same.status_code == 200 and same.headers["ETag"] == etag
    assert [row.action for row in channel_audit(created["id"])] == ["created"]


def test_only_an_admin_edits_and_another_organizations_channel_is_not_found(app, api, people, other_org):
    channel = alert_channels.add_channel({"name": "ops", "kind": "webhook", "target": URL}, now=utcnow(), actor="t")
    foreign = alert_channels.add_channel(
        {"name": "theirs", "kind": "webhook", "target": URL}, now=utcnow(), actor="t", project="acme/main"
    )
    before = stored_row(channel.id)
    for role in ("operator", "viewer"):
        api.login(role)
        refused = api.patch(f"/api/v1/channels/{channel.id}", json={"name": f"by-{role}"})
        assert refused.status_code == 403 and refused.mimetype == "application/problem+json"
    assert stored_row(channel.id) == before
    api.login("admin")
    for missing in (foreign.id, 999_999, 2**31):
        answer = api.patch(f"/api/v1/channels/{missing}", json={"name": "mine"})
        assert answer.status_code == 404 and answer.mimetype == "application/problem+json", missing
    assert alert_channels.get_channel(foreign.id).name == "theirs"


# --- a stored URL that cannot be decrypted ----------------------------------------------------------


def test_an_unreadable_channel_is_answered_marked_and_repaired_by_setting_its_url(app, api, people):
    api.login("admin")
    created = create(api).get_json()
    path = f"/api/v1/channels/{created['id']}"
    before = stored_row(created["id"])
    with channel_key(app, OTHER_KEY):
        one = api.get(path)
        assert one.status_code == 200 and one.get_json()["target"] == "(unreadable)"
        assert one.get_json()["unreadable"].startswith("the URL and the signing secret cannot be decrypted: ")
        assert "stored with a different CHANNEL_SECRET_KEY" in one.get_json()["unreadable"]
        [listed] = api.get("/api/v1/channels").get_json()
        assert listed == one.get_json()

        kept = api.patch(path, json={"kinds": ["overdue"]}, headers={"If-Match": one.headers["ETag"]})
        assert kept.status_code == 200 and kept.get_json()["unreadable"] == one.get_json()["unreadable"]
        after = stored_row(created["id"])
        assert (after["target"], after["secret"]) == (before["target"], before["secret"])

        repaired = api.patch(path, json={"target": URL, "secret": "a-new-secret"})
        assert repaired.status_code == 200 and repaired.get_json()["unreadable"] is None
        assert repaired.get_json()["target"] == "https://hooks.example.com/…path"


def test_a_test_send_to_an_unreadable_channel_answers_the_failed_delivery(app, api, people):
    channel = alert_channels.add_channel(
        {"name": "ops", "kind": "slack", "target": "https://hooks.slack.com/services/T0/B0/XXXX"},
        now=utcnow(),
        actor="t",
    )
    damage(channel.id)
    api.login("operator")
    answer = api.post(f"/api/v1/channels/{channel.id}/test")
    assert answer.status_code == 200, answer.get_json()
    delivery = answer.get_json()
    assert (delivery["status"], delivery["attempts"], delivery["response_status"]) == ("failed", 1, None)
    assert delivery["last_error"].startswith("not sent: the URL cannot be decrypted: ")


def test_a_url_python_cannot_split_and_an_overlong_time_zone_are_422_not_500(app, api, people):
    # urlsplit raises on an unclosed IPv6 bracket, and ZoneInfo raises OSError on a name longer than
    # a file name may be: both once escaped the checks as server errors.
    api.login("admin")
    created = create(api).get_json()
    for body, field, fragment in (
        ({"target": "http://[::1"}, "target", "needs an http:// or https:// URL (Invalid IPv6 URL)"),
        ({"quiet_timezone": "Europe/" + "x" * 5000}, "quiet_timezone", "at most 64 characters"),
    ):
        refused_create = create(api, name="new", **body)
        refused_edit = api.patch(f"/api/v1/channels/{created['id']}", json=body)
        for answer in (refused_create, refused_edit):
            assert answer.status_code == 422, answer.get_data(as_text=True)
            assert fragment in answer.get_json()["errors"][field]
    assert [c["name"] for c in api.get("/api/v1/channels").get_json()] == ["ops"]
