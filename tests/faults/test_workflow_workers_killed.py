"""200 workflow runs of 5 steps each (a diamond and a tail: a, then b and c, then d, then e) run
by several real worker processes while workers are SIGKILLed at random moments: every step of
every run ends exactly once, succeeded, no step is created twice, no attempt runs in two
processes, each step is created only after every step it waits for ended, and every run ends.

Real processes, no injected clock: `flask scheduler run` (it creates the 200 occurrences, as a
catch-up of a job that owes them, starts them and recovers expired leases) and three `flask
worker run --workers 2` at a time. A kill comes once a random number of steps more have
succeeded (never after a sleep); the victim's task processes die with it and a new worker takes
its place. Leases are 10 s, so what a victim held is recovered and retried within seconds, by
the scheduler or an idle worker. Each step runs `test_witness` (tests/helpers/witness_worker.py),
a no-op that writes "execution attempt pid time" the moment it runs; the database is compared
with what the task processes saw, then the ledger check (`flask verify`) runs.
"""

from __future__ import annotations

import random
import signal
import time
from collections import Counter, defaultdict
from datetime import timedelta

import pytest

from tests.factories import make_job
from tests.helpers import witness_worker
from tests.helpers.processes import FlaskProcess, children_of, is_alive, wait_for
from tests.helpers.scenario import check_ledger, rows, scalar, stop_gracefully, utcnow

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.timeout(300)]

RUNS = 200
STEPS = [
    {"name": "a", "task": "test_witness", "timeout_seconds": 5},
    {"name": "b", "task": "test_witness", "timeout_seconds": 5, "after": ["a"]},
    {"name": "c", "task": "test_witness", "timeout_seconds": 5, "after": ["a"]},
    {"name": "d", "task": "test_witness", "timeout_seconds": 5, "after": ["b", "c"]},
    {"name": "e", "task": "test_witness", "timeout_seconds": 5, "after": ["d"]},
]
WORKERS = 3  # live at a time, two slots each
KILLS = 6
# Each kill comes after 30-120 more steps succeeded: 6 kills land within the first ~720 of 1,000.
MORE_BEFORE_KILL = (30, 120)
# A step's lease: max(LEASE_SECONDS, timeout + buffer) = 10 s; healthy workers renew it every 2 s.
LEASES = {"LEASE_SECONDS": "10", "LEASE_BUFFER_SECONDS": "2"}


def steps_succeeded() -> int:
    return scalar("SELECT count(*) FROM executions WHERE workflow_run_id IS NOT NULL AND status = 'succeeded'")


def runs_unfinished() -> int:
    return scalar(
        "SELECT count(*) FROM executions AS e JOIN workflow_runs AS w ON w.id = e.id"
        " WHERE e.status IN ('pending', 'running')"
    )


def kill(process: FlaskProcess) -> None:
    """SIGKILL a worker; its zygote and task processes die with it (parent-death signals)."""
    assert process.popen.poll() is None, process.describe()
    family = children_of(process.pid)
    family += [pid for zygote in family for pid in children_of(zygote)]
    process.signal(signal.SIGKILL)
    assert process.wait_exit(within=10) == -signal.SIGKILL
    wait_for(lambda: not any(is_alive(pid) for pid in family), within=10, what="the worker's processes to die")


