"""Scheduler processes that start ticking at the same instant, for the high-availability race.

Each racer is a `multiprocessing` spawn child with its own interpreter, app and database
connections. All of them wait on one barrier and then tick until a tick finds nothing due, so
their first ticks really overlap (a subprocess per tick would mostly measure start-up jitter).
"""

from __future__ import annotations

import json
import multiprocessing
import time
from collections.abc import Mapping
from pathlib import Path

import pytest

BARRIER_TIMEOUT = 60.0
MAX_TICKS = 200


def tick_until_idle(env: dict, scheduler_id: str, barrier, report_path: str) -> None:
    """Spawn target: wait for the others, tick until nothing is due, write a JSON report."""
    from app import create_app
    from app.services.engine.scheduler import Scheduler

    app = create_app(env=env)
    with app.app_context():
        scheduler = Scheduler(app, scheduler_id=scheduler_id)
        totals = {"ticks": 0, "due": 0, "created": 0, "missed": 0}
        barrier.wait(BARRIER_TIMEOUT)
        for _ in range(MAX_TICKS):
            report = scheduler.tick()
            totals["ticks"] += 1
            totals["due"] += report.due
            totals["created"] += report.created
            totals["missed"] += report.missed
            if report.due == 0:
                break
    Path(report_path).write_text(json.dumps(totals))


def race_schedulers(env: Mapping[str, str], count: int, report_dir: Path, *, within: float = 60.0) -> list[dict]:
    """Run `count` scheduler processes that start together; return each one's totals."""
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(count)
    report_dir.mkdir(parents=True, exist_ok=True)
    paths = [report_dir / f"scheduler-{n}.json" for n in range(count)]
    processes = [
        context.Process(target=tick_until_idle, args=(dict(env), f"racer-{n}", barrier, str(path)))
        for n, path in enumerate(paths)
    ]
    for process in processes:
        process.start()
    deadline = time.monotonic() + within
    try:
        for process in processes:
            process.join(max(0.1, deadline - time.monotonic()))
        stuck = [p.pid for p in processes if p.is_alive()]
        if stuck:
            pytest.fail(f"scheduler processes {stuck} did not finish within {within:g} s")
    finally:
        for process in processes:
            if process.is_alive():
                process.kill()
                process.join(5)
    codes = [process.exitcode for process in processes]
    assert codes == [0] * count, f"scheduler processes exited with {codes}"
    return [json.loads(path.read_text()) for path in paths]


def trigger_together(env: dict, job_id: int, threads: int, barrier, report_path: str) -> None:
    """Spawn target: `threads` threads, each on its own database connection, wait on the shared
    barrier (with every other process's threads) and trigger `job_id` once; write what each got."""
    import threading

    from app import create_app
    from app.clock import utcnow
    from app.extensions import db
    from app.services.use_cases import runs

    app = create_app(env=env)
    answers: list[dict] = []
    errors: list[str] = []

    def one() -> None:
        with app.app_context():
            try:
                db.session.connection()  # connect before the barrier: the race is the insert
                barrier.wait(BARRIER_TIMEOUT)
                execution = runs.trigger_run(job_id, {}, now=utcnow(), actor="racer")
                answers.append({"id": execution.id, "deduplicated": execution.deduplicated})
            except Exception as exc:  # reported to the test, which fails on it
                errors.append(repr(exc))
            finally:
                db.session.remove()

    workers = [threading.Thread(target=one) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    Path(report_path).write_text(json.dumps({"answers": answers, "errors": errors}))


def race_triggers(env: Mapping[str, str], job_id: int, *, processes: int, threads: int, report_dir: Path) -> list[dict]:
    """Trigger `job_id` from `processes` x `threads` connections at the same instant; every answer."""
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(processes * threads)
    report_dir.mkdir(parents=True, exist_ok=True)
    paths = [report_dir / f"trigger-{n}.json" for n in range(processes)]
    children = [
        context.Process(target=trigger_together, args=(dict(env), job_id, threads, barrier, str(path)))
        for path in paths
    ]
    for child in children:
        child.start()
    try:
        for child in children:
            child.join(120)
    finally:
        for child in children:
            if child.is_alive():
                child.kill()
                child.join(5)
    assert [child.exitcode for child in children] == [0] * processes
    reports = [json.loads(path.read_text()) for path in paths]
    errors = [error for report in reports for error in report["errors"]]
    assert not errors, errors
    return [answer for report in reports for answer in report["answers"]]
