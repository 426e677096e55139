"""One scenario that drives every store operation, for the parity and transition tests.

`SCENARIO` is a table of steps; each runs against `store_for(db.engine)` on whatever database the
test's app uses and returns a result in database-independent terms (labels, not ids), next to
the result it must have. `setup` steps change rows behind the store's back (a job disabled, a
legacy `claimed` row) and are not store operations.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import select, text

from app.database import write_transaction
from app.domain.states import AttemptStatus
from app.domain.states import ExecutionStatus as S
from app.extensions import db
from app.models import Attempt, Batch, Execution
from app.store import ExpiredLease, Finished, Outcome, occurrence_row, store_for
from app.store.rows import batch_item_row, callback_row, manual_row, one_off_row
from tests.factories import make_job, make_queue

T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
LEASE = dict(lease_seconds=60, buffer_seconds=30)


def at(**delta) -> datetime:
    return T0 + timedelta(**delta)


class Recorder:
    """Wraps the store and notes which operations were called."""

    def __init__(self, store) -> None:
        self._store = store
        self.called: set[str] = set()

    def __getattr__(self, name: str):
        attribute = getattr(self._store, name)
        if callable(attribute):
            self.called.add(name)
        return attribute


@dataclass
class Run:
    """The scenario's state: labels for ids, the job rows, the recording store."""

    store: Recorder
    ids: dict[str, int] = field(default_factory=dict)
    jobs: dict[str, Any] = field(default_factory=dict)

    def label(self, execution_id: int) -> str:
        return next(name for name, known in self.ids.items() if known == execution_id)

    def labels(self, execution_ids) -> list[str]:
        return sorted(self.label(i) for i in execution_ids)

    def write(self, action: Callable):
        with write_transaction(db.engine) as conn:
            return action(conn)


def outcome(status: str) -> Outcome:
    failed = status != "succeeded"
    return Outcome(status=AttemptStatus(status), exit_code=1 if failed else 0, output=status, error="boom" * failed)


# --- the steps --------------------------------------------------------------------------------


def make_jobs(run: Run):
    common = dict(now=at(hours=-1), every="1h", timeout_seconds=60)
    run.jobs["a"] = make_job("a", overlap_policy="allow", max_attempts=2, retry_backoff_seconds=10, **common)
    run.jobs["q"] = make_job("q", overlap_policy="queue", max_attempts=1, **common)
    run.jobs["off"] = make_job("off", overlap_policy="allow", **common)
    return sorted(run.jobs)


def lock_due_jobs(run: Run):
    return sorted(row.name for row in run.write(lambda c: run.store.lock_due_jobs(c, now=T0, limit=10)))


def advance_and_earliest(run: Run):
    def go(conn):
        run.store.advance_jobs(conn, [(run.jobs["a"].id, at(hours=1)), (run.jobs["off"].id, None)])
        return run.store.earliest_next_run(conn)

    return run.write(go)


def insert_occurrences(run: Run, minutes: list[int], statuses=None):
    job = run.jobs["a"]
    statuses = statuses or [S.PENDING] * len(minutes)
    rows = [
        occurrence_row(job, at(minutes=m), trigger="schedule", status=status, now=T0)
        for m, status in zip(minutes, statuses)
    ]
    created = run.write(lambda c: run.store.insert_occurrences(c, rows))
    result = []
    db.session.rollback()
    for execution_id, status in created:
        scheduled = db.session.get(Execution, execution_id).scheduled_for
        name = f"a{int((scheduled - T0).total_seconds() // 60)}"
        run.ids[name] = execution_id
        result.append((name, status))
    db.session.rollback()
    return sorted(result)


def insert_manual(run: Run, name: str, job: str, now: datetime):
    run.ids[name] = run.write(lambda c: run.store.insert_manual(c, run.jobs[job], now=now))
    return name


def active(run: Run, now: datetime):
    found = run.write(lambda c: run.store.jobs_with_active_runs(c, [j.id for j in run.jobs.values()], now))
    return sorted(name for name, job in run.jobs.items() if job.id in found)


def turn(run: Run, worker: str, now: datetime, limit: int, finished=()):
    items = [Finished(run.ids[name], number, outcome(status), retry) for name, number, status, retry in finished]
    result = run.write(
        lambda c: run.store.record_and_claim(c, items, worker_id=worker, now=now, limit=limit, queue_ids=None, **LEASE)
    )
    return {
        "recorded": run.labels(result.recorded),
        "started": [(run.label(item.id), number, item.attempts) for item, number in result.started],
        "cancelled": run.labels(item.id for item in result.cancelled),
    }


def record(run: Run, worker: str, now: datetime, finished):
    items = [Finished(run.ids[name], number, outcome(status), retry) for name, number, status, retry in finished]
    return run.labels(run.write(lambda c: run.store.record_finished(c, items, worker_id=worker, now=now)))


