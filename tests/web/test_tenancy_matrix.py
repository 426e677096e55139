"""Tenant isolation over every web route, on both databases: another organization's object is a 404.

Two organizations: `default` (A: the installation's own) and `bravo` (B), each with a project,
a queue, a job, executions, an alert, a batch and members of each role. Every route of
`app.url_map` outside /api/ (the API has its own matrix) must have a row in ROUTES saying what it
needs, so a new route cannot escape; then, for anonymous and A's viewer, operator and admin:
- the status of each method of each route, with A's objects in the URL, is the one its row gives
  (sign-in redirect for anonymous, 403 for a role too low, through for a role high enough);
- no response to a user of A holds a name or a link to an object of B;
- each route given B's object answers exactly what it answers for a missing one, and B's rows
  are unchanged; a viewer's forged POSTs are refused (403) and change nothing at all.
"""

from __future__ import annotations

import re
from datetime import timedelta
from urllib.parse import urlsplit

import pytest
from sqlalchemy import select, text

from app.clock import utcnow
from app.extensions import db
from app.models import Heartbeat
from app.services.caller import Caller
from app.services.use_cases import tenancy
from tests.factories import make_alert, make_execution, make_job, make_user
from tests.helpers.web import WebClient

PASSWORD = "matrix-password"
MISSING = 999_999  # an id (or name) no object has

# What each web route needs: public (anyone), public_read (anyone when WEBUI_PUBLIC_READ=1),
# read (a member), operate (operator or admin), administer (admin). `metrics` is off by default.
ROUTES: dict[str, str] = {
    "static": "public",
    "dashboard.home": "public",
    "health.healthz": "public",
    "health.readyz": "public",
    "metrics.metrics_endpoint": "metrics",
    "auth.login": "public",
    "auth.logout": "public",
    "jobs.index": "public_read",
    "jobs.detail": "public_read",
    "executions.index": "public_read",
    "dashboard.index": "read",
    "dashboard.panel": "read",
    "dashboard.grid": "read",
    "health.page": "read",
    "jobs.schedule_preview": "read",
    "jobs.explain": "read",
    "executions.detail": "read",
    "queues.index": "read",
    "queues.detail": "read",
    "workers.index": "read",
    "alerts.index": "read",
    "alerts.channels": "read",
    "alerts.channel_detail": "read",
    "alerts.routing": "read",
    "audit.index": "read",
    "events.index": "operate",
    "batches.index": "read",
    "batches.detail": "read",
    "workflows.detail": "read",
    "context.switch": "read",
    "projects.index": "read",
    "settings.index": "read",
    "projects.create": "administer",
    "projects.rename": "administer",
    "projects.rename_organization": "administer",
    "projects.delete": "administer",
    "projects.delete_organization": "administer",
    "tokens.index": "read",  # a member's own API tokens
    "tasks.index": "read",  # the task catalog: the deployer's, the same for everyone signed in
    "tasks.detail": "read",
    "tokens.create": "read",
    "tokens.revoke": "read",
    "jobs.create": "operate",
    "jobs.edit": "operate",
    "jobs.delete": "operate",
    "jobs.enable": "operate",
    "jobs.disable": "operate",
    "jobs.trigger": "operate",
    "jobs.backfill": "operate",
    "jobs.submit_batch": "operate",
    "executions.retry": "operate",
    "executions.cancel": "operate",
    "alerts.resolve_one": "operate",
    "alerts.resolve_selected": "operate",
    "alerts.test_channel": "operate",
    "alerts.job_notify": "operate",
    "alerts.mute_job": "operate",
    "alerts.unmute_job": "operate",
    "bulk.jobs_bulk": "operate",
    "bulk.executions_bulk": "operate",
    "batches.cancel": "operate",
    "workflows.cancel": "operate",
    "workflows.retry": "operate",
    "queues.pause": "operate",
    "queues.resume": "operate",
    "queues.delete": "administer",
    "workers.drain": "operate",
    "workers.stop": "operate",
    "workers.reload": "operate",
    "queues.create": "administer",
    "queues.edit": "administer",
    "alerts.create_channel": "administer",
    "alerts.delete_channel": "administer",
    "alerts.channel_settings": "administer",
    "alerts.save_routing": "administer",
    "alerts.edit_channel": "administer",
    "users.index": "administer",
    "users.detail": "administer",
    "users.create": "administer",
    "users.set_role": "administer",
    "users.reset_password": "administer",
    "users.disable": "administer",
    "users.enable": "administer",
}
LEVELS = {"read": 0, "operate": 1, "administer": 2}
ROLE_LEVEL = {"viewer": 0, "operator": 1, "admin": 2}
WHO = ("anonymous", "viewer", "operator", "admin")
# Tables whose rows are the tenants' data: what a refused or cross-organization request must not touch.
TENANT_TABLES = ("organizations", "projects", "queues", "jobs", "executions", "alerts", "users", "memberships")


