"""The REST API end to end through the Flask client, on SQLite and PostgreSQL: sign-in, scoping
by organization and role, problem documents, ETag/If-Match, cursor pagination, idempotency."""

from __future__ import annotations

from datetime import timedelta

from flask_jwt_extended import create_access_token

from app.extensions import db
from app.models import IdempotencyKey, RevokedToken
from tests.factories import make_execution, make_job, make_user
from tests.helpers.api import PASSWORD, ApiClient, job_body


def test_the_document_and_the_docs_pages_are_published(app, api):
    document = api.get("/api/v1/openapi.json").get_json()
    assert document["openapi"].startswith("3.")
    assert "/api/v1/jobs/{job_id}/trigger" in document["paths"]
    assert document["components"]["securitySchemes"]["bearerAuth"]["scheme"] == "bearer"
    for page, asset in (
        ("/api/docs", "vendor/swagger-ui/swagger-ui-bundle.js"),
        ("/api/redoc", "vendor/redoc/redoc.standalone.js"),
    ):
        html = api.get(page).get_data(as_text=True)
        assert f"/static/{asset}" in html and "cdn" not in html.lower()
        assert api.get(f"/static/{asset}").status_code == 200


def test_every_operation_has_a_summary_and_documents_its_errors(app, api):
    document = api.get("/api/v1/openapi.json").get_json()
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            if method == "parameters":
                continue
            assert operation.get("summary"), f"{method} {path} has no summary"
            assert "Roles:" in operation.get("description", ""), f"{method} {path} does not name its roles"
            if operation.get("security") != []:
                assert "401" in operation["responses"], f"{method} {path} does not document 401"


def test_sign_in_me_and_problem_documents(app, api, people):
    wrong = api.post("/api/v1/auth/login", {"username": "admin", "password": "nope"})
    assert wrong.status_code == 401
    assert wrong.headers["Content-Type"] == "application/problem+json"
    assert wrong.get_json()["detail"] == "wrong username or password"
    invalid = api.post("/api/v1/auth/login", {"username": ""})
    assert invalid.status_code == 422
    assert set(invalid.get_json()["errors"]) == {"username", "password"}
    tokens = api.login("operator")
    assert tokens["expires_in"] == 15 * 60 and tokens["token_type"] == "Bearer"
    me = api.get("/api/v1/me").get_json()
    assert (me["user"]["username"], me["organization"], me["role"], me["credential"]) == (
        "operator",
        "default",
        "operator",
        "jwt",
    )


def test_logout_revokes_the_access_and_the_refresh_token(app, api, people):
    tokens = api.login("viewer")
    assert api.post("/api/v1/auth/refresh", token=tokens["refresh_token"]).status_code == 200
    assert api.post("/api/v1/auth/logout").status_code == 204
    refused = api.get("/api/v1/me")
    assert refused.status_code == 401 and "revoked" in refused.get_json()["detail"]
    assert api.post("/api/v1/auth/refresh", token=tokens["refresh_token"]).status_code == 401
    assert db.session.query(RevokedToken).count() == 2


def test_an_expired_token_and_a_forged_one_are_refused(app, api, people):
    expired = create_access_token(identity=str(people["admin"].id), expires_delta=timedelta(seconds=-5))
    response = api.get("/api/v1/me", token=expired)
    assert response.status_code == 401 and "expired" in response.get_json()["detail"]
    assert response.headers["WWW-Authenticate"].startswith("Bearer")
    tokens = api.login("admin")
    forged = tokens["access_token"][:-4] + ("AAAA" if not tokens["access_token"].endswith("AAAA") else "BBBB")
    assert api.get("/api/v1/me", token=forged).status_code == 401
    # A refresh token is not an access token.
    assert api.get("/api/v1/me", token=tokens["refresh_token"]).status_code == 401


def test_a_password_change_revokes_the_refresh_tokens(app, api, people):
    tokens = api.login("operator")
    short = api.post("/api/v1/auth/password", {"current_password": PASSWORD, "new_password": "short"})
    assert short.status_code == 422 and "new_password" in short.get_json()["errors"]
    wrong = api.post("/api/v1/auth/password", {"current_password": "nope", "new_password": "a-long-new-secret"})
    assert wrong.status_code == 422 and "current_password" in wrong.get_json()["errors"]
    assert (
        api.post(
            "/api/v1/auth/password", {"current_password": PASSWORD, "new_password": "a-long-new-secret"}
        ).status_code
        == 204
    )
    assert api.post("/api/v1/auth/refresh", token=tokens["refresh_token"]).status_code == 401
    ApiClient(app).login("operator", "a-long-new-secret")


