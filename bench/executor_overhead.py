"""Micro-benchmark: per-task start-up cost, fork server vs a fresh interpreter per task.

    .venv/bin/python bench/executor_overhead.py [--tasks 1000] [--concurrency 4] [--fresh-runs 20]

Fork server: `always_succeed` from the built-in catalog, `--concurrency` requests in flight at once
through one ForkServer. "start cost" is the zygote's fork_ms (request received -> child ready to
call the task); "latency" is submit -> result seen by the client.

Fresh interpreter: `python -c "import app.tasks.catalog"` per task, the same concurrency; "start
cost" is that process's wall time, which is all start-up (the task itself would come on top).
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(PROJECT_ROOT))

from app.executor import ForkServer, TaskRequest  # noqa: E402

CONTEXT = {
    "execution_id": 0, "job_id": None, "job_name": "bench", "idempotency_key": "bench", "attempt": 1,
    "artifact_dir": "/tmp", "database_url": "", "marker_dir": "/tmp",
}


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def bench_fork_server(tasks: int, concurrency: int) -> dict:
    started = time.perf_counter()
    server = ForkServer(preload=("app.tasks.catalog",))
    server.start()
    warmup_ms = (time.perf_counter() - started) * 1000
    fork_ms: list[float] = []
    latency_ms: list[float] = []
    submitted_at: dict[int, float] = {}
    failures = 0
    next_id = 1
    begin = time.perf_counter()
    try:
        while len(fork_ms) < tasks:
            while next_id <= tasks and len(submitted_at) < concurrency:
                submitted_at[next_id] = time.perf_counter()
                server.submit(TaskRequest(next_id, "always_succeed", {}, {**CONTEXT, "execution_id": next_id}, 30))
                next_id += 1
            for result in server.poll(timeout=5):
                latency_ms.append((time.perf_counter() - submitted_at.pop(result.execution_id)) * 1000)
                fork_ms.append(result.fork_ms)
                failures += result.status != "succeeded"
        elapsed = time.perf_counter() - begin
    finally:
        server.stop()
    return {
        "name": f"fork server, {concurrency} in flight",
        "runs": tasks, "failures": failures, "setup_ms": warmup_ms,
        "start_median": statistics.median(fork_ms), "start_p95": percentile(fork_ms, 0.95),
        "latency_median": statistics.median(latency_ms), "latency_p95": percentile(latency_ms, 0.95),
        "per_second": tasks / elapsed,
    }


def bench_fresh_interpreter(runs: int, concurrency: int) -> dict:
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT)}
    command = [sys.executable, "-c", "import app.tasks.catalog"]
    wall_ms: list[float] = []
    running: dict[subprocess.Popen, float] = {}
    failures = 0
    launched = 0
    begin = time.perf_counter()
    while len(wall_ms) < runs:
        while launched < runs and len(running) < concurrency:
            running[subprocess.Popen(command, env=env, cwd=PROJECT_ROOT)] = time.perf_counter()
            launched += 1
        for proc in list(running):
            if proc.poll() is not None:
                wall_ms.append((time.perf_counter() - running.pop(proc)) * 1000)
                failures += proc.returncode != 0
        time.sleep(0.001)
    elapsed = time.perf_counter() - begin
    return {
        "name": f"fresh interpreter, {concurrency} in flight",
        "runs": runs, "failures": failures, "setup_ms": 0.0,
        "start_median": statistics.median(wall_ms), "start_p95": percentile(wall_ms, 0.95),
        "latency_median": statistics.median(wall_ms), "latency_p95": percentile(wall_ms, 0.95),
        "per_second": runs / elapsed,
    }


def print_table(rows: list[dict]) -> None:
    header = (f"{'executor':<32} {'runs':>5} {'fail':>4} {'start ms p50':>12} {'p95':>8} "
              f"{'latency ms p50':>14} {'p95':>8} {'tasks/s':>8}")
    print(header)
    print("-" * len(header))
    for row in rows:
        print(f"{row['name']:<32} {row['runs']:>5} {row['failures']:>4} {row['start_median']:>12.2f} "
              f"{row['start_p95']:>8.2f} {row['latency_median']:>14.2f} {row['latency_p95']:>8.2f} "
              f"{row['per_second']:>8.1f}")
    fork_row = rows[0]
    print(f"\nzygote start-up (once per worker): {fork_row['setup_ms']:.0f} ms; cpus: {os.cpu_count()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--fresh-runs", type=int, default=20)
    args = parser.parse_args()
    print_table([
        bench_fork_server(args.tasks, args.concurrency),
        bench_fork_server(min(args.tasks, 300), 1),
        bench_fresh_interpreter(args.fresh_runs, args.concurrency),
    ])


if __name__ == "__main__":
    main()
