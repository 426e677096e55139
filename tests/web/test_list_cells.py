"""The list tables' cell filters (app/web/filters.py) render what the macros they replaced did."""

from __future__ import annotations

from datetime import UTC, datetime

from markupsafe import Markup

from app.web.filters import enabled_badge, name_link, status_badge, time_cell, url_pattern


def test_time_cell_shows_the_instant_with_its_zone_and_the_utc_instant_on_hover():
    moment = datetime(2026, 6, 1, 12, 0, 5, 250000, tzinfo=UTC)
    assert time_cell(moment) == (
        '<time datetime="2026-06-01T12:00:05.250000Z" title="2026-06-01 12:00:05 UTC">2026-06-01 12:00:05 UTC</time>'
    )
    assert time_cell("2026-06-01T12:00:05Z") == (
        '<time datetime="2026-06-01T12:00:05Z" title="2026-06-01 12:00:05 UTC">2026-06-01 12:00:05 UTC</time>'
    )
    assert time_cell(None) == '<span class="muted">—</span>'
    assert time_cell("") == '<span class="muted">—</span>'


def test_cells_escape_what_they_show():
    assert status_badge("timed_out") == '<span class="status status-timed_out">timed out</span>'
    assert name_link('<b>"x"</b>', "/jobs/1?a=1&b=2") == (
        '<a class="clip" href="/jobs/1?a=1&amp;b=2" title="&lt;b&gt;&#34;x&#34;&lt;/b&gt;">'
        "&lt;b&gt;&#34;x&#34;&lt;/b&gt;</a>"
    )
    assert isinstance(name_link("x", "/"), Markup)
    assert enabled_badge(True) == '<span class="status status-enabled">enabled</span>'
    assert enabled_badge(False) == '<span class="status status-disabled">disabled</span>'


def test_macros_render_through_the_filters(app):
    with app.test_request_context():
        template = app.jinja_env.from_string(
            '{% import "macros/ui.html" as ui %}[{{ ui.at(none) }}|{{ ui.status("failed") }}|'
            '{{ ui.name_link("a", "/b") }}|{{ ui.enabled_badge(false) }}]'
        )
        assert template.render() == (
            '[<span class="muted">—</span>|<span class="status status-failed">failed</span>|'
            '<a class="clip" href="/b" title="a">a</a>|<span class="status status-disabled">disabled</span>]'
        )


def test_url_pattern_builds_what_url_for_builds(app):
    from flask import url_for

    with app.test_request_context():
        execution_url = url_pattern("executions.detail", "execution_id")
        job_url = url_pattern("jobs.detail", "job_id")
        for key in (1, 42, 2147483647):
            assert execution_url(key) == url_for("executions.detail", execution_id=key)
            assert job_url(key) == url_for("jobs.detail", job_id=key)
