"""The routing rules with literal instants: which route a job follows, which channels an event
reaches, parsing, the quiet window (across midnight, in a time zone, over a DST change) and when a
group's next message may go."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from app.domain.notify_routing import (
    DEFAULT_EVENTS,
    ChannelRules,
    Route,
    effective_route,
    parse_events,
    parse_quiet,
    quiet_until,
    routed_channels,
    send_at,
)


def rules(id=1, *, kinds=(), group=600, quiet=(None, None), zone=None, enabled=True):
    return ChannelRules(id, enabled, tuple(kinds), group, quiet[0], quiet[1], zone)


def at(*args):
    return datetime(*args, tzinfo=UTC)


def test_a_jobs_override_beats_its_project_which_beats_the_default():
    project = Route(("failure",), (1,), "project")
    assert effective_route(None, None) == Route(DEFAULT_EVENTS, None, "default")
    assert effective_route(None, project) == project
    assert effective_route(Route(("success",), (2,), "job"), project) == Route(("success",), (2,), "job")
    # An override naming no channel keeps its project's channels.
    assert effective_route(Route(("recovery",), None, "job"), project) == Route(("recovery",), (1,), "job")


def test_the_channels_an_event_reaches():
    channels = [rules(1), rules(2, kinds=("dead_letter",)), rules(3, enabled=False)]
    every = Route(("failure", "dead_letter"), None, "project")
    assert [c.id for c in routed_channels(every, "failure", channels)] == [1]
    assert [c.id for c in routed_channels(every, "dead_letter", channels)] == [1, 2]
    assert routed_channels(every, "success", channels) == []
    assert [c.id for c in routed_channels(Route(("dead_letter",), (2,), "job"), "dead_letter", channels)] == [2]


def test_events_parse_in_their_order_and_unknown_ones_are_named():
    assert parse_events("recovery, failure") == ("failure", "recovery")
    assert parse_events("none") == () and parse_events([]) == ()
    with pytest.raises(ValueError, match="unknown event\\(s\\) boom"):
        parse_events("failure,boom")


@pytest.mark.parametrize(
    ("text", "window"), [("22:00-07:00", ("22:00", "07:00")), ("9:30 - 17:00", ("09:30", "17:00")), ("off", None)]
)
def test_quiet_windows_parse(text, window):
    assert parse_quiet(text) == window


@pytest.mark.parametrize("text", ["22:00", "24:00-07:00", "22:60-07:00", "7pm-8am", "08:00-08:00"])
def test_bad_quiet_windows_are_refused(text):
    with pytest.raises(ValueError):
        parse_quiet(text)


def test_a_window_across_midnight_holds_until_its_end():
    assert quiet_until(at(2026, 6, 1, 23, 30), "22:00", "07:00", None) == at(2026, 6, 2, 7, 0)
    assert quiet_until(at(2026, 6, 2, 3, 0), "22:00", "07:00", None) == at(2026, 6, 2, 7, 0)
    assert quiet_until(at(2026, 6, 2, 7, 0), "22:00", "07:00", None) is None
    assert quiet_until(at(2026, 6, 2, 12, 0), "22:00", "07:00", None) is None
    assert quiet_until(at(2026, 6, 2, 12, 0), "09:00", "17:00", None) == at(2026, 6, 2, 17, 0)


def test_a_window_in_a_time_zone_and_over_a_dst_change():
    # Paris is UTC+2 in June: 19:30 UTC is 21:30 there (not yet quiet), 20:00 UTC is 22:00; the
    # window ends at 07:00 Paris, 05:00 UTC.
    assert quiet_until(at(2026, 6, 1, 19, 30), "22:00", "07:00", "Europe/Paris") is None
    assert quiet_until(at(2026, 6, 1, 20, 0), "22:00", "07:00", "Europe/Paris") == at(2026, 6, 2, 5, 0)
    # The night clocks go back (25 October 2026): 07:00 Paris is 06:00 UTC the next morning.
    assert quiet_until(at(2026, 10, 24, 21, 0), "22:00", "07:00", "Europe/Paris") == at(2026, 10, 25, 6, 0)


def test_a_groups_next_message_waits_for_the_window_and_the_quiet():
    now = at(2026, 6, 1, 12, 0)
    assert send_at(now, rules(), last_message_at=None) == now
    assert send_at(now, rules(), last_message_at=now - timedelta(minutes=4)) == now + timedelta(minutes=6)
    assert send_at(now, rules(), last_message_at=now - timedelta(minutes=11)) == now
    assert send_at(now, rules(group=0), last_message_at=now) == now
    quiet = rules(quiet=("12:05", "13:00"))
    assert send_at(now, quiet, last_message_at=now - timedelta(minutes=4)) == at(2026, 6, 1, 13, 0)
