"""The rules that decide how a capped row count is shown: exact, an estimate, or a lower bound."""

from __future__ import annotations

import pytest

from app.services.read.row_counts import ESTIMATE, EXACT, MORE_THAN, RowCount, round_estimate, settle, settle_total


@pytest.mark.parametrize(
    "rows,shown",
    [
        (0, 0),
        (7, 7),
        (999, 999),
        (1_234, 1_230),
        (50_001, 50_000),
        (991_001, 991_000),
        (992_133.4, 992_000),
        (999_600, 1_000_000),
        (1_234_567, 1_230_000),
        (-3, 0),
    ],
)
def test_estimates_keep_three_significant_figures(rows, shown):
    assert round_estimate(rows) == shown


def test_counts_up_to_the_cap_are_exact_whatever_the_planner_thinks():
    assert settle(0, None, cap=100) == RowCount(0, EXACT)
    assert settle(100, 5_000_000, cap=100) == RowCount(100, EXACT)


def test_a_count_past_the_cap_shows_the_planner_estimate_rounded():
    assert settle(101, 991_001.0, cap=100) == RowCount(991_000, ESTIMATE)


def test_a_count_past_the_cap_with_stale_statistics_is_a_lower_bound():
    # The planner expects fewer rows than were just counted (statistics from before they arrived,
    # or no planner at all): all that is known is "more than the cap".
    assert settle(101, 40.0, cap=100) == RowCount(100, MORE_THAN)
    assert settle(101, None, cap=100) == RowCount(100, MORE_THAN)


def test_a_total_is_as_inexact_as_its_least_exact_part():
    assert settle_total([RowCount(3), RowCount(4)]) == RowCount(7, EXACT)
    assert settle_total([RowCount(4_999), RowCount(991_000, ESTIMATE)]) == RowCount(996_000, ESTIMATE)
    assert settle_total([RowCount(5), RowCount(991_000, ESTIMATE), RowCount(50_000, MORE_THAN)]) == RowCount(
        1_041_005, MORE_THAN
    )
    assert settle_total([]) == RowCount(0, EXACT)
