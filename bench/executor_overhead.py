"""Executor overhead: per-task start cost of the fork server vs a fresh interpreter per task.

Fork server: `always_succeed` from the built-in catalog through one `ForkServer`, with 1 and 4
requests in flight. "start cost" is the zygote's fork_ms (request received -> child ready to call
the task); "latency" is submit -> result seen by the client (fork, run, report, reap). "cpu" is CPU ms per
task, split into the client (this process), the zygote and the task processes (the zygote's reaped
children, from /proc), with the minor page faults (mostly copy-on-write) of the zygote and of each
task process: the load of other tenants inflates wall times but hardly these.
Fresh interpreter: `python -c "import app.tasks.catalog"` per task, the same concurrency; its wall
time is all start-up (the task itself would come on top). That is the same-run limit the fork
server is compared with: ratio = fork cost / fresh-interpreter cost.

Standalone (the original micro-benchmark): `python -m bench.executor_overhead [--tasks 1000]`.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time

from bench.harness import PROJECT_ROOT, Figure, summary

NAME = "executor"
CONTEXT = {
    "execution_id": 0,
    "job_id": None,
    "job_name": "bench",
    "idempotency_key": "bench",
    "attempt": 1,
    "artifact_dir": "/tmp",
    "database_url": "",
    "marker_dir": "/tmp",
}


def _proc_counters(pid: int) -> dict[str, float]:
    """CPU seconds and minor faults of process `pid` itself and of its reaped children (/proc)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return {
        "cpu": (int(fields[11]) + int(fields[12])) / ticks,
        "children_cpu": (int(fields[13]) + int(fields[14])) / ticks,
        "faults": int(fields[7]),
        "children_faults": int(fields[8]),
    }


def _self_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def bench_fork_server(tasks: int, concurrency: int) -> dict:
    from app.executor import ForkServer, TaskRequest

    started = time.perf_counter()
    server = ForkServer(preload=("app.tasks.catalog",))
    server.start()
    warmup_ms = (time.perf_counter() - started) * 1000
    fork_ms: list[float] = []
    latency_ms: list[float] = []
    submitted_at: dict[int, float] = {}
    failures = 0
    next_id = 1
    zygote_before, client_before = _proc_counters(server.zygote_pid), _self_cpu()
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
        zygote_after, client_after = _proc_counters(server.zygote_pid), _self_cpu()
    finally:
        server.stop()
    per_task = {key: (zygote_after[key] - zygote_before[key]) / tasks for key in zygote_before}
    return {
        "name": f"fork server, {concurrency} in flight",
        "runs": tasks,
        "failures": failures,
        "setup_ms": warmup_ms,
        "start": summary(fork_ms),
        "latency": summary(latency_ms),
        "per_second": tasks / elapsed,
        "cpu_ms": {
            "client": (client_after - client_before) * 1000 / tasks,
            "zygote": per_task["cpu"] * 1000,
            "tasks": per_task["children_cpu"] * 1000,
        },
        "faults": {"zygote": per_task["faults"], "task": per_task["children_faults"]},
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
        "runs": runs,
        "failures": failures,
        "setup_ms": 0.0,
        "start": summary(wall_ms),
        "latency": summary(wall_ms),
        "per_second": runs / elapsed,
    }


def run(db, options) -> list[Figure]:
    """Suite entry point (the database is not used)."""
    tasks = options.executor_tasks
    fork4 = bench_fork_server(tasks, 4)
    fork1 = bench_fork_server(min(tasks, 300), 1)
    fresh4 = bench_fresh_interpreter(options.fresh_runs, 4)
    fresh1 = bench_fresh_interpreter(max(3, options.fresh_runs // 2), 1)
    figures = []
    for fork, fresh in ((fork1, fresh1), (fork4, fresh4)):
        n = fork["name"].split(", ")[1]
        note = f"{fork['failures']} failures; zygote warm-up {fork['setup_ms']:.0f} ms once per worker"
        figures += [
            Figure(
                NAME,
                f"fork start cost p50, {n}",
                fork["start"]["p50"],
                "ms",
                "fresh interpreter p50",
                fresh["start"]["p50"],
                note=note,
            ).judge("<= 5"),
            Figure(
                NAME,
                f"fork start cost p95, {n}",
                fork["start"]["p95"],
                "ms",
                "fresh interpreter p95",
                fresh["start"]["p95"],
            ).judge("<= 5"),
            Figure(
                NAME,
                f"submit->result latency p50, {n}",
                fork["latency"]["p50"],
                "ms",
                "fresh interpreter p50",
                fresh["latency"]["p50"],
                note=f"p95 {fork['latency']['p95']:.2f} ms; "
                f"{fork['per_second']:.0f} tasks/s vs {fresh['per_second']:.1f}/s; {_cpu_note(fork)}",
            ),
        ]
    figures[0].extra = {"fork_1": fork1, "fork_4": fork4, "fresh_1": fresh1, "fresh_4": fresh4}
    return figures


def _cpu_note(row: dict) -> str:
    cpu, faults = row["cpu_ms"], row["faults"]
    return (
        f"CPU ms per task: client {cpu['client']:.2f}, zygote {cpu['zygote']:.2f}, task process {cpu['tasks']:.2f}"
        f" (sum {sum(cpu.values()):.2f}); minor faults per task: zygote {faults['zygote']:.0f}, "
        f"task process {faults['task']:.0f}"
    )


def print_table(rows: list[dict]) -> None:
    header = (
        f"{'executor':<32} {'runs':>5} {'fail':>4} {'start ms p50':>12} {'p95':>8} "
        f"{'latency ms p50':>14} {'p95':>8} {'tasks/s':>8}"
    )
    print(header)
    print("-" * len(header))
    for row in rows:
        print(
            f"{row['name']:<32} {row['runs']:>5} {row['failures']:>4} {row['start']['p50']:>12.2f} "
            f"{row['start']['p95']:>8.2f} {row['latency']['p50']:>14.2f} {row['latency']['p95']:>8.2f} "
            f"{row['per_second']:>8.1f}"
        )
    print(
        f"\nzygote start-up (once per worker): {rows[0]['setup_ms']:.0f} ms; cpus: {os.cpu_count()}; "
        f"fork p99 {rows[0]['start']['p99']:.2f} ms"
    )
    for row in rows:
        if "cpu_ms" in row:
            print(f"{row['name']}: {_cpu_note(row)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--fresh-runs", type=int, default=20)
    args = parser.parse_args()
    print_table(
        [
            bench_fork_server(args.tasks, args.concurrency),
            bench_fork_server(min(args.tasks, 300), 1),
            bench_fresh_interpreter(args.fresh_runs, args.concurrency),
        ]
    )


if __name__ == "__main__":
    sys.path.insert(0, str(PROJECT_ROOT))
    main()