def disable(run: Run, job: str):
    run.write(lambda c: c.execute(text("UPDATE jobs SET enabled = false WHERE id = :id"), {"id": run.jobs[job].id}))
    return "disabled"


def legacy_claimed(run: Run, name: str):
    """A row an older release claimed and never started (its worker died in between)."""
    run.write(
        lambda c: c.execute(
            text(
                "UPDATE executions SET status = 'claimed', claimed_by = 'old', lease_expires_at = :lease WHERE id = :id"
            ),
            {"lease": T0, "id": run.ids[name]},
        )
    )
    return "claimed"


def cancel(run: Run, name: str, now: datetime):
    return run.write(lambda c: run.store.cancel_execution(c, run.ids[name], now=now, reason="operator"))


def cancel_queued(run: Run, job: str, now: datetime):
    return run.labels(run.write(lambda c: run.store.cancel_queued_for_job(c, run.jobs[job].id, now=now, reason="off")))


def recover(run: Run, now: datetime):
    """What recovery does, on the store alone: retry while attempts remain, else dead-letter."""

    def go(conn):
        settled = {}
        for lease in run.store.lock_expired_leases(conn, now=now, limit=10):
            assert isinstance(lease, ExpiredLease)
            retry_at = (
                now + timedelta(seconds=lease.retry_backoff_seconds) if lease.attempts < lease.max_attempts else None
            )
            if lease.status == S.CLAIMED.value:
                retry_at = None
            new = run.store.recover_execution(conn, lease, now=now, retry_at=retry_at, reason="lease expired")
            settled[run.label(lease.id)] = (lease.status, new, lease.job_name)
        return settled

    return run.write(go)


def expire(run: Run, name: str, worker: str, now: datetime):
    return run.write(lambda c: run.store.expire_lease(c, run.ids[name], worker_id=worker, now=now))


def renew(run: Run, names, worker: str, now: datetime):
    ids = [run.ids[name] for name in names]
    renewed = run.write(lambda c: run.store.renew_leases(c, ids, worker_id=worker, now=now, lease_seconds=60))
    return {run.label(execution_id): lease for execution_id, lease in renewed.items()}


def queue(run: Run, now: datetime):
    counts = run.write(lambda c: run.store.queue_counts(c, now))
    return (counts.depth, counts.oldest_due_at, counts.in_flight, counts.retries_waiting)


def by_status(run: Run):
    counts = run.write(run.store.counts_by_status)
    assert run.write(lambda c: run.store.counts_by_status(c, created_since=at(seconds=2))) == dict(
        counts, succeeded=0, timed_out=0, missed=0, cancelled=1, dead_lettered=0, running=1
    )  # created at +2s and later: am (cancelled) and al (running)
    return {status: n for status, n in counts.items() if n}


def prune(run: Run, now: datetime):
    run.write(lambda c: c.execute(text("UPDATE jobs SET retention_count = 1 WHERE id = :id"), {"id": run.jobs["a"].id}))

    def go(conn):
        doomed = run.store.prunable_history(conn, now=now, limit=100)
        names = run.labels(doomed)
        assert run.store.delete_executions(conn, list(doomed)) == len(names)
        return names

    return run.write(go)


def snapshot(run: Run):
    """Every execution by label: (status, attempts, claimed_by) and its attempts' statuses."""
    db.session.rollback()
    rows = {}
    for row in db.session.scalars(select(Execution)):
        attempts = db.session.scalars(
            select(Attempt.status).where(Attempt.execution_id == row.id).order_by(Attempt.number)
        )
        rows[run.label(row.id)] = (row.status, row.attempts, row.claimed_by, list(attempts))
    db.session.rollback()
    return rows


# --- run limits and queued TTLs -----------------------------------------------------------------


def limit_reached(run: Run, job: str, runs: int):
    """The scheduler's advance for a job whose run limit was reached: no next run, runs counted."""
    job_id = run.jobs[job].id
    reason = f"max_runs reached: {runs} scheduled runs created"
    run.write(
        lambda c: run.store.advance_jobs(c, [(job_id, None)], runs_added={job_id: runs}, limit_reasons={job_id: reason})
    )
    db.session.rollback()
    found = db.session.execute(
        text("SELECT runs_created, disabled_reason FROM jobs WHERE id = :id"), {"id": job_id}
    ).one()
    db.session.rollback()
    return tuple(found)


def finish_limited(run: Run, now: datetime):
    by_id = {job.id: name for name, job in run.jobs.items()}
    return [
        (by_id[job_id], reason) for job_id, reason in run.write(lambda c: run.store.finish_limited_jobs(c, now=now))
    ]


def set_queued_ttl(run: Run, job: str, seconds: int):
    run.write(
        lambda c: c.execute(
            text("UPDATE jobs SET queued_ttl_seconds = :s WHERE id = :id"), {"s": seconds, "id": run.jobs[job].id}
        )
    )
    return seconds


