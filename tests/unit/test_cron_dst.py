"""The DST rule (docs/adr/0005-dst-rule.md), as a table of literal days with exact UTC instants.

Fixed-hour jobs: a missing local time runs at the first instant after the gap,
once; a repeated local time runs once, at its first occurrence. Wildcard-hour
jobs follow elapsed time: missing times are skipped, repeated times run twice.
"""

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from app.scheduling import CronExpression
from app.scheduling.timezones import WallTimeKind, locate_wall_time

UTC = UTC


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def z(instant: datetime) -> str:
    return instant.isoformat().replace("+00:00", "Z")


def transitions(zone_name: str, year: int) -> list[tuple[datetime, timedelta, timedelta]]:
    """(instant, offset before, offset after) of each offset change in ``year``, to the minute."""
    zone = ZoneInfo(zone_name)
    found = []
    day = datetime(year, 1, 1, tzinfo=UTC)
    while day.year == year:
        following = day + timedelta(days=1)
        before, after = day.astimezone(zone).utcoffset(), following.astimezone(zone).utcoffset()
        if before != after:
            minute = day
            while minute.astimezone(zone).utcoffset() == before:
                minute += timedelta(minutes=1)
            found.append((minute, before, after))
        day = following
    return found


def test_transition_dates_used_below_are_real():
    """Check the tzdata facts the table relies on, so a tzdata change fails loudly here."""
    hours = timedelta(hours=1)
    assert transitions("America/New_York", 2026) == [
        (utc("2026-03-08T07:00:00Z"), -5 * hours, -4 * hours),
        (utc("2026-11-01T06:00:00Z"), -4 * hours, -5 * hours),
    ]
    assert transitions("Europe/London", 2026) == [
        (utc("2026-03-29T01:00:00Z"), 0 * hours, 1 * hours),
        (utc("2026-10-25T01:00:00Z"), 1 * hours, 0 * hours),
    ]
    assert transitions("Australia/Lord_Howe", 2026) == [
        (utc("2026-04-04T15:00:00Z"), 11 * hours, 10.5 * hours),
        (utc("2026-10-03T15:30:00Z"), 10.5 * hours, 11 * hours),
    ]
    assert transitions("America/Santiago", 2026) == [
        (utc("2026-04-05T03:00:00Z"), -3 * hours, -4 * hours),
        (utc("2026-09-06T04:00:00Z"), -4 * hours, -3 * hours),
    ]
    assert transitions("Asia/Kolkata", 2026) == []


GAP = "DST gap: {} does not exist, runs at {}"
FOLD_FIRST = "DST fold: {} occurs twice, runs at the first ({})"
FOLD_SECOND = "DST fold: second {} ({})"
SKIPPED = "DST gap: {} does not exist, skipped"

