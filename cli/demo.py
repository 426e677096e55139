"""`flask demo single-fire | misfire | timeout`: self-checking demonstrations of the guarantees.

Each command works on the configured database with jobs of its own (named `demo-<command>-<token>`,
on queue `demo`), prints what it shows as it goes, removes its jobs, alerts and heartbeats at the
end, and exits 1 with one line on stderr when what it set out to show does not hold.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FuturesTimeout
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import TypeVar

import click
from flask import current_app
from flask.cli import AppGroup

from app.clock import utcnow
from app.database import write_transaction
from app.domain.states import TERMINAL
from app.domain.states import ExecutionStatus as S
from app.extensions import db
from app.models import Attempt, Execution, Job
from app.services import events
from app.services.engine import heartbeats
from app.services.engine.scheduler import Scheduler, TickReport
from app.services.engine.worker import Worker, WorkerStats
from app.services.errors import ServiceError
from app.services.use_cases import alerts, executions, jobs, queues
from app.store import occurrence_row, store_for
from cli.common import fmt_age, handle_errors, mutating

T = TypeVar("T")
demo_cli = AppGroup("demo", help="Self-checking demonstrations of the guarantees.")

ACTOR = "demo"
QUEUE = "demo"
RACE_SECONDS = 90.0  # how long the raced schedulers or workers may take before the demo gives up
# The misfire demo's scheduler runs at this instant, where only the demo's own jobs can be due.
MISFIRE_CLOCK = datetime(2000, 1, 1, tzinfo=UTC)


class DemoFailed(Exception):
    """What the demo set out to show did not hold."""


def expect(condition: bool, message: str) -> None:
    if not condition:
        raise DemoFailed(message)


@contextmanager
def demo_run(command: str) -> Iterator[str]:
    """Yield a unique name prefix; remove everything made under it afterwards, pass or fail."""
    prefix = f"demo-{command}-{uuid.uuid4().hex[:6]}"
    started = utcnow()
    made_queue = QUEUE not in queues.known_names()
    if made_queue:
        queues.add_queue(
            {"name": QUEUE, "description": "Made by `flask demo`; removed when it ends."}, now=utcnow(), actor=ACTOR
        )
    try:
        yield prefix
    except DemoFailed as failed:
        raise click.ClickException(f"{command} demo FAILED: {failed}") from None
    finally:
        _clean_up(prefix)
        # Runs due in the past are the demo's point; the backlog alert they raise is its own.
        try:
            alerts.delete_alerts_of_queue(queues.get_queue(QUEUE).id, since=started)
        except ServiceError:  # the queue is gone already
            db.session.rollback()
        if made_queue:
            try:
                queues.delete_queue(QUEUE, now=utcnow(), actor=ACTOR)
            except ServiceError:  # another demo running at the same time still uses it
                db.session.rollback()


def _clean_up(prefix: str) -> None:
    db.session.rollback()
    ids = [job.id for job in jobs.list_jobs() if job.name.startswith(prefix)]
    alerts.delete_alerts_of_jobs(ids)
    # The demo's processes remove their own heartbeats when they end; this covers one that failed.
    with write_transaction(db.engine) as conn:
        for kind in ("scheduler", "worker"):
            for process_id in (f"{prefix}-{kind}", *(f"{prefix}-{kind}-{n}" for n in range(1, 4))):
                heartbeats.remove(conn, process_id)
    for job_id in ids:
        jobs.delete_job(job_id, now=utcnow(), actor=ACTOR)


def _create_job(name: str, *, now: datetime, **fields) -> Job:
    data = {
        "name": name,
        "task": "always_succeed",
        "schedule_type": "interval",
        "schedule": {"every": "1m"},
        "queue": QUEUE,
        "description": "Made by `flask demo`; removed when the demo ends.",
        **fields,
    }
    return jobs.create_job(data, now=now, actor=ACTOR)


def _executions(job_ids: list[int]) -> list[Execution]:
    """The jobs' executions by job and occurrence (a demo job has a handful)."""
    db.session.rollback()  # see what other processes committed
    rows = [row for job_id in job_ids for row in executions.list_executions(job_id=job_id, limit=1000)]
    return sorted(rows, key=lambda row: (row.job_id, row.scheduled_for))


def _wait_until_settled(job_ids: list[int], within: float) -> list[Execution]:
    """Executions of the jobs once none is in flight or pending (a live worker may hold some)."""
    deadline = time.monotonic() + within
    while True:
        rows = _executions(job_ids)
        if all(S(row.status) in TERMINAL for row in rows) or time.monotonic() > deadline:
            return rows
        time.sleep(0.1)