def web_rules(app) -> dict:
    return {rule.endpoint: rule for rule in app.url_map.iter_rules() if not rule.rule.startswith("/api/")}


def test_every_web_route_has_a_row(app):
    rules = web_rules(app)
    missing = sorted(set(rules) - set(ROUTES))
    stale = sorted(set(ROUTES) - set(rules))
    assert not missing, f"web routes without a row in ROUTES (decide what they need): {missing}"
    assert not stale, f"rows for routes that no longer exist: {stale}"
    # Every route outside the API declares what it needs (requires(Action...) or public).
    for endpoint in rules:
        if endpoint not in ("static", "metrics.metrics_endpoint"):
            assert hasattr(app.view_functions[endpoint], "required_action"), endpoint


def _org(name: str) -> dict:
    """One organization's objects, every name carrying `name` (so a leak is a plain text match)."""
    now = utcnow()
    caller = Caller.cli()
    if name == "alpha":
        org = tenancy.default_organization()
        project = tenancy.working_project(None)
        org_name = "default"
    else:
        org = tenancy.add_organization(name, now=now, caller=caller)
        project = tenancy.add_project(name, f"{name}-proj", now=now, caller=caller)
        org_name = name
    project_caller = Caller.cli(project_id=project.id)
    from app.services.use_cases import queues

    queue = queues.add_queue({"name": f"{name}-queue"}, now=now, actor="test", caller=project_caller)
    from app.services.use_cases import jobs

    job = jobs.create_job(
        {
            "name": f"{name}-job",
            "task": "always_succeed",
            "schedule_type": "interval",
            "schedule": {"every": "1h"},
            "queue": queue.name,
            "description": f"{name} description",
        },
        now=now,
        actor="test",
        caller=project_caller,
    )
    failed = make_execution(job, "failed", output=f"{name} output", error=f"{name} error")
    running = make_execution(job, "running")
    alert = make_alert(job, failed, message=f"{name} alert")
    batch_id = MISSING
    try:
        from app.services.use_cases import batches

        batch_id = batches.submit_batch(job.id, {"items": [{}]}, now=now, actor="test").id
    except Exception:  # noqa: BLE001 - batches may refuse this job's task; the route is still covered
        db.session.rollback()
    flow = jobs.create_job(
        {
            "name": f"{name}-flow",
            "task": "always_succeed",
            "schedule_type": "interval",
            "schedule": {"every": "1h"},
            "queue": queue.name,
            "steps": [{"name": "a", "task": "always_succeed"}],
        },
        now=now,
        actor="test",
        caller=project_caller,
    )
    from app.services.use_cases import runs

    workflow_run = runs.trigger_run(flow.id, {}, now=now, actor="test")
    members = {
        role: make_user(f"{name}-{role}", PASSWORD, role=role, organization=org_name)
        for role in ("viewer", "operator", "admin")
    }
    target = make_user(f"{name}-target", PASSWORD, role="viewer", organization=org_name)
    return {
        "org_id": org.id,
        "project_id": project.id,
        "members": members,
        "args": {
            "job_id": job.id,
            "project_id": project.id,
            "execution_id": failed.id,
            "alert_id": alert.id,
            "queue_name": queue.name,
            "batch_id": batch_id,
            "run_id": workflow_run.id,
            "user_id": target.id,
            "channel_id": MISSING,
            "token_id": MISSING,
        },
        "running_id": running.id,
        "ids": {"job": job.id, "execution": failed.id, "running": running.id, "alert": alert.id, "user": target.id},
    }


@pytest.fixture
def tenants(app) -> dict:
    app.config["LOGIN_RATE_LIMIT_ATTEMPTS"] = 100_000
    app.config["RATELIMIT_ENABLED"] = False
    a, b = _org("alpha"), _org("bravo")
    # One worker of the site runs one execution of each organization.
    now = utcnow()
    db.session.add(
        Heartbeat(
            id="worker-shared",
            kind="worker",
            host="host-a",
            pid=4242,
            started_at=now - timedelta(hours=1),
            last_seen=now,
            info={
                "state": "running",
                "slots": 4,
                "busy": 2,
                "queues": ["*"],
                "executions": [
                    {"id": a["running_id"], "job_id": a["ids"]["job"], "job_name": "alpha-job", "attempt": 1},
                    {"id": b["running_id"], "job_id": b["ids"]["job"], "job_name": "bravo-job", "attempt": 1},
                ],
            },
        )
    )
    db.session.commit()
    return {"a": a, "b": b}