# (zone, expression, after, [(expected UTC instant, expected note), ...]) in order.
CASES = [
    # --- America/New_York, spring forward 2026-03-08: 02:00 EST -> 03:00 EDT (07:00Z).
    (
        "America/New_York",
        "30 2 * * *",
        "2026-03-07T00:00:00Z",
        [
            ("2026-03-07T07:30:00Z", None),
            ("2026-03-08T07:00:00Z", GAP.format("02:30", "03:00")),
            ("2026-03-09T06:30:00Z", None),
        ],
    ),
    (
        "America/New_York",
        "15,45 2 * * *",
        "2026-03-08T00:00:00Z",
        [  # two gap times, one run
            ("2026-03-08T07:00:00Z", GAP.format("02:15", "03:00")),
            ("2026-03-09T06:15:00Z", None),
        ],
    ),
    (
        "America/New_York",
        "0 2,3 * * *",
        "2026-03-08T00:00:00Z",
        [  # gap run merges with 03:00
            ("2026-03-08T07:00:00Z", GAP.format("02:00", "03:00")),
            ("2026-03-09T06:00:00Z", None),
        ],
    ),
    (
        "America/New_York",
        "0 * * * *",
        "2026-03-08T05:00:00Z",
        [  # 02:00 local is skipped
            ("2026-03-08T06:00:00Z", None),
            ("2026-03-08T07:00:00Z", SKIPPED.format("02:00")),
            ("2026-03-08T08:00:00Z", None),
        ],
    ),
    (
        "America/New_York",
        "*/30 * * * *",
        "2026-03-08T06:00:00Z",
        [
            ("2026-03-08T06:30:00Z", None),
            ("2026-03-08T07:00:00Z", "DST gap: 02:00 to 02:30 do not exist, 2 runs skipped"),
            ("2026-03-08T07:30:00Z", None),
        ],
    ),
    (
        "America/New_York",
        "@daily",
        "2026-03-07T12:00:00Z",
        [
            ("2026-03-08T05:00:00Z", None),
            ("2026-03-09T04:00:00Z", None),
        ],
    ),
    # --- America/New_York, fall back 2026-11-01: 01:00-01:59 happens at 05:xxZ (EDT) and 06:xxZ (EST).
    (
        "America/New_York",
        "30 1 * * *",
        "2026-10-31T12:00:00Z",
        [
            ("2026-11-01T05:30:00Z", FOLD_FIRST.format("01:30", "EDT")),
            ("2026-11-02T06:30:00Z", None),
        ],
    ),
    (
        "America/New_York",
        "30 1 * * 0",
        "2026-10-31T12:00:00Z",
        [  # weekly (Sunday)
            ("2026-11-01T05:30:00Z", FOLD_FIRST.format("01:30", "EDT")),
            ("2026-11-08T06:30:00Z", None),
        ],
    ),
    (
        "America/New_York",
        "30 1 1 * *",
        "2026-10-15T00:00:00Z",
        [  # monthly
            ("2026-11-01T05:30:00Z", FOLD_FIRST.format("01:30", "EDT")),
            ("2026-12-01T06:30:00Z", None),
        ],
    ),
    (
        "America/New_York",
        "30 1 1 11 *",
        "2026-10-01T00:00:00Z",
        [  # yearly
            ("2026-11-01T05:30:00Z", FOLD_FIRST.format("01:30", "EDT")),
            ("2027-11-01T05:30:00Z", None),  # DST ends 2027-11-07, so still EDT
        ],
    ),
    (
        "America/New_York",
        "0 1 * * *",
        "2026-11-01T04:00:00Z",
        [
            ("2026-11-01T05:00:00Z", FOLD_FIRST.format("01:00", "EDT")),
            ("2026-11-02T06:00:00Z", None),
        ],
    ),
    (
        "America/New_York",
        "0 * * * *",
        "2026-11-01T04:00:00Z",
        [  # both 01:00s, one hour apart
            ("2026-11-01T05:00:00Z", None),
            ("2026-11-01T06:00:00Z", FOLD_SECOND.format("01:00", "EST")),
            ("2026-11-01T07:00:00Z", None),
        ],
    ),
    (
        "America/New_York",
        "@hourly",
        "2026-11-01T04:30:00Z",
        [
            ("2026-11-01T05:00:00Z", None),
            ("2026-11-01T06:00:00Z", FOLD_SECOND.format("01:00", "EST")),
            ("2026-11-01T07:00:00Z", None),
        ],
    ),
    (
        "America/New_York",
        "*/30 * * * *",
        "2026-11-01T04:30:00Z",
        [  # 4 runs in the doubled hour
            ("2026-11-01T05:00:00Z", None),
            ("2026-11-01T05:30:00Z", None),
            ("2026-11-01T06:00:00Z", FOLD_SECOND.format("01:00", "EST")),
            ("2026-11-01T06:30:00Z", FOLD_SECOND.format("01:30", "EST")),
            ("2026-11-01T07:00:00Z", None),
        ],
    ),
    # --- Europe/London, 2026-03-29: 01:00 GMT -> 02:00 BST (01:00Z).
    (
        "Europe/London",
        "30 1 * * *",
        "2026-03-28T12:00:00Z",
        [
            ("2026-03-29T01:00:00Z", GAP.format("01:30", "02:00")),
            ("2026-03-30T00:30:00Z", None),
        ],
    ),
    (
        "Europe/London",
        "0 * * * *",
        "2026-03-29T00:00:00Z",
        [
            ("2026-03-29T01:00:00Z", SKIPPED.format("01:00")),
            ("2026-03-29T02:00:00Z", None),
        ],
    ),
    # --- Europe/London, 2026-10-25: 02:00 BST -> 01:00 GMT (01:00Z).
    (
        "Europe/London",
        "30 1 * * *",
        "2026-10-24T12:00:00Z",
        [
            ("2026-10-25T00:30:00Z", FOLD_FIRST.format("01:30", "BST")),
            ("2026-10-26T01:30:00Z", None),
        ],
    ),
    (
        "Europe/London",
        "0 * * * *",
        "2026-10-24T23:30:00Z",
        [
            ("2026-10-25T00:00:00Z", None),
            ("2026-10-25T01:00:00Z", FOLD_SECOND.format("01:00", "GMT")),
            ("2026-10-25T02:00:00Z", None),
        ],
    ),
    # --- Australia/Lord_Howe, 2026-04-05: 02:00 (+11) -> 01:30 (+10:30); 01:30-01:59 repeats.
    (
        "Australia/Lord_Howe",
        "45 1 * * *",
        "2026-04-04T00:00:00Z",
        [
            ("2026-04-04T14:45:00Z", FOLD_FIRST.format("01:45", "+11")),
            ("2026-04-05T15:15:00Z", None),
        ],
    ),
    (
        "Australia/Lord_Howe",
        "15 1 * * *",
        "2026-04-04T00:00:00Z",
        [  # 01:15 is not repeated
            ("2026-04-04T14:15:00Z", None),
            ("2026-04-05T14:45:00Z", None),
        ],
    ),
    (
        "Australia/Lord_Howe",
        "*/15 * * * *",
        "2026-04-04T14:15:00Z",
        [
            ("2026-04-04T14:30:00Z", None),
            ("2026-04-04T14:45:00Z", None),
            ("2026-04-04T15:00:00Z", FOLD_SECOND.format("01:30", "+1030")),
            ("2026-04-04T15:15:00Z", FOLD_SECOND.format("01:45", "+1030")),
            ("2026-04-04T15:30:00Z", None),
        ],
    ),
    # --- Australia/Lord_Howe, 2026-10-04: 02:00 (+10:30) -> 02:30 (+11); 02:00-02:29 missing.
    (
        "Australia/Lord_Howe",
        "15 2 * * *",
        "2026-10-02T12:00:00Z",
        [
            ("2026-10-02T15:45:00Z", None),
            ("2026-10-03T15:30:00Z", GAP.format("02:15", "02:30")),
            ("2026-10-04T15:15:00Z", None),
        ],
    ),
    (
        "Australia/Lord_Howe",
        "*/15 * * * *",
        "2026-10-03T15:15:00Z",
        [
            ("2026-10-03T15:30:00Z", "DST gap: 02:00 to 02:15 do not exist, 2 runs skipped"),
            ("2026-10-03T15:45:00Z", None),
        ],
    ),
    (
        "Australia/Lord_Howe",
        "0 * * * *",
        "2026-10-03T15:00:00Z",
        [
            ("2026-10-03T16:00:00Z", SKIPPED.format("02:00")),
        ],
    ),
    # --- America/Santiago, 2026-04-05: 00:00 (-03) -> 23:00 (-04) on the 4th; 23:xx repeats.
    (
        "America/Santiago",
        "30 23 * * *",
        "2026-04-03T12:00:00Z",
        [
            ("2026-04-04T02:30:00Z", None),
            ("2026-04-05T02:30:00Z", FOLD_FIRST.format("23:30", "-03")),
            ("2026-04-06T03:30:00Z", None),
        ],
    ),
    (
        "America/Santiago",
        "0 * * * *",
        "2026-04-05T01:30:00Z",
        [
            ("2026-04-05T02:00:00Z", None),
            ("2026-04-05T03:00:00Z", FOLD_SECOND.format("23:00", "-04")),
            ("2026-04-05T04:00:00Z", None),
        ],
    ),
    (
        "America/Santiago",
        "0 0 * * *",
        "2026-04-03T12:00:00Z",
        [  # midnight itself is not repeated
            ("2026-04-04T03:00:00Z", None),
            ("2026-04-05T04:00:00Z", None),
        ],
    ),
    # --- America/Santiago, 2026-09-06: 00:00 (-04) -> 01:00 (-03); midnight does not exist.
    (
        "America/Santiago",
        "0 0 * * *",
        "2026-09-05T00:00:00Z",
        [
            ("2026-09-05T04:00:00Z", None),
            ("2026-09-06T04:00:00Z", GAP.format("00:00", "01:00")),
            ("2026-09-07T03:00:00Z", None),
        ],
    ),
    (
        "America/Santiago",
        "30 0 6 9 *",
        "2026-01-01T00:00:00Z",
        [
            ("2026-09-06T04:00:00Z", GAP.format("00:30", "01:00")),
            ("2027-09-06T03:30:00Z", None),
        ],
    ),
    (
        "America/Santiago",
        "0 * * * *",
        "2026-09-06T03:00:00Z",
        [
            ("2026-09-06T04:00:00Z", SKIPPED.format("00:00")),
            ("2026-09-06T05:00:00Z", None),
        ],
    ),
]


