"""A person's display time zone: set on the settings page, by `flask user set-timezone` or the
API's `me`; every page then shows times in it with the zone named and the UTC instant on hover."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from app.extensions import db
from app.models import User
from tests.factories import make_execution, make_job, make_user
from tests.helpers.api import PASSWORD, ApiClient
from tests.helpers.cli import assert_error, ok, ok_json
from tests.helpers.web import WebClient

AT = datetime(2026, 6, 1, 12, 0, 5, 123456, tzinfo=UTC)  # 21:00:05 in Tokyo


def tokyo_client(app) -> WebClient:
    make_user("yuki", PASSWORD, role="admin")
    client = WebClient(app)
    assert client.login("yuki", PASSWORD).status_code == 302
    assert client.post("/settings/", {"time_zone": "Asia/Tokyo"}).status_code == 303
    return client


def test_the_settings_page_sets_the_zone_and_refuses_an_unknown_one(app):
    client = tokyo_client(app)
    db.session.rollback()
    assert db.session.scalar(db.select(User.time_zone).where(User.username == "yuki")) == "Asia/Tokyo"
    page = client.get("/settings/").get_data(as_text=True)
    assert 'value="Asia/Tokyo"' in page and " JST</time>" in page
    bad = client.post("/settings/", {"time_zone": "Mars/Olympus"})
    assert bad.status_code == 400 and "must be an IANA time zone" in bad.get_data(as_text=True)


def test_three_pages_show_times_in_the_users_zone_with_utc_on_hover(app):
    job = make_job("zoned", now=AT - timedelta(minutes=1))
    execution = make_execution(job, "succeeded", now=AT)
    client = tokyo_client(app)
    shown = (
        '<time datetime="2026-06-01T12:00:05.123456Z" title="2026-06-01 12:00:05 UTC">2026-06-01 21:00:05 JST</time>'
    )
    for url in ("/executions/", f"/executions/{execution.id}", f"/jobs/{job.id}"):
        body = client.get(url).get_data(as_text=True)
        assert shown in body, url
        shown_text = re.sub(r'datetime="[^"]*"', "", body.split("<main", 1)[1])
        assert not re.search(r"\d\d:\d\d:\d\d\.\d", shown_text), url  # never microseconds
    events = client.get("/events/").get_data(as_text=True)
    assert " JST</time>" in events and "times are in Asia/Tokyo" in events
    # someone else still sees UTC
    make_user("uma", PASSWORD, role="admin")
    other = WebClient(app)
    other.login("uma", PASSWORD)
    assert "2026-06-01 12:00:05 UTC</time>" in other.get("/executions/").get_data(as_text=True)


def test_cli_set_timezone(app, cli):
    make_user("kim", PASSWORD, role="viewer")
    assert ok_json(cli("user", "set-timezone", "kim", "Europe/Paris", "--json")) == {
        "username": "kim",
        "time_zone": "Europe/Paris",
    }
    assert "sees times in Asia/Seoul" in ok(cli("user", "set-timezone", "kim", "Asia/Seoul"))
    assert_error(cli("user", "set-timezone", "kim", "Nowhere/Land"), "must be an IANA time zone")
    assert_error(cli("user", "set-timezone", "nobody", "UTC"), "does not exist")


def test_the_api_me_reads_and_sets_the_zone(app):
    make_user("ana", PASSWORD, role="viewer")
    api = ApiClient(app)
    api.login("ana")
    assert api.get("/api/v1/me").get_json()["time_zone"] == "UTC"
    changed = api.patch("/api/v1/me", {"time_zone": "America/Sao_Paulo"})
    assert changed.status_code == 200 and changed.get_json()["time_zone"] == "America/Sao_Paulo"
    assert api.get("/api/v1/me").get_json()["time_zone"] == "America/Sao_Paulo"
    assert api.patch("/api/v1/me", {"time_zone": "Bogus/Zone"}).status_code == 422
    created = api.get("/api/v1/me").get_json()["user"]["created_at"]
    assert created.endswith("Z")  # the API still speaks UTC


def test_cli_tables_take_another_zone_and_json_stays_utc(app, cli):
    job = make_job("zoned-cli", now=AT - timedelta(minutes=1))
    make_execution(job, "succeeded", now=AT)
    table = ok(cli("execution", "list", "--tz", "Asia/Tokyo"))
    assert "SCHEDULED FOR (Asia/Tokyo)" in table and "2026-06-01T20:59:05+09:00" in table
    assert "2026-06-01T21:00:05+09:00" in table  # finished
    assert "2026-06-01 12:00:05Z" in ok(cli("execution", "list"))  # UTC without --tz
    [doc] = ok_json(cli("execution", "list", "--tz", "Asia/Tokyo", "--json"))
    assert doc["finished_at"].endswith("Z")
    events = ok(cli("event", "list", "--tz", "America/New_York", "--kind", "job_created"))
    assert "WHEN (America/New_York)" in events and "-04:00" in events
    assert_error(cli("event", "list", "--tz", "Moon/Base"), "--tz: unknown time zone 'Moon/Base'")
