"""`python -m bench [NAME ...] [options]`: run benchmarks, print a table, write JSON.

Names: throughput, executor, fire, tick, dashboard, memory, degradation, queues, console, sorts, events, api, burst,
retention, startup, idle, workflows (default: all, in that order). Results go to bench/results/<UTC timestamp>.json (gitignored).
`--smoke` runs them at the smallest sizes, seconds each (tests/bench runs every one so in the suite).
`python -m bench peers [--help]` runs the side-by-side comparison with the peers (bench/peers/).
"""

from __future__ import annotations

import argparse
import importlib
import json
import signal
import sys
import time
import traceback
from pathlib import Path

from app.clock import utcnow
from bench.harness import PROJECT_ROOT, BenchDatabase, machine_facts, server_facts
from bench.report import print_table

BENCHMARKS = {
    "throughput": "bench.throughput",
    "executor": "bench.executor_overhead",
    "fire": "bench.fire_precision",
    "tick": "bench.tick_scaling",
    "dashboard": "bench.dashboard",
    "memory": "bench.memory",
    "degradation": "bench.degradation",
    "queues": "bench.queues",
    "console": "bench.console",
    "sorts": "bench.execution_sorts",
    "events": "bench.events",
    "api": "bench.api",
    "burst": "bench.burst",
    "retention": "bench.retention",
    "startup": "bench.startup",
    "idle": "bench.idle",
    "workflows": "bench.workflows",
}
RESULTS_DIR = PROJECT_ROOT / "bench" / "results"
# Sizes and durations of a full run, of --quick and of --smoke, where an option does not say.
_FULL = {
    "throughput_n": 3000,
    "executor_tasks": 1000,
    "fresh_runs": 20,
    "fire_seconds": 30.0,
    "fire_jobs": 200,
    "triggers": 100,
    "tick_sizes": "1000,10000,100000",
    "rows": 1_000_000,
    "hold_seconds": 30.0,
    "rounds": 3,
    "burst_leads": "2000,0",
    "burst_jobs": 1000,
    "burst_scenarios": "100,cron",
    "burst_fork_count": 1000,
    "retention_rows": 600_000,
    "startup_runs": 10,
    "idle_seconds": 60.0,
}
DEFAULTS = {
    "full": _FULL,
    "quick": _FULL
    | {
        "throughput_n": 600,
        "executor_tasks": 200,
        "fresh_runs": 6,
        "fire_seconds": 10.0,
        "triggers": 30,
        "tick_sizes": "1000,10000",
        "rows": 100_000,
        "hold_seconds": 10.0,
        "retention_rows": 60_000,
        "startup_runs": 5,
        "idle_seconds": 20.0,
    },
    # Every step once, on as little data as still goes through it: the history keeps its 300
    # pending and running rows, the burst its 100-job scenario (with 10 jobs) at the default lead.
    "smoke": _FULL
    | {
        "throughput_n": 8,
        "executor_tasks": 4,
        "fresh_runs": 2,
        "fire_seconds": 1.0,
        "fire_jobs": 4,
        "triggers": 2,
        "tick_sizes": "100,200",
        "rows": 2000,
        "hold_seconds": 1.0,
        "rounds": 1,
        "burst_leads": "2000",
        "burst_scenarios": "100",
        "burst_fork_count": 20,
        "retention_rows": 400,
        "startup_runs": 1,
        "idle_seconds": 2.0,
    },
}


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument(
        "names", nargs="*", metavar="NAME", help=f"benchmarks to run (default all): {', '.join(BENCHMARKS)}"
    )
    parser.add_argument("--quick", action="store_true", help="small sizes and short durations")
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="the smallest sizes, each step once, seconds per benchmark: it runs, its figures mean nothing"
        " (the test suite's smoke runs; skips burst's cron-minute scenario, which waits for the next minute)",
    )
    parser.add_argument("--throughput-n", type=int, default=None, help="pending executions per run (default 3000)")
    parser.add_argument("--no-sqlite", dest="sqlite", action="store_false", help="skip the SQLite throughput row")
    parser.add_argument("--executor-tasks", type=int, default=None, help="fork-server tasks (default 1000)")
    parser.add_argument("--fresh-runs", type=int, default=None, help="fresh-interpreter runs (default 20)")
    parser.add_argument(
        "--fire-seconds",
        type=float,
        default=None,
        help="measured duration of the fire-time run (default 30; 60 for the one-minute figures)",
    )
    parser.add_argument("--fire-jobs", type=int, default=None, help="interval jobs in the fire-time run (default 200)")
    parser.add_argument("--triggers", type=int, default=None, help="manual triggers timed (default 100)")
    parser.add_argument("--tick-sizes", default=None, help="comma-separated job counts (default 1000,10000,100000)")
    parser.add_argument(
        "--rows",
        type=int,
        default=None,
        help="execution rows for the dashboard and queue statistics, event rows for the events viewer (default 1000000)",
    )
    parser.add_argument(
        "--hold-seconds",
        type=float,
        default=None,
        help="how long the idle transaction is held in the degradation run (default 30)",
    )
    parser.add_argument("--rounds", type=int, default=None, help="rounds of each burst scenario (default 3)")
    parser.add_argument(
        "--burst-leads",
        default=None,
        help="SCHEDULER_LEAD_MS values the burst scenarios run with (default 2000,0: with and without a lead)",
    )
    parser.add_argument("--burst-jobs", type=int, default=None, help="cron jobs in the minute burst (default 1000)")
    parser.add_argument(
        "--burst-scenarios",
        default=None,
        help="burst scenarios to run (default 100,cron: the 100-job burst on 4 slots and the cron minute on 8)",
    )
    parser.add_argument(
        "--burst-fork-count",
        type=int,
        default=None,
        help="forks timed for the fork limit after each burst (default 1000)",
    )
    parser.add_argument(
        "--retention-rows",
        type=int,
        default=None,
        help="oldest history rows the retention run may delete (default 600000; the most it takes from --database)",
    )
    parser.add_argument(
        "--startup-runs", type=int, default=None, help="runs of each command the startup benchmark times (default 10)"
    )
    parser.add_argument(
        "--idle-seconds", type=float, default=None, help="measured window of the idle benchmark (default 60)"
    )
    parser.add_argument("--keep-db", action="store_true", help="do not drop the benchmark database at the end")
    parser.add_argument(
        "--database",
        default=None,
        metavar="NAME",
        help="benchmark database to use and keep (e.g. cronwell_bench_10m): created when missing, migrated, and"
        " the console, api and queues statistics reuse the history loaded there by an earlier run with the same"
        " --rows instead of loading it again (example: --rows 10000000 --database cronwell_bench_10m)",
    )
    parser.add_argument(
        "--template-db",
        default=None,
        metavar="NAME",
        help="create the benchmark database as a copy of NAME (migrated to the head, nobody connected to it)"
        " instead of migrating it (the smoke runs share one migration this way)",
    )
    parser.add_argument("--output", type=Path, default=None, help="JSON file to write (default bench/results/...)")
    options = parser.parse_args(argv)
    size = "smoke" if options.smoke else "quick" if options.quick else "full"
    for key, value in DEFAULTS[size].items():
        if getattr(options, key) is None:
            setattr(options, key, value)
    options.quick = options.quick or options.smoke  # every benchmark's quick shortcuts apply too
    options.tick_sizes = [int(x) for x in str(options.tick_sizes).split(",") if x]
    options.burst_leads = [int(x) for x in str(options.burst_leads).split(",") if x]
    options.burst_scenarios = [x for x in str(options.burst_scenarios).split(",") if x]
    if set(options.burst_scenarios) - {"100", "cron"}:
        parser.error("--burst-scenarios takes 100 and/or cron")
    unknown = [n for n in options.names if n not in BENCHMARKS]
    if unknown:
        parser.error(f"unknown benchmark {', '.join(unknown)}; choose from {', '.join(BENCHMARKS)}")
    options.names = options.names or list(BENCHMARKS)
    return options


