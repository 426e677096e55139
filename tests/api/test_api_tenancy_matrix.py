"""The tenancy matrix over every API operation, with a JWT and with an API token of each role, on
both databases: an operation the role allows never answers 401/403/404 for the caller's own
objects; one it does not allow is 403; another organization's object is 404 (as a missing one).

Operations are read from the app's URL map, so a new operation without an entry here fails.
"""

from __future__ import annotations

import itertools
import re

import pytest

from app.clock import utcnow
from app.extensions import db
from app.models import Project, Queue
from app.services.caller import Caller
from app.services.use_cases import alert_channels, batches, runs, tokens
from tests.factories import make_alert, make_execution, make_heartbeat, make_job, make_user
from tests.helpers.api import PASSWORD, ApiClient, job_body

ROLES = ("viewer", "operator", "admin")
# Signing in and out, registering and password changes have their own tests (JWT-only, public).
SKIPPED = {
    "POST /api/v1/auth/login",
    "POST /api/v1/auth/refresh",
    "POST /api/v1/auth/logout",
    "POST /api/v1/auth/password",
    "POST /api/v1/auth/register",
}
_names = itertools.count(1)
# Operations on organizations and projects themselves: people only, never an API token.
PERSONS_ONLY = {
    ("POST", "/api/v1/projects"),
    ("PATCH", "/api/v1/organizations/<string:name>"),
    ("DELETE", "/api/v1/organizations/<string:name>"),
    ("PATCH", "/api/v1/projects/<int:project_id>"),
    ("DELETE", "/api/v1/projects/<int:project_id>"),
}


def body_for(method: str, rule: str, world: dict) -> dict | None:
    """A valid body for the operation (None: no body)."""
    n = next(_names)
    bodies = {
        "POST /api/v1/jobs": job_body(f"matrix job {n}"),
        "PATCH /api/v1/jobs/<int:job_id>": {"description": f"edited {n}"},
        "POST /api/v1/jobs/<int:job_id>/backfill": {
            "from": "2026-01-01T00:00:00Z",
            "to": "2026-01-01T03:00:00Z",
            "dry_run": True,
        },
        "POST /api/v1/queues": {"name": f"matrix-{n}"},
        "PATCH /api/v1/queues/<int:queue_id>": {"priority": 1},
        "POST /api/v1/projects": {"organization": "default", "name": f"matrix-{n}"},
        # Renamed to the name they have: the other operations still find them by it.
        "PATCH /api/v1/organizations/<string:name>": {"name": world["own"]["name"]},
        "PATCH /api/v1/projects/<int:project_id>": {"name": "default"},
        "POST /api/v1/schedules/preview": {"schedule_type": "interval", "schedule": {"every": "5m"}},
        "POST /api/v1/tokens": {"name": f"matrix-{n}", "project": "default/default", "role": "viewer"},
        "POST /api/v1/users/invitations": {"role": "viewer"},
        "POST /api/v1/batches": {"job_id": world["own"]["job_id"], "items": [{}]},
        "POST /api/v1/runs": {"task": "echo"},
        "POST /api/v1/projects/<string:org>/<string:project>/apply": {"jobs": [], "dry_run": True},
        "PUT /api/v1/projects/<int:project_id>/notify": {"events": ["failure", "recovery"]},
        "PUT /api/v1/jobs/<int:job_id>/notify": {"events": ["failure"], "channels": None},
        "POST /api/v1/channels": {"name": f"matrix-{n}", "kind": "email", "target": "ops@example.com"},
    }
    return bodies.get(f"{method} {rule}")


def operations(app) -> list[tuple[str, str, object]]:
    found = []
    for rule in app.url_map.iter_rules():
        if not rule.rule.startswith("/api/v1/") or rule.rule.endswith("openapi.json"):
            continue
        view = app.view_functions[rule.endpoint]
        for method in sorted(rule.methods - {"HEAD", "OPTIONS"}):
            if f"{method} {rule.rule}" not in SKIPPED:
                found.append((method, rule.rule, getattr(view, "_cronwell_action", "missing")))
    # Destructive operations last, so the others find the objects they need; a deletion inside an
    # object (a job's notification override) before the object's own.
    return sorted(
        found,
        key=lambda op: (
            op[0] == "DELETE",
            "cancel" in op[1],
            -op[1].count("/") if op[0] == "DELETE" else 0,
            op[1],
            op[0],
        ),
    )


