"""A worker SIGKILLed at random instants under load keeps the history truthful (PostgreSQL, real
processes): every task process that ran has its Attempt, no attempt ran twice, and once the
leases are recovered every execution ends exactly once.

The worker claims ahead while its tasks are short (runs started in the database, waiting for a
slot: app/services/engine/worker.py; a slot's worth of them queued in the zygote, which forks one
the moment a task ends), so a kill can land between a turn's commit and the fork of what it
claimed, while runs wait in the zygote's queue, between a fork and the turn that records it, or anywhere in a turn. The task
(`test_witness`, tests/helpers/witness_worker.py) writes "execution attempt pid" the moment it
runs; the database is then compared with what the processes saw. Kill moments are picked by
progress (a random count of finished rows), never by sleeping; lease expiry is reached with an
injected clock.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from collections import Counter
from datetime import timedelta

import pytest
from sqlalchemy import text

from app.clock import utcnow
from app.executor import ForkServer
from app.extensions import db
from app.services.engine import recovery
from app.services.engine.worker import Worker
from tests.factories import make_job
from tests.helpers import witness_worker  # noqa: F401 - registers test_witness in this process too
from tests.helpers.databases import app_env_for
from tests.helpers.processes import PROJECT_ROOT, children_of, is_alive, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

EXECUTIONS = 800
KILLS = 5
# Each kill comes after 5-60 more successes and strands at most slots x 17 runs claimed by the
# victim (running under its lease until the recovery below: ADR 0010), so 5 kills use at most
# 5 x (60 + 68) = 640 runs and the next victim always finds pending work to reach its target.
MORE_BEFORE_KILL = (5, 60)


def count(status: str) -> int:
    db.session.rollback()
    return db.session.execute(text("SELECT count(*) FROM executions WHERE status = :s"), {"s": status}).scalar()


SLOTS = 4  # the witness worker's default


def load(tmp_path, n: int = EXECUTIONS, config: dict | None = None):
    """`n` pending runs of a witnessed no-op job; returns the witness file and the workers' env."""
    job = make_job(
        config=config or {},
        now=utcnow(),
        every="1d",
        name="witnessed",
        task="test_witness",
        overlap_policy="allow",
        max_attempts=10,
        retry_backoff_seconds=1,
    )
    db.session.execute(
        text(
            """INSERT INTO executions (job_id, scheduled_for, trigger, idempotency_key, status, attempts,
                                       max_attempts, queue_id, priority, exclusive, available_at, output, error,
                                       created_at, updated_at)
               SELECT :job, now(), 'manual', 'kill:' || g, 'pending', 0, 10, :queue, 0, false,
                      now() - interval '1 second', '', '', now(), now()
               FROM generate_series(1, :n) AS g"""
        ),
        {"job": job.id, "queue": job.queue_id, "n": n},
    )
    db.session.commit()
    return tmp_path / "witness.log"


