"""The security matrix: every route of `app.url_map` x anonymous / signed-in (operator) / viewer x
GET / POST, asserted against the table below (the rules of `app/web/access.py`). A route without a row fails the
test, so whoever adds a route must decide who may use it.

Also here: CSRF on every POST (forms and HTMX, WTF_CSRF_ENABLED as in production), session
rotation on sign-in, open-redirect attempts on `next=`, login rate limiting shared by two real
gunicorn worker processes through Redis, no secret in logs or error pages, and no traceback on
a page with DEBUG off.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import uuid
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from sqlalchemy import text

from app import create_app
from app.extensions import db
from tests.factories import make_alert, make_execution, make_heartbeat, make_job, make_user
from tests.helpers.servers import REDIS_URL
from tests.helpers.web import WebClient

# Outcomes, as the response classifies them.
OK = "200 page"
SIGN_IN = "redirect to sign-in"
DONE = "redirect (action taken or refused with a message)"
INVALID = "400 form shown again with errors"
FORBIDDEN = "403"
NOT_FOUND = "404"
NOT_ALLOWED = "405"


@dataclass(frozen=True)
class Row:
    """Who gets what on one endpoint. `public`: anonymous GET needs sign-in when WEBUI_PUBLIC_READ=0.
    `operator`: a viewer (signed in, no operator role) gets 403 wherever an operator gets through."""

    methods: frozenset[str]
    anon_get: str
    user_get: str
    anon_post: str
    user_post: str
    public: bool = False
    operator: bool = False
    admin: bool = False  # an operator (and a viewer) gets 403 wherever an admin gets through


def row(
    methods: str, anon_get: str, user_get: str, anon_post: str = NOT_ALLOWED, user_post: str = NOT_ALLOWED, **flags
) -> Row:
    return Row(frozenset(methods.split(",")), anon_get, user_get, anon_post, user_post, **flags)


ACTION = dict(anon_get=NOT_ALLOWED, user_get=NOT_ALLOWED, anon_post=SIGN_IN, user_post=DONE, operator=True)

MATRIX: dict[str, Row] = {
    # public pages and probes
    "dashboard.home": row("GET", OK, OK),
    "health.healthz": row("GET", OK, OK),
    "health.readyz": row("GET", OK, OK),
    "static": row("GET", OK, OK),
    "metrics.metrics_endpoint": row("GET", NOT_FOUND, NOT_FOUND),  # METRICS_ENABLED=0 (default): no such page
    # sign in / out
    "auth.login": row("GET,POST", OK, DONE, anon_post=INVALID, user_post=DONE),
    "auth.logout": row("POST", NOT_ALLOWED, NOT_ALLOWED, anon_post=DONE, user_post=DONE),
    # public reads (unless WEBUI_PUBLIC_READ=0)
    "jobs.index": row("GET", OK, OK, public=True),
    "jobs.detail": row("GET", OK, OK, public=True),
    "executions.index": row("GET", OK, OK, public=True),
    # signed-in reads
    "dashboard.index": row("GET", SIGN_IN, OK),
    "dashboard.panel": row("GET", SIGN_IN, OK),
    "dashboard.grid": row("GET", SIGN_IN, OK),
    "health.page": row("GET", SIGN_IN, OK),
    "alerts.index": row("GET", SIGN_IN, OK),
    "audit.index": row("GET", SIGN_IN, OK),
    "events.index": row("GET", SIGN_IN, OK, operator=True),
    "queues.index": row("GET", SIGN_IN, OK),
    "queues.detail": row("GET", SIGN_IN, OK),
    "workers.index": row("GET", SIGN_IN, OK),
    "tasks.index": row("GET", SIGN_IN, OK),
    "tasks.detail": row("GET", SIGN_IN, OK),
    "executions.detail": row("GET", SIGN_IN, OK),
    "batches.index": row("GET", SIGN_IN, OK),
    "batches.detail": row("GET", SIGN_IN, OK),
    "workflows.detail": row("GET", SIGN_IN, OK),
    "jobs.schedule_preview": row("GET", SIGN_IN, OK),
    "jobs.explain": row("GET", SIGN_IN, OK),
    "alerts.channels": row("GET", SIGN_IN, OK),
    "alerts.channel_detail": row("GET", SIGN_IN, OK),
    "alerts.routing": row("GET", SIGN_IN, OK),
    # operator pages with forms (an empty POST is refused inline)
    "jobs.create": row("GET,POST", SIGN_IN, OK, SIGN_IN, INVALID, operator=True),
    "jobs.edit": row("GET,POST", SIGN_IN, OK, SIGN_IN, INVALID, operator=True),
    "jobs.delete": row("GET,POST", SIGN_IN, OK, SIGN_IN, INVALID, operator=True),
    "jobs.submit_batch": row("POST", NOT_ALLOWED, NOT_ALLOWED, SIGN_IN, INVALID, operator=True),
    "jobs.backfill": row("GET,POST", SIGN_IN, OK, SIGN_IN, INVALID, operator=True),
    "alerts.create_channel": row("GET,POST", SIGN_IN, OK, SIGN_IN, INVALID, operator=True, admin=True),
    "alerts.edit_channel": row("GET,POST", SIGN_IN, OK, SIGN_IN, INVALID, operator=True, admin=True),
    "queues.create": row("GET,POST", SIGN_IN, OK, SIGN_IN, INVALID, operator=True, admin=True),
    "queues.edit": row("GET,POST", SIGN_IN, OK, SIGN_IN, INVALID, operator=True, admin=True),
    # operator actions (POST only)
    "jobs.enable": row("POST", **ACTION),
    "jobs.disable": row("POST", **ACTION),
    "jobs.trigger": row("POST", **ACTION),
    "batches.cancel": row("POST", **ACTION),
    "workflows.cancel": row("POST", **ACTION),
    "workflows.retry": row("POST", **ACTION),
    "executions.retry": row("POST", **ACTION),
    "executions.cancel": row("POST", **ACTION),
    "alerts.resolve_one": row("POST", **ACTION),
    "alerts.resolve_selected": row("POST", **ACTION),
    "alerts.mute_job": row("POST", **ACTION),
    "alerts.unmute_job": row("POST", **ACTION),
    "bulk.executions_bulk": row("POST", **ACTION),
    "bulk.jobs_bulk": row("POST", **ACTION),
    "alerts.test_channel": row("POST", **ACTION),
    "alerts.delete_channel": row("POST", **{**ACTION, "admin": True}),
    "alerts.channel_settings": row("POST", **{**ACTION, "admin": True}),
    "alerts.job_notify": row("POST", **ACTION),
    "alerts.save_routing": row("POST", **{**ACTION, "admin": True}),
    "queues.pause": row("POST", **ACTION),
    "queues.resume": row("POST", **ACTION),
    "queues.delete": row("POST", **{**ACTION, "admin": True}),
    "workers.drain": row("POST", **ACTION),
    "workers.stop": row("POST", **ACTION),
    "workers.reload": row("POST", **ACTION),
    # user management: admins only (an empty form is refused inline)
    # API tokens: a member's own (another user's token is 404, like a missing one)
    "tokens.index": row("GET", SIGN_IN, OK, anon_post=SIGN_IN, user_post=INVALID),
    "tokens.create": row("POST", SIGN_IN, OK, SIGN_IN, INVALID),
    "tokens.revoke": row("POST", NOT_ALLOWED, NOT_ALLOWED, SIGN_IN, NOT_FOUND),
    "users.index": row("GET", SIGN_IN, OK, operator=True, admin=True),
    "users.detail": row("GET", SIGN_IN, OK, operator=True, admin=True),
    "users.create": row("POST", NOT_ALLOWED, NOT_ALLOWED, SIGN_IN, INVALID, operator=True, admin=True),
    "users.set_role": row("POST", NOT_ALLOWED, NOT_ALLOWED, SIGN_IN, INVALID, operator=True, admin=True),
    "users.reset_password": row("POST", NOT_ALLOWED, NOT_ALLOWED, SIGN_IN, INVALID, operator=True, admin=True),
    "users.disable": row("POST", **{**ACTION, "admin": True}),
    "users.enable": row("POST", **{**ACTION, "admin": True}),
    # the header's organization / project switcher: any signed-in member
    "context.switch": row("POST", NOT_ALLOWED, NOT_ALLOWED, SIGN_IN, DONE),
    "projects.index": row("GET", SIGN_IN, OK),
    "settings.index": row("GET,POST", SIGN_IN, OK, SIGN_IN, INVALID),
    "projects.create": row("POST", NOT_ALLOWED, NOT_ALLOWED, SIGN_IN, INVALID, operator=True, admin=True),
    "projects.rename": row("POST", NOT_ALLOWED, NOT_ALLOWED, SIGN_IN, INVALID, operator=True, admin=True),
    "projects.rename_organization": row("POST", NOT_ALLOWED, NOT_ALLOWED, SIGN_IN, INVALID, operator=True, admin=True),
    "projects.delete": row("GET,POST", SIGN_IN, OK, SIGN_IN, DONE, operator=True, admin=True),
    "projects.delete_organization": row("GET,POST", SIGN_IN, OK, SIGN_IN, DONE, operator=True, admin=True),
}


@pytest.fixture
def world(app) -> dict:
    """One of everything a URL can point at, and the two kinds of signed-in user."""
    app.config["LOGIN_RATE_LIMIT_ATTEMPTS"] = 10_000  # the matrix signs in over a hundred times
    job = make_job("matrix-job")
    execution = make_execution(job, "failed", output="matrix output", error="matrix error")
    alert = make_alert(job, execution)
    make_user("matrix-operator", role="operator")
    from app.clock import utcnow
    from app.services.use_cases import batches

    batch = batches.submit_batch(job.id, {"items": "[{}]"}, now=utcnow(), actor="test")
    from app.services.use_cases import runs

    flow = make_job("matrix-flow", steps=[{"name": "a", "task": "always_succeed"}])
    workflow_run = runs.trigger_run(flow.id, {}, now=utcnow(), actor="test")
    viewer = make_user("matrix-viewer", role="viewer")
    from app.services.use_cases import alert_channels

    channel = alert_channels.add_channel(
        {"name": "matrix", "kind": "email", "target": "ops@example.com"}, now=utcnow(), actor="test"
    )
    return {
        "user_id": viewer.id,
        "job_id": job.id,
        "project_id": job.project_id,
        "execution_id": execution.id,
        "batch_id": batch.id,
        "run_id": workflow_run.id,
        "alert_id": alert.id,
        "channel_id": channel.id,
        "name": "summary",
        "task_name": "echo",
        "queue_name": job.queue,
        "worker_id": make_heartbeat("worker-matrix-1", "worker", age_seconds=0).id,
        "token_id": _token_of_another_user(),
        "filename": "vendor/htmx.min.js",
    }


def _token_of_another_user() -> int:
    from app.clock import utcnow
    from app.services.caller import Caller
    from app.services.use_cases import tokens

    owner = make_user("matrix-token-owner", role="admin")
    return tokens.create_token(
        Caller.cli(), name="matrix", project=None, role="viewer", user_id=owner.id, now=utcnow()
    ).token.id


def url_for_rule(rule, world: dict) -> str:
    """A real URL for the rule, with the sample values of `world` for its arguments."""
    return rule.build({argument: world[argument] for argument in rule.arguments})[1]


def classify(response) -> str:
    status = response.status_code
    if status in (301, 302, 303):
        return SIGN_IN if urlsplit(response.headers["Location"]).path == "/auth/login" else DONE
    return {200: OK, 400: INVALID, 403: FORBIDDEN, 404: NOT_FOUND, 405: NOT_ALLOWED}.get(status, str(status))


def client_as(app, who: str) -> WebClient:
    client = WebClient(app)
    if who != "anonymous":
        assert client.login(f"matrix-{who}").status_code == 302
    return client


def rules_by_endpoint(app) -> dict:
    """Every web route; the REST API (/api/, bearer credentials) has its own matrix in tests/api/."""
    return {rule.endpoint: rule for rule in app.url_map.iter_rules() if not rule.rule.startswith("/api/")}


def test_every_route_has_a_row_with_its_methods(app):
    rules = rules_by_endpoint(app)
    missing = sorted(set(rules) - set(MATRIX))
    stale = sorted(set(MATRIX) - set(rules))
    assert not missing, f"routes without a row in MATRIX (decide who may use them): {missing}"
    assert not stale, f"rows for routes that no longer exist: {stale}"
    for endpoint, rule in rules.items():
        assert set(rule.methods) - {"HEAD", "OPTIONS"} == MATRIX[endpoint].methods, endpoint


def expected(entry: Row, who: str, method: str, public_read: bool) -> str:
    if who == "anonymous":
        outcome = entry.anon_get if method == "GET" else entry.anon_post
        if entry.public and method == "GET" and not public_read:
            return SIGN_IN
        return outcome
    outcome = entry.user_get if method == "GET" else entry.user_post
    if who == "viewer" and entry.operator and outcome in (OK, DONE, INVALID):
        return FORBIDDEN
    if who == "operator" and entry.admin and outcome in (OK, DONE, INVALID):
        return FORBIDDEN
    return outcome


@pytest.mark.parametrize("public_read", [True, False], ids=["public-read", "no-public-read"])
def test_every_route_for_every_kind_of_visitor(app, world, public_read):
    app.config["WEBUI_PUBLIC_READ"] = public_read
    rules = rules_by_endpoint(app)
    mismatches = []
    for endpoint, entry in sorted(MATRIX.items()):
        url = url_for_rule(rules[endpoint], world)
        for who in ("anonymous", "operator", "viewer"):
            client = client_as(app, who)  # fresh per endpoint: sign-out must not leak into the next row
            for method in ("GET", "POST"):
                response = client.get(url) if method == "GET" else client.post(url, {})
                got, want = classify(response), expected(entry, who, method, public_read)
                if got != want:
                    mismatches.append(f"{method} {url} as {who}: got {got}, table says {want}")
    assert not mismatches, "\n".join(mismatches)


# --- CSRF ----------------------------------------------------------------------------------------


def post_routes(app, world) -> list[str]:
    # The REST API takes bearer credentials in a header, never cookies: no CSRF token (tests/api/).
    return sorted(
        url_for_rule(rule, world)
        for rule in app.url_map.iter_rules()
        if "POST" in rule.methods and not rule.rule.startswith("/api/")
    )


@pytest.mark.parametrize("who", ["anonymous", "operator"])
def test_every_post_needs_the_csrf_token_forms_and_htmx(app, world, who):
    client = client_as(app, who)
    other = WebClient(app)
    foreign_token = other.csrf_token()  # valid, but for another session
    for url in post_routes(app, world):
        cases = {
            "no token": client.post(url, {}, csrf=False),
            "HTMX without header": client.post(url, {}, csrf=False, htmx=True),
            "foreign token": client.request("POST", url, data={"csrf_token": foreign_token}),
            "foreign HTMX header": client.request(
                "POST", url, headers={"HX-Request": "true", "X-CSRFToken": foreign_token}
            ),
            "garbage token": client.request("POST", url, data={"csrf_token": "x" * 40}),
        }
        for case, response in cases.items():
            assert response.status_code == 400, f"POST {url} as {who}, {case}: {response.status_code}"
            assert "security token" in response.get_data(as_text=True), (url, case)
    # The HTMX header carrying this session's token is accepted (the request reaches the view).
    response = client.post(f"/jobs/{world['job_id']}/trigger", {}, htmx=True)
    assert response.status_code != 400


# --- sign-in: session rotation and open redirects -----------------------------------------------


def test_sign_in_rotates_the_session_and_a_planted_cookie_stays_anonymous(app, world):
    client = WebClient(app)
    client.get("/")
    cookie_name = app.config["SESSION_COOKIE_NAME"]
    before = client.client.get_cookie(cookie_name).value
    assert client.login("matrix-operator").status_code == 302
    after = client.client.get_cookie(cookie_name).value
    assert after != before
    # An attacker who planted (or kept) the pre-sign-in cookie gets nothing from it.
    attacker = WebClient(app)
    attacker.client.set_cookie(cookie_name, before)
    assert classify(attacker.get("/dashboard/")) == SIGN_IN
    # Signing out ends the session: the signed-in cookie is dead afterwards too.
    assert client.post("/auth/logout", {}).status_code == 302
    assert classify(client.get("/dashboard/")) == SIGN_IN


OFF_SITE = [
    "https://evil.example/",
    "//evil.example/",
    "///evil.example/",
    "/\\evil.example",
    "\\/evil.example",
    "\\\\evil.example",
    "javascript:alert(1)",
    "data:text/html,<script>alert(1)</script>",
    "http:/evil.example",
    "https:evil.example",
    "/\t/evil.example",
    "/\n/evil.example",
    " //evil.example",
    "\x00//evil.example",
    "//evil.example@localhost/",
    "//localhost@evil.example/",
    "http://localhost@evil.example/",
    "%2F%2Fevil.example",
    "/%5Cevil.example",
    "//%65vil.example",
    "〱evil.example",
    "/ /evil.example",
    "//" + "a" * 3000,
]


def assert_same_site(location: str) -> None:
    parts = urlsplit(location)
    assert parts.scheme in ("", "http") and parts.netloc in ("", "localhost"), location
    assert parts.path.startswith("/") and not parts.path.startswith("//") and "\\" not in location, location


@pytest.mark.parametrize("target", OFF_SITE)
def test_next_never_leads_off_site(app, world, target):
    client = WebClient(app)
    response = client.login("matrix-operator", next_url=target)
    assert response.status_code == 302
    assert_same_site(response.headers["Location"])
    # Already signed in, GET /auth/login?next=... redirects at once: same rule.
    again = client.request("GET", "/auth/login", query_string={"next": target})
    assert again.status_code == 302
    assert_same_site(again.headers["Location"])


def test_the_next_built_for_an_anonymous_htmx_request_stays_on_site(app, world):
    response = WebClient(app).get(
        "/dashboard/panels/summary", htmx=True, headers={"HX-Current-URL": "https://evil.example//evil.example/x"}
    )
    assert response.status_code == 401
    body = response.get_data(as_text=True)
    assert "evil.example" not in body


# --- DEBUG off: no traceback, no secret on an error page -----------------------------------------

SECRET_KEY = "matrix-secret-key-" + "s" * 40


def test_debug_off_error_pages_show_no_traceback_or_secret(app_env, capfd, monkeypatch):
    monkeypatch.setenv("SECRET_KEY", SECRET_KEY)  # as in production: the log redaction reads the environment
    application = create_app(env={**app_env, "DEBUG": "0", "SECRET_KEY": SECRET_KEY, "LOG_FORMAT": "json"})

    def boom():
        raise RuntimeError(f"exploded while holding {SECRET_KEY}")

    application.add_url_rule("/boom-for-the-test", "boom", boom)
    client = application.test_client()
    response = client.get("/boom-for-the-test")
    body = response.get_data(as_text=True)
    assert response.status_code == 500
    assert "Traceback" not in body and "RuntimeError" not in body and SECRET_KEY not in body
    for path in ("/no-such-page", "/jobs/999999", "/auth/logout"):
        page = client.get(path).get_data(as_text=True)
        assert "Traceback" not in page and SECRET_KEY not in page
    captured = capfd.readouterr()
    # Cronwell's own handler writes JSON lines (pytest's capture handlers add text lines of their own).
    logged = "\n".join(line for line in (captured.err + captured.out).splitlines() if line.startswith("{"))
    assert "RuntimeError" in logged  # the error is logged for the operator...
    assert SECRET_KEY not in logged  # ...with the secret masked


# --- two gunicorn workers sharing Redis ----------------------------------------------------------

SECRETS = {
    "SECRET_KEY": SECRET_KEY,
    "SCHEDULER_CLI_SECRET": "matrix-cli-secret-value",
    "METRICS_TOKEN": "matrix-metrics-token-value",
    "DEV_ADMIN_PASSWORD": "matrix dev admin password",
}
LIMIT = 5
PASSWORD = "matrix-user-password-1"


@pytest.fixture
def gunicorn(app_env, backend, tmp_path):
    """gunicorn -w 2 on a free port, on the test's database, sharing the local Redis."""
    from tests.helpers.processes import PROJECT_ROOT, descendants_of, wait_for
    from tests.helpers.scenario import http_get
    from tests.helpers.servers import free_port, require_redis

    if backend != "sqlite":
        pytest.skip("one backend is enough for the process test")
    require_redis()
    port = free_port()
    env = {key: value for key, value in os.environ.items() if not key.startswith(("FLASK_", "PYTEST_", "PROMETHEUS_"))}
    env.update(app_env)
    env.update(SECRETS)
    prefix = f"cronwell-matrix-{uuid.uuid4().hex}:"
    env.update(
        {
            "DEBUG": "0",
            "LOG_FORMAT": "json",
            "LOG_LEVEL": "INFO",
            "REDIS_URL": REDIS_URL,
            "CACHE_KEY_PREFIX": prefix,
            "GUNICORN_BIND": f"127.0.0.1:{port}",
            "GUNICORN_WORKERS": "2",
            "GUNICORN_THREADS": "2",
            "LOGIN_RATE_LIMIT_ATTEMPTS": str(LIMIT),
            "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "prometheus"),
            "PYTHONUNBUFFERED": "1",
        }
    )
    log_path = tmp_path / "gunicorn.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "--config", "gunicorn.conf.py", "wsgi:app"],
            cwd=PROJECT_ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(
            lambda: process.poll() is None and http_get(f"{base}/healthz")[0] == 200,
            within=60,
            interval=0.2,
            what=lambda: f"gunicorn to answer\n{log_path.read_text(errors='replace')[-3000:]}",
        )
        wait_for(lambda: len(descendants_of(process.pid)) >= 2, within=30, what="two gunicorn workers")

        def both_workers_answer() -> bool:
            probes = [threading.Thread(target=http_get, args=(f"{base}/healthz",)) for _ in range(6)]
            for probe in probes:
                probe.start()
            for probe in probes:
                probe.join(10)
            return len(answering_pids(log_path, "/healthz")) >= 2

        wait_for(both_workers_answer, within=60, interval=0.2, what="both gunicorn workers to answer requests")
        yield base, log_path, process, prefix
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)


