"""Security headers, cookie flags, CSRF on HTMX posts, escaping, and a CSP the pages satisfy."""

from __future__ import annotations

import re

import pytest

from app import create_app
from tests.factories import make_alert, make_execution, make_job
from tests.helpers.web import WebClient, signed_in_client

XSS = '<script>alert("x")</script><img src=x onerror=alert(1)>'


def test_security_headers_on_pages_fragments_and_json(app):
    client = signed_in_client(app)
    for response in (
        client.get("/"),
        client.get("/dashboard/panels/summary", htmx=True),
        client.get("/healthz"),
        client.get("/no-such-page"),
    ):
        csp = response.headers["Content-Security-Policy"]
        assert "script-src 'self'" in csp and "style-src 'self'" in csp
        assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
        assert "frame-ancestors 'none'" in csp
        assert response.headers["X-Frame-Options"] == "DENY"
        assert response.headers["X-Content-Type-Options"] == "nosniff"
        assert response.headers["Referrer-Policy"] == "same-origin"
        assert response.headers["Cache-Control"] == "no-store"


def test_cookies_without_secure_flag_by_default(app):
    cookie = WebClient(app).get("/").headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Lax" in cookie
    assert "Secure" not in cookie


def test_secure_cookies_setting(app_env):
    application = create_app({"TESTING": True, "SECURE_COOKIES": True}, env=app_env)
    with application.app_context():
        response = WebClient(application).client.get("/", base_url="https://localhost")
        cookie = response.headers["Set-Cookie"]
        assert cookie.startswith("__Host-cronwell_session=")
        assert "Secure" in cookie and "HttpOnly" in cookie and "SameSite=Lax" in cookie
        assert "max-age=" in response.headers["Strict-Transport-Security"]


def _pages(app):
    job = make_job("pages-job")
    execution = make_execution(job, "failed", output="out", error="err")
    make_alert(job, execution)
    client = signed_in_client(app)
    urls = [
        "/",
        "/dashboard/",
        "/jobs/",
        f"/jobs/{job.id}",
        f"/jobs/{job.id}/edit",
        "/jobs/new",
        f"/jobs/{job.id}/delete",
        "/executions/",
        f"/executions/{execution.id}",
        "/alerts/",
        "/health/",
    ]
    return client, urls


def test_pages_use_no_inline_script_or_style(app):
    """What the CSP forbids must not be in the markup, or the browser would drop it."""
    client, urls = _pages(app)
    for url in urls:
        body = client.get(url).get_data(as_text=True)
        for tag in re.findall(r"<script[^>]*>", body):
            assert "src=" in tag, (url, tag)
        assert not re.search(r"<script[^>]*>\s*[^<\s]", body), url
        assert "<style" not in body, url
        assert not re.search(r"\sstyle=", body), url
        assert not re.search(r"\son[a-z]+=", body), url
        assert not re.search(r"hx-on|javascript:", body), url
        assert '"includeIndicatorStyles": false' in body, url


def test_static_assets_are_served_locally(app):
    client = WebClient(app)
    htmx = client.get("/static/vendor/htmx.min.js")
    assert htmx.status_code == 200 and b"htmx" in htmx.data
    assert client.get("/static/js/app.js").status_code == 200
    assert client.get("/static/css/app.css").status_code == 200
    page = client.get("/").get_data(as_text=True)
    assert "https://" not in page and "http://" not in page  # no CDN


def test_user_input_is_escaped_everywhere(app):
    job = make_job(XSS, description=XSS, config={})
    execution = make_execution(job, "failed", output=XSS, error=XSS)
    make_alert(job, execution, message=XSS)
    client = signed_in_client(app)
    for url in (
        "/dashboard/",
        "/jobs/",
        f"/jobs/{job.id}",
        f"/jobs/{job.id}/edit",
        "/executions/",
        f"/executions/{execution.id}",
        "/alerts/",
        "/dashboard/panels/alerts",
        "/dashboard/panels/jobs",
        f"/jobs/{job.id}/delete",
    ):
        body = client.get(url).get_data(as_text=True)
        assert '<script>alert("x")' not in body, url
        assert "<img src=x" not in body, url
    assert "&lt;script&gt;" in client.get(f"/jobs/{job.id}").get_data(as_text=True)


def test_escaping_in_preview_errors(app):
    client = signed_in_client(app)
    body = client.get(
        "/jobs/preview?schedule_type=cron&cron=*+*+*+*+*&timezone=%3Cscript%3Ealert(1)%3C/script%3E", htmx=True
    ).get_data(as_text=True)
    assert "<script>" not in body and "&lt;script&gt;" in body


def test_htmx_post_needs_the_csrf_header(app):
    job = make_job()
    alert = make_alert(job)
    client = signed_in_client(app)
    refused = client.post(f"/alerts/{alert.id}/resolve", htmx=True, csrf=False)
    assert refused.status_code == 400
    assert "<html" not in refused.get_data(as_text=True)  # a fragment HTMX can show
    accepted = client.post(f"/alerts/{alert.id}/resolve", htmx=True)
    assert accepted.status_code == 200
    assert 'id="panel-alerts"' in accepted.get_data(as_text=True)


@pytest.mark.parametrize(
    "url",
    [
        "/jobs/1/disable",
        "/jobs/1/enable",
        "/jobs/1/trigger",
        "/jobs/1/delete",
        "/jobs/new",
        "/jobs/1/edit",
        "/executions/1/retry",
        "/executions/1/cancel",
        "/alerts/resolve",
        "/alerts/1/resolve",
        "/auth/login",
        "/auth/logout",
    ],
)
def test_every_post_without_csrf_token_is_400(app, url):
    make_job()
    client = signed_in_client(app)
    response = client.post(url, {"confirm_name": "x"}, csrf=False)
    assert response.status_code == 400, url
    assert "security token" in response.get_data(as_text=True)


def test_bad_csrf_token_is_400(app):
    client = signed_in_client(app)
    assert client.post("/auth/logout", {"csrf_token": "forged"}, csrf=False).status_code == 400