def test_registration_is_closed_unless_open_or_invited(app, api, people):
    closed = api.post("/api/v1/auth/register", {"username": "carol", "password": "carol-secret-1"})
    assert closed.status_code == 403
    api.login("operator")
    assert api.post("/api/v1/users/invitations", {"role": "viewer"}).status_code == 403  # admins only
    api.login("admin")
    invitation = api.post("/api/v1/users/invitations", {"role": "operator"}).get_json()["invitation"]
    joined = api.post(
        "/api/v1/auth/register", {"username": "carol", "password": "carol-secret-1", "invitation": invitation}, token=""
    )
    assert joined.status_code == 201
    assert joined.get_json()["memberships"] == [{"organization": "default", "role": "operator"}]
    again = api.post(
        "/api/v1/auth/register", {"username": "dave", "password": "dave-secret-1", "invitation": invitation}, token=""
    )
    assert again.status_code == 422 and "invitation" in again.get_json()["errors"]
    app.config["REGISTRATION_OPEN"] = True
    opened = api.post("/api/v1/auth/register", {"username": "erin", "password": "erin-secret-1"}, token="")
    assert opened.status_code == 201 and opened.get_json()["memberships"] == []


def test_roles_401_403_404(app, api, people, other_org):
    job = make_job("mine")
    foreign = make_job("theirs")
    # Move `theirs` to the other organization's project.
    from app.models import Queue

    foreign.queue_id = db.session.query(Queue).filter_by(project_id=other_org.id).one().id
    db.session.commit()
    assert api.get(f"/api/v1/jobs/{job.id}").status_code == 401
    api.login("viewer")
    assert api.get(f"/api/v1/jobs/{job.id}").status_code == 200
    assert api.get(f"/api/v1/jobs/{foreign.id}").status_code == 404
    assert api.post(f"/api/v1/jobs/{job.id}/trigger").status_code == 403
    assert api.post(f"/api/v1/jobs/{foreign.id}/trigger").status_code in (403, 404)
    listed = [item["name"] for item in api.get("/api/v1/jobs").get_json()["items"]]
    assert listed == ["mine"]
    api.login("operator")
    assert api.post(f"/api/v1/jobs/{foreign.id}/trigger").status_code == 404
    assert api.post(f"/api/v1/jobs/{job.id}/trigger").status_code == 201
    assert api.get("/api/v1/jobs/99999999999").status_code == 404


def test_create_edit_with_if_match_and_field_errors(app, api, people):
    api.login("operator")
    bad = api.post("/api/v1/jobs", {"name": "", "task": "no-such-task", "schedule_type": "interval", "schedule": {}})
    assert bad.status_code == 422
    assert {"name", "task"} <= set(bad.get_json()["errors"])
    created = api.post("/api/v1/jobs", job_body("etag job"))
    assert created.status_code == 201
    job = created.get_json()
    assert created.headers["Location"].endswith(f"/api/v1/jobs/{job['id']}")
    read = api.get(f"/api/v1/jobs/{job['id']}")
    etag = read.headers["ETag"]
    edited = api.patch(f"/api/v1/jobs/{job['id']}", {"description": "first"}, headers={"If-Match": etag})
    assert edited.status_code == 200 and edited.get_json()["description"] == "first"
    stale = api.patch(f"/api/v1/jobs/{job['id']}", {"description": "second"}, headers={"If-Match": etag})
    assert stale.status_code == 412
    assert api.get(f"/api/v1/jobs/{job['id']}").get_json()["description"] == "first"


def test_cursor_pagination_and_filters(app, api, people):
    job = make_job("paged")
    ids = [make_execution(job, "succeeded").id for _ in range(5)] + [make_execution(job, "failed").id]
    api.login("viewer")
    seen, url = [], "/api/v1/executions?limit=2"
    while url:
        page = api.get(url).get_json()
        assert len(page["items"]) <= 2
        seen += [item["id"] for item in page["items"]]
        url = page["next"]
    assert seen == sorted(ids, reverse=True)
    failed = api.get(f"/api/v1/executions?status=failed&job={job.id}").get_json()["items"]
    assert [item["id"] for item in failed] == [ids[-1]]
    assert api.get("/api/v1/executions?limit=100000").status_code == 422
    assert api.get("/api/v1/executions?status=bogus").status_code == 422


def test_idempotency_key_replays_the_first_answer(app, api, people):
    job = make_job("once")
    api.login("operator")
    key = {"Idempotency-Key": "trigger-once-1"}
    first = api.post(f"/api/v1/jobs/{job.id}/trigger", headers=key)
    second = api.post(f"/api/v1/jobs/{job.id}/trigger", headers=key)
    assert first.status_code == second.status_code == 201
    assert first.get_json()["id"] == second.get_json()["id"]
    assert second.headers["Idempotent-Replayed"] == "true"
    other_body = api.post("/api/v1/jobs", job_body("x"), headers=key)
    assert other_body.status_code == 422 and "Idempotency-Key" in other_body.get_json()["errors"]
    runs = api.get(f"/api/v1/executions?job={job.id}").get_json()["items"]
    assert len(runs) == 1
    assert db.session.query(IdempotencyKey).count() == 1