def expire_queued(run: Run, now: datetime):
    return [(run.label(row.id), row.reason) for row in run.write(lambda c: run.store.expire_queued(c, now=now))]


# (name, action, expected, is a store operation). Times: the jobs fall due at T0.
# --- queues and their concurrency limit -------------------------------------------------------


def make_limited_queue(run: Run):
    """Queue `lim` with a concurrency limit of 1, and job `l` (still in `default`) with two runs."""
    make_queue("lim", now=at(hours=-1), concurrency_limit=1)
    run.jobs["l"] = make_job("l", now=at(hours=-1), every="1h", overlap_policy="allow", timeout_seconds=60)
    return "lim"


def queue_names(run: Run):
    return run.write(lambda c: run.store.queue_names(c))


def queue_ids(run: Run, names):
    return sorted(run.write(lambda c: run.store.queue_ids(c, names)))


def move_to(run: Run, job: str, queue: str):
    def go(conn):
        queue_id = run.store.queue_ids(conn, [queue])[queue]
        return run.store.move_queued_to_queue(conn, run.jobs[job].id, queue_id)

    return run.write(go)


def slots_taken(run: Run, queue: str):
    return run.write(lambda c: c.execute(text("SELECT slots_taken FROM queues WHERE name = :n"), {"n": queue}).scalar())


def release(run: Run, names):
    run.write(lambda c: run.store.release_slots(c, [run.ids[name] for name in names]))
    return "released"


def release_job(run: Run, job: str):
    run.write(lambda c: run.store.release_slots_of_job(c, run.jobs[job].id))
    return "released"


def raise_starving(run: Run, due_before: datetime):
    return run.write(lambda c: run.store.raise_starving_priorities(c, due_before=due_before))


def lim_stats(run: Run, now: datetime):
    def go(conn):
        queue_id = run.store.queue_ids(conn, ["lim"])["lim"]
        stats = run.store.queue_stats(conn, now, queue_ids=[queue_id])[queue_id]
        return (stats.pending, stats.running, stats.succeeded_last_hour, stats.scheduled_later)

    return run.write(go)


def request_cancel(run: Run, name: str, now: datetime):
    return run.write(
        lambda c: run.store.request_cancel(c, run.ids[name], now=now, requested_by="ops", reason="cancelled by ops")
    )


def cancel_requests(run: Run, worker: str):
    found = run.write(lambda c: run.store.cancel_requests(c, worker_id=worker))
    return {run.label(execution_id): by for execution_id, by in found.items()}