def sample_args(world: dict) -> dict:
    return {
        **world["args"],
        "name": "summary",
        "worker_id": "worker-shared",
        "task_name": "echo",
        "filename": "vendor/htmx.min.js",
    }


def missing_args(world: dict) -> dict:
    args = {key: MISSING for key in world["args"]}
    return {**sample_args(world), **args, "queue_name": "no-such-queue"}


def build(rule, args: dict) -> str:
    return rule.build({name: args[name] for name in rule.arguments})[1]


def client_for(app, who: str, world: dict) -> WebClient:
    client = WebClient(app)
    if who != "anonymous":
        response = client.login(world["members"][who].username, PASSWORD)
        assert response.status_code == 302, response.get_data(as_text=True)
    return client


def call(client: WebClient, method: str, url: str):
    return client.get(url) if method == "GET" else client.post(url, {})


def methods_of(rule) -> list[str]:
    return sorted(set(rule.methods) & {"GET", "POST"})


def signs_in(response) -> bool:
    return response.status_code in (302, 303) and urlsplit(response.headers["Location"]).path == "/auth/login"


def expectation(level: str, who: str, method: str) -> str:
    """`through` (the view ran: a page, a redirect after the action, an inline refusal or 404),
    `sign-in`, `forbidden` or `absent`."""
    if level == "metrics":
        return "absent"
    if level == "public" or (level == "public_read" and method == "GET" and who == "anonymous"):
        return "through"
    if who == "anonymous":
        return "sign-in"
    needed = 0 if level == "public_read" else LEVELS[level]
    return "through" if ROLE_LEVEL[who] >= needed else "forbidden"


def outcome(response) -> str:
    if signs_in(response):
        return "sign-in"
    if response.status_code == 403:
        return "forbidden"
    if response.status_code == 404:
        return "absent"
    assert response.status_code < 500, response.status_code
    return "through"


def fingerprint(tables=TENANT_TABLES) -> dict:
    """Every row of the tenant tables, to prove a refused request changed nothing."""
    db.session.rollback()
    found = {}
    for table in tables:
        rows = db.session.execute(text(f"SELECT * FROM {table} ORDER BY id")).all()  # noqa: S608 - fixed names
        found[table] = [tuple(str(value) for value in row) for row in rows]
    return found


def leaks(body: str, other: dict) -> list[str]:
    """Names and links of the other organization's objects found in `body`."""
    found = [word for word in ("bravo",) if word in body.lower()]
    patterns = {
        "job": r"/jobs/{}(?![0-9])",
        "execution": r"/executions/{}(?![0-9])",
        "running": r"/executions/{}(?![0-9])",
        "alert": r"(?:alert_ids\" value=\"|/alerts/){}(?![0-9])",
        "user": r"/users/{}(?![0-9])",
    }
    for kind, pattern in patterns.items():
        if re.search(pattern.format(other["ids"][kind]), body):
            found.append(f"{kind} {other['ids'][kind]}")
    return found


# Routes that end the session or whose POST signs in: run last so the client stays signed in.
_LAST = ("auth.login", "auth.logout")


def ordered(rules: dict) -> list[str]:
    return sorted(rules, key=lambda endpoint: (endpoint in _LAST, endpoint))


@pytest.mark.parametrize("who", WHO)
def test_every_route_for_each_role_of_one_organization(app, tenants, who):
    a, b = tenants["a"], tenants["b"]
    rules = web_rules(app)
    client = client_for(app, who, a)
    b_rows = {table: rows for table, rows in fingerprint().items()}
    mismatches, leaked = [], []
    for endpoint in ordered(rules):
        rule = rules[endpoint]
        for method in methods_of(rule):
            url = build(rule, sample_args(a))
            response = call(client, method, url)
            got, want = outcome(response), expectation(ROUTES[endpoint], who, method)
            # A route whose object this test does not make (MISSING) answers 404 where it lets one through.
            unmade = any(sample_args(a)[name] == MISSING for name in rule.arguments)
            if got != want and not (want == "through" and got == "absent" and unmade):
                mismatches.append(f"{method} {url} as {who}: got {got} ({response.status_code}), expected {want}")
            if who != "anonymous" and response.status_code == 200:
                found = leaks(response.get_data(as_text=True), b)
                if found:
                    leaked.append(f"{method} {url} as {who} shows organization B: {found}")
    assert not mismatches, "\n".join(mismatches)
    assert not leaked, "\n".join(leaked)
    after = fingerprint()
    for table in ("organizations", "projects"):
        assert after[table] == b_rows[table], table


