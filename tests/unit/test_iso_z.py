"""app.clock.iso_z: the one ISO 8601 with `Z` formatter."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from app.clock import iso_z


def test_utc_instants_end_in_z_with_microseconds_only_when_present():
    assert iso_z(datetime(2026, 6, 1, 12, 0, tzinfo=UTC)) == "2026-06-01T12:00:00Z"
    assert iso_z(datetime(2026, 6, 1, 12, 0, 0, 5, tzinfo=UTC)) == "2026-06-01T12:00:00.000005Z"


def test_other_zones_are_converted_to_utc():
    paris_summer = timezone(timedelta(hours=2))
    assert iso_z(datetime(2026, 6, 1, 14, 0, tzinfo=paris_summer)) == "2026-06-01T12:00:00Z"


def test_fixed_width_and_millisecond_forms():
    moment = datetime(2026, 6, 1, 12, 0, 0, 123456, tzinfo=UTC)
    assert iso_z(moment.replace(microsecond=0), "microseconds") == "2026-06-01T12:00:00.000000Z"
    assert iso_z(moment, "milliseconds") == "2026-06-01T12:00:00.123Z"


def test_none_stays_none_and_naive_or_non_datetimes_are_refused():
    assert iso_z(None) is None
    with pytest.raises(ValueError, match="naive"):
        iso_z(datetime(2026, 6, 1, 12, 0))
    with pytest.raises(TypeError):
        iso_z("2026-06-01T12:00:00Z")  # type: ignore[arg-type]
