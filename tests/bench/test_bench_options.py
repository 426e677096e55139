"""`python -m bench`'s sizes: a full run, --quick and --smoke, and an explicit option over either."""

from __future__ import annotations

from bench.__main__ import BENCHMARKS, parse_args


def test_a_full_run_has_the_documented_sizes():
    options = parse_args([])
    assert (options.throughput_n, options.rows, options.rounds) == (3000, 1_000_000, 3)
    assert options.tick_sizes == [1000, 10000, 100000]
    assert options.burst_scenarios == ["100", "cron"] and options.burst_leads == [2000, 0]
    assert options.names == list(BENCHMARKS)
    assert not options.smoke and not options.quick


def test_smoke_is_the_smallest_size_and_takes_the_quick_shortcuts_too():
    smoke, quick = parse_args(["--smoke"]), parse_args(["--quick"])
    assert smoke.quick  # every benchmark's --quick shortcuts apply as well
    for size in ("throughput_n", "executor_tasks", "fresh_runs", "fire_seconds", "triggers", "rows", "retention_rows"):
        assert getattr(smoke, size) < getattr(quick, size), size
    assert max(smoke.tick_sizes) < min(quick.tick_sizes)
    assert smoke.burst_scenarios == ["100"]  # the cron minute would wait for the next minute


def test_an_option_given_beats_the_size_defaults():
    options = parse_args(["tick", "--smoke", "--tick-sizes", "300", "--rounds", "2", "--template-db", "tpl"])
    assert options.names == ["tick"]
    assert (options.tick_sizes, options.rounds, options.template_db) == ([300], 2, "tpl")
    assert options.throughput_n == parse_args(["--smoke"]).throughput_n