@pytest.mark.parametrize(
    ("zone", "expression", "after", "expected"),
    CASES,
    ids=[f"{zone}|{expression}|{after[:10]}" for zone, expression, after, _ in CASES],
)
def test_dst_table(zone, expression, after, expected):
    cron = CronExpression.parse(expression)
    found, current = [], utc(after)
    for _ in expected:
        fire = cron.fire_after(current, zone)
        found.append((z(fire.instant), fire.note))
        current = fire.instant
    assert found == expected


@pytest.mark.parametrize(
    ("expression", "after", "expected"),
    [
        # Asking from inside the first pass of the fold still finds the second pass.
        ("0 * * * *", "2026-11-01T05:00:00Z", "2026-11-01T06:00:00Z"),
        ("0 * * * *", "2026-11-01T05:10:00Z", "2026-11-01T06:00:00Z"),
        ("*/30 * * * *", "2026-11-01T05:10:00Z", "2026-11-01T05:30:00Z"),
        ("*/30 * * * *", "2026-11-01T05:40:00Z", "2026-11-01T06:00:00Z"),
        ("*/30 * * * *", "2026-11-01T06:10:00Z", "2026-11-01T06:30:00Z"),
        ("45 1 * * *", "2026-11-01T05:50:00Z", "2026-11-02T06:45:00Z"),
        # Fixed-hour job asked between the two passes: no second run.
        ("30 1 * * *", "2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"),
        ("30 1 * * *", "2026-11-01T06:00:00Z", "2026-11-02T06:30:00Z"),
        # Asked exactly at the moved gap run: next day.
        ("30 2 * * *", "2026-03-08T07:00:00Z", "2026-03-09T06:30:00Z"),
        ("30 2 * * *", "2026-03-08T06:59:59Z", "2026-03-08T07:00:00Z"),
    ],
)
def test_next_after_from_inside_transitions(expression, after, expected):
    found = CronExpression.parse(expression).next_after(utc(after), "America/New_York")
    assert z(found) == expected


