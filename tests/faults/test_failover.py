"""PostgreSQL fails over to a streaming replica under load (tests/helpers/replication.py).

A primary and a replica built by the test (`pg_basebackup`, private clusters on free loopback
ports); a scheduler and a worker run ten 1 s jobs through a multi-host URL
(`postgresql://...@primary,replica/db?target_session_attrs=read-write`), and the test itself commits
a probe row every 50 ms straight to the primary. Replication is then held back for 2 s (WAL stops
at the link), the primary is killed (immediate shutdown) and the replica promoted. The processes
reconnect to the new primary on their own, LISTEN again and carry on; the ledger on the new primary
is clean.

- synchronous replication: a commit is acknowledged only once the replica has it, so nothing
  acknowledged is lost (the commits held back by the lag were never acknowledged: their clients
  got an error and retried on the new primary);
- asynchronous replication: what was acknowledged during the lag is lost. The test measures the
  window (the acknowledged probes missing on the new primary) and which executions' starts were
  lost: those occurrences run again on the new primary, because the scheduler's cursor for the
  job rolled back with them, and the ledger still accounts for each occurrence exactly once (the
  new primary has no trace of the first run: its side effects happened, its record did not
  survive - the same "not exactly once" as a crash before `complete`, docs/reliability.md).
"""

from __future__ import annotations

import threading
import time

import psycopg
import pytest

from app import create_app
from tests.factories import make_job
from tests.helpers.databases import app_env_for, migrate
from tests.helpers.processes import FlaskProcesses, wait_for
from tests.helpers.replication import ReplicatedPostgres
from tests.helpers.scenario import assert_alive, check_ledger, log_events, rows, scalar, stop_gracefully, utcnow

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.timeout(115)]

DATABASE = "cronwell_failover"
LAG_SECONDS = 2.0
# The scheduler, its alert delivery thread and the worker.
LISTENING = {"LISTEN cronwell_jobs", "LISTEN cronwell_alerts", "LISTEN cronwell_work; LISTEN cronwell_control"}


@pytest.fixture(params=["synchronous", "asynchronous"])
def replicated(request, tmp_path):
    cluster = ReplicatedPostgres(synchronous=request.param == "synchronous")
    try:
        cluster.start()
        cluster.primary.create_database(DATABASE)
        migrate(cluster.primary.url(DATABASE), tmp_path / "migrate")
        yield cluster
    finally:
        cluster.destroy()


@pytest.fixture
def failover_env(replicated, tmp_path) -> dict:
    env = app_env_for(replicated.multi_host_url(DATABASE), tmp_path / "instance")
    env.update({"LOG_FORMAT": "json", "LOG_LEVEL": "INFO", "WORKER_SHUTDOWN_GRACE_SECONDS": "10"})
    return env


@pytest.fixture
def failover_app(failover_env):
    application = create_app({"TESTING": True}, env={**failover_env, "LOG_LEVEL": "WARNING"})
    with application.app_context():
        yield application
        from app.extensions import db

        db.session.remove()
        db.engine.dispose()


@pytest.fixture
def failover_processes(failover_env, tmp_path):
    started = FlaskProcesses(failover_env, tmp_path / "process-logs")
    try:
        yield started
    finally:
        started.cleanup()


class ProbeWriter:
    """Commits one row every 50 ms straight to the primary; remembers which were acknowledged."""

    def __init__(self, url: str) -> None:
        self.acknowledged: dict[int, float] = {}  # probe id -> monotonic time of the acknowledgement
        self.failed_at: float | None = None
        self._conn = psycopg.connect(url, autocommit=True)
        self._conn.execute("CREATE TABLE failover_probe (id serial PRIMARY KEY, at timestamptz DEFAULT now())")
        self._running = True
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while self._running:
            try:
                [probe_id] = self._conn.execute("INSERT INTO failover_probe DEFAULT VALUES RETURNING id").fetchone()
            except psycopg.Error:
                self.failed_at = time.monotonic()
                return
            self.acknowledged[probe_id] = time.monotonic()
            time.sleep(0.05)

    def stop(self) -> None:
        self._running = False
        self._thread.join(timeout=10)
        self._conn.close()


def listening() -> set[str]:
    return {
        row[0]
        for row in rows(
            "SELECT DISTINCT query FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN %'"
        )
    }


def succeeded() -> int:
    return scalar("SELECT count(*) FROM executions WHERE status = 'succeeded'")


