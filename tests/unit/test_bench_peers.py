"""The peer harness's pure parts: options, the summary and the table, the stamp readers. The
harness itself (`python -m bench peers`) installs the peers and runs for minutes: never in tests."""

from __future__ import annotations

import pytest

from bench.peers import ORDER, parse_args, render_table, summarise
from bench.peers.systems import _rq_stamp, read_celery_stamps


def _round(rate: float, cpu: float, rss: float | None) -> dict:
    return {"rate": rate, "cpu_ms_per_job": cpu, "parent_rss_mb": rss}


CANNED = {
    "systems": {
        "cronwell": {
            "label": "Cronwell 1 worker x 4 slots",
            "isolation": "process per task",
            "rounds": [_round(400, 3.5, 70.0), _round(500, 3.7, 72.5), _round(460, 3.6, 71.0)],
        },
        "cronwell-pool": {
            "label": "Cronwell pool 1 x 2",
            "isolation": "reused pool",
            "rounds": [_round(1100, 1.2, 60.0), _round(1200, 1.1, 61.0), _round(1150, 1.2, 60.5)],
        },
        "fork": {"label": "fork limit", "isolation": "-", "rounds": [_round(900, 1.0, None), _round(1000, 1.0, None)]},
        "rq": {"label": "rq, 2 processes", "isolation": "fork per job", "rounds": [_round(115, 14.0, 36.0)]},
        "celery": {"label": "Celery prefork -c 2", "isolation": "reused pool", "rounds": [{"error": "boom"}]},
        "procrastinate": {"label": "Procrastinate", "isolation": "in-process", "rounds": [_round(575, 2.0, 38.0)]},
    }
}


def test_defaults_are_the_documented_full_run():
    options = parse_args([])
    assert (options.peers_n, options.rounds, options.redis_db) == (3000, 3, 13)
    assert options.systems == list(ORDER)
    assert not options.skip_install


def test_a_subset_keeps_cronwell_and_the_run_order():
    options = parse_args(["--systems", "celery,rq", "--peers-n", "200", "--rounds", "1"])
    assert options.systems == ["cronwell", "rq", "celery"]
    assert parse_args(["--systems", "cronwell-pool,celery"]).systems == ["cronwell", "cronwell-pool", "celery"]
    assert (options.peers_n, options.rounds) == (200, 1)


@pytest.mark.parametrize(
    "argv",
    [["--systems", "sidekiq"], ["--peers-n", "0"], ["--rounds", "0"], ["--redis-db", "16"], ["--peers-n", "x"]],
)
def test_bad_options_exit_with_a_usage_error(argv, capsys):
    with pytest.raises(SystemExit) as exit_info:
        parse_args(argv)
    assert exit_info.value.code == 2
    assert "error:" in capsys.readouterr().err


def test_summary_takes_medians_and_cronwells_ratio_to_each():
    found = summarise(CANNED)
    assert found["cronwell"]["rate_median"] == 460
    assert found["cronwell"]["rss_mb"] == 72.5
    assert found["cronwell"]["cronwell_ratio"] is None
    assert found["fork"]["rate_median"] == 950
    assert found["fork"]["cpu_ms_median"] is None  # a bare fork loop: no per-job CPU figure
    assert found["fork"]["cronwell_ratio"] == pytest.approx(460 / 950)
    assert found["rq"]["cronwell_ratio"] == pytest.approx(4.0)
    assert found["celery"]["rounds"] == 0


def test_summary_gives_the_pool_rows_ratio_to_each_peer():
    found = summarise(CANNED)
    assert found["cronwell-pool"]["rate_median"] == 1150
    assert found["procrastinate"]["pool_ratio"] == pytest.approx(2.0)
    assert found["rq"]["pool_ratio"] == pytest.approx(10.0)
    assert found["cronwell"]["pool_ratio"] is None and found["cronwell-pool"]["pool_ratio"] is None
    assert found["cronwell-pool"]["cronwell_ratio"] is None


def test_table_has_a_row_per_system_with_rates_ratios_and_failures():
    table = render_table(CANNED).splitlines()
    assert table[0].split()[:2] == ["system", "isolation"]
    rows = {line.split("  ")[0].strip(): line for line in table[2:]}
    assert set(rows) == {
        "Cronwell 1 worker x 4 slots",
        "Cronwell pool 1 x 2",
        "fork limit",
        "rq, 2 processes",
        "Celery prefork -c 2",
        "Procrastinate",
    }
    assert "460 (400-500)" in rows["Cronwell 1 worker x 4 slots"]
    assert "72.5 MB" in rows["Cronwell 1 worker x 4 slots"]
    assert rows["fork limit"].split()[-2:] == ["0.48x", "1.21x"]
    assert rows["rq, 2 processes"].split()[-2:] == ["4.00x", "10.00x"]
    assert rows["Procrastinate"].split()[-2:] == ["0.80x", "2.00x"]
    assert "no result" in rows["Celery prefork -c 2"]  # failed or interrupted


def test_celery_stamps_count_finishes_and_take_first_start_and_last_finish(tmp_path):
    path = tmp_path / "celery.stamps"
    assert read_celery_stamps(path) == (0, None, None)
    path.write_bytes(
        b"S1000000000000000000\nF1000000000500000000\nS0999999999000000000\nF1000000002000000000\nF10000\n"
    )
    done, first, last = read_celery_stamps(path)
    assert done == 2  # the torn last line is not a finish
    assert first == pytest.approx(999_999_999.0)
    assert last == pytest.approx(1_000_000_002.0)


def test_rq_stamps_are_utc():
    assert _rq_stamp(b"1970-01-01T00:00:01.500000Z") == pytest.approx(1.5)
    assert _rq_stamp(b"") is None
    assert _rq_stamp(None) is None