SCENARIO: list[tuple[str, Callable[[Run], Any], Any, bool]] = [
    ("jobs", make_jobs, ["a", "off", "q"], False),
    ("lock due jobs", lock_due_jobs, ["a", "off", "q"], True),
    ("advance a, exhaust off; earliest next run", advance_and_earliest, T0, True),
    ("nothing waits or runs yet", lambda r: r.write(r.store.any_active), False, False),
    (
        "insert occurrences (one missed)",
        lambda r: insert_occurrences(r, [-3, -2, -1], [S.MISSED, S.PENDING, S.PENDING]),
        [("a-1", "pending"), ("a-2", "pending"), ("a-3", "missed")],
        True,
    ),
    ("insert a duplicate and a new one", lambda r: insert_occurrences(r, [-1, 0]), [("a0", "pending")], True),
    ("manual q1", lambda r: insert_manual(r, "q1", "q", T0), "q1", True),
    ("a waiting run is activity", lambda r: r.write(r.store.any_active), True, False),
    ("manual q2", lambda r: insert_manual(r, "q2", "q", T0), "q2", True),
    ("manual off1", lambda r: insert_manual(r, "off1", "off", T0), "off1", True),
    ("active runs", lambda r: active(r, T0), ["a", "off", "q"], True),
    (
        "turn w1, 2 slots: oldest first",
        lambda r: turn(r, "w1", T0, 2),
        {"recorded": [], "started": [("a-2", 1, 0), ("a-1", 1, 0)], "cancelled": []},
        True,
    ),
    ("disable off behind the store's back", lambda r: disable(r, "off"), "disabled", False),
    (
        "turn w2: the queue job FIFO, the disabled job's row cancelled",
        lambda r: turn(r, "w2", T0, 10),
        {"recorded": [], "started": [("a0", 1, 0), ("q1", 1, 0)], "cancelled": ["off1"]},
        True,
    ),
    (
        "w1 records a success and a failure with a retry",
        lambda r: turn(
            r, "w1", at(seconds=1), 0, [("a-2", 1, "succeeded", None), ("a-1", 1, "failed", at(seconds=11))]
        ),
        {"recorded": ["a-1", "a-2"], "started": [], "cancelled": []},
        True,
    ),
    ("a stale w2 records nothing", lambda r: record(r, "w2", at(seconds=1), [("a-2", 1, "failed", None)]), [], True),
    (
        "w2 records q1's final failure",
        lambda r: record(r, "w2", at(seconds=1), [("q1", 1, "timed_out", None)]),
        ["q1"],
        True,
    ),
    (
        "turn w2: q2 may run now",
        lambda r: turn(r, "w2", at(seconds=1), 5),
        {"recorded": [], "started": [("q2", 1, 0)], "cancelled": []},
        True,
    ),
    ("queue counts", lambda r: queue(r, at(seconds=1)), (0, None, 2, 1), True),
    ("cancel the waiting retry", lambda r: cancel(r, "a-1", at(seconds=2)), True, True),
    ("cancel a running row: refused", lambda r: cancel(r, "q2", at(seconds=2)), False, True),
    ("manual am", lambda r: insert_manual(r, "am", "a", at(seconds=2)), "am", True),
    ("cancel a's queued rows", lambda r: cancel_queued(r, "a", at(seconds=3)), ["am"], True),
    ("manual al", lambda r: insert_manual(r, "al", "a", at(seconds=3)), "al", True),
    ("al becomes a legacy claimed row", lambda r: legacy_claimed(r, "al"), "claimed", False),
    (
        "recover expired leases",
        lambda r: recover(r, at(hours=2)),
        {
            "a0": ("running", "retry_scheduled", "a"),
            "q2": ("running", "dead_lettered", "q"),
            "al": ("claimed", "pending", "a"),
        },
        True,
    ),
    ("nothing left to recover", lambda r: recover(r, at(hours=2)), {}, True),
    ("queue counts after recovery", lambda r: queue(r, at(hours=3)), (2, at(seconds=3), 0, 0), True),
    (
        "turn w3 at +3h",
        lambda r: turn(r, "w3", at(hours=3), 5),
        {"recorded": [], "started": [("a0", 2, 1), ("al", 1, 0)], "cancelled": []},
        True,
    ),
    # The worker renews its running rows' leases with its heartbeat: never shorter than they were.
    (
        "w3 renews early: the longer lease (timeout + buffer) is kept",
        lambda r: renew(r, ["a0", "al", "a-3"], "w3", at(hours=3, seconds=10)),
        {"a0": at(hours=3, seconds=90), "al": at(hours=3, seconds=90)},
        True,
    ),
    (
        "w3 renews later: now + lease",
        lambda r: renew(r, ["a0", "al"], "w3", at(hours=3, seconds=60)),
        {"a0": at(hours=3, seconds=120), "al": at(hours=3, seconds=120)},
        True,
    ),
    ("another worker renews nothing", lambda r: renew(r, ["a0", "al"], "w9", at(hours=3, seconds=60)), {}, True),
    ("another worker cannot expire w3's lease", lambda r: expire(r, "a0", "w9", at(hours=3)), False, True),
    ("w3 expires its lease on shutdown", lambda r: expire(r, "a0", "w3", at(hours=3)), True, True),
    (
        "counts by status",
        by_status,
        {"running": 2, "succeeded": 1, "timed_out": 1, "missed": 1, "cancelled": 3, "dead_lettered": 1},
        True,
    ),
    ("prune a to its newest finished row", lambda r: prune(r, at(hours=4)), ["a-1", "a-2", "a-3"], True),
    ("queue lim, limit 1", make_limited_queue, "lim", False),
    ("queue names", queue_names, ["default", "lim"], True),
    ("queue ids of known names", lambda r: queue_ids(r, ["lim", "nope"]), ["lim"], True),
    ("manual l1", lambda r: insert_manual(r, "l1", "l", at(hours=5)), "l1", True),
    ("manual l2", lambda r: insert_manual(r, "l2", "l", at(hours=5)), "l2", True),
    ("move l's waiting runs to lim", lambda r: move_to(r, "l", "lim"), 2, True),
    (
        "turn w4: lim starts one of two",
        lambda r: turn(r, "w4", at(hours=5), 5),
        {"recorded": [], "started": [("l1", 1, 0)], "cancelled": []},
        True,
    ),
    ("lim's slot is taken", lambda r: slots_taken(r, "lim"), 1, False),
    (
        "turn w5: lim is full",
        lambda r: turn(r, "w5", at(hours=5), 5),
        {"recorded": [], "started": [], "cancelled": []},
        True,
    ),
    # A slot given back in a turn frees it for the next turn (PostgreSQL's turn reads the queue
    # as the statement began; the worker turns again at once when it recorded something).
    (
        "turn w4 records l1",
        lambda r: turn(r, "w4", at(hours=5, seconds=1), 0, [("l1", 1, "succeeded", None)]),
        {"recorded": ["l1"], "started": [], "cancelled": []},
        True,
    ),
    ("lim is free again", lambda r: slots_taken(r, "lim"), 0, False),
    (
        "turn w4 starts l2",
        lambda r: turn(r, "w4", at(hours=5, seconds=1), 5),
        {"recorded": [], "started": [("l2", 1, 0)], "cancelled": []},
        True,
    ),
    ("releasing a finished row gives nothing back", lambda r: release(r, ["l1"]), "released", True),
    ("lim's slot is l2's", lambda r: slots_taken(r, "lim"), 1, False),
    ("lim's statistics", lambda r: lim_stats(r, at(hours=5, seconds=2)), (0, 1, 1, 0), True),
    ("l's running run gives its slot back before l goes", lambda r: release_job(r, "l"), "released", True),
    ("lim is free", lambda r: slots_taken(r, "lim"), 0, False),
    ("manual l3, due at +6h", lambda r: insert_manual(r, "l3", "l", at(hours=6)), "l3", True),
    ("nothing waiting was due before +5h", lambda r: raise_starving(r, at(hours=5)), 0, True),
    ("l3 has waited: top priority", lambda r: raise_starving(r, at(hours=7)), 1, True),
    ("and only once", lambda r: raise_starving(r, at(hours=7)), 0, True),
    # Cancelling running work: the request is stamped (nothing moves), the owning worker finds it
    # and records the killed attempt `cancelled`; recovery cancels a requested row whose worker is gone.
    ("ask w4 to cancel running l2", lambda r: request_cancel(r, "l2", at(hours=7)), "w4", True),
    ("asking twice changes nothing", lambda r: request_cancel(r, "l2", at(hours=7)), None, True),
    ("a queued row is not asked", lambda r: request_cancel(r, "l3", at(hours=7)), None, True),
    ("w4 finds the request", lambda r: cancel_requests(r, "w4"), {"l2": "ops"}, True),
    ("w3 has none", lambda r: cancel_requests(r, "w3"), {}, True),
    (
        "w4 records l2 cancelled",
        lambda r: turn(r, "w4", at(hours=7, seconds=1), 0, [("l2", 1, "cancelled", None)]),
        {"recorded": ["l2"], "started": [], "cancelled": []},
        True,
    ),
    ("ask w3 to cancel al", lambda r: request_cancel(r, "al", at(hours=7)), "w3", True),
    (
        "w3 is gone: recovery cancels al, dead-letters a0",
        lambda r: recover(r, at(hours=8)),
        {"a0": ("running", "dead_lettered", "a"), "al": ("running", "cancelled", "a")},
        True,
    ),
    # Run limits: the tick's advance counts runs and records the reason; the job is disabled once
    # nothing of it waits or runs. Queued TTL: waiting work past it ends `expired`.
    (
        "q reaches max_runs 2",
        lambda r: limit_reached(r, "q", 2),
        (2, "max_runs reached: 2 scheduled runs created"),
        True,
    ),
    (
        "q is finished: disabled",
        lambda r: finish_limited(r, at(hours=8)),
        [("q", "max_runs reached: 2 scheduled runs created")],
        True,
    ),
    ("and only once", lambda r: finish_limited(r, at(hours=8)), [], True),
    ("l's runs expire after 60 s waiting", lambda r: set_queued_ttl(r, "l", 60), 60, False),
    ("l3 has waited 59 s: kept", lambda r: expire_queued(r, at(hours=6, seconds=59)), [], True),
    (
        "l3 has waited 60 s: expired",
        lambda r: expire_queued(r, at(hours=6, seconds=60)),
        [("l3", "queued TTL passed: not started within 60s of becoming available")],
        True,
    ),
]