# --- single-fire ------------------------------------------------------------------------------


@demo_cli.command("single-fire")
@mutating
@handle_errors
def single_fire() -> None:
    """Race 3 schedulers and 3 workers: each occurrence runs exactly once.

    Four demo jobs have three occurrences each already due. Three schedulers, each on its own
    database connection, tick at the same instant (released together from a starting gate), then
    three workers (each with its own fork server) drain the demo queue at the same instant. Every
    occurrence must end with one execution and one attempt. On SQLite they take turns on the
    database write lock instead, and the demo says so.

    \b
    Example:
      flask demo single-fire
    """
    postgres = db.engine.dialect.name == "postgresql"
    if postgres:
        click.echo(
            "PostgreSQL: schedulers lock due jobs and workers claim executions with FOR UPDATE SKIP "
            "LOCKED. Each group of three, each on its own database connection, waits at a starting "
            "gate and is released at one instant, so they really race."
        )
    else:
        click.echo(
            "SQLite cannot show skip-locked: it has no row locks. Its schedulers and workers take turns on the "
            "database write lock (BEGIN IMMEDIATE), so the race below is serialised. What it does show "
            "is the unique-key guarantee: one execution per (job, scheduled_for), whoever writes it."
        )
    with demo_run("single-fire") as prefix:
        now = utcnow()
        # Every 10 minutes from 35 minutes ago: due 25, 15 and 5 minutes ago, next in 5 minutes, so
        # nothing new falls due while the demo runs.
        made = [
            _create_job(
                f"{prefix}-{n}",
                now=now - timedelta(minutes=35),
                schedule={"every": "10m"},
                misfire_policy="catch_up",
                overlap_policy="allow",
            )
            for n in range(1, 5)
        ]
        job_ids = [job.id for job in made]
        due = {(job.id, at) for job in made for at in _occurrences(job, until=now)}
        click.echo(f"  {len(made)} jobs, {len(due)} occurrences due")

        app = current_app._get_current_object()  # type: ignore[attr-defined]  # a proxy, typed as the app it stands for

        def scheduler_tick(n: int) -> TickReport:
            scheduler = Scheduler(app, scheduler_id=f"{prefix}-scheduler-{n}")
            report = scheduler.tick()
            scheduler.forget_heartbeat()  # a one-off tick is not a running scheduler
            return report

        created = [report.created for report in _race(3, scheduler_tick)]
        rows = _executions(job_ids)
        keys = [(row.job_id, row.scheduled_for) for row in rows]
        expect(len(keys) == len(set(keys)), f"duplicate executions for one occurrence: {len(keys) - len(set(keys))}")
        expect(set(keys) == due, f"{len(set(keys))} executions for {len(due)} due occurrences")
        click.echo(
            f"  3 schedulers ticking at once created {' + '.join(map(str, created))} = {sum(created)} "
            f"executions; the database holds exactly one per due occurrence"
        )
        if postgres and sum(created) and max(created) == sum(created):
            click.echo(
                "  (one scheduler locked every due job in a single statement; the others skipped the "
                "locked rows rather than wait for them or fire them again)"
            )

        job_id, scheduled_for = min(due)
        job = db.session.get(Job, job_id)
        with write_transaction(db.engine) as conn:
            again = store_for(conn).insert_occurrences(
                conn, [occurrence_row(job, scheduled_for, trigger="schedule", status=S.PENDING, now=utcnow())]
            )
        expect(not again and len(_executions(job_ids)) == len(due), "a second insert of an occurrence was kept")
        click.echo(
            "  writing one of them again, as a late fourth scheduler would, creates nothing: the unique "
            "(job, scheduled_for) key"
        )

        def worker_drain(n: int) -> WorkerStats:
            return Worker(app, worker_id=f"{prefix}-worker-{n}", slots=2, queues=[QUEUE]).run(burst=True)

        stats = _race(3, worker_drain)
        expect(sum(s.discarded for s in stats) == 0, "a worker lost a claimed row to another worker")
        claimed = [s.claimed for s in stats]
        rows = _wait_until_settled(job_ids, within=30)
        attempts = {row.id: len(_attempts_of(row.id)) for row in rows}
        expect(
            all(row.status == "succeeded" for row in rows),
            "not every execution succeeded: " + ", ".join(sorted({row.status for row in rows})),
        )
        expect(
            all(attempts.get(row.id) == 1 and row.attempts == 1 for row in rows),
            "an execution ran more than once (or not at all)",
        )
        click.echo(
            f"  3 workers racing claimed {' + '.join(map(str, claimed))} = {sum(claimed)}; every one of the "
            f"{len(rows)} executions succeeded with exactly one attempt"
        )
    click.echo("OK: each due occurrence got exactly one execution, and each execution ran exactly once.")


