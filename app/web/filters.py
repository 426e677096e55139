"""Template filters for times, ages and durations. Values may be datetimes or ISO 8601 text
(cached dashboard data is JSON, so its instants arrive as text).

The cell filters (`time_cell`, `status_badge`, `name_link`, `enabled_badge`) hold the markup of
the small building blocks list tables repeat in every row; the macros of the same names in
templates/macros/ui.html call them. A Jinja macro call per cell cost the 50-row lists more CPU
than their queries, a filter a fraction of it."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from flask import Flask, url_for
from markupsafe import Markup, escape

from app.clock import iso_z, utcnow


def as_datetime(value) -> datetime | None:
    """An aware UTC datetime from a datetime or ISO 8601 text; None when empty or unreadable."""
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        moment = value
    else:
        try:
            moment = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        except ValueError:
            return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def format_utc(value) -> str:
    """`2026-06-01 12:00:05 UTC`, or an em dash for nothing."""
    moment = as_datetime(value)
    return "—" if moment is None else moment.strftime("%Y-%m-%d %H:%M:%S UTC")


def iso_utc(value) -> str:
    moment = as_datetime(value)
    return "" if moment is None else iso_z(moment)


def format_local(value, zone: str | None) -> str:
    """The instant in the job's zone, e.g. `2026-03-08 03:00 EDT`."""
    moment = as_datetime(value)
    if moment is None:
        return "—"
    try:
        local = moment.astimezone(ZoneInfo(zone or "UTC"))
    except (KeyError, ValueError):
        return format_utc(moment)
    return local.strftime("%Y-%m-%d %H:%M:%S %Z")


def format_seconds(seconds) -> str:
    """A short human duration: `0.42 s`, `12 s`, `3 m 05 s`, `2 h 01 m`, `3 d 4 h`."""
    if seconds is None or seconds == "":
        return "—"
    seconds = float(seconds)
    negative = seconds < 0
    seconds = abs(seconds)
    if seconds < 10:
        text = f"{seconds:.2f} s"
    elif seconds < 60:
        text = f"{seconds:.0f} s"
    elif seconds < 3600:
        text = f"{int(seconds // 60)} m {int(seconds % 60):02d} s"
    elif seconds < 86400:
        text = f"{int(seconds // 3600)} h {int(seconds % 3600 // 60):02d} m"
    else:
        text = f"{int(seconds // 86400)} d {int(seconds % 86400 // 3600)} h"
    return f"-{text}" if negative else text


def age(value, now: datetime | None = None) -> str:
    """How long ago (or, for a future instant, how far ahead) `value` is: `5 s ago`, `in 3 m 00 s`."""
    moment = as_datetime(value)
    if moment is None:
        return "—"
    now = now or utcnow()
    delta = (now - moment).total_seconds()
    span = abs(delta)
    text = f"{span:.0f} s" if span < 60 else format_seconds(span)
    return f"{text} ago" if delta >= 0 else f"in {text}"


def label(value) -> str:
    """`timed_out` -> `timed out`."""
    return "" if value is None else str(value).replace("_", " ")


_DASH_CELL = Markup('<span class="muted">—</span>')
_ENABLED = Markup('<span class="status status-enabled">enabled</span>')
_DISABLED = Markup('<span class="status status-disabled">disabled</span>')


def time_cell(value) -> Markup:
    """An instant in a list table (whose header says UTC): `2026-06-01 12:00:05` in a `<time>`
    with the ISO instant and the full text on hover; a muted dash for nothing."""
    if not value:
        return _DASH_CELL
    moment = as_datetime(value)
    if moment is None:  # text that is no instant
        return Markup('<time datetime="" title="—"></time>')
    # Digits, dashes, colons and spaces only: nothing to escape. (f-strings, not Markup's `%`,
    # whose per-argument wrappers cost more than the rest of the cell.)
    shown = moment.strftime("%Y-%m-%d %H:%M:%S")
    return Markup(f'<time datetime="{iso_z(moment)}" title="{shown} UTC">{shown}</time>')


def status_badge(value) -> Markup:
    """`<span class="status status-timed_out">timed out</span>`."""
    return Markup(f'<span class="status status-{escape(value)}">{escape(label(value))}</span>')


def name_link(text, href) -> Markup:
    """A name that may be long (a job's, up to 200 characters), cut with an ellipsis by CSS to
    keep every column of its table in view; the full text on hover and for screen readers."""
    text = escape(text)
    return Markup(f'<a class="clip" href="{escape(href)}" title="{text}">{text}</a>')


def enabled_badge(enabled) -> Markup:
    return _ENABLED if enabled else _DISABLED


_URL_SENTINEL = 987654321


def url_pattern(endpoint: str, key: str):
    """`url_for(endpoint, key=value)` for every row of a list: the URL is built once and each
    row's value formatted into it (url_for per row was a tenth of a list page's CPU)."""
    url = url_for(endpoint, **{key: _URL_SENTINEL})
    head, found, tail = url.partition(str(_URL_SENTINEL))
    if not found or str(_URL_SENTINEL) in tail:
        return lambda value: url_for(endpoint, **{key: value})
    return lambda value: f"{head}{value}{tail}"


def register_filters(app: Flask) -> None:
    app.add_template_filter(format_utc, "utc")
    app.add_template_filter(iso_utc, "iso")
    app.add_template_filter(format_local, "localtime")
    app.add_template_filter(format_seconds, "seconds")
    app.add_template_filter(age, "age")
    app.add_template_filter(label, "label")
    app.add_template_filter(time_cell, "time_cell")
    app.add_template_filter(status_badge, "status_badge")
    app.add_template_filter(name_link, "name_link")
    app.add_template_filter(enabled_badge, "enabled_badge")
    app.add_template_global(url_pattern, "url_pattern")
