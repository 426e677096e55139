"""The backfill request, parsed once for the form, the CLI and the API (no database)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from marshmallow import ValidationError

from app.definitions.backfill import MAX_BACKFILL, BackfillSchema, window_errors

NOW = datetime(2026, 6, 10, 12, 0, tzinfo=UTC)


def load(data, timezone="UTC"):
    return BackfillSchema(now=NOW, timezone=timezone).load(data)


def errors_of(data, timezone="UTC"):
    with pytest.raises(ValidationError) as caught:
        load(data, timezone)
    return caught.value.messages


def test_a_window_without_offsets_is_read_in_the_jobs_zone():
    request = load({"from": "2026-06-01T00:00", "to": "2026-06-02T00:00"}, timezone="Asia/Tokyo")
    assert request == {
        "start": datetime(2026, 5, 31, 15, 0, tzinfo=UTC),
        "end": datetime(2026, 6, 1, 15, 0, tzinfo=UTC),
        "max_runs": None,
        "overlap": None,
        "dry_run": False,
    }


def test_text_from_a_form_and_values_from_json_load_alike():
    from_form = load({"from": "2026-06-01T00:00Z", "to": "2026-06-02T00:00Z", "max": "10", "overlap": "queue"})
    from_json = load({"from": "2026-06-01T00:00:00+00:00", "to": "2026-06-02T00:00:00Z", "max": 10, "overlap": "queue"})
    assert from_form == from_json and from_form["max_runs"] == 10 and from_form["overlap"] == "queue"


@pytest.mark.parametrize(
    ("data", "key", "message"),
    [
        ({"from": "2026-06-02T00:00Z", "to": "2026-06-01T00:00Z"}, "to", "ends before it starts"),
        ({"from": "2026-06-01T00:00Z", "to": "2026-06-11T00:00Z"}, "to", "covers the past"),
        ({"from": "2000-01-01T00:00Z", "to": "2026-06-01T00:00Z"}, "to", "at most 3660 days"),
        ({"from": "yesterday", "to": "2026-06-01T00:00Z"}, "from", "ISO"),
        ({"from": "2026-06-01T00:00Z"}, "to", "is required"),
        ({"from": "2026-06-01T00:00Z", "to": "2026-06-02T00:00Z", "max": 0}, "max", "between 1 and 1000"),
        ({"from": "2026-06-01T00:00Z", "to": "2026-06-02T00:00Z", "max": "ten"}, "max", "whole number"),
        ({"from": "2026-06-01T00:00Z", "to": "2026-06-02T00:00Z", "overlap": "sometimes"}, "overlap", "one of"),
        ({"from": "2026-06-01T00:00Z", "to": "2026-06-02T00:00Z", "dry_run": "yes"}, "dry_run", "true or false"),
    ],
)
def test_each_refusal_is_keyed_by_the_input_at_fault(data, key, message):
    messages = errors_of(data)
    assert key in messages and message in str(messages[key]), messages


def test_the_window_rules_are_the_same_for_values_given_directly():
    start, end = datetime(2026, 6, 2, tzinfo=UTC), datetime(2026, 6, 1, tzinfo=UTC)
    assert window_errors(start, end, now=NOW) == {"to": "the window ends before it starts"}
    assert window_errors(end, start, now=NOW, max_runs=MAX_BACKFILL + 1) == {"max": "must be between 1 and 1000"}
    assert window_errors(end, start, now=NOW, overlap="allow") == {}
