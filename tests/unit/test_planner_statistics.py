"""When a tick's burst leaves the planner's statistics of executions behind (app/store/postgres.py)."""

from app.store.postgres import STALE_STATISTICS_MIN_ROWS, statistics_stale


def test_a_burst_larger_than_the_table_the_statistics_describe_is_stale():
    assert statistics_stale(1000, -1)  # never analyzed (a new table, or truncated)
    assert statistics_stale(1000, 0)  # analyzed while empty
    assert statistics_stale(1000, None)  # no estimate at all
    assert statistics_stale(1000, 999)


def test_a_small_burst_or_a_table_the_statistics_already_count_as_larger_is_not():
    assert not statistics_stale(STALE_STATISTICS_MIN_ROWS - 1, -1)  # too few rows to matter
    assert statistics_stale(STALE_STATISTICS_MIN_ROWS, -1)
    assert not statistics_stale(1000, 1000)
    assert not statistics_stale(1000, 10_000_000)  # a burst into a large table: autovacuum's job