def _occurrences(job: Job, *, until: datetime) -> list[datetime]:
    schedule, found, at = jobs.schedule_of(job), [], job.next_run_at
    while at is not None and at <= until:
        found.append(at)
        at = schedule.next_after(at)
    return found


def _attempts_of(execution_id: int) -> list[Attempt]:
    """The execution's attempts in order; each names the worker that claimed and ran it."""
    db.session.rollback()  # see what other processes committed
    return list(executions.get_execution(execution_id, with_attempts=True).attempt_rows)


def _race(count: int, run: Callable[[int], T]) -> list[T]:
    """Call run(1) ... run(count) on `count` threads released at one instant; their results in order.

    Each thread has its own app context, so its own session and database connection: on
    PostgreSQL they really contend for the same rows. An exception in one is raised here.
    """
    app = current_app._get_current_object()  # type: ignore[attr-defined]  # a proxy, typed as the app it stands for
    gate = threading.Barrier(count)

    def contender(n: int) -> T:
        with app.app_context():
            try:
                gate.wait(timeout=RACE_SECONDS)
                return run(n)
            finally:
                db.session.remove()

    with ThreadPoolExecutor(max_workers=count, thread_name_prefix="demo-race") as pool:
        futures = [pool.submit(contender, n) for n in range(1, count + 1)]
        try:
            return [future.result(timeout=RACE_SECONDS) for future in futures]
        except FuturesTimeout:
            raise DemoFailed(f"the racers did not finish in {RACE_SECONDS:g} s") from None


# --- misfire ----------------------------------------------------------------------------------

EXPECTED_MISFIRE = {  # (seconds before the tick, trigger or "missed") for each policy
    "coalesce": [(30, "schedule")],
    "catch_up": [(270, "catch_up"), (210, "catch_up"), (150, "catch_up"), (90, "catch_up"), (30, "schedule")],
    "skip": [(270, "missed"), (210, "missed"), (150, "missed"), (90, "missed"), (30, "schedule")],
}


@demo_cli.command("misfire")
@mutating
@handle_errors
def misfire() -> None:
    """Show coalesce, catch_up and skip on jobs whose next run is 4.5 minutes in the past.

    One job per misfire policy (every minute, misfire grace 60 s) gets one scheduler pass on an
    injected clock, so nothing waits. The clock is set to 2000-01-01 00:00Z, where only the demo's
    own jobs can be due: nothing else in the database is touched.

    \b
    Example:
      flask demo misfire
    """
    at = MISFIRE_CLOCK
    with demo_run("misfire") as prefix:
        made = {
            policy: _create_job(
                f"{prefix}-{policy}",
                now=at - timedelta(minutes=5, seconds=30),
                misfire_policy=policy,
                misfire_grace_seconds=60,
                overlap_policy="allow",
            )
            for policy in EXPECTED_MISFIRE
        }
        ids = [job.id for job in made.values()]
        # Their next run (1999-12-31) is due for any scheduler: a real one running now may fire
        # them first, and the check below then says so.
        click.echo(
            f"Three jobs every 1m, misfire grace 60s, next run {fmt_age(270)} before a scheduler pass at "
            f"{at:%Y-%m-%d %H:%M}Z (an injected clock): occurrences at -4m30s, -3m30s, -2m30s, -1m30s, "
            "-30s; the first four are late."
        )
        scheduler = Scheduler(current_app._get_current_object(), scheduler_id=f"{prefix}-scheduler", clock=lambda: at)  # type: ignore[attr-defined]  # a proxy, typed as the app it stands for
        report = TickReport()
        scheduler.schedule_due_jobs(at, report)
        expect(report.due == 3, f"the scheduler pass found {report.due} due jobs instead of the demo's 3")
        rows = _executions(ids)
        expect(
            all(row.created_at == at for row in rows), "another scheduler fired the demo jobs first; run the demo again"
        )
        for policy, job in made.items():
            _check_policy(policy, job, [row for row in rows if row.job_id == job.id], at)
        again = TickReport()
        scheduler.schedule_due_jobs(at, again)
        expect(again.due == 0 and len(_executions(ids)) == len(rows), "a second pass at the same instant did more")
        click.echo("  a second pass at the same instant finds nothing due: each job's cursor moved past its backlog")
    click.echo("OK: coalesce, catch_up and skip each did what the policy says, in one scheduler pass.")


