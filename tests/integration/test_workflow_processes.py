"""Workflow runs with real worker processes on PostgreSQL: a diamond's two middle steps run at
the same time on two workers and the last step sees both results; a worker SIGKILLed while a
step runs loses nothing: the step is recovered through its lease, and the step after it runs
once. Every step process leaves a witness line, compared with the database afterwards."""

from __future__ import annotations

import json
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
from app.services.read.ledger import verify
from app.services.use_cases import runs
from tests.factories import make_job
from tests.helpers import workflow_tasks
from tests.helpers.databases import app_env_for
from tests.helpers.processes import PROJECT_ROOT, wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.timeout(180)]


def diamond(middle_seconds: dict[str, float], first_seconds: float = 0) -> list[dict]:
    return [
        {"name": "a", "task": "wf_witness", "config": {"seconds": first_seconds}},
        {
            "name": "b",
            "task": "wf_witness",
            "config": {"seconds": middle_seconds["b"]},
            "after": ["a"],
            "timeout_seconds": 300,
        },
        {"name": "c", "task": "wf_witness", "config": {"seconds": middle_seconds["c"]}, "after": ["a"]},
        {"name": "d", "task": "wf_witness", "after": ["b", "c"]},
    ]


def start_worker(pg_url, tmp_path, worker_id: str, witness) -> subprocess.Popen:
    env = {**app_env_for(pg_url, tmp_path / "instance"), "PYTHONPATH": str(PROJECT_ROOT)}
    command = [
        "-m",
        "tests.helpers.workflow_tasks",
        "--worker-id",
        worker_id,
        "--slots",
        "1",
        "--witness",
        str(witness),
    ]
    return subprocess.Popen(
        [sys.executable, *command],
        cwd=PROJECT_ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def steps(run_id: int) -> dict[str, tuple]:
    db.session.rollback()
    rows = db.session.execute(
        text("SELECT step, id, status, attempts, claimed_by, result FROM executions WHERE workflow_run_id = :r"),
        {"r": run_id},
    )
    return {row.step: row for row in rows}


def witnessed(witness) -> list[dict]:
    lines = witness.read_text().splitlines() if witness.exists() else []
    return [dict(zip(("job", "step", "execution", "pid", "start", "end"), line.split())) for line in lines]


def errors(run_id: int) -> dict[str, str]:
    db.session.rollback()
    rows = db.session.execute(text("SELECT step, error FROM executions WHERE workflow_run_id = :r"), {"r": run_id})
    return {row.step: row.error[-300:] for row in rows if row.error}


def anchor_status(run_id: int) -> str:
    db.session.rollback()
    return db.session.execute(text("SELECT status FROM executions WHERE id = :id"), {"id": run_id}).scalar()


@pytest.fixture
def workers(pg_url, tmp_path):
    started = []

    def start(worker_id: str, witness):
        proc = start_worker(pg_url, tmp_path, worker_id, witness)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in started:
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


def test_the_middle_steps_run_at_once_on_two_workers_and_the_last_sees_both(pg_app, tmp_path, workers):
    witness = tmp_path / "witness.log"
    job = make_job(now=utcnow(), task="echo", every="1d", steps=diamond({"b": 1.5, "c": 1.5}, first_seconds=0.5))
    # (A first step this long keeps each worker from claiming ahead: a worker whose tasks are very
    # short takes a slot's worth more at a time, and would run b and c one after the other.)
    first, second = workers("w1", witness), workers("w2", witness)
    run = runs.trigger_run(job.id, {}, now=utcnow(), actor="test")

    wait_for(lambda: anchor_status(run.id) != "running", within=60, what=lambda: first.stderr.read1().decode())
    assert anchor_status(run.id) == "succeeded", errors(run.id)
    by_step = {line["step"]: line for line in witnessed(witness)}
    assert sorted(by_step) == ["a", "b", "c", "d"] and len(witnessed(witness)) == 4
    b, c = by_step["b"], by_step["c"]
    assert float(b["start"]) < float(c["end"]) and float(c["start"]) < float(b["end"])  # they overlapped
    assert float(by_step["d"]["start"]) >= max(float(b["end"]), float(c["end"]))
    rows = steps(run.id)
    assert {rows["b"].claimed_by, rows["c"].claimed_by} == {"w1", "w2"}
    assert json.loads(rows["d"].result)["upstream"] == ["b", "c"]
    assert first.poll() is None and second.poll() is None


def test_a_worker_killed_while_a_step_runs_loses_nothing_and_the_next_step_runs_once(
    pg_app, tmp_path, workers, monkeypatch
):
    witness = tmp_path / "witness.log"
    job = make_job(
        now=utcnow(),
        task="echo",
        every="1d",
        steps=diamond({"b": 60, "c": 0}, first_seconds=0.5),
        max_attempts=2,
        retry_backoff_seconds=1,
    )
    victims = {"w1": workers("w1", witness), "w2": workers("w2", witness)}
    run = runs.trigger_run(job.id, {}, now=utcnow(), actor="test")

    def b_running_and_c_done():
        rows = steps(run.id)
        return "b" in rows and rows["b"].status == "running" and "c" in rows and rows["c"].status == "succeeded"

    wait_for(b_running_and_c_done, within=60, what="b running and c succeeded")
    holder = steps(run.id)["b"].claimed_by
    victims[holder].send_signal(signal.SIGKILL)
    assert victims[holder].wait(timeout=10) == -signal.SIGKILL
    for proc in victims.values():  # the survivor too: the rest is drained with an injected clock
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=20)

    later = utcnow() + timedelta(hours=1)
    db.session.rollback()
    before = db.session.execute(
        text("SELECT attempts, max_attempts, status FROM executions WHERE id = :e"), {"e": steps(run.id)["b"].id}
    ).one()
    tried = db.session.execute(
        text("SELECT number, status, worker_id, error FROM attempts WHERE execution_id = :e"),
        {"e": steps(run.id)["b"].id},
    ).all()
    assert tuple(before) == (1, 2, "running"), (before, tried)
    assert recovery.recover_expired_leases(db.engine, now=later).retried == 1  # b, through its lease
    monkeypatch.setenv(workflow_tasks.WITNESS_ENV, str(witness))
    executor = ForkServer(preload=workflow_tasks.PRELOAD, kill_grace_seconds=1.0)
    db.session.execute(text("UPDATE executions SET config_override = '{}' WHERE workflow_run_id = :r"), {"r": run.id})
    db.session.commit()  # b's retry need not sleep again
    try:
        Worker(pg_app, worker_id="rescuer", clock=lambda: later + timedelta(minutes=5), executor=executor).run(
            burst=True
        )
    finally:
        executor.stop()

    assert anchor_status(run.id) == "succeeded"
    rows = steps(run.id)
    assert rows["b"].attempts == 2 and rows["d"].attempts == 1
    assert Counter(line["step"] for line in witnessed(witness)) == {"a": 1, "b": 1, "c": 1, "d": 1}
    attempts = dict(
        db.session.execute(
            text("SELECT number, status FROM attempts WHERE execution_id = :e ORDER BY number"), {"e": rows["b"].id}
        ).all()
    )
    assert attempts == {1: "abandoned", 2: "succeeded"}
    assert verify(now=later + timedelta(minutes=6)).ok