FINAL = {
    "a0": ("dead_lettered", 2, None, ["abandoned", "abandoned"]),
    "am": ("cancelled", 0, None, []),
    "off1": ("cancelled", 0, None, []),
    "q1": ("timed_out", 1, "w2", ["timed_out"]),
    "q2": ("dead_lettered", 1, None, ["abandoned"]),
    "al": ("cancelled", 1, None, ["cancelled"]),
    "l1": ("succeeded", 1, "w4", ["succeeded"]),
    "l2": ("cancelled", 1, "w4", ["cancelled"]),
    "l3": ("expired", 0, None, []),
    "b1": ("succeeded", 1, "w6", ["succeeded"]),
    "b2": ("cancelled", 0, None, []),
    "bd": ("pending", 0, None, []),
    "cb": ("pending", 0, None, []),
}


# --- ad-hoc runs, batches and callbacks ----------------------------------------------------------


def make_batch_job(run: Run):
    run.jobs["b"] = make_job("b", now=at(hours=-1), every="1h", timeout_seconds=60, task="echo")
    job = run.jobs["b"]
    run.ids["batch"] = run.write(
        lambda c: c.execute(
            Batch.__table__.insert()
            .values(
                job_id=job.id, item_count=2, on_complete="echo", on_complete_config={}, created_by="t", created_at=T0
            )
            .returning(Batch.__table__.c.id)
        ).scalar_one()
    )
    return "b"


