"""Cronwell's benchmark suite: `python -m bench` (or `make bench`) runs every benchmark.

    python -m bench                      # everything, a table on stdout, JSON in bench/results/
    python -m bench throughput tick      # only these (names: see `python -m bench --help`)
    python -m bench --quick              # smaller sizes, for a smoke run

Rules the suite keeps (see docs/performance.md):
- every figure is printed next to a limit measured in the same run, as a ratio, because the
  machines are shared and noisy; targets are reported, never asserted;
- each run creates its own PostgreSQL database `cronwell_bench_<pid>` on the loopback server,
  migrates it with `flask db upgrade`, and drops it at the end;
- everything stops by itself (bounded counts and durations), and the suite never runs in CI.
"""