def _interrupt(signum, frame) -> None:  # noqa: ARG001
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["peers"]:  # the side-by-side run against Procrastinate, rq and Celery (its own options)
        from bench.peers import main as peers_main

        return peers_main(argv[1:])
    options = parse_args(argv)
    # A SIGTERM (a test's timeout, a supervisor) unwinds as Ctrl-C does: every benchmark stops the
    # processes it started, and the database is dropped.
    signal.signal(signal.SIGTERM, _interrupt)
    started = utcnow()
    db = BenchDatabase(name=options.database, template=options.template_db)
    print(f"{'opening' if options.database else 'creating'} benchmark database {db.name} ...", flush=True)
    db.create(reuse=bool(options.database))
    results: dict = {
        "started_at": started.isoformat(),
        "machine": machine_facts(),
        "options": vars(options) | {"output": str(options.output) if options.output else None},
        "benchmarks": {},
    }
    figures = []
    failed: list[str] = []
    try:
        results["postgres"] = server_facts(db.url)
        for name in options.names:
            module = importlib.import_module(BENCHMARKS[name])
            print(f"\n== {name}: {module.__doc__.splitlines()[0]}", flush=True)
            began = time.perf_counter()
            try:
                found = module.run(db, options)
            except Exception:
                traceback.print_exc()
                failed.append(name)
                results["benchmarks"][name] = {"error": traceback.format_exc()}
                continue
            seconds = time.perf_counter() - began
            print_table(found)
            print(f"({name} took {seconds:.0f} s)", flush=True)
            figures += found
            results["benchmarks"][name] = {"seconds": seconds, "figures": [f.to_json() for f in found]}
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second one must not stop the clean-up half way
        if not (options.keep_db or options.database):
            db.drop()
    results["finished_at"] = utcnow().isoformat()
    print("\n== all results")
    print_table(figures)
    output = options.output or RESULTS_DIR / f"{started.strftime('%Y%m%dT%H%M%SZ')}.json"
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(results, indent=2, default=str))
    print(f"\nJSON: {output}")
    if failed:
        print(f"benchmarks that failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