def insert_items(run: Run, now: datetime):
    job, batch_id = run.jobs["b"], run.ids["batch"]
    rows = [
        batch_item_row(job, batch_id=batch_id, index=n, config_override={"message": f"item {n}"}, now=now)
        for n in (1, 2)
    ]
    created = run.write(lambda c: run.store.insert_executions(c, rows))
    for n, execution_id in zip((1, 2), sorted(created)):
        run.ids[f"b{n}"] = execution_id
    return run.labels(created)


def insert_delayed(run: Run, name: str, now: datetime, until: datetime):
    job = run.jobs["b"]
    run.ids[name] = run.write(
        lambda c: run.store.insert_manual(c, job, now=now, available_at=until, config_override={"fail": True})
    )
    db.session.rollback()
    row = db.session.get(Execution, run.ids[name])
    found = (row.status, row.available_at, row.config_override)
    db.session.rollback()
    return found


def cancel_batch_items(run: Run, now: datetime):
    return run.labels(
        run.write(lambda c: run.store.cancel_queued_for_batch(c, run.ids["batch"], now=now, reason="batch cancelled"))
    )


def complete_batches(run: Run, now: datetime, *, sweep: bool = False):
    ids = None if sweep else [run.ids["batch"]]
    done = run.write(lambda c: run.store.complete_batches(c, now=now, batch_ids=ids))
    return [("batch" if row.id == run.ids["batch"] else row.id, row.on_complete) for row in done]


def batch_counts(run: Run):
    return run.write(lambda c: run.store.batch_counts(c, [run.ids["batch"]]))[run.ids["batch"]]


def insert_callback(run: Run, now: datetime):
    row = callback_row(run.jobs["b"], kind="on_complete", task="echo", config={}, now=now, batch_id=run.ids["batch"])
    created = run.write(lambda c: run.store.insert_executions(c, [row]))
    if created:
        run.ids["cb"] = created[0]
    return run.labels(created)


BATCH_SCENARIO: list[tuple[str, Callable[[Run], Any], Any, bool]] = [
    ("job b with a batch", make_batch_job, "b", False),
    ("batch items b1, b2", lambda r: insert_items(r, at(hours=9)), ["b1", "b2"], True),
    ("the same items again: none created", lambda r: insert_items(r, at(hours=9)), [], True),
    (
        "a run of b delayed to +20h, with an override",
        lambda r: insert_delayed(r, "bd", at(hours=9), at(hours=20)),
        ("pending", at(hours=20), {"fail": True}),
        True,
    ),
    (
        "turn w6 at +9h starts b1 (bd waits)",
        lambda r: turn(r, "w6", at(hours=9), 1),
        {"recorded": [], "started": [("b1", 1, 0)], "cancelled": []},
        True,
    ),
    ("cancel the batch's queued items", lambda r: cancel_batch_items(r, at(hours=9)), ["b2"], True),
    ("b1 still runs: not complete", lambda r: complete_batches(r, at(hours=9)), [], True),
    (
        "w6 records b1",
        lambda r: turn(r, "w6", at(hours=9, seconds=1), 0, [("b1", 1, "succeeded", None)]),
        {"recorded": ["b1"], "started": [], "cancelled": []},
        True,
    ),
    ("the batch completes", lambda r: complete_batches(r, at(hours=9, seconds=1)), [("batch", "echo")], True),
    ("and only once", lambda r: complete_batches(r, at(hours=9, seconds=2)), [], True),
    ("the sweep finds nothing open", lambda r: complete_batches(r, at(hours=9, seconds=2), sweep=True), [], True),
    ("the batch's counts", batch_counts, {"succeeded": 1, "cancelled": 1}, True),
    ("its callback", lambda r: insert_callback(r, at(hours=9, seconds=1)), ["cb"], True),
    ("its callback again: none", lambda r: insert_callback(r, at(hours=9, seconds=1)), [], True),
]
SCENARIO += BATCH_SCENARIO


# --- occurrences written ahead (SCHEDULER_LEAD_MS) ----------------------------------------------


def make_skip_job(run: Run):
    """Job `w`, overlap policy skip, its cursor at +12h as a tick at +11h59m58s left it."""
    run.jobs["w"] = make_job("w", now=at(hours=-1), every="1h", overlap_policy="skip", timeout_seconds=60)
    run.write(
        lambda c: c.execute(
            text("UPDATE jobs SET next_run_at = :at, runs_created = 0 WHERE id = :id"),
            {"at": at(hours=12), "id": run.jobs["w"].id},
        )
    )
    return "w"


def jobs_by_id(run: Run):
    found = run.write(lambda c: run.store.jobs_by_id(c, [run.jobs["w"].id, run.jobs["a"].id, 999_999]))
    return sorted(row.name for row in found)


def with_work(run: Run, names):
    found = run.write(lambda c: run.store.jobs_with_work(c, [run.jobs[name].id for name in names]))
    return sorted(name for name in names if run.jobs[name].id in found)


