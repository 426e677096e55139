"""Fuzzing the web forms and query strings (CSRF on, signed in as an operator), on SQLite and
PostgreSQL: oversized, unicode, HTML and control-character input is never a 500, is always
escaped where it is shown, and a refused job form stores nothing.

Each hostile value carries the marker tag `<x-fuzz ...>`: it must never reach a page unescaped.
"""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from sqlalchemy import func, select

from app.extensions import db
from app.models import Job
from tests.factories import make_user
from tests.fuzz.strategies import FUZZ_DB, hostile_text
from tests.helpers.web import WebClient, job_form

MARKER = '<x-fuzz onmouseover="alert(1)">'
FORM_FIELDS = [
    "name",
    "description",
    "task",
    "config",
    "schedule_type",
    "every",
    "cron",
    "run_at",
    "timezone",
    "overlap_policy",
    "misfire_policy",
    "misfire_grace_seconds",
    "max_attempts",
    "retry_backoff_seconds",
    "timeout_seconds",
    "alert_mode",
    "retention_count",
    "retention_days",
    "queue",
    "priority",
    "enabled",
]


def web_text() -> st.SearchStrategy[str]:
    """Hostile text, often with the marker tag inside it."""
    return st.one_of(hostile_text(), st.builds(lambda a, b: f"{a}{MARKER}{b}", hostile_text(20), hostile_text(20)))


@pytest.fixture
def operator(app) -> WebClient:
    make_user("fuzz-operator", role="operator")
    client = WebClient(app)
    assert client.login("fuzz-operator").status_code == 302
    return client


def jobs_stored() -> int:
    db.session.rollback()
    return db.session.scalar(select(func.count()).select_from(Job))


def assert_safe(response, what) -> None:
    body = response.get_data(as_text=True)
    assert response.status_code < 500, f"{what}: {response.status_code}\n{body[:3000]}"
    assert "<x-fuzz" not in body, f"{what}: unescaped input in the page"
    assert "Traceback" not in body


@FUZZ_DB
@given(overrides=st.dictionaries(st.sampled_from(FORM_FIELDS), web_text(), min_size=1, max_size=6))
@example(overrides={"description": "x" * 100_000})
@example(overrides={"name": MARKER, "cron": MARKER, "schedule_type": "cron"})
@example(overrides={"timezone": "America"})
@example(overrides={"description": "nul\x00byte", "config": '{"message": "a\\u0000b"}'})
@example(overrides={"every": "1" * 5000 + "s"})
def test_job_form_never_500s_escapes_input_and_stores_nothing_when_refused(app, operator, overrides):
    before = jobs_stored()
    response = operator.post("/jobs/new", job_form(**overrides))
    assert_safe(response, f"POST /jobs/new {overrides!r:.300}")
    created = response.status_code in (302, 303)
    assert response.status_code in (200, 302, 303, 400, 409, 413), response.status_code
    assert jobs_stored() == before + (1 if created else 0)


@FUZZ_DB
@given(overrides=st.dictionaries(st.sampled_from(FORM_FIELDS), web_text(), min_size=1, max_size=4))
def test_job_edit_form_never_500s_and_escapes_input(app, operator, overrides):
    job_response = operator.post("/jobs/new", job_form(name=f"edit-target-{jobs_stored()}"))
    assert job_response.status_code in (302, 303)
    job_id = int(job_response.headers["Location"].rstrip("/").rsplit("/", 1)[1])
    response = operator.post(f"/jobs/{job_id}/edit", job_form(**overrides))
    assert_safe(response, f"POST /jobs/{job_id}/edit {overrides!r:.300}")


@FUZZ_DB
@given(
    args=st.dictionaries(
        st.sampled_from(
            ["schedule_type", "every", "cron", "run_at", "timezone", "status", "job", "page", "show", "next"]
        ),
        web_text(),
        max_size=4,
    )
)
@example(args={"schedule_type": "interval", "every": "1m", "timezone": "America"})
@example(args={"page": "9" * 5000})
@example(args={"job": "9" * 30})
@example(args={"job": "²", "page": "²"})
def test_query_strings_never_500_and_are_escaped(app, operator, args):
    from urllib.parse import urlencode

    query = urlencode(args)
    for path in ("/jobs/preview", "/jobs/", "/executions/", "/alerts/", "/auth/login"):
        response = operator.get(f"{path}?{query}", htmx=path == "/jobs/preview")
        assert_safe(response, f"GET {path}?{query[:300]}")


@FUZZ_DB
@given(username=web_text(), password=web_text(), next_url=web_text())
@example(username="admin\x00", password="x", next_url="/")
def test_sign_in_form_never_500s_and_escapes_input(app, username, password, next_url):
    app.config["LOGIN_RATE_LIMIT_ATTEMPTS"] = 1_000_000  # reach the credential check every time
    client = WebClient(app)
    response = client.post("/auth/login", {"username": username, "password": password, "next": next_url})
    assert_safe(response, "POST /auth/login")
    assert response.status_code in (302, 400, 429)


@FUZZ_DB
@given(ids=st.lists(web_text(), max_size=5))
@example(ids=["²", "١", "1" * 40, "-1", "0"])
def test_bulk_resolve_never_500s(app, operator, ids):
    response = operator.post("/alerts/resolve", {"alert_ids": ids})
    assert_safe(response, "POST /alerts/resolve")


def test_an_oversized_post_is_refused_without_a_500(app, operator):
    before = jobs_stored()
    response = operator.post("/jobs/new", job_form(description="d" * 5_000_000))
    assert_safe(response, "POST /jobs/new with 5 MB")
    assert response.status_code in (400, 413)
    assert jobs_stored() == before