@pytest.mark.parametrize("who", WHO)
def test_another_organizations_object_answers_like_a_missing_one(app, tenants, who):
    a, b = tenants["a"], tenants["b"]
    rules = web_rules(app)
    client = client_for(app, who, a)
    with_objects = [e for e in ordered(rules) if set(rules[e].arguments) & set(b["args"]) and e not in _LAST]
    assert {"jobs.detail", "executions.detail", "queues.detail", "users.detail", "alerts.resolve_one"} <= set(
        with_objects
    )
    before = fingerprint()
    differences = []
    for endpoint in with_objects:
        rule = rules[endpoint]
        for method in methods_of(rule):
            foreign = call(client, method, build(rule, sample_args(b)))
            missing = call(client, method, build(rule, missing_args(a)))
            if (outcome(foreign), foreign.status_code) != (outcome(missing), missing.status_code):
                differences.append(
                    f"{method} {rule.rule} as {who}: B's object -> {foreign.status_code}, a missing one -> "
                    f"{missing.status_code}"
                )
            if foreign.status_code == 200 and "bravo" in foreign.get_data(as_text=True).lower():
                differences.append(f"{method} {rule.rule} as {who}: B's object shown")
    assert not differences, "\n".join(differences)
    assert fingerprint() == before, "a request of organization A changed rows"


def test_a_viewers_forged_posts_are_refused_and_change_nothing(app, tenants):
    a = tenants["a"]
    rules = web_rules(app)
    viewer = client_for(app, "viewer", a)
    before = fingerprint()
    refused = []
    for endpoint in ordered(rules):
        rule = rules[endpoint]
        if "POST" not in rule.methods or ROUTES[endpoint] not in ("operate", "administer"):
            continue
        # A forged form: the fields a real one would send, with this session's CSRF token.
        form = {"confirm_name": "alpha-job", "name": "forged", "priority": "1", "role": "admin", "reason": "x"}
        response = viewer.post(build(rule, sample_args(a)), form)
        if response.status_code != 403:
            refused.append(f"POST {rule.rule}: {response.status_code}")
    assert not refused, "viewer POSTs that were not refused:\n" + "\n".join(refused)
    assert fingerprint() == before


def test_pages_show_no_mutating_buttons_to_a_viewer(app, tenants):
    a = tenants["a"]
    viewer = client_for(app, "viewer", a)
    args = sample_args(a)
    pages = {
        "/jobs/": ["/jobs/new"],
        f"/jobs/{args['job_id']}": ["/trigger", "/disable", "/enable", "/delete", "/edit"],
        f"/executions/{args['execution_id']}": ["/retry", "/cancel"],
        "/queues/": ['action="/queues/new"'],
        f"/queues/{args['queue_name']}": ["/pause", "/resume", "/edit"],
        "/alerts/": ["Resolve selected", "Resolve #"],
        "/dashboard/": ["/jobs/new", "Resolve"],
    }
    for url, forbidden in pages.items():
        body = viewer.get(url).get_data(as_text=True)
        assert viewer.get(url).status_code == 200, url
        shown = [marker for marker in forbidden if marker in body]
        assert not shown, f"{url} shows {shown} to a viewer"
    admin = client_for(app, "admin", a)
    assert "/users/" in admin.get("/dashboard/").get_data(as_text=True)
    assert "/users/" not in viewer.get("/dashboard/").get_data(as_text=True)


