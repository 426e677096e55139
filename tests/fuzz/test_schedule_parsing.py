"""Fuzzing the pure schedule engine: whatever comes in, the answer is a usable schedule or a
ScheduleError with a short, one-line message for the operator. Never another exception (which
would be a 500 in the web UI and a traceback in the CLI), and never an empty message.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import example, given
from hypothesis import strategies as st

from app.scheduling import CronExpression, ScheduleError, parse_interval, parse_schedule, preview
from tests.fuzz.strategies import FUZZ, hostile_text, json_values, schedule_values

ANCHOR = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def assert_clear(error: ScheduleError) -> None:
    assert str(error).strip(), "an empty refusal"


def tz_names() -> st.SearchStrategy[str]:
    return st.one_of(
        st.sampled_from(
            [
                "UTC",
                "America/New_York",
                "Australia/Lord_Howe",
                "America",
                "Etc",
                "posixrules",
                "zone.tab",
                "../UTC",
                "/etc/localtime",
                "UTC\x00",
                "utc",
            ]
        ),
        hostile_text(80),
    )


@FUZZ
@given(value=st.one_of(hostile_text(), json_values))
@example("America")
@example({"minutes": "x" * 100_000})
@example("1" * 5000 + "s")
def test_parse_interval_returns_a_positive_duration_or_a_clear_refusal(value):
    try:
        every = parse_interval(value)
    except ScheduleError as error:
        assert_clear(error)
        return
    assert isinstance(every, timedelta) and every > timedelta(0)


@FUZZ
@given(text=st.one_of(hostile_text(), json_values, st.lists(hostile_text(8), min_size=5, max_size=5).map(" ".join)))
@example("0 0 30 2 *")
@example("* * * * " + "1" * 100_000)
@example("0-59/99999999999999999999 * * * *")
def test_cron_parse_returns_an_expression_that_can_fire_or_a_clear_refusal(text):
    try:
        expression = CronExpression.parse(text)
    except ScheduleError as error:
        assert_clear(error)
        return
    schedule = parse_schedule("cron", {"expression": expression.text}, "UTC")
    assert schedule.next_after(ANCHOR) is not None


@FUZZ
@given(
    schedule_type=st.one_of(st.sampled_from(["one_time", "interval", "cron"]), hostile_text(20)),
    data=st.data(),
    zone=tz_names(),
)
@example(schedule_type="interval", data=None, zone="America")
def test_parse_schedule_and_preview_never_raise_anything_but_schedule_error(schedule_type, data, zone):
    value = (
        data.draw(schedule_values(schedule_type))
        if data is not None and schedule_type in ("one_time", "interval", "cron")
        else {"every": "1m"}
    )
    try:
        schedule = parse_schedule(schedule_type, value, zone, anchor=ANCHOR)
        items = preview(schedule, ANCHOR, 3)
    except ScheduleError as error:
        assert_clear(error)
        return
    # What was accepted must survive the storage round trip the job row relies on.
    assert parse_schedule(schedule_type, schedule.to_json(), zone) == schedule
    assert all(item.utc > ANCHOR for item in items)
