"""The runs of a round: Cronwell 1 x 4 (process isolation), Cronwell in pool isolation, the fork
limit, Procrastinate, rq and Celery. Each
loads its queue BEFORE its worker starts, runs the workers through `measure.run`, and reads the
system's own first-start and last-finish timestamps where it keeps them."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import psycopg

from bench.harness import PROJECT_ROOT, BenchDatabase
from bench.peers import measure

PEER_SIDE = Path(__file__).resolve().parent / "peer_side.py"
QUEUE = "peers"
# Cronwell's pool run: one worker with this many slots, so this many pool processes run tasks
# (Celery's -c 2 has two; see docs/performance.md for why this is the fair count).
POOL_SLOTS = 2


@dataclass
class Context:
    """What every run needs: sizes, the peer interpreter, the databases, where logs go."""

    count: int
    peer_python: Path
    cronwell_db: BenchDatabase
    procrastinate_url: str
    admin_url: str
    redis_url: str
    log_dir: Path


class PgBackends:
    """Cumulative CPU seconds of the PostgreSQL backends serving one database (from /proc),
    sampled on every poll so backends that come and go are counted; the poller's own excluded."""

    def __init__(self, conn: psycopg.Connection) -> None:
        self.conn = conn
        self.first: dict[int, float] = {}
        self.last: dict[int, float] = {}
        self.calls = 0

    def __call__(self) -> float:
        pids = [
            row[0]
            for row in self.conn.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
            ).fetchall()
        ]
        for pid in pids:
            cpu = measure.process_cpu(pid, with_reaped_children=False)
            if pid not in self.first:
                # Present at the go snapshot: count from there; appeared later: all of it is this run's.
                self.first[pid] = cpu if self.calls == 0 else 0.0
            self.last[pid] = cpu
        self.calls += 1
        return sum(self.last[p] - self.first[p] for p in self.last)