def test_api_tokens_scope_role_and_revocation(app, api, people, other_org):
    make_user("outsider", PASSWORD, role="admin", organization="acme")
    job = make_job("for tokens")
    api.login("operator")
    too_high = api.post("/api/v1/tokens", {"name": "x", "project": "default/default", "role": "admin"})
    assert too_high.status_code == 403
    assert api.post("/api/v1/tokens", {"name": "x", "project": "acme/main", "role": "viewer"}).status_code == 404
    created = api.post("/api/v1/tokens", {"name": "ci", "project": "default/default", "role": "operator"})
    assert created.status_code == 201
    secret = created.get_json()["token"]
    assert secret.startswith("cw_")
    machine = ApiClient(app, secret)
    me = machine.get("/api/v1/me").get_json()
    assert (me["credential"], me["project"], me["role"]) == ("api_token", "default/default", "operator")
    assert machine.post(f"/api/v1/jobs/{job.id}/trigger").status_code == 201
    listed = api.get("/api/v1/tokens").get_json()
    assert [t["name"] for t in listed] == ["ci"] and "token" not in listed[0]
    assert listed[0]["last_used_at"] is not None
    assert "secret" not in str(db.session.execute(db.text("SELECT token_hash FROM api_tokens")).scalar())
    assert api.post(f"/api/v1/tokens/{listed[0]['id']}/revoke").status_code == 200
    assert machine.get("/api/v1/me").status_code == 401
    # The other organization's admin cannot see or revoke it.
    outsider = ApiClient(app)
    outsider.login("outsider")
    assert outsider.post(f"/api/v1/tokens/{listed[0]['id']}/revoke").status_code == 404


def test_a_token_of_project_a_cannot_touch_project_b(app, api, people, other_org):
    make_user("acme-admin", PASSWORD, role="admin", organization="acme")
    mine = make_job("in default")
    acme = ApiClient(app)
    acme.login("acme-admin")
    secret = acme.post("/api/v1/tokens", {"name": "acme-ci", "project": "acme/main", "role": "admin"}).get_json()[
        "token"
    ]
    machine = ApiClient(app, secret)
    assert machine.get(f"/api/v1/jobs/{mine.id}").status_code == 404
    assert machine.post(f"/api/v1/jobs/{mine.id}/trigger").status_code == 404
    assert machine.get("/api/v1/jobs").get_json()["items"] == []
    assert machine.get("/api/v1/executions").get_json()["items"] == []


def test_the_retention_pass_prunes_expired_denylist_rows_and_keys(app, api, people):
    from app.clock import utcnow
    from app.services.engine.retention import prune_history

    tokens = api.login("admin")
    api.post("/api/v1/auth/logout")
    assert db.session.query(RevokedToken).count() == 2
    db.session.rollback()
    prune_history(now=utcnow() + timedelta(days=8))
    assert db.session.query(RevokedToken).count() == 0
    assert tokens


def test_sign_in_is_rate_limited_with_retry_after(app, api, people):
    app.config["API_AUTH_RATE_LIMIT"] = "3 per minute"
    for _ in range(3):
        assert api.post("/api/v1/auth/login", {"username": "admin", "password": "nope"}).status_code == 401
    limited = api.post("/api/v1/auth/login", {"username": "admin", "password": PASSWORD})
    assert limited.status_code == 429
    assert limited.headers["Content-Type"] == "application/problem+json"
    assert 1 <= int(limited.headers["Retry-After"]) <= 60
    # Another address is not held back by this one's attempts.
    other = api.client.post(
        "/api/v1/auth/login", json={"username": "admin", "password": PASSWORD}, environ_base={"REMOTE_ADDR": "10.9.9.9"}
    )
    assert other.status_code == 200


def test_requests_per_credential_are_rate_limited(app, api, people):
    app.config["API_TOKEN_RATE_LIMIT"] = "2 per minute"
    api.login("viewer")
    assert api.get("/api/v1/me").status_code == 200
    assert api.get("/api/v1/me").status_code == 200
    limited = api.get("/api/v1/me")
    assert limited.status_code == 429 and int(limited.headers["Retry-After"]) >= 1


def test_sign_in_counts_per_address_not_against_the_credential_limit(app, api, people):
    """A route's own limit replaces its blueprint's: signing in is how a caller gets a credential."""
    app.config["API_TOKEN_RATE_LIMIT"] = "1 per minute"
    for _ in range(3):
        assert api.post("/api/v1/auth/login", {"username": "admin", "password": "nope"}).status_code == 401
    api.login("viewer")
    assert api.get("/api/v1/me").status_code == 200
    assert api.get("/api/v1/me").status_code == 429


