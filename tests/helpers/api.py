"""The REST API from a test: a JSON client with a bearer credential, and request bodies."""

from __future__ import annotations

PASSWORD = "right-password"


class ApiClient:
    """The Flask test client speaking JSON with an optional bearer credential."""

    def __init__(self, app, token: str | None = None) -> None:
        self.client = app.test_client()
        self.token = token

    def request(self, method: str, path: str, json=None, headers=None, token: str | None = None):
        headers = dict(headers or {})
        credential = token if token is not None else self.token
        if credential:
            headers["Authorization"] = f"Bearer {credential}"
        response = self.client.open(path, method=method, json=json, headers=headers)
        # Requests here share the test's app context (and its session); a server ends each
        # request's transaction, so end it here too, or SQLite would keep reading an old snapshot.
        from app.extensions import db

        db.session.rollback()
        return response

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def post(self, path, json=None, **kw):
        return self.request("POST", path, json=json, **kw)

    def patch(self, path, json=None, **kw):
        return self.request("PATCH", path, json=json, **kw)

    def delete(self, path, **kw):
        return self.request("DELETE", path, **kw)

    def login(self, username: str, password: str = PASSWORD, **extra) -> dict:
        response = self.post("/api/v1/auth/login", {"username": username, "password": password, **extra}, token="")
        assert response.status_code == 200, response.get_data(as_text=True)
        body = response.get_json()
        self.token = body["access_token"]
        return body


def job_body(name: str = "api job", **fields) -> dict:
    return {
        "name": name,
        "task": "always_succeed",
        "schedule_type": "interval",
        "schedule": {"every": "1h"},
        **fields,
    }
