"""Helpers for the web tests: a client that carries the CSRF token, a signed-in client, a job form.

CSRF protection stays on in every web test (as in production); `WebClient.post` sends the token
the way the browser does, and `csrf=False` leaves it out to test the refusal.
"""

from __future__ import annotations

import re
from itertools import count

from tests.factories import make_user

_CSRF_META = re.compile(r'<meta name="csrf-token" content="([^"]+)"')
_sequence = count(1)


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
    """A client signed in as a new user with `role`."""
    username = f"{role}-{next(_sequence)}"
    make_user(username, role=role)
    client = WebClient(app)
    response = client.login(username)
    assert response.status_code == 302, response.get_data(as_text=True)
    return client


def rows(body: str) -> int:
    """How many rows the page's table body holds (0 when it has none)."""
    tbody = body.split("<tbody>", 1)[1].split("</tbody>", 1)[0] if "<tbody>" in body else ""
    return tbody.count("<tr>")


def job_form(**overrides) -> dict:
    """A complete, valid job form submission; an override of None leaves that field out."""
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