def test_workflow_runs_lose_and_duplicate_no_step_while_workers_are_killed_at_random(fault_app, processes, tmp_path):
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    witness = tmp_path / "witness.log"
    witness.touch()
    # A job owing RUNS hourly occurrences: the scheduler catches them all up, 50 per tick.
    make_job(
        "diamond-and-tail",
        now=utcnow() - timedelta(hours=RUNS, minutes=30),
        every="1h",
        task="echo",
        steps=STEPS,
        misfire_policy="catch_up",
        overlap_policy="allow",
        max_attempts=10,
        retry_backoff_seconds=1,
    )
    env = {"CRONWELL_TASK_MODULES": "tests.helpers.witness_worker", witness_worker.WITNESS_ENV: str(witness), **LEASES}
    names = iter(f"w{n}" for n in range(100))
    live = [processes.start_worker("--workers", "2", "--worker-id", next(names), env=env) for _ in range(WORKERS)]
    started = time.monotonic()
    scheduler = processes.start("scheduler", "run", "--tick-seconds", "1", "--scheduler-id", "scheduler")

    killed: list[str] = []
    for _ in range(KILLS):
        target = steps_succeeded() + rng.randrange(*MORE_BEFORE_KILL)
        wait_for(
            lambda: steps_succeeded() >= target or runs_unfinished() == 0 and steps_succeeded() > 0,
            within=120,
            interval=0.02,
            what=lambda: f"{target} steps succeeded (seed {seed})\n{processes.outputs()[-6000:]}",
        )
        victim = live.pop(rng.randrange(len(live)))
        kill(victim)
        killed.append(victim.args[victim.args.index("--worker-id") + 1])
        live.append(processes.start_worker("--workers", "2", "--worker-id", next(names), env=env))
    kills_done_at = steps_succeeded()
    assert kills_done_at < RUNS * len(STEPS), f"every kill came after the work was done (seed {seed})"

    wait_for(
        lambda: runs_unfinished() == 0 and scalar("SELECT count(*) FROM workflow_runs") == RUNS,
        within=180,
        interval=0.2,
        what=lambda: (
            f"every run to end (seed {seed}): {steps_succeeded()} steps succeeded\n{scheduler.describe()[-4000:]}"
        ),
    )
    elapsed = time.monotonic() - started
    stop_gracefully(scheduler, *live)
    context = f"seed {seed}, killed {killed}"

    # Every run ended succeeded, with each of its five steps created once and succeeded.
    anchors = dict(rows("SELECT e.id, e.status FROM executions AS e JOIN workflow_runs AS w ON w.id = e.id"))
    assert len(anchors) == RUNS and Counter(anchors.values()) == {"succeeded": RUNS}, context
    steps = rows(
        "SELECT id, workflow_run_id, step, status, attempts, created_at, finished_at FROM executions"
        " WHERE workflow_run_id IS NOT NULL"
    )
    per_run: dict[int, dict[str, object]] = defaultdict(dict)
    for row in steps:
        assert row.step not in per_run[row.workflow_run_id], (row.workflow_run_id, row.step, context)
        per_run[row.workflow_run_id][row.step] = row
    assert set(per_run) == set(anchors), context
    assert all(sorted(by_step) == ["a", "b", "c", "d", "e"] for by_step in per_run.values()), context
    assert Counter(row.status for row in steps) == {"succeeded": RUNS * len(STEPS)}, context
    # What the task processes saw against the attempts the database holds.
    seen = [tuple(int(value) for value in line.split()[:3]) for line in witness.read_text().splitlines()]
    ran = Counter((execution_id, attempt) for execution_id, attempt, _ in seen)
    attempts = {
        (row.execution_id, row.number): (row.status, row.pid, row.worker_id)
        for row in rows("SELECT execution_id, number, status, pid, worker_id FROM attempts")
    }
    assert [key for key, count in ran.items() if count > 1] == [], context  # no attempt ran twice
    assert [key for key in ran if key not in attempts] == [], context  # every process has its Attempt
    for execution_id, attempt, pid in seen:
        status, recorded_pid, _ = attempts[(execution_id, attempt)]
        assert status in ("succeeded", "abandoned"), (execution_id, attempt, status, context)
        if status == "succeeded":
            assert recorded_pid == pid, context
    for row in steps:  # ended once: by its last attempt, every earlier one abandoned by a kill
        statuses = [attempts[(row.id, number)][0] for number in range(1, row.attempts + 1)]
        assert statuses[-1] == "succeeded" and set(statuses[:-1]) <= {"abandoned"}, (row.id, statuses, context)
        assert len([key for key in attempts if key[0] == row.id]) == row.attempts, context
        assert ran[(row.id, row.attempts)] == 1, (row.id, context)  # its succeeding process was seen
    # No process of a step started before every step it waits for had ended. (The process start
    # times are the task processes' own; the ends are the recording turns' stamps. A step's
    # created_at is its creating turn's stamp, read before that turn waited for the run's lock, so
    # it may precede by milliseconds the end stamped by a concurrent turn that committed first.)
    first_start: dict[int, float] = {}
    for line in witness.read_text().splitlines():
        execution_id, started_at = int(line.split()[0]), float(line.split()[3])
        first_start[execution_id] = min(started_at, first_start.get(execution_id, started_at))
    for by_step in per_run.values():
        for step in STEPS:
            for up in step.get("after", []):
                downstream, upstream = by_step[step["name"]], by_step[up]
                assert first_start[downstream.id] > upstream.finished_at.timestamp(), (step["name"], up, context)
    abandoned = [key for key, (status, _, _) in attempts.items() if status == "abandoned"]
    assert {attempts[key][2] for key in abandoned} <= set(killed), context
    assert abandoned, f"no kill stranded any work ({context})"
    never_ran = len([key for key in abandoned if key not in ran])

    figures = check_ledger("workflow workers killed at random")
    assert figures.occurrences == RUNS and figures.duplicates == 0, context
    print(
        f"[workflow workers killed at random] runs={RUNS} steps={len(steps)} kills={len(killed)} "
        f"(the last after {kills_done_at} steps) abandoned_attempts={len(abandoned)} never_forked={never_ran} "
        f"seconds={elapsed:.1f} seed={seed}"
    )