def _check_policy(policy: str, job: Job, rows: list[Execution], at: datetime) -> None:
    seen = [
        (int((at - row.scheduled_for).total_seconds()), "missed" if row.status == "missed" else row.trigger)
        for row in rows
    ]
    expect(seen == EXPECTED_MISFIRE[policy], f"{policy}: got {seen}, expected {EXPECTED_MISFIRE[policy]}")
    db.session.rollback()
    next_run_at = db.session.get(Job, job.id).next_run_at
    expect(next_run_at == at + timedelta(seconds=30), f"{policy}: next run {next_run_at}, expected 30 s after the pass")
    runnable = [row for row in rows if row.status != "missed"]
    line = " ".join(f"-{fmt_age(ago)}" for ago, _ in seen)
    if policy == "coalesce":
        folded = events.list_events("misfire_coalesced", job_id=job.id)
        expect(
            len(folded) == 1 and folded[0].payload.get("occurrences") == 4,
            "coalesce: expected one misfire_coalesced event folding 4 occurrences",
        )
        detail = f"1 run for the latest occurrence ({line}); 1 misfire event folds the other 4, no missed rows"
    elif policy == "catch_up":
        detail = f"{len(runnable)} runs, one per occurrence ({line}); 4 marked catch_up"
    else:
        detail = f"{len(rows) - len(runnable)} recorded missed, {len(runnable)} run (-30s, within the grace)"
    click.echo(f"  {policy:<8}  {detail}; next run +30s")


# --- timeout ----------------------------------------------------------------------------------


@demo_cli.command("timeout")
@mutating
@handle_errors
def timeout() -> None:
    """Run a 30 s task with a 1 s timeout through a real worker: killed, retried, dead-lettered.

    \b
    Example:
      flask demo timeout
    """
    with demo_run("timeout") as prefix:
        now = utcnow()
        job = _create_job(
            prefix,
            now=now,
            task="sleep_for_seconds",
            config={"seconds": 30},
            schedule={"every": "1d"},
            timeout_seconds=1,
            max_attempts=2,
            retry_backoff_seconds=0,
            alert_mode="web",
        )
        execution = jobs.trigger_job(job.id, now=now, actor=ACTOR)
        click.echo(
            f"Job {job.name}: sleep_for_seconds 30 with timeout_seconds=1, max_attempts=2, no retry backoff; "
            f"triggered execution {execution.id}, run by a worker with a fork-server on queue '{QUEUE}'."
        )
        started = time.monotonic()
        Worker(current_app._get_current_object(), worker_id=f"{prefix}-worker", slots=1, queues=[QUEUE]).run(burst=True)  # type: ignore[attr-defined]  # a proxy, typed as the app it stands for
        [row] = _wait_until_settled([job.id], within=60)
        attempts = _attempts_of(row.id)
        expect(row.status == "timed_out", f"execution ended {row.status}, expected timed_out")
        expect(
            [a.status for a in attempts] == ["timed_out", "timed_out"],
            f"attempts ended {[a.status for a in attempts]}, expected two timed_out",
        )
        for attempt in attempts:
            took = (attempt.finished_at - attempt.started_at).total_seconds()
            expect(took < 10, f"attempt {attempt.number} took {took:.1f} s: the task was not killed at its timeout")
            expect(_process_gone(attempt.pid), f"task process {attempt.pid} of attempt {attempt.number} is still alive")
            click.echo(
                f"  attempt {attempt.number}: timed_out after {took:.2f} s; task process {attempt.pid} "
                f"was killed (exit code {attempt.exit_code}) and is gone"
            )
        retries = events.list_events("retry_scheduled", execution_id=row.id)
        expect(len(retries) == 1, f"{len(retries)} retry_scheduled events, expected 1")
        dead = next((d for d in alerts.list_dead_letters() if d.execution_id == row.id), None)
        alert = next((a for a in alerts.list_alerts(include_resolved=True) if a.execution_id == row.id), None)
        expect(dead is not None and alert is not None, "no dead letter and alert after the last attempt")
        click.echo(
            f"  retried once, then kept its truthful status timed_out and was dead-lettered with an alert: "
            f"{alert.message[:160]}"
        )
        click.echo(f"  ({time.monotonic() - started:.1f} s in all, for a task that wanted 30 s per attempt)")
    click.echo("OK: the hard timeout killed the task, the retry ran, and the exhausted execution was flagged.")


def _process_gone(pid: int | None) -> bool:
    """True when no process has this id any more (the zygote reaps its task processes, and the
    worker's shutdown stops the zygote, so a killed task leaves no zombie behind)."""
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, under another user (the pid was reused)
        return False
    return False