def test_the_switcher_offers_only_the_users_organizations_and_narrows_the_pages(app, tenants):
    a, b = tenants["a"], tenants["b"]
    # A member of both organizations sees both in the switcher and one at a time in the pages.
    db.session.rollback()
    both = make_user("both-orgs", PASSWORD, role="operator")
    from app.models import Membership

    both.memberships.append(Membership(organization_id=b["org_id"], role="viewer", created_at=utcnow()))
    db.session.commit()
    client = WebClient(app)
    assert client.login("both-orgs", PASSWORD).status_code == 302
    jobs_page = client.get("/jobs/").get_data(as_text=True)
    assert "alpha-job" in jobs_page and "bravo-job" not in jobs_page
    assert f'value="{b["org_id"]}"' in jobs_page  # offered in the switcher
    assert client.post("/context", {"organization_id": str(b["org_id"]), "next": "/jobs/"}).status_code == 303
    jobs_page = client.get("/jobs/").get_data(as_text=True)
    assert "bravo-job" in jobs_page and "alpha-job" not in jobs_page
    # A viewer there: B's job may be read but not triggered.
    assert client.post(f"/jobs/{b['ids']['job']}/trigger").status_code == 403
    # An organization the user does not belong to cannot be chosen: the choice is ignored.
    outsider = client_for(app, "viewer", a)
    outsider.post("/context", {"organization_id": str(b["org_id"])})
    assert "bravo-job" not in outsider.get("/jobs/").get_data(as_text=True)
    assert outsider.get(f"/jobs/{b['ids']['job']}").status_code == 404
    # A superuser sees every organization until narrowed.
    db.session.rollback()
    make_user("root", PASSWORD, role=None, superuser=True)
    root = WebClient(app)
    assert root.login("root", PASSWORD).status_code == 302
    everything = root.get("/jobs/").get_data(as_text=True)
    assert "alpha-job" in everything and "bravo-job" in everything
    root.post("/context", {"organization_id": str(a["org_id"])})
    assert "bravo-job" not in root.get("/jobs/").get_data(as_text=True)


def test_projects_page_lists_the_organizations_projects_and_admins_add_one(app, tenants):
    admin = client_for(app, "admin", tenants["a"])
    page = admin.get("/projects/").get_data(as_text=True)
    assert "default/default" in page and "bravo" not in page
    assert admin.post("/projects/new", {"name": "reports", "description": "monthly"}).status_code == 303
    assert "default/reports" in admin.get("/projects/").get_data(as_text=True)
    refused = admin.post("/projects/new", {"name": "Bad Name"})
    assert refused.status_code == 400 and "lower-case letters" in refused.get_data(as_text=True)
    duplicate = admin.post("/projects/new", {"name": "reports"})
    assert duplicate.status_code == 400 and "already exists" in duplicate.get_data(as_text=True)
    viewer = client_for(app, "viewer", tenants["a"])
    assert 'action="/projects/new"' not in viewer.get("/projects/").get_data(as_text=True)
    assert viewer.post("/projects/new", {"name": "sneaky"}).status_code == 403
    db.session.rollback()
    names = [p.name for p in tenancy.list_projects(Caller.cli())]
    assert "sneaky" not in names and "reports" in names


def test_admin_manages_only_their_organizations_users(app, tenants):
    a, b = tenants["a"], tenants["b"]
    admin = client_for(app, "admin", a)
    listed = admin.get("/users/").get_data(as_text=True)
    assert "alpha-viewer" in listed and "bravo" not in listed
    response = admin.post("/users/new", {"username": "newcomer", "password": "long enough", "role": "operator"})
    assert response.status_code == 303
    from app.models import User

    db.session.rollback()
    newcomer = db.session.scalar(select(User).where(User.username == "newcomer"))
    assert [(m.organization_id, m.role) for m in newcomer.memberships] == [(a["org_id"], "operator")]
    short = admin.post("/users/new", {"username": "short", "password": "x", "role": "viewer"})
    assert short.status_code == 400 and "at least 8 characters" in short.get_data(as_text=True)
    target = a["args"]["user_id"]
    assert admin.post(f"/users/{target}/role", {"role": "operator"}).status_code == 303
    assert admin.post(f"/users/{target}/disable").status_code == 303
    db.session.rollback()
    changed = db.session.get(User, target)
    assert changed.role_in(a["org_id"]) == "operator" and not changed.active
    # B's users are missing to A's admin.
    assert admin.get(f"/users/{b['args']['user_id']}").status_code == 404
    assert admin.post(f"/users/{b['args']['user_id']}/disable").status_code == 404
    db.session.rollback()
    assert db.session.get(User, b["args"]["user_id"]).active


def test_dashboard_figures_are_the_organizations_and_fresh_after_a_change(app, tenants):
    a, b = tenants["a"], tenants["b"]
    admin_a, admin_b = client_for(app, "admin", a), client_for(app, "admin", b)

    def jobs_tile(client) -> str:
        body = client.get("/dashboard/panels/summary", htmx=True).get_data(as_text=True)
        return re.search(r"Jobs enabled</dt><dd>(\d+) <span class=\"muted small\">/ (\d+)", body).groups()

    assert jobs_tile(admin_a) == ("2", "2") and jobs_tile(admin_b) == ("2", "2")  # each its own job and workflow
    make_job("alpha-second")  # the default project: organization A's; invalidates the summary
    assert jobs_tile(admin_a) == ("3", "3")  # not the cached "2": every scope's copy went stale
    assert jobs_tile(admin_b) == ("2", "2")