def start_victim(pg_url, tmp_path, worker_id: str, witness, *options: str) -> subprocess.Popen:
    env = {**app_env_for(pg_url, tmp_path / "instance"), "PYTHONPATH": str(PROJECT_ROOT)}
    command = ["-m", "tests.helpers.witness_worker", "--worker-id", worker_id, "--witness", str(witness), *options]
    return subprocess.Popen(
        [sys.executable, *command],
        cwd=PROJECT_ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def kill(proc: subprocess.Popen) -> None:
    """SIGKILL the worker; its zygote and task processes die with it (parent-death signals)."""
    assert proc.poll() is None, proc.stderr.read().decode(errors="replace")
    family = children_of(proc.pid)
    family += [pid for zygote in family for pid in children_of(zygote)]
    proc.send_signal(signal.SIGKILL)
    assert proc.wait(timeout=10) == -signal.SIGKILL
    wait_for(lambda: not any(is_alive(pid) for pid in family), within=10, what="the worker's processes to die")


def witnessed(witness) -> list[tuple[int, int, int]]:
    """(execution, attempt, pid) of every task process that ran, in the order they ran."""
    return [tuple(int(v) for v in line.split()[:3]) for line in witness.read_text().splitlines()]


def started_after(witness, moment: float) -> int:
    """How many task processes started after `moment` (epoch seconds)."""
    return sum(float(line.split()[3]) > moment for line in witness.read_text().splitlines())


def recover_drain_and_check(pg_app, witness, killed_ids: list[str], n: int, context: str) -> tuple[int, int]:
    """Recover the killed workers' leases (injected clock), drain the rest with a fresh worker,
    then compare the database with what the task processes saw. Returns (abandoned attempts, of
    them never forked)."""
    later = utcnow() + timedelta(hours=1)
    report = recovery.recover_expired_leases(db.engine, now=later)
    drain_clock = lambda: later + timedelta(minutes=5)  # noqa: E731 - past every retry's backoff
    executor = ForkServer(preload=("app.tasks.catalog", "tests.helpers.witness_worker"))
    os.environ[witness_worker.WITNESS_ENV] = str(witness)
    try:
        Worker(pg_app, worker_id="rescuer", slots=4, clock=drain_clock, executor=executor).run(burst=True)
    finally:
        os.environ.pop(witness_worker.WITNESS_ENV, None)

    db.session.rollback()
    seen = witnessed(witness)
    ran = Counter((execution_id, attempt) for execution_id, attempt, _ in seen)
    attempts = {
        (row.execution_id, row.number): (row.status, row.pid, row.worker_id)
        for row in db.session.execute(text("SELECT execution_id, number, status, pid, worker_id FROM attempts"))
    }
    executions = {
        row.id: (row.status, row.attempts)
        for row in db.session.execute(text("SELECT id, status, attempts FROM executions"))
    }
    context = f"({context}, {report.retried} recovered)"

    # No attempt ran in two processes.
    assert [key for key, n in ran.items() if n > 1] == [], context
    # Every process that ran has its Attempt; a finished one records that very process.
    assert [key for key in ran if key not in attempts] == [], context
    for execution_id, attempt, pid in seen:
        status, recorded_pid, _ = attempts[(execution_id, attempt)]
        assert status in ("succeeded", "abandoned"), (execution_id, attempt, status, context)
        if status == "succeeded":
            assert recorded_pid == pid, context
    # Every execution ended exactly once: succeeded, by exactly one attempt, its last.
    assert Counter(status for status, _ in executions.values()) == {"succeeded": n}, context
    for execution_id, (_, number) in executions.items():
        statuses = [attempts[(execution_id, n)][0] for n in range(1, number + 1)]
        assert statuses[-1] == "succeeded" and set(statuses[:-1]) <= {"abandoned"}, (execution_id, statuses, context)
        assert len([key for key in attempts if key[0] == execution_id]) == number, context
    # Abandoned attempts belong to the killed workers only; some of them never got a process
    # (claimed ahead, or claimed just before the kill): those were retried, not lost (above).
    abandoned = [key for key, (status, _, _) in attempts.items() if status == "abandoned"]
    assert {attempts[key][2] for key in abandoned} <= set(killed_ids), context
    # (Not all by the recovery above: a later victim that found nothing to claim helps recover
    # leases that ran out meanwhile, as idle workers do.)
    return len(abandoned), len([key for key in abandoned if key not in ran])


def kill_victims(pg_url, tmp_path, witness, rng, *, kills: int, more: tuple[int, int], name: str, seed) -> list[str]:
    """Start `kills` victims one after another, each SIGKILLed once a random number `more` (a
    range) of executions more have succeeded: anywhere in the loop, at full load. Their ids."""
    killed_ids = []
    for k in range(kills):
        worker_id = f"{name}-{k}"
        proc = start_victim(pg_url, tmp_path, worker_id, witness)
        try:
            target = count("succeeded") + rng.randrange(*more)
            wait_for(
                lambda: count("succeeded") >= target or proc.poll() is not None,
                within=120,
                interval=0.002,
                what=f"{target} succeeded (seed {seed})",
            )
            kill(proc)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        killed_ids.append(worker_id)
    return killed_ids


def test_worker_killed_at_random_points_leaves_a_truthful_history(pg_app, pg_url, tmp_path):
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    witness = load(tmp_path)
    killed_ids = kill_victims(
        pg_url, tmp_path, witness, rng, kills=KILLS, more=MORE_BEFORE_KILL, name="victim", seed=seed
    )
    abandoned, never_ran = recover_drain_and_check(pg_app, witness, killed_ids, EXECUTIONS, f"seed {seed}")
    print(f"{abandoned} attempts abandoned by {KILLS} kills, {never_ran} of them never forked (seed {seed})")


def waiting_turn_started_at() -> float | None:
    """When the worker's turn statement now waiting for a lock in the test database began (epoch
    seconds), or None if it does not wait: the turn's text (`TURN_SQL`, whose first 1 KB is what
    pg_stat_activity keeps) begins with its `result` part. Other statements of the worker may queue
    behind the rows the waiting turn holds (a lease renewal), so the filter is by text."""
    db.session.rollback()
    return db.session.execute(
        text(
            "SELECT extract(epoch FROM query_start) FROM pg_stat_activity WHERE datname = current_database()"
            " AND wait_event_type = 'Lock' AND pid <> pg_backend_pid() AND query LIKE '%WITH result AS (%'"
            " ORDER BY query_start LIMIT 1"
        )
    ).scalar()


def others_active() -> int:
    db.session.rollback()
    return db.session.execute(
        text(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND state = 'active' AND pid <> pg_backend_pid()"
        )
    ).scalar()


def test_worker_killed_while_its_turn_waits_on_postgresql_forked_only_committed_claims(pg_app, pg_url, tmp_path):
    """On PostgreSQL the turn's statement and commit run on the worker's committer thread while
    the main thread keeps forking runs claimed in earlier turns (Worker._overlapped, ADR 0010).
    A test transaction holds a SHARE lock on attempts, so the worker's next turn (which inserts
    Attempt rows for what it claims) waits inside PostgreSQL. Task processes keep starting
    meanwhile, and the worker is SIGKILLed while that turn still waits: every process that ran
    has its Attempt, the turn's claims (committed by the orphaned backend once the lock is
    released) are recovered through their leases, and nothing ran twice."""
    witness = load(tmp_path)
    # A deeper claim-ahead buffer (a second of work), so forks go on well past the turn's start.
    proc = start_victim(pg_url, tmp_path, "victim", witness, "--ahead-wait", "1.0")
    locker = db.engine.connect()
    try:
        # Past the first turns: tasks are known to be short, so runs are claimed ahead.
        wait_for(lambda: count("succeeded") >= 60 or proc.poll() is not None, within=120, what="60 succeeded")
        locker.execute(text("LOCK TABLE attempts IN SHARE MODE"))  # the turn's INSERT waits for this
        began = wait_for(waiting_turn_started_at, within=30, what="the worker's turn to wait for the lock")
        # At most SLOTS task processes were running when that statement began, so more than SLOTS
        # starting after it were forked while the turn waited.
        wait_for(
            lambda: started_after(witness, began) > SLOTS or proc.poll() is not None,
            within=30,
            what="task processes forked while the turn waits",
        )
        assert waiting_turn_started_at() == began, "the turn finished before the kill"
        kill(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        locker.rollback()
        locker.close()
    # The orphaned backend finishes the turn's statement once the lock is gone (it commits: a
    # backend notices its client left only when it replies); recovery comes after that.
    wait_for(lambda: others_active() == 0, within=30, what="the killed worker's statement to end")
    abandoned, never_ran = recover_drain_and_check(pg_app, witness, ["victim"], EXECUTIONS, "killed in a waiting turn")
    assert abandoned > 0  # what was running or claimed ahead at the kill: retried, not lost
    print(f"{abandoned} attempts abandoned by the kill, {never_ran} of them never forked")


def test_worker_killed_while_runs_wait_in_its_zygote_leaves_a_truthful_history(pg_app, pg_url, tmp_path):
    """Tasks that hold their slot for 20 ms keep the zygote's queue full (one run per slot handed
    over beyond the free slots, ADR 0010, amendment on the zygote's queue), so each kill lands while runs
    wait there: the zygote, told by PDEATHSIG and EOF, kills its tasks and forks none of the
    queued runs, which recovery retries like any run claimed and never forked."""
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    n = 300
    witness = load(tmp_path, n, config={"seconds": 0.02})
    killed_ids = kill_victims(pg_url, tmp_path, witness, rng, kills=3, more=(20, 50), name="queued-victim", seed=seed)
    abandoned, never_ran = recover_drain_and_check(pg_app, witness, killed_ids, n, f"queued, seed {seed}")
    # Each kill strands the slots' running tasks and the runs waiting in the zygote and `ready`.
    assert never_ran > 0, f"seed {seed}"
    print(f"{abandoned} attempts abandoned by 3 kills, {never_ran} of them never forked (seed {seed})")