def write_ahead(run: Run, name: str, scheduled: datetime, now: datetime):
    """The tick's write-ahead of `w`'s occurrence at `scheduled`: the row, and the cursor past it."""
    job = run.jobs["w"]
    row = occurrence_row(job, scheduled, trigger="schedule", status=S.PENDING, now=now)

    def go(conn):
        created = run.store.insert_occurrences(conn, [row])
        conn.execute(
            text("UPDATE jobs SET next_run_at = :next, runs_created = runs_created + 1 WHERE id = :id"),
            {"next": scheduled + timedelta(hours=1), "id": job.id},
        )
        return created

    ((execution_id, status),) = run.write(go)
    run.ids[name] = execution_id
    return status


def ahead(run: Run, now: datetime):
    found = run.write(lambda c: run.store.pending_ahead(c, [run.jobs["w"].id], now=now))
    return {run.label(execution_id): scheduled for execution_id, scheduled in found.items()}


def skip_ahead(run: Run):
    return {
        run.label(execution_id): scheduled
        for execution_id, scheduled in run.write(run.store.overlap_skip_ahead).items()
    }


def claimable_after(run: Run, after: datetime, queue: str | None = None):
    def go(conn):
        queue_ids = [run.store.queue_ids(conn, [queue])[queue]] if queue else None
        return run.store.earliest_claimable(conn, after=after, queue_ids=queue_ids)

    return run.write(go)


def next_run_after(run: Run, after: datetime):
    return run.write(lambda c: run.store.earliest_next_run(c, after=after))


def withdraw(run: Run, now: datetime):
    count, job = run.write(lambda c: run.store.withdraw_ahead(c, run.jobs["w"].id, now=now))
    return count, (job.next_run_at, job.runs_created)


def take_overlapped(run: Run, name: str, now: datetime):
    taken = run.write(lambda c: run.store.take_overlapped_ahead(c, [run.ids[name]], now=now))
    return [(name, row.scheduled_for) for row in taken]


LEAD_SCENARIO: list[tuple[str, Callable[[Run], Any], Any, bool]] = [
    ("job w, overlap skip, next run at +12h", make_skip_job, "w", False),
    ("jobs by id (an unknown id is left out)", jobs_by_id, ["a", "w"], True),
    ("w has no work yet; b has (bd waits), a has none", lambda r: with_work(r, ["a", "b", "w"]), ["b"], True),
    (
        "the tick writes w's +12h occurrence ahead",
        lambda r: write_ahead(r, "w12", at(hours=12), at(hours=11, minutes=59, seconds=58)),
        "pending",
        True,
    ),
    ("w has work now", lambda r: with_work(r, ["w"]), ["w"], True),
    (
        "written ahead and not yet due",
        lambda r: ahead(r, at(hours=11, minutes=59, seconds=59)),
        {"w12": at(hours=12)},
        True,
    ),
    ("at its time it is an ordinary row", lambda r: ahead(r, at(hours=12)), {}, True),
    ("the overlap-skip rows written ahead", skip_ahead, {"w12": at(hours=12)}, True),
    ("an idle worker wakes at w12's time", lambda r: claimable_after(r, at(hours=11)), at(hours=12), True),
    ("then at bd's (in its queue too)", lambda r: claimable_after(r, at(hours=12), "default"), at(hours=20), True),
    ("the scheduler's next horizon", lambda r: next_run_after(r, at(hours=12)), at(hours=13), True),
    (
        # A burst's ANALYZE is PostgreSQL's alone (tests/integration/test_lead_time.py); a tick of
        # a few rows leaves the statistics to autovacuum on both.
        "a one-row tick leaves the planner's statistics alone",
        lambda r: r.write(lambda c: r.store.refresh_planner_statistics(c, written=1)),
        False,
        True,
    ),
    (
        "w is edited before +12h: w12 withdrawn, cursor back",
        lambda r: withdraw(r, at(hours=11, minutes=59, seconds=59)),
        (1, (at(hours=12), 0)),
        True,
    ),
    (
        "nothing left to withdraw",
        lambda r: withdraw(r, at(hours=11, minutes=59, seconds=59)),
        (0, (at(hours=12), 0)),
        True,
    ),
    (
        "written ahead again",
        lambda r: write_ahead(r, "w12b", at(hours=12), at(hours=11, minutes=59, seconds=59)),
        "pending",
        True,
    ),
    (
        "an operator's run of w, due now",
        lambda r: insert_manual(r, "wm", "w", at(hours=11, minutes=59, seconds=59)),
        "wm",
        True,
    ),
    (
        "before its time w12b is left alone",
        lambda r: take_overlapped(r, "w12b", at(hours=11, minutes=59, seconds=59)),
        [],
        True,
    ),
    (
        "at its time w is busy: w12b taken",
        lambda r: take_overlapped(r, "w12b", at(hours=12)),
        [("w12b", at(hours=12))],
        True,
    ),
]
SCENARIO += LEAD_SCENARIO
FINAL["wm"] = ("pending", 0, None, [])


# --- one-off runs (no job) --------------------------------------------------------------------