def build_world(caller_user) -> dict:
    """Objects in the default organization (`own`) and in `acme` (`foreign`)."""
    system = Caller.system()
    from app.services.use_cases import tenancy

    tenancy.add_organization("acme", now=utcnow(), caller=system)
    acme = tenancy.add_project("acme", "main", now=utcnow(), caller=system)
    acme_admin = make_user("acme-admin", PASSWORD, role="admin", organization="acme")
    world = {}
    for side, project in (("own", None), ("foreign", acme)):
        job = make_job(f"{side} job {next(_names)}", task="echo")
        if project is not None:
            job.queue_id = db.session.query(Queue).filter_by(project_id=project.id, name="default").one().id
            db.session.commit()
        execution = make_execution(job, "failed")
        alert = make_alert(job, execution)
        queue_project = (
            project.id if project is not None else db.session.query(Project).filter_by(name="default").first().id
        )
        queue = Queue(project_id=queue_project, name=f"{side}-q", created_at=utcnow(), updated_at=utcnow())
        db.session.add(queue)
        db.session.commit()
        batch = batches.submit_batch(job.id, {"items": [{}]}, now=utcnow(), actor="test")
        flow = make_job(f"{side} flow {next(_names)}", task="echo", steps=[{"name": "a", "task": "always_succeed"}])
        if project is not None:
            flow.queue_id = job.queue_id
            db.session.commit()
        workflow_run = runs.trigger_run(flow.id, {}, now=utcnow(), actor="test")  # started: a workflow run
        # A webhook on a closed loopback port: a test send fails at once, without leaving the machine.
        channel = alert_channels.add_channel(
            {"name": f"{side}-hook", "kind": "webhook", "target": "http://127.0.0.1:9/hook"},
            now=utcnow(),
            actor="test",
            project=None if side == "own" else "acme/main",
        )
        owner = caller_user if side == "own" else acme_admin
        token = tokens.create_token(
            Caller.cli(),
            name=f"{side}-token",
            project=None if side == "own" else "acme/main",
            role="viewer",
            user_id=owner.id,
            now=utcnow(),
        ).token
        world[side] = {
            "job_id": job.id,
            "execution_id": execution.id,
            "alert_id": alert.id,
            "queue_id": queue.id,
            "batch_id": batch.id,
            "run_id": workflow_run.id,
            "channel_id": channel.id,
            "project_id": queue_project,
            "token_id": token.id,
            "name": "default" if side == "own" else "acme",
            # A project named in the path as ORG/PROJECT (a job file's apply).
            "org": "default" if side == "own" else "acme",
            "project": "default" if side == "own" else "main",
            "worker_id": "matrix-worker",
        }
    make_heartbeat("matrix-worker", "worker", age_seconds=0)
    return world


# Objects every organization shares (the task catalog is the deployer's): a path names a real
# one, and there is no other organization's copy to be refused.
SHARED_OBJECTS = {"/api/v1/tasks/<string:name>": {"name": "echo"}}


def path_for(rule: str, ids: dict) -> str:
    ids = {**ids, **SHARED_OBJECTS.get(rule, {})}
    return re.sub(r"<(?:[a-z]+:)?([a-z_]+)>", lambda m: str(ids[m.group(1)]), rule)


@pytest.mark.parametrize("credential", ["jwt", "api_token"])
@pytest.mark.parametrize("role", ROLES)
def test_every_operation_scoped_by_organization_and_role(app, role, credential):
    from app.domain.permissions import allows

    app.config.update(API_AUTH_RATE_LIMIT="100000 per minute", API_TOKEN_RATE_LIMIT="100000 per minute")
    user = make_user(f"matrix-{role}", PASSWORD, role=role)
    world = build_world(user)
    client = ApiClient(app)
    if credential == "jwt":
        client.login(user.username)
    else:
        client.token = tokens.create_token(
            Caller.cli(), name="matrix", project="default/default", role=role, user_id=user.id, now=utcnow()
        ).secret
    problems = []
    checked = operations(app)
    assert len(checked) >= 45 and ("POST", "/api/v1/jobs/<int:job_id>/trigger", checked[0][2]) is not None
    assert {rule for _, rule, _ in checked} >= {
        "/api/v1/jobs/<int:job_id>/trigger",
        "/api/v1/batches/<int:batch_id>/cancel",
    }
    for method, rule, action in checked:
        if action == "missing":
            problems.append(f"{method} {rule}: not guarded by authenticated()")
            continue
        allowed = action is None or allows(role, action)
        if credential == "api_token" and (method, rule) in PERSONS_ONLY:
            allowed = False  # a token acts in its own project only: it may not create, rename or delete one
        has_object = "<" in rule and "worker_id" not in rule and rule not in SHARED_OBJECTS
        own = client.request(method, path_for(rule, world["own"]), json=body_for(method, rule, world))
        if own.status_code >= 500:
            problems.append(f"{method} {rule} own: {own.status_code}")
        elif allowed and own.status_code in (401, 403, 404):
            problems.append(f"{method} {rule} own: {own.status_code} for an allowed {role} ({own.get_json()})")
        elif not allowed and own.status_code != 403:
            problems.append(f"{method} {rule} own: {own.status_code}, expected 403 for {role}")
        if has_object:
            foreign = client.request(method, path_for(rule, world["foreign"]), json=body_for(method, rule, world))
            expected = 404 if allowed else 403
            if foreign.status_code != expected:
                problems.append(f"{method} {rule} foreign: {foreign.status_code}, expected {expected}")
    assert not problems, "\n".join(problems)
