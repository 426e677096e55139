"""`python -m bench [NAME ...] [options]`: run benchmarks, print a table, write JSON.

Names: throughput, executor, fire, tick, dashboard, memory, degradation, queues, console, api, burst,
retention (default: all, in that order). Results go to bench/results/<UTC timestamp>.json (gitignored).
`python -m bench peers [--help]` runs the side-by-side comparison with the peers (bench/peers/).
"""

from __future__ import annotations

import argparse
import importlib
import json
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
    "api": "bench.api",
    "burst": "bench.burst",
    "retention": "bench.retention",
}
RESULTS_DIR = PROJECT_ROOT / "bench" / "results"


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument(
        "names", nargs="*", metavar="NAME", help=f"benchmarks to run (default all): {', '.join(BENCHMARKS)}"
    )
    parser.add_argument("--quick", action="store_true", help="small sizes and short durations (a smoke run)")
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
    parser.add_argument("--fire-jobs", type=int, default=200, help="interval jobs in the fire-time run")
    parser.add_argument("--triggers", type=int, default=None, help="manual triggers timed (default 100)")
    parser.add_argument("--tick-sizes", default=None, help="comma-separated job counts (default 1000,10000,100000)")
    parser.add_argument(
        "--rows", type=int, default=None, help="execution rows for the dashboard and queue statistics (default 1000000)"
    )
    parser.add_argument(
        "--hold-seconds",
        type=float,
        default=None,
        help="how long the idle transaction is held in the degradation run (default 30)",
    )
    parser.add_argument("--rounds", type=int, default=3, help="rounds of each burst scenario (default 3)")
    parser.add_argument(
        "--burst-leads",
        default="2000,0",
        help="SCHEDULER_LEAD_MS values the burst scenarios run with (default 2000,0: with and without a lead)",
    )
    parser.add_argument("--burst-jobs", type=int, default=1000, help="cron jobs in the minute burst (default 1000)")
    parser.add_argument(
        "--burst-scenarios",
        default="100,cron",
        help="burst scenarios to run (default 100,cron: the 100-job burst on 4 slots and the cron minute on 8)",
    )
    parser.add_argument(
        "--burst-fork-count",
        type=int,
        default=1000,
        help="forks timed for the fork limit after each burst (default 1000)",
    )
    parser.add_argument(
        "--retention-rows",
        type=int,
        default=None,
        help="oldest history rows the retention run may delete (default 600000; the most it takes from --database)",
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
    parser.add_argument("--output", type=Path, default=None, help="JSON file to write (default bench/results/...)")
    options = parser.parse_args(argv)
    quick = options.quick
    defaults = {
        "throughput_n": 600 if quick else 3000,
        "executor_tasks": 200 if quick else 1000,
        "fresh_runs": 6 if quick else 20,
        "fire_seconds": 10.0 if quick else 30.0,
        "triggers": 30 if quick else 100,
        "tick_sizes": "1000,10000" if quick else "1000,10000,100000",
        "rows": 100_000 if quick else 1_000_000,
        "hold_seconds": 10.0 if quick else 30.0,
        "retention_rows": 60_000 if quick else 600_000,
    }
    for key, value in defaults.items():
        if getattr(options, key) is None:
            setattr(options, key, value)
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


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["peers"]:  # the side-by-side run against Procrastinate, rq and Celery (its own options)
        from bench.peers import main as peers_main

        return peers_main(argv[1:])
    options = parse_args(argv)
    started = utcnow()
    db = BenchDatabase(name=options.database)
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