def insert_one_off(run: Run, specs: list[tuple[str, str | None]], now: datetime):
    """One-off runs of `echo` in job a's queue, each (label, idempotency key or None); they go
    first in any turn (priority -100), so the scenario's other waiting rows stay as they are."""
    from app.models import Queue

    queue = db.session.get(Queue, run.jobs["a"].queue_id)
    project_id = queue.project_id
    db.session.rollback()
    rows = [
        one_off_row(
            task="echo",
            config={"message": label},
            project_id=project_id,
            queue_id=run.jobs["a"].queue_id,
            priority=-100,
            max_attempts=2,
            timeout_seconds=30,
            queued_ttl_seconds=None,
            success_ttl_seconds=-1,
            failure_ttl_seconds=-1,
            now=now,
            idempotency_key=key,
        )
        for label, key in specs
    ]
    answers = run.write(lambda c: run.store.insert_one_off_runs(c, rows))
    for (label, _), (execution_id, created) in zip(specs, answers):
        if created:
            run.ids[label] = execution_id
    return [(run.label(execution_id), created) for execution_id, created in answers]


ONE_OFF_SCENARIO: list[tuple[str, Callable[[Run], Any], Any, bool]] = [
    (
        "one-off runs o1, o2 (o2 with a key)",
        lambda r: insert_one_off(r, [("o1", None), ("o2", "k")], at(hours=13)),
        [("o1", True), ("o2", True)],
        True,
    ),
    (
        "the key again: o2, not created",
        lambda r: insert_one_off(r, [("o2 again", "k")], at(hours=13)),
        [("o2", False)],
        True,
    ),
    (
        "turn w13 at +13h starts o1 and o2 (no job to join)",
        lambda r: turn(r, "w13", at(hours=13), 2),
        {"recorded": [], "started": [("o1", 1, 0), ("o2", 1, 0)], "cancelled": []},
        True,
    ),
    (
        "o1 fails with attempts left, o2 succeeds",
        lambda r: turn(
            r,
            "w13",
            at(hours=13, seconds=1),
            0,
            [("o1", 1, "failed", at(hours=13, minutes=1)), ("o2", 1, "succeeded", None)],
        ),
        {"recorded": ["o1", "o2"], "started": [], "cancelled": []},
        True,
    ),
    (
        "its retry starts at +13h1m",
        lambda r: turn(r, "w13", at(hours=13, minutes=1), 1),
        {"recorded": [], "started": [("o1", 2, 1)], "cancelled": []},
        True,
    ),
    (
        "o1 fails on its last attempt",
        lambda r: turn(r, "w13", at(hours=13, minutes=1, seconds=1), 0, [("o1", 2, "failed", None)]),
        {"recorded": ["o1"], "started": [], "cancelled": []},
        True,
    ),
]
SCENARIO += ONE_OFF_SCENARIO
FINAL["o1"] = ("failed", 2, "w13", ["failed", "failed"])
FINAL["o2"] = ("succeeded", 1, "w13", ["succeeded"])


# --- unique jobs: a held key returns its holder ----------------------------------------------------


def unique_manual_runs(run: Run):
    """Two manual runs of a unique job: the second is the first, deduplicated."""
    run.jobs["u"] = make_job("u", now=at(hours=-1), every="1h", overlap_policy="allow", unique=True)
    first = run.write(lambda c: run.store.insert_manual_once(c, run.jobs["u"], now=at(hours=13)))
    again = run.write(lambda c: run.store.insert_manual_once(c, run.jobs["u"], now=at(hours=13)))
    row = manual_row(run.jobs["u"], now=at(hours=13))
    direct = run.write(lambda c: run.store.insert_unique(c, row))
    run.ids["u1"] = first[0]
    return [first[1], again == (first[0], True), direct == (first[0], True)]


def unique_occurrence(run: Run):
    """A scheduled occurrence of the unique job while u1 waits: recorded missed, naming u1."""
    row = occurrence_row(run.jobs["u"], at(hours=13), trigger="schedule", status=S.PENDING, now=at(hours=13))

    def go(conn):
        created = run.store.insert_occurrences(conn, [row])
        return created, run.store.deduplicate_occurrences(conn, [row], now=at(hours=13))

    created, deduplicated = run.write(go)
    db.session.rollback()
    run.ids["u13"] = db.session.scalar(select(Execution.id).where(Execution.idempotency_key == row["idempotency_key"]))
    db.session.rollback()
    return created, [run.label(holder) for _, holder in deduplicated]


SCENARIO += [
    ("two manual runs of a unique job", unique_manual_runs, [False, True, True], True),
    ("its occurrence while u1 waits", unique_occurrence, ([], ["u1"]), True),
]
FINAL["u1"] = ("pending", 0, None, [])
FINAL["u13"] = ("missed", 0, None, [])


def new_run() -> Run:
    return Run(store=Recorder(store_for(db.engine)))
