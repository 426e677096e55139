"""How long an idle worker sleeps and how often it beats (app/services/engine/idle_pacing.py)."""

from datetime import UTC, datetime, timedelta

from app.services.engine import idle_pacing
from app.sql.waiting import IdleLook, Outlook

NOW = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)


def test_a_safety_look_that_finds_nothing_sleeps_the_whole_idle_poll():
    assert idle_pacing.rest_after_look(IdleLook(earliest=None, orders=False), now=NOW, idle_poll=5) == 5


def test_a_safety_look_sleeps_only_until_the_next_row_becomes_claimable():
    look = IdleLook(earliest=NOW + timedelta(seconds=2), orders=False)
    assert idle_pacing.rest_after_look(look, now=NOW, idle_poll=5) == 2
    later = IdleLook(earliest=NOW + timedelta(seconds=60), orders=False)
    assert idle_pacing.rest_after_look(later, now=NOW, idle_poll=5) == 5


def test_a_claimable_row_or_a_waiting_order_ends_the_rest_at_once():
    assert (
        idle_pacing.rest_after_look(IdleLook(earliest=NOW - timedelta(seconds=1), orders=False), now=NOW, idle_poll=5)
        == 0
    )
    assert idle_pacing.rest_after_look(IdleLook(earliest=None, orders=True), now=NOW, idle_poll=5) == 0


def test_after_a_turn_a_quiet_worker_sleeps_the_idle_poll_unless_rows_are_held_back():
    nothing = Outlook(next_at=None, held_back=False)
    assert idle_pacing.wait_after_turn(nothing, now=NOW, poll=1, idle_poll=5, quiet=True) == 5
    assert idle_pacing.wait_after_turn(nothing, now=NOW, poll=1, idle_poll=5, quiet=False) == 1
    held = Outlook(next_at=None, held_back=True)  # a limit or a paused queue: what frees it sends no NOTIFY
    assert idle_pacing.wait_after_turn(held, now=NOW, poll=1, idle_poll=5, quiet=True) == 1


def test_after_a_turn_the_next_claimable_row_shortens_the_sleep():
    soon = Outlook(next_at=NOW + timedelta(milliseconds=300), held_back=False)
    assert idle_pacing.wait_after_turn(soon, now=NOW, poll=1, idle_poll=5, quiet=True) == 0.3
    due = Outlook(next_at=NOW - timedelta(seconds=1), held_back=False)
    assert idle_pacing.wait_after_turn(due, now=NOW, poll=1, idle_poll=5, quiet=True) == 0


def test_an_idle_listening_worker_beats_less_often_but_well_inside_the_staleness_limit():
    assert idle_pacing.heartbeat_every(busy=True, listening=True, normal=5, stale_seconds=60) == 5
    assert idle_pacing.heartbeat_every(busy=False, listening=False, normal=5, stale_seconds=60) == 5
    assert idle_pacing.heartbeat_every(busy=False, listening=True, normal=5, stale_seconds=60) == 15
    assert idle_pacing.heartbeat_every(busy=False, listening=True, normal=5, stale_seconds=20) == 5
    assert idle_pacing.heartbeat_every(busy=False, listening=True, normal=5, stale_seconds=40) == 10