@pytest.mark.parametrize("zone_name", ["America/New_York", "Europe/London", "Australia/Lord_Howe", "America/Santiago"])
def test_locate_wall_time_agrees_with_round_trip_definition(zone_name):
    """Gap = the wall time does not survive a round trip through UTC; fold = offsets differ by fold."""
    zone = ZoneInfo(zone_name)
    for instant, _before, _after in transitions(zone_name, 2026):
        wall = (instant - timedelta(hours=3)).astimezone(zone).replace(tzinfo=None, second=0)
        for _ in range(6 * 60):
            wall += timedelta(minutes=1)
            resolved = locate_wall_time(wall, zone)
            round_trip = wall.replace(tzinfo=zone).astimezone(UTC).astimezone(zone)
            missing = round_trip.replace(tzinfo=None) != wall
            repeated = (
                wall.replace(tzinfo=zone, fold=0).utcoffset() != wall.replace(tzinfo=zone, fold=1).utcoffset()
            ) and not missing
            expected_kind = WallTimeKind.GAP if missing else WallTimeKind.FOLD if repeated else WallTimeKind.NORMAL
            assert resolved.kind is expected_kind, wall
            if missing:
                assert resolved.first == instant  # first valid instant after the gap
            else:
                assert resolved.first.astimezone(zone).replace(tzinfo=None) == wall
            if repeated:
                assert resolved.second - resolved.first == _before - _after
