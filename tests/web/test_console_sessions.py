"""Sessions end on the server: a cookie saved before sign-out (or before the user's sessions were
ended for a password change, a disabled account or a role change) opens nothing afterwards, and
none outlives SESSION_MAX_AGE_HOURS."""

from __future__ import annotations

import importlib

import pytest

from app.extensions import db
from app.services.use_cases import sessions
from tests.helpers.web import WebClient, signed_in_client


def _cookie(client: WebClient) -> str:
    name = client.app.config["SESSION_COOKIE_NAME"]
    cookie = client.client.get_cookie(name)
    assert cookie is not None, "no session cookie after sign-in"
    return cookie.value


def _replay(app, value: str) -> WebClient:
    """A fresh browser that presents a copied session cookie."""
    thief = WebClient(app)
    thief.client.set_cookie(app.config["SESSION_COOKIE_NAME"], value)
    return thief


def _user_id(client: WebClient) -> int:
    with client.client.session_transaction() as saved:
        return int(saved["_user_id"])


def test_a_cookie_saved_before_sign_out_gets_the_sign_in_page(app):
    client = signed_in_client(app)
    saved = _cookie(client)
    assert _replay(app, saved).get("/dashboard/").status_code == 200  # the copy works while signed in

    assert client.post("/auth/logout").status_code == 302
    response = _replay(app, saved).get("/dashboard/")
    assert response.status_code == 302
    assert response.headers["Location"].startswith("/auth/login")
    # The same browser, with the cookie put back as it was, is signed out too.
    client.client.set_cookie(app.config["SESSION_COOKIE_NAME"], saved)
    assert client.get("/dashboard/").headers["Location"].startswith("/auth/login")


def test_signing_out_ends_only_that_session(app):
    first = signed_in_client(app)
    user_id = _user_id(first)
    second = WebClient(app)
    assert second.login(first_username(first)).status_code == 302
    assert _live(user_id) == 2
    first.post("/auth/logout")
    assert _live(user_id) == 1
    assert second.get("/dashboard/").status_code == 200


def _live(user_id: int) -> int:
    db.session.rollback()  # read what the requests committed, not this test's older snapshot
    return sessions.count_sessions(user_id)


def first_username(client: WebClient) -> str:
    with client.app.app_context():
        from app.models import User

        return db.session.get(User, _user_id(client)).username


def test_end_sessions_signs_the_user_out_everywhere(app):
    first = signed_in_client(app)
    user_id = _user_id(first)
    second = WebClient(app)
    second.login(first_username(first))
    saved = _cookie(second)

    assert sessions.end_sessions(user_id) == 2
    db.session.commit()

    for client in (first, second, _replay(app, saved)):
        response = client.get("/dashboard/")
        assert response.status_code == 302 and response.headers["Location"].startswith("/auth/login")
    # Signing in again works and starts a fresh session.
    assert first.login(first_username(first)).status_code == 302
    assert first.get("/dashboard/").status_code == 200


def test_a_forged_or_missing_session_token_is_refused(app):
    client = signed_in_client(app)
    with client.client.session_transaction() as saved:
        saved[sessions.COOKIE_KEY] = "not-a-token"
    assert client.get("/dashboard/").status_code == 302
    with client.client.session_transaction() as saved:
        saved.pop(sessions.COOKIE_KEY, None)
    assert client.get("/dashboard/").status_code == 302


# --- the age limit (SESSION_MAX_AGE_HOURS) ----------------------------------------------------------


def _on_clock(monkeypatch, clock) -> None:
    """Sign-in and the user loader read `clock` (the edges' clock; nothing here sleeps)."""
    monkeypatch.setattr(importlib.import_module("app.auth.routes"), "utcnow", clock)
    monkeypatch.setattr(importlib.import_module("app.web"), "utcnow", clock)


def test_a_session_past_the_max_age_gets_the_sign_in_page_however_active(app, monkeypatch, clock):
    app.config["SESSION_MAX_AGE_HOURS"] = 12
    _on_clock(monkeypatch, clock)
    client = signed_in_client(app)
    saved = _cookie(client)
    for _ in range(11):  # used every hour: activity does not extend it
        clock.advance(hours=1)
        assert client.get("/dashboard/").status_code == 200
    clock.advance(minutes=59, seconds=59)
    assert client.get("/dashboard/").status_code == 200
    clock.advance(seconds=1)  # 12 h after sign-in
    for browser in (client, _replay(app, saved)):
        response = browser.get("/dashboard/")
        assert response.status_code == 302 and response.headers["Location"].startswith("/auth/login")
    # Signing in again starts a new session with a new 12 h.
    assert client.login(first_username(client)).status_code == 302
    clock.advance(hours=11)
    assert client.get("/dashboard/").status_code == 200


def test_the_max_age_is_a_setting_with_a_week_by_default(app):
    from config import load_settings

    assert load_settings({})["SESSION_MAX_AGE_HOURS"] == 168
    assert load_settings({"SESSION_MAX_AGE_HOURS": "8"})["SESSION_MAX_AGE_HOURS"] == 8
    with pytest.raises(ValueError, match="SESSION_MAX_AGE_HOURS must be >= 1"):
        load_settings({"SESSION_MAX_AGE_HOURS": "0"})