class RedisCpu:
    """Cumulative CPU seconds of the Redis server (INFO cpu; the whole server)."""

    def __init__(self, client) -> None:
        self.client = client

    def __call__(self) -> float:
        info = self.client.info("cpu")
        return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def _peer_env(ctx: Context, **extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env.update({"PYTHONPATH": str(PEER_SIDE.parent), "PEERS_REDIS_URL": ctx.redis_url, **extra})
    env["PEERS_PG_URL"] = ctx.procrastinate_url
    return env


def _peer(ctx: Context, *args: str) -> list[str]:
    return [str(ctx.peer_python), str(PEER_SIDE), *args]


def _load(ctx: Context, system: str, env: dict) -> None:
    import subprocess

    subprocess.run(
        _peer(ctx, system, "load", "--count", str(ctx.count)),
        env=env,
        cwd=PEER_SIDE.parent,
        check=True,
        capture_output=True,
        timeout=600,
    )


def _result(ctx: Context, facts: measure.RunFacts, first: float | None, last: float | None, source: str) -> dict:
    if first is None or last is None:
        first, last, source = facts.go, facts.done_at, "harness clock: go signal to the last job seen done"
    seconds = max(1e-6, last - first)
    per_job = 1000 / max(1, facts.done)
    rss = [r for r in facts.parent_rss_mb if r is not None]
    return {
        "done": facts.done,
        "rate": facts.done / seconds,
        "seconds": seconds,
        "timestamps": source,
        "go_to_last_s": last - facts.go,
        "cpu_ms_per_job": (facts.cpu_workers_s + facts.cpu_server_s) * per_job,
        "cpu_ms_per_job_workers": facts.cpu_workers_s * per_job,
        "cpu_ms_per_job_server": facts.cpu_server_s * per_job,
        "machine_busy_ms_per_job": facts.machine_busy_s * per_job,
        "parent_rss_mb": max(rss) if rss else None,
        "parent_rss_each_mb": facts.parent_rss_mb,
        "loadavg": facts.loadavg,
    }


# --- Cronwell and the fork limit ----------------------------------------------------------------


def _prepare_one_off(db, count: int) -> None:
    """The same work as `_prepare_pg`'s, as one-off runs of the same task (no job)."""
    from app.clock import utcnow
    from bench import loaders

    db.reset()
    with db.connect() as conn:
        loaders.insert_one_off(conn, "always_succeed", count, now=utcnow())
        conn.execute("VACUUM ANALYZE executions")


def run_cronwell(
    ctx: Context, round_no: int, *, isolation: str = "process", slots: int = 4, one_off: bool = False
) -> dict:
    from bench.throughput import _prepare_pg

    db = ctx.cronwell_db
    if one_off:
        _prepare_one_off(db, ctx.count)
    else:
        _prepare_pg(db, ctx.count)
    worker_id = f"peers-cronwell-{isolation}{'-one-off' if one_off else ''}-{round_no}"
    spawn = measure.Spawn(
        # The lean worker app `flask worker run` builds (no web stack), not the whole web app.
        [
            sys.executable,
            "-m",
            "bench.child",
            "worker",
            "--kind",
            "worker",
            "--slots",
            str(slots),
            "--worker-id",
            worker_id,
        ],
        db.env(),
        PROJECT_ROOT,
    )
    with db.connect() as conn:
        conn.execute("UPDATE jobs SET isolation = %s", (isolation,))

        def done() -> int:
            return conn.execute("SELECT count(*) FROM executions WHERE status = 'succeeded'").fetchone()[0]

        log = ctx.log_dir / f"cronwell-{isolation}{'-one-off' if one_off else ''}.log"
        facts = measure.run([spawn], count=ctx.count, done=done, log=log, server_cpu=PgBackends(conn))
        first, last = conn.execute(
            "SELECT extract(epoch FROM min(started_at)), extract(epoch FROM max(finished_at))"
            " FROM executions WHERE status = 'succeeded'"
        ).fetchone()
    result = _result(ctx, facts, float(first), float(last), "executions.started_at / finished_at")
    lines = [line for line in facts.stdout[0].splitlines() if line.startswith("{")]
    if lines:
        report = json.loads(lines[-1])
        result["child_report"] = {k: v for k, v in report.items() if k != "fork_ms"}
    return result


def run_cronwell_one_off(ctx: Context, round_no: int) -> dict:
    """The same worker and task, the work given as one-off runs (no job) instead of a job's runs."""
    return run_cronwell(ctx, round_no, one_off=True)


def run_cronwell_pool(ctx: Context, round_no: int) -> dict:
    """The same worker and the same durable history (an Attempt per execution), with the job in
    pool isolation: attempts run in reused pool processes instead of a fork each."""
    return run_cronwell(ctx, round_no, isolation="pool", slots=POOL_SLOTS)


def run_fork_limit(ctx: Context, round_no: int) -> dict:
    spawn = measure.Spawn(
        [sys.executable, "-m", "bench.child", "fork", "--slots", "4", "--count", str(ctx.count)],
        ctx.cronwell_db.env(),
        PROJECT_ROOT,
    )
    facts = measure.run([spawn], count=ctx.count, done=None, log=ctx.log_dir / "fork.log")
    report = json.loads([line for line in facts.stdout[0].splitlines() if line.startswith("{")][-1])
    result = _result(ctx, facts, report["go"], report["end"], "the child's clock: go to the last waitpid")
    result["parent_rss_mb"] = None  # a bare fork loop, not a worker
    return result


# --- Procrastinate ------------------------------------------------------------------------------


def _recreate(admin_url: str, name: str) -> None:
    with psycopg.connect(admin_url, autocommit=True, connect_timeout=5) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def run_procrastinate(ctx: Context, round_no: int) -> dict:
    _recreate(ctx.admin_url, ctx.procrastinate_url.rsplit("/", 1)[1])
    env = _peer_env(ctx)
    _load(ctx, "procrastinate", env)
    with psycopg.connect(ctx.procrastinate_url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")  # as Cronwell's queue gets after loading

        def done() -> int:
            return conn.execute("SELECT count(*) FROM procrastinate_jobs WHERE status = 'succeeded'").fetchone()[0]

        spawn = measure.Spawn(_peer(ctx, "procrastinate", "worker", "--concurrency", "4"), env, PEER_SIDE.parent)
        facts = measure.run(
            [spawn], count=ctx.count, done=done, log=ctx.log_dir / "procrastinate.log", server_cpu=PgBackends(conn)
        )
        first, last = conn.execute(
            "SELECT extract(epoch FROM min(at) FILTER (WHERE type = 'started')),"
            " extract(epoch FROM max(at) FILTER (WHERE type = 'succeeded')) FROM procrastinate_events"
        ).fetchone()
    return _result(ctx, facts, float(first), float(last), "procrastinate_events 'started' / 'succeeded'")


# --- rq and Celery (Redis) ----------------------------------------------------------------------


def _redis(ctx: Context):
    from redis import Redis

    return Redis.from_url(ctx.redis_url)


def _rq_stamp(value: bytes | None) -> float | None:
    if not value:
        return None
    return datetime.strptime(value.decode(), "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC).timestamp()


def run_rq(ctx: Context, round_no: int) -> dict:
    client = _redis(ctx)
    client.flushdb()
    env = _peer_env(ctx)
    _load(ctx, "rq", env)
    spawns = [
        measure.Spawn(_peer(ctx, "rq", "worker", "--name", f"peers-rq-{round_no}-{i}"), env, PEER_SIDE.parent)
        for i in range(2)
    ]
    key = f"rq:finished:{QUEUE}"
    facts = measure.run(
        spawns, count=ctx.count, done=lambda: client.zcard(key), log=ctx.log_dir / "rq.log", server_cpu=RedisCpu(client)
    )
    pipe = client.pipeline()
    for job_id in client.zrange(key, 0, -1):
        pipe.hmget(f"rq:job:{job_id.decode()}", "started_at", "ended_at")
    stamps = pipe.execute()
    starts = [s for s in (_rq_stamp(a) for a, _ in stamps) if s]
    ends = [e for e in (_rq_stamp(b) for _, b in stamps) if e]
    client.flushdb()
    return _result(
        ctx, facts, min(starts) if starts else None, max(ends) if ends else None, "rq job hash started_at / ended_at"
    )


def read_celery_stamps(path: Path) -> tuple[int, float | None, float | None]:
    """(finished count, first start, last finish) from the stamp file the Celery pool writes."""
    try:
        lines = path.read_bytes().splitlines()
    except OSError:
        return 0, None, None
    starts = [int(line[1:]) / 1e9 for line in lines if line.startswith(b"S") and len(line) == 20]
    ends = [int(line[1:]) / 1e9 for line in lines if line.startswith(b"F") and len(line) == 20]
    return len(ends), (min(starts) if starts else None), (max(ends) if ends else None)


def run_celery(ctx: Context, round_no: int) -> dict:
    client = _redis(ctx)
    client.flushdb()
    stamps = ctx.log_dir / "celery.stamps"
    stamps.unlink(missing_ok=True)
    env = _peer_env(ctx, PEERS_STAMPS=str(stamps))
    _load(ctx, "celery", env)
    spawn = measure.Spawn(_peer(ctx, "celery", "worker", "--concurrency", "2"), env, PEER_SIDE.parent)
    facts = measure.run(
        [spawn],
        count=ctx.count,
        done=lambda: read_celery_stamps(stamps)[0],
        log=ctx.log_dir / "celery.log",
        server_cpu=RedisCpu(client),
        exits_by_itself=False,
    )
    _, first, last = read_celery_stamps(stamps)
    client.flushdb()
    return _result(ctx, facts, first, last, "task_prerun / task_postrun signal stamps (no result backend)")


SYSTEMS = {
    "cronwell": ("Cronwell 1 worker x 4 slots", "process per task, durable in PostgreSQL", run_cronwell),
    "cronwell-one-off": (
        "Cronwell one-off runs, 1 worker x 4 slots",
        "process per task, durable in PostgreSQL, no job",
        run_cronwell_one_off,
    ),
    "cronwell-pool": (
        f"Cronwell pool, 1 worker x {POOL_SLOTS} slots",
        "reused pool, durable in PostgreSQL",
        run_cronwell_pool,
    ),
    "fork": ("same-run fork + exit + wait limit, 4 in flight", "-", run_fork_limit),
    "procrastinate": ("Procrastinate 3.10, concurrency 4", "in-process, durable in PostgreSQL", run_procrastinate),
    "rq": ("rq 2.12, 2 processes (Worker)", "fork per job, Redis", run_rq),
    "celery": ("Celery 5.7 prefork -c 2, Redis broker, no result backend", "reused pool", run_celery),
}
