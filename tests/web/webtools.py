"""Helpers for the web tests: users, a client that carries the CSRF token, and row factories.

CSRF protection stays on in every web test (as in production); `WebClient.post` sends the token
the way the browser does, and `csrf=False` leaves it out to test the refusal.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from itertools import count

from werkzeug.security import generate_password_hash

from app.extensions import db
from app.models import Alert, Attempt, Execution, Job, User
from app.services.use_cases import jobs as job_service

NOW = datetime(2026, 6, 1, 12, 0, 0, tzinfo=UTC)
_CSRF_META = re.compile(r'<meta name="csrf-token" content="([^"]+)"')
_sequence = count(1)


def make_user(username: str = "admin", password: str = "secret-pw", role: str = "admin", active: bool = True) -> User:
    user = User(username=username, role=role, active=active, created_at=NOW)
    # A cheap hash keeps the tests fast; production uses werkzeug's default (scrypt).
    user.password_hash = generate_password_hash(password, method="pbkdf2:sha256:1000")
    db.session.add(user)
    db.session.commit()
    return user


class WebClient:
    """A Flask test client that signs in and posts forms with the CSRF token.

    Each request runs in its own app context, as in a real server: the `app` fixture keeps one
    context open for the whole test, and a request inside it would share `g` (where Flask-Login
    caches the user and Flask-WTF the CSRF token) with every other request of the test.
    """

    def __init__(self, app) -> None:
        self.app = app
        self.client = app.test_client()

    def request(self, method: str, url: str, **kwargs):
        with self.app.app_context():
            return self.client.open(url, method=method, **kwargs)

    def get(self, url: str, *, htmx: bool = False, **kwargs):
        headers = kwargs.pop("headers", {})
        if htmx:
            headers["HX-Request"] = "true"
        return self.request("GET", url, headers=headers, **kwargs)

    def csrf_token(self) -> str:
        page = self.get("/")
        match = _CSRF_META.search(page.get_data(as_text=True))
        assert match, "no csrf-token meta tag on the page"
        return match.group(1)

    def post(self, url: str, data: dict | None = None, *, csrf: bool = True, htmx: bool = False, **kwargs):
        data = dict(data or {})
        headers = kwargs.pop("headers", {})
        if csrf:
            token = self.csrf_token()
            if htmx:
                headers["X-CSRFToken"] = token
            else:
                data["csrf_token"] = token
        if htmx:
            headers["HX-Request"] = "true"
        return self.request("POST", url, data=data, headers=headers, **kwargs)

    def login(self, username: str = "admin", password: str = "secret-pw", next_url: str | None = None):
        data = {"username": username, "password": password}
        if next_url is not None:
            data["next"] = next_url
        return self.post("/auth/login", data)


def signed_in_client(app, role: str = "admin") -> WebClient:
    username = f"{role}-{next(_sequence)}"
    make_user(username, role=role)
    client = WebClient(app)
    response = client.login(username)
    assert response.status_code == 302, response.get_data(as_text=True)
    return client


def make_job(name: str | None = None, *, now: datetime = NOW, **fields) -> Job:
    data = {
        "name": name or f"job-{next(_sequence)}",
        "task": "always_succeed",
        "schedule_type": "interval",
        "schedule": {"every": "5m"},
        **fields,
    }
    return job_service.create_job(data, now=now, actor="test")


def make_execution(
    job: Job,
    status: str = "succeeded",
    *,
    output: str = "",
    error: str = "",
    started: datetime | None = None,
    seconds: float = 1.5,
    attempts: int = 1,
    trigger: str = "manual",
) -> Execution:
    started = started or NOW
    terminal = status in {"succeeded", "failed", "timed_out", "missed", "cancelled", "dead_lettered"}
    ran = status not in {"pending", "missed", "cancelled", "retry_scheduled", "claimed"}
    execution = Execution(
        job_id=job.id,
        scheduled_for=started,
        trigger=trigger,
        idempotency_key=f"test-{next(_sequence)}",
        status=status,
        attempts=attempts if ran else 0,
        max_attempts=max(3, attempts),
        available_at=started,
        started_at=started if ran else None,
        finished_at=(started + timedelta(seconds=seconds)) if terminal else None,
        output=output,
        error=error,
        queue=job.queue,
        priority=job.priority,
        created_at=started,
        updated_at=started,
    )
    db.session.add(execution)
    db.session.flush()
    if ran:
        attempt_status = {"dead_lettered": "abandoned", "retry_scheduled": "failed"}.get(status, status)
        done = attempt_status != "running"
        db.session.add(
            Attempt(
                execution_id=execution.id,
                number=1,
                worker_id="worker-test",
                pid=4242,
                status=attempt_status,
                started_at=started,
                finished_at=(started + timedelta(seconds=seconds)) if done else None,
                output=output,
                error=error,
            )
        )
    db.session.commit()
    return execution


def make_alert(
    job: Job | None = None,
    execution: Execution | None = None,
    message: str = "something broke",
    kind: str = "dead_letter",
) -> Alert:
    alert = Alert(
        job_id=job.id if job else None,
        execution_id=execution.id if execution else None,
        kind=kind,
        message=message,
        created_at=NOW,
    )
    db.session.add(alert)
    db.session.commit()
    return alert


def job_form(**overrides) -> dict:
    """A complete, valid job form submission."""
    data = {
        "name": f"form-job-{next(_sequence)}",
        "description": "",
        "task": "always_succeed",
        "config": "{}",
        "schedule_type": "interval",
        "every": "5m",
        "cron": "",
        "run_at": "",
        "timezone": "UTC",
        "overlap_policy": "skip",
        "misfire_policy": "coalesce",
        "misfire_grace_seconds": "60",
        "max_attempts": "3",
        "retry_backoff_seconds": "10",
        "timeout_seconds": "30",
        "alert_mode": "web",
        "retention_count": "500",
        "retention_days": "30",
        "queue": "default",
        "priority": "0",
        "enabled": "y",
    }
    data.update(overrides)
    return {k: v for k, v in data.items() if v is not None}
