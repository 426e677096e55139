"""Template filters for times, ages and durations. Values may be datetimes or ISO 8601 text
(cached dashboard data is JSON, so its instants arrive as text).

The cell filters (`time_cell`, `status_badge`, `name_link`, `enabled_badge`) hold the markup of
the small building blocks list tables repeat in every row; the macros of the same names in
templates/macros/ui.html call them. A Jinja macro call per cell cost the 50-row lists more CPU
than their queries, a filter a fraction of it."""

from __future__ import annotations

from datetime import UTC, datetime
from functools import lru_cache
from zoneinfo import ZoneInfo

from flask import Flask, g, has_request_context, url_for
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


@lru_cache(maxsize=64)
def _zone(name: str) -> ZoneInfo:
    return ZoneInfo(name)


def display_zone() -> str:
    """The signed-in user's display time zone (their settings), else UTC; read once per request."""
    if not has_request_context():
        return "UTC"
    zone = g.get("display_zone")
    if zone is None:
        from flask_login import current_user

        zone = getattr(current_user, "time_zone", None) if current_user.is_authenticated else None
        try:
            _zone(zone or "UTC")
        except (KeyError, ValueError):
            zone = None
        g.display_zone = zone = zone or "UTC"
    return zone


def format_when(value) -> str:
    """The one time format of the web: the instant in the viewer's zone, seconds precision, with
    the zone (`2026-06-01 21:00:05 JST`); an em dash for nothing. Plain text (for attributes)."""
    moment = as_datetime(value)
    if moment is None:
        return "—"
    zone = display_zone()
    if zone == "UTC":
        return moment.strftime("%Y-%m-%d %H:%M:%S UTC")
    return moment.astimezone(_zone(zone)).strftime("%Y-%m-%d %H:%M:%S %Z")


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
    """An instant on a page: `format_when` in a `<time>` with the ISO instant, and the UTC instant
    on hover; a muted dash for nothing. Every template shows times through it (or `utc`, its
    plain-text twin for attributes), so there is one format everywhere."""
    if not value:
        return _DASH_CELL
    moment = as_datetime(value)
    if moment is None:  # text that is no instant
        return Markup('<time datetime="" title="—"></time>')
    # Digits, dashes, colons, spaces and a zone abbreviation: nothing to escape. (f-strings, not
    # Markup's `%`, whose per-argument wrappers cost more than the rest of the cell.)
    shown = escape(format_when(moment))
    return Markup(f'<time datetime="{iso_z(moment)}" title="{moment.strftime("%Y-%m-%d %H:%M:%S")} UTC">{shown}</time>')


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
    app.add_template_filter(format_when, "utc")  # the viewer's zone, with the zone named
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
    app.add_template_global(display_zone, "display_zone")
