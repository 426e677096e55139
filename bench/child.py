"""Entry points of the processes the throughput and degradation benchmarks start.

    python -m bench.child MODE --slots N [--seconds S] [--windows W] [--worker-id ID]

Each child gets ready (app created, zygote warm, modules imported), prints `ready` on stdout,
waits for a line on stdin (the go signal, sent to all children at once), works, and prints one
JSON line with what it did. Modes:

- `worker`: the real `Worker.run(burst=True)`: claim, start, fork a task process, record; the
  figure the product is judged by. It runs on what `flask worker run` runs on (the settings, no
  Flask: `--kind worker`, the default); `--kind web` builds its runtime from the whole app.
- `dbpath`: limit (a): the worker's turn statement (`store.record_and_claim`: record the last
  batch, claim and start the next, one transaction) in a tight loop, no executor, no Python
  worker loop around it; with `--tasks`, filtered on the catalog's task names as a worker's turn
  is (`--no-tasks`: without the filter, to measure what it costs).
- `nullworker`: the real Worker with an executor that "runs" every task instantly: the worker
  loop and its SQL without the fork, to tell the loop's cost from the fork's.
- `fork`: limit (b): fork + exit + waitpid with `--slots` children in flight, in an interpreter
  that imported what the zygote imports, so it is the size of the warmed parent.
- `claimloop`: `dbpath` for `--seconds`, counting claims per `--windows`-second window.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from pathlib import Path

from app.clock import utcnow


def _ready_then_go() -> float:
    print("ready", flush=True)
    sys.stdin.readline()
    return time.time()


def _app(kind: str = "scheduler"):
    """The app the turn statement needs: the database without the web stack (the scheduler kind
    has SQLAlchemy and the settings, and starts in half the time of the whole app)."""
    from app import create_app

    return create_app({"TESTING": True}, kind=kind)


def _runtime(kind: str):
    """What the worker runs on. `--kind worker`: as `python -m app.worker_process` builds it (the
    process `flask worker run` becomes), from the settings alone, without Flask or SQLAlchemy;
    `--kind web`: from the whole app, as tests build it."""
    from app.services.engine.runtime import WorkerRuntime

    if kind == "worker":
        from app.tasks import load_catalog
        from config import load_settings

        load_catalog()
        return WorkerRuntime.from_settings(load_settings())
    return WorkerRuntime.from_app(_app(kind))


def run_worker(slots: int, worker_id: str, null: bool, kind: str = "worker") -> dict:
    from app.services.engine.worker import Worker

    runtime = _runtime(kind)
    executor = InstantExecutor() if null else MeasuredForkServer(kill_grace_seconds=2.0)
    worker = Worker(runtime, worker_id=worker_id, slots=slots, executor=executor)
    worker.start()
    go = _ready_then_go()
    before, pg_before = _cpu(), _postgres_cpu(runtime.database)
    stats = worker.run(burst=True)  # returns after the zygote is stopped and reaped
    end = time.time()
    after, pg_after = _cpu(), _postgres_cpu(runtime.database)
    return {
        "go": go,
        "end": end,
        "claimed": stats.claimed,
        "succeeded": stats.succeeded,
        "failed": stats.failed,
        "fork_ms": list(stats.fork_ms),
        "cpu_parent_s": after[0] - before[0],
        "cpu_zygote_and_tasks_s": after[1] - before[1],
        "cpu_zygote_s": getattr(executor, "zygote_cpu_s", None),
        # The backends serving this worker (its kept turn connection and the others), from /proc.
        "cpu_postgres_s": sum(cpu - pg_before.get(pid, 0.0) for pid, cpu in pg_after.items()),
    }


def _cpu() -> tuple[float, float]:
    """CPU seconds (user + system) of this process, and of its reaped children (zygote + tasks)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime, kids.ru_utime + kids.ru_stime