def answering_pids(log_path: Path, path: str, method: str = "GET") -> set[int]:
    """Which worker processes answered `method path`, from gunicorn's JSON access log."""
    pids = set()
    for line in log_path.read_text(errors="replace").splitlines():
        if line.startswith("{"):
            record = json.loads(line)
            if record.get("event") == "http_request" and record.get("path") == path and record.get("method") == method:
                pids.add(record["pid"])
    return pids


def test_login_rate_limit_holds_across_two_gunicorn_workers(app, gunicorn):
    import redis

    from app.web.ratelimit import login_keys
    from tests.helpers.http import Browser

    base, log_path, process, prefix = gunicorn
    make_user("limited", password=PASSWORD, role="operator")
    statuses: list[int] = []
    lock = threading.Lock()

    def guess(n: int) -> None:
        answer = Browser(base).sign_in("limited", f"wrong-guess-{n}")
        with lock:
            statuses.append(answer.status)

    # Concurrent connections, so both worker processes take sign-in attempts.
    threads = [threading.Thread(target=guess, args=(n,)) for n in range(4 * LIMIT)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    checked, refused = statuses.count(400), statuses.count(429)
    login_pids = answering_pids(log_path, "/auth/login", "POST")
    print(
        f"\n[rate limit] {len(statuses)} concurrent wrong guesses: {checked} checked, {refused} refused; "
        f"answered by worker pids {sorted(login_pids)}"
    )
    assert len(statuses) == 4 * LIMIT and sorted(set(statuses)) == [400, 429], statuses
    assert len(login_pids) >= 2, "only one gunicorn worker took sign-in attempts; the test proved nothing"
    # One counter for both processes: every attempt, whichever worker took it, counted in Redis.
    user_key = prefix + login_keys("limited", "127.0.0.1")[1]
    assert int(redis.Redis.from_url(REDIS_URL).get(user_key)) == 4 * LIMIT
    # Never more than the limit got through (per-process counting would let up to twice as many
    # through). Concurrent attempts may let fewer through: each counts on two keys (address and
    # username), and two racing attempts can each push one key over the limit; the limiter errs
    # on the side of refusing.
    assert 1 <= checked <= LIMIT
    # Even the right password is refused now: the limit is on the username, whoever asks.
    assert Browser(base).sign_in("limited", PASSWORD).status == 429


def test_no_secret_in_gunicorn_logs_or_error_pages(app, gunicorn):
    from tests.helpers.http import Browser

    base, log_path, process, _ = gunicorn
    make_user("careful", password=PASSWORD, role="operator")
    execution = make_execution(make_job("doomed-job"), "failed", output="out", error="err")
    browser = Browser(base)
    assert browser.sign_in("careful", PASSWORD).status == 302
    pages = [browser.get(path) for path in ("/no-such-page", "/jobs/999999", "/auth/logout", "/dashboard/panels/x")]
    pages.append(browser.request("POST", "/jobs/new", {"name": "x"}))  # no CSRF token: 400
    pages.append(Browser(base).sign_in("careful", "wrong " + SECRETS["DEV_ADMIN_PASSWORD"]))
    # A real 500: the database loses a table under the running server.
    db.session.execute(text("DROP TABLE attempts"))
    db.session.commit()
    failing = browser.get(f"/executions/{execution.id}")
    pages.append(failing)
    assert failing.status == 500, failing.status
    assert "Something went wrong" in failing.body
    process.send_signal(signal.SIGTERM)
    process.wait(timeout=30)
    log = log_path.read_text(errors="replace")
    everything = log + "\n".join(page.body for page in pages)
    for name, value in {**SECRETS, "user password": PASSWORD}.items():
        assert value not in everything, f"{name} leaked"
    for page in pages:
        assert "Traceback" not in page.body and "sqlalchemy" not in page.body.lower(), page.body[:2000]