def test_a_failover_to_the_replica_loses_nothing_acknowledged_or_measures_what_it_loses(
    replicated, failover_app, failover_processes
):
    mode = "synchronous" if replicated.synchronous else "asynchronous"
    now = utcnow()
    for n in range(10):
        make_job(now=now, every="1s", name=f"fast-{n}", overlap_policy="queue")
    scheduler = failover_processes.start("scheduler", "run", "--tick-seconds", "1", "--scheduler-id", "fo-scheduler")
    worker = failover_processes.start_worker("--workers", "4", "--worker-id", "fo-worker")
    everyone = (scheduler, worker)

    def progress(count):
        def check():
            assert_alive(*everyone)
            return succeeded() >= count

        return check

    wait_for(progress(30), within=60, interval=0.2, what=lambda: "30 runs\n" + failover_processes.outputs()[-6000:])
    wait_for(lambda: listening() == LISTENING, within=20, what="the scheduler and the worker to LISTEN")
    probes = ProbeWriter(replicated.primary.url(DATABASE))
    wait_for(lambda: len(probes.acknowledged) >= 10 and replicated.caught_up(), within=20, what="replication")

    replicated.lag()
    lag_at = time.monotonic()
    time.sleep(LAG_SECONDS)  # the lag is a span of time: commits pile up (sync) or go unreplicated (async)
    kill_at = time.monotonic()
    before = succeeded()
    replicated.fail_over()
    promoted_at = time.monotonic()
    probes.stop()

    wait_for(
        progress(before + 20),
        within=60,
        interval=0.2,
        what=lambda: "20 runs on the new primary\n" + failover_processes.outputs()[-6000:],
    )
    carried_on_at = time.monotonic()
    wait_for(
        lambda: listening() == LISTENING,
        within=30,
        what=lambda: f"both processes to LISTEN on the new primary ({listening()})",
    )
    stop_gracefully(*everyone)
    # A run still `running` under the worker's live lease, though the stopped worker held nothing:
    # a claim whose record the worker lost (a result recorded only on the old primary). The worker
    # gives those up once it is back, so their jobs wait for recovery, not for LEASE_SECONDS.
    orphaned = scalar(
        "SELECT count(*) FROM executions WHERE status = 'running' AND claimed_by = 'fo-worker'"
        " AND lease_expires_at > :now",
        now=utcnow(),
    )

    present = {row[0] for row in rows("SELECT id FROM failover_probe")}
    lost_probes = sorted(i for i in probes.acknowledged if i not in present)
    started = {(r["execution_id"], r["attempt"]): r["job_id"] for r in log_events(worker, "execution_started")}
    recorded = {
        (r[0], r[1]): r[2]
        for r in rows(
            "SELECT a.execution_id, a.number, e.job_id FROM attempts AS a JOIN executions AS e ON e.id = a.execution_id WHERE a.worker_id = 'fo-worker'"
        )
    }
    lost_starts = sorted(key for key, job_id in started.items() if recorded.get(key) != job_id)
    figures = {
        "probes_acknowledged": len(probes.acknowledged),
        "probes_lost": len(lost_probes),
        "loss_window_s": round(kill_at - probes.acknowledged[lost_probes[0]], 2) if lost_probes else 0.0,
        "lag_s": round(kill_at - lag_at, 2),
        "starts_acknowledged": len(started),
        "starts_lost": len(lost_starts),
        "failover_s": round(promoted_at - kill_at, 2),
        "carried_on_after_s": round(carried_on_at - kill_at, 2),
        "claims_released": len(log_events(worker, "claim_released")),
        "claims_orphaned": orphaned,
        "worker_failures": len(log_events(worker, "worker_loop_failed")),
        "scheduler_failures": len(log_events(scheduler, "tick_failed")),
    }
    check_ledger(f"failover, {mode} replication")
    verify = failover_processes.start("verify")  # the operator's check, through the multi-host URL
    assert verify.wait_exit(60) == 0, verify.describe()
    print(f"\n[failover, {mode} replication] " + " ".join(f"{key}={value}" for key, value in figures.items()))
    assert orphaned == 0, figures
    if replicated.synchronous:
        assert lost_probes == [] and lost_starts == [], figures  # nothing acknowledged is lost
    else:
        assert lost_probes, figures  # the lag's acknowledged commits are gone ...
        assert figures["loss_window_s"] <= LAG_SECONDS + 0.5, figures  # ... and no more than the lag