def test_requests_go_through_while_the_limit_storage_is_unreachable(app, api, people, caplog):
    from limits.storage import storage_from_string
    from limits.strategies import MovingWindowRateLimiter

    from app.request_limits import EXTENSION

    app.config["API_TOKEN_RATE_LIMIT"] = "1 per minute"
    api.login("viewer")
    unreachable = storage_from_string("redis://127.0.0.1:1", socket_connect_timeout=0.2, socket_timeout=0.2)
    counters = app.extensions[EXTENSION]
    app.extensions[EXTENSION] = type(counters)(unreachable, MovingWindowRateLimiter(unreachable))
    try:
        assert [api.get("/api/v1/me").status_code for _ in range(3)] == [200, 200, 200]
    finally:
        app.extensions[EXTENSION] = counters
    assert "rate limit storage unavailable" in caplog.text


def test_trigger_later_with_an_override_and_batches(app, api, people):
    job = make_job("adhoc", task="echo")
    api.login("operator")
    later = api.post(f"/api/v1/jobs/{job.id}/trigger", {"in": "10m", "config_override": {"message": "hi"}})
    assert later.status_code == 201, later.get_json()
    run = later.get_json()
    assert run["status"] == "pending" and run["available_at"] > run["created_at"]
    bad = api.post(f"/api/v1/jobs/{job.id}/trigger", {"in": "soon"})
    assert bad.status_code == 422 and "in" in bad.get_json()["errors"]
    submitted = api.post("/api/v1/batches", {"job_id": job.id, "items": [{"message": "a"}, {"message": "b"}]})
    assert submitted.status_code == 201, submitted.get_json()
    batch = submitted.get_json()
    assert (batch["items"], batch["status"]) == (2, "running")
    assert len(api.get(f"/api/v1/batches/{batch['id']}/items").get_json()) == 2
    assert [b["id"] for b in api.get("/api/v1/batches").get_json()["items"]] == [batch["id"]]
    cancelled = api.post(f"/api/v1/batches/{batch['id']}/cancel")
    assert cancelled.status_code == 200 and cancelled.get_json()["status"] == "cancelled"
    assert api.post(f"/api/v1/batches/{batch['id']}/cancel").status_code == 409
    invalid = api.post("/api/v1/batches", {"job_id": job.id, "items": "not a list"})
    assert invalid.status_code == 422 and "items" in invalid.get_json()["errors"]


def test_explain_lint_and_backfill(app, api, people):
    from datetime import timedelta as td

    from app.clock import iso_z, utcnow

    job = make_job("insight", every="1h", now=utcnow() - td(days=1))
    api.login("operator")
    explained = api.get(f"/api/v1/jobs/{job.id}/explain?at={iso_z(utcnow().replace(microsecond=0))}")
    assert explained.status_code == 200 and explained.get_json()["job"]["id"] == job.id
    assert api.get(f"/api/v1/jobs/{job.id}/explain").status_code == 422
    assert api.get(f"/api/v1/jobs/{job.id}/lint").status_code == 200
    start, end = iso_z(utcnow() - td(hours=5)), iso_z(utcnow() - td(hours=1))
    plan = api.post(f"/api/v1/jobs/{job.id}/backfill", {"from": start, "to": end, "dry_run": True})
    assert plan.status_code == 200 and plan.get_json()["dry_run"] is True
    done = api.post(f"/api/v1/jobs/{job.id}/backfill", {"from": start, "to": end})
    assert done.status_code == 201 and done.get_json()["created"] >= 1


def test_a_token_for_one_project_cannot_touch_another_project_of_its_organization(app, api, people):
    from app.clock import utcnow
    from app.models import Queue
    from app.services.caller import Caller
    from app.services.use_cases import tenancy, tokens

    second = tenancy.add_project("default", "second", now=utcnow(), caller=Caller.system())
    elsewhere = make_job("in second")
    elsewhere.queue_id = db.session.query(Queue).filter_by(project_id=second.id, name="default").one().id
    db.session.commit()
    here = make_job("in default")
    secret = tokens.create_token(
        Caller.cli(), name="a", project="default/default", role="admin", user_id=people["admin"].id, now=utcnow()
    ).secret
    machine = ApiClient(app, secret)
    assert machine.get(f"/api/v1/jobs/{here.id}").status_code == 200
    assert machine.get(f"/api/v1/jobs/{elsewhere.id}").status_code == 404
    assert machine.post(f"/api/v1/jobs/{elsewhere.id}/trigger").status_code == 404
    assert [j["name"] for j in machine.get("/api/v1/jobs").get_json()["items"]] == ["in default"]
    # The admin's JWT (no project chosen) sees both.
    api.login("admin")
    assert api.get(f"/api/v1/jobs/{elsewhere.id}").status_code == 200
