"""A process follows the database's clock when its host clock is off by more than the tolerance,
and keeps its own clock when they agree (app/clock.py)."""

from datetime import UTC, datetime, timedelta

import pytest

from app import clock

T0 = datetime(2030, 1, 1, tzinfo=UTC)


@pytest.fixture(autouse=True)
def no_correction(monkeypatch):
    monkeypatch.setattr(clock, "_correction", timedelta(0))


def test_a_clock_in_step_is_left_alone():
    assert clock.follow(T0 + timedelta(milliseconds=40), T0) == timedelta(0)
    assert clock.correction() == timedelta(0)


def test_a_clock_30_s_ahead_follows_the_database():
    moved = clock.follow(T0, T0 + timedelta(seconds=30))
    assert moved == timedelta(seconds=-30) and clock.correction() == timedelta(seconds=-30)
    # Measured again, a few milliseconds apart: no jitter in utcnow().
    assert clock.follow(T0, T0 + timedelta(seconds=30, milliseconds=20)) == timedelta(0)
    # The host clock was fixed (NTP): the correction goes away.
    assert clock.follow(T0, T0) == timedelta(seconds=30) and clock.correction() == timedelta(0)


def test_utcnow_adds_the_correction(monkeypatch):
    monkeypatch.setattr(clock, "_host_offset", timedelta(0))
    real = clock.host_now()
    monkeypatch.setattr(clock, "_host_offset", timedelta(seconds=-30))  # CRONWELL_CLOCK_OFFSET_SECONDS=-30
    host = clock.host_now()
    assert abs(host - (real - timedelta(seconds=30))) < timedelta(seconds=1)
    clock.follow(host + timedelta(seconds=30), host)
    assert abs(clock.utcnow() - real) < timedelta(seconds=1)