def _proc_cpu(pid: int) -> tuple[float, float]:
    """CPU seconds (user + system) of process `pid` itself, and of its reaped children, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks, (int(fields[13]) + int(fields[14])) / ticks


def _forkserver_class():
    from app.executor import ForkServer

    class Measured(ForkServer):
        """The real fork server, reading its zygote's own CPU (without the task processes it
        reaped) just before stopping it, so the benchmark can tell the two apart."""

        zygote_cpu_s: float | None = None

        def stop(self, grace_seconds: float = 0.0):
            if self.zygote_pid is not None:
                try:
                    self.zygote_cpu_s = _proc_cpu(self.zygote_pid)[0]
                except OSError:
                    pass
            return super().stop(grace_seconds)

    return Measured


def MeasuredForkServer(**kwargs):  # noqa: N802 - a class, built late so the import stays lazy
    return _forkserver_class()(**kwargs)


def _postgres_cpu(database) -> dict[int, float]:
    """CPU seconds (user + system) so far of each server backend connected to this database as
    this process's connections (named by PGAPPNAME, see `main`): read from /proc, so only with the
    server on this host (else {}); SQLite has no server ({})."""
    from app.sql.connections import POSTGRESQL

    if database.dialect != POSTGRESQL:
        return {}
    with database.reading() as conn:
        cursor = conn.cursor()
        cursor.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
            " AND application_name = current_setting('application_name')"
        )
        pids = [row[0] for row in cursor.fetchall()]
    found = {}
    for pid in pids:
        try:
            found[pid] = _proc_cpu(pid)[0]
        except OSError:
            continue
    return found


class DbPath:
    """Limit (a): the worker's turns without the executor, on one kept connection like the
    worker's: each turn records the previous batch as succeeded and claims + starts the next
    (`store.record_and_claim`, one statement on PostgreSQL), in a tight loop."""

    def __init__(self, app, worker_id: str, slots: int, tasks: list[str] | None = None) -> None:
        from app.extensions import db

        self.worker_id, self.slots, self.tasks = worker_id, slots, tasks
        self.lease = (app.config["LEASE_SECONDS"], app.config["LEASE_BUFFER_SECONDS"])
        self.conn = db.engine.connect()  # opened before the go signal, like the worker's
        self.running: list[tuple[int, int]] = []

    def turn(self) -> int:
        """One turn; returns how many executions it started (0 once nothing is left)."""
        from app.database import write_transaction_on
        from app.domain.states import AttemptStatus
        from app.store import Finished, Outcome, store_for

        outcome = Outcome(status=AttemptStatus.SUCCEEDED, exit_code=0, output="ok\n", error="", pid=0)
        finished = [Finished(execution_id, number, outcome, None) for execution_id, number in self.running]
        with write_transaction_on(self.conn) as conn:
            turn = store_for(conn).record_and_claim(
                conn,
                finished,
                worker_id=self.worker_id,
                now=utcnow(),
                limit=self.slots,
                queue_ids=None,
                lease_seconds=self.lease[0],
                buffer_seconds=self.lease[1],
                tasks=self.tasks,
            )
        self.running = [(item.id, number) for item, number in turn.started]
        return len(turn.started)

    def drain(self) -> None:
        while self.running:
            self.turn()


def _advertised(with_tasks: bool) -> list[str] | None:
    """The task names a worker's turn is filtered on (the catalog's), or None for no filter."""
    if not with_tasks:
        return None
    from app.tasks.loading import catalog_versions

    return sorted(catalog_versions())


def run_dbpath(slots: int, worker_id: str, with_tasks: bool = True) -> dict:
    app = _app()
    with app.app_context():
        path = DbPath(app, worker_id, slots, _advertised(with_tasks))
        go = _ready_then_go()
        done = 0
        while True:
            n = path.turn()
            if not n:
                break
            done += n
        path.drain()
        end = time.time()
    return {"go": go, "end": end, "claimed": done, "succeeded": done}


def run_claimloop(slots: int, worker_id: str, seconds: float, window: float) -> dict:
    app = _app()
    with app.app_context():
        path = DbPath(app, worker_id, slots, _advertised(True))
        go = _ready_then_go()
        counts: list[int] = []
        latencies: list[list[float]] = []
        stop = go + seconds
        while time.time() < stop:
            index = int((time.time() - go) // window)
            while len(counts) <= index:
                counts.append(0)
                latencies.append([])
            started = time.perf_counter()
            n = path.turn()
            latencies[index].append((time.perf_counter() - started) * 1000)
            if not n:
                time.sleep(0.01)
            counts[index] += n
    return {
        "go": go,
        "end": time.time(),
        "window_seconds": window,
        "counts": counts,
        "batch_ms_p50": [sorted(w)[len(w) // 2] if w else None for w in latencies],
    }


def run_fork(inflight: int, count: int) -> dict:
    import app.executor.zygote  # noqa: F401 - the zygote's own imports
    import app.tasks.catalog  # noqa: F401 - and its preload
    from bench.harness import proc_status

    size = proc_status(os.getpid())
    go = _ready_then_go()
    alive = 0
    for _ in range(count):
        if alive >= inflight:
            os.waitpid(-1, 0)
            alive -= 1
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        alive += 1
    while alive:
        os.waitpid(-1, 0)
        alive -= 1
    end = time.time()
    return {"go": go, "end": end, "forks": count, "rss_mb": size.get("VmRSS")}


class InstantExecutor:
    """A ForkServer stand-in whose tasks succeed the moment they are submitted (no process). It
    answers every call the worker makes on its executor (tests/bench keeps the two in step)."""

    kill_grace_seconds = 2.0
    preload = ("app.tasks.catalog",)
    result_max_bytes = 65536
    withhold: frozenset[str] = frozenset()

    def __init__(self) -> None:
        from app.executor.pool_limits import PoolLimits

        self.pool = PoolLimits()
        self._r, self._w = os.pipe()
        os.set_blocking(self._r, False)
        self._results = []
        self.zygote_pid = None

    def start(self) -> None:
        self.zygote_pid = os.getpid()  # not None: the worker sees a started executor

    def submit(self, request, *, within: int | None = None) -> None:
        from app.executor import TaskResult

        now = time.time()
        self._results.append(
            TaskResult(
                execution_id=request.execution_id,
                status="succeeded",
                exit_code=0,
                output="ok\n",
                error="",
                pid=0,
                started_at=now,
                finished_at=now,
                fork_ms=0.0,
            )
        )
        os.write(self._w, b"x")

    def poll(self, timeout: float = 0.0):
        try:
            os.read(self._r, 65536)
        except BlockingIOError:
            pass
        results, self._results = self._results, []
        return results

    def kill(self, execution_id: int, *, reason: str = "killed") -> None:
        pass  # every task has already finished: its result waits for the next poll

    def running(self) -> set[int]:
        return {result.execution_id for result in self._results}

    def pid_of(self, execution_id: int) -> int | None:
        return None  # no task process

    def fileno(self) -> int:
        return self._r

    def stop(self, grace_seconds: float = 0.0):
        return self.poll()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["worker", "nullworker", "dbpath", "fork", "claimloop"])
    parser.add_argument("--slots", type=int, default=4)
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--windows", type=float, default=5.0)
    parser.add_argument("--worker-id", default=f"bench-{os.getpid()}")
    parser.add_argument("--tasks", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument(
        "--kind",
        choices=["web", "worker"],
        default="worker",
        help="what the worker modes run on: worker (default) as `flask worker run` does, web the whole app",
    )
    args = parser.parse_args()
    os.environ["PGAPPNAME"] = args.worker_id  # libpq names every connection: its backends' CPU is read
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    if args.mode == "worker":
        result = run_worker(args.slots, args.worker_id, null=False, kind=args.kind)
    elif args.mode == "nullworker":
        result = run_worker(args.slots, args.worker_id, null=True, kind=args.kind)
    elif args.mode == "dbpath":
        result = run_dbpath(args.slots, args.worker_id, with_tasks=args.tasks)
    elif args.mode == "claimloop":
        result = run_claimloop(args.slots, args.worker_id, args.seconds, args.windows)
    else:
        result = run_fork(args.slots, args.count)
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
