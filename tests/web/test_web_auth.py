"""Sign in and sign out: credentials, session rotation, safe `next=`, CSRF and rate limiting."""

from __future__ import annotations

import pytest

from app import create_app
from tests.factories import make_user
from tests.helpers.web import WebClient


@pytest.fixture
def user(app):
    return make_user("alice", "right-password", role="operator")


def test_sign_in_lands_on_dashboard(app, user):
    client = WebClient(app)
    response = client.login("alice", "right-password")
    assert response.status_code == 302
    assert response.headers["Location"] == "/dashboard/"
    page = client.get("/dashboard/")
    assert page.status_code == 200
    assert "alice" in page.get_data(as_text=True)


def test_sign_in_form_renders_with_labels(app):
    body = WebClient(app).get("/auth/login").get_data(as_text=True)
    assert '<label for="username">Username</label>' in body
    assert '<label for="password">Password</label>' in body


@pytest.mark.parametrize(
    "username,password", [("alice", "wrong"), ("nobody", "right-password"), ("", ""), ("alice", "x" * 5000)]
)
def test_bad_credentials_are_refused_inline(app, user, username, password):
    client = WebClient(app)
    response = client.login(username, password)
    assert response.status_code == 400
    assert client.get("/dashboard/").status_code == 302


def test_wrong_password_message(app, user):
    body = WebClient(app).login("alice", "wrong").get_data(as_text=True)
    assert "Wrong username or password." in body


def test_inactive_user_cannot_sign_in(app):
    make_user("bob", "pw-bob", active=False)
    assert WebClient(app).login("bob", "pw-bob").status_code == 400


def test_session_is_rotated_on_sign_in(app, user):
    client = WebClient(app)
    client.get("/")
    with client.client.session_transaction() as session:
        session["planted"] = "by-attacker"
        before_token = session["csrf_token"]
    client.login("alice", "right-password")
    with client.client.session_transaction() as session:
        assert "planted" not in session
        assert session.get("csrf_token") != before_token
        assert session["_user_id"]


def test_sign_out_is_post_only(app, user):
    client = WebClient(app)
    client.login("alice", "right-password")
    assert client.get("/auth/logout").status_code == 405
    assert client.get("/dashboard/").status_code == 200  # still signed in


def test_sign_out_needs_the_csrf_token(app, user):
    client = WebClient(app)
    client.login("alice", "right-password")
    response = client.post("/auth/logout", csrf=False)
    assert response.status_code == 400
    assert "security token" in response.get_data(as_text=True)
    assert client.get("/dashboard/").status_code == 200


def test_sign_out(app, user):
    client = WebClient(app)
    client.login("alice", "right-password")
    response = client.post("/auth/logout")
    assert response.status_code == 302
    assert client.get("/dashboard/").status_code == 302


def test_sign_in_without_csrf_token_is_400_not_500(app, user):
    response = WebClient(app).post("/auth/login", {"username": "alice", "password": "right-password"}, csrf=False)
    assert response.status_code == 400
    assert "security token" in response.get_data(as_text=True)


@pytest.mark.parametrize("target", ["/jobs/?page=2", "/executions/?status=failed"])
def test_next_on_this_site_is_followed(app, user, target):
    response = WebClient(app).login("alice", "right-password", next_url=target)
    assert response.headers["Location"] == target


@pytest.mark.parametrize(
    "target",
    [
        "https://evil.example/",
        "//evil.example/path",
        "/\\evil.example",
        "\\\\evil.example",
        "javascript:alert(1)",
        "http:/evil.example",
        "/\x00/evil",
        "/\t/evil.example",
        "evil.example",
        " //evil.example",
        "%2F%2Fevil.example",
    ],
)
def test_next_off_site_is_ignored(app, user, target):
    response = WebClient(app).login("alice", "right-password", next_url=target)
    assert response.status_code == 302
    assert response.headers["Location"] == "/dashboard/"


def test_redirect_to_sign_in_keeps_the_page_as_next(app, user):
    client = WebClient(app)
    response = client.get("/executions/1")
    assert response.headers["Location"] == "/auth/login?next=/executions/1"
    page = client.get(response.headers["Location"]).get_data(as_text=True)
    assert 'name="next" type="hidden" value="/executions/1"' in page


def test_signed_in_visit_to_login_goes_to_dashboard(app, user):
    client = WebClient(app)
    client.login("alice", "right-password")
    assert client.get("/auth/login").headers["Location"] == "/dashboard/"


def test_sign_in_attempts_are_rate_limited(app, user):
    app.config.update(LOGIN_RATE_LIMIT_ATTEMPTS=3, LOGIN_RATE_LIMIT_WINDOW_SECONDS=60)
    client = WebClient(app)
    for _ in range(3):
        assert client.login("alice", "wrong").status_code == 400
    blocked = client.login("alice", "right-password")
    assert blocked.status_code == 429
    assert blocked.headers["Retry-After"] == "60"
    assert "Too many sign-in attempts" in blocked.get_data(as_text=True)
    assert client.get("/dashboard/").status_code == 302


def test_rate_limit_is_per_username_across_addresses(app, user):
    app.config.update(LOGIN_RATE_LIMIT_ATTEMPTS=2)
    client_a, client_b = WebClient(app), WebClient(app)
    client_a.post("/auth/login", {"username": "alice", "password": "x"}, environ_base={"REMOTE_ADDR": "10.0.0.1"})
    client_b.post("/auth/login", {"username": "alice", "password": "x"}, environ_base={"REMOTE_ADDR": "10.0.0.2"})
    third = WebClient(app).post(
        "/auth/login", {"username": "alice", "password": "right-password"}, environ_base={"REMOTE_ADDR": "10.0.0.3"}
    )
    assert third.status_code == 429
    other_user = make_user("carol", "pw-carol")
    assert WebClient(app).login(other_user.username, "pw-carol").status_code == 302


def test_auth_off_needs_no_sign_in(app_env):
    application = create_app({"TESTING": True, "WEBUI_AUTH": False}, env=app_env)
    with application.app_context():
        client = WebClient(application)
        assert client.get("/dashboard/").status_code == 200
        assert "Sign in" not in client.get("/").get_data(as_text=True)
