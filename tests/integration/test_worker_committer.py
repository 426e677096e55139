"""The worker's turn on its committer thread (PostgreSQL; app/services/engine/committer.py): the
statement and its commit run there while the main thread keeps forking runs claimed in earlier
turns (Worker._overlapped). Real worker, fork server and database; the kill-at-any-instant side
is tests/integration/test_worker_killed_at_random.py. SQLite keeps its turns on the main thread."""

from __future__ import annotations

import threading
from collections import Counter

from sqlalchemy import select, text
from sqlalchemy.exc import OperationalError

from app.clock import utcnow
from app.extensions import db
from app.models import Attempt, Execution
from app.services.engine.worker import Worker
from app.sql import turn
from tests.factories import make_execution, make_job

RUNS = 200


def test_turns_run_on_the_committer_thread_and_survive_a_failed_turn(app, monkeypatch):
    job = make_job(now=utcnow(), name="many", overlap_policy="allow", max_attempts=1)
    for _ in range(RUNS):
        make_execution(job, "pending")
    db.session.commit()
    worker = Worker(app, worker_id="w-committer", slots=4)
    real, calls, waiting_on_main = turn.record_and_claim, [], []

    def record_and_claim(conn, *args, **kwargs):
        calls.append(threading.current_thread().name)
        if calls[-1] == "MainThread":  # the turn runs inline: nothing forks until it returns
            waiting_on_main.append(len(worker.book.ready))
        if calls.count("worker-committer") == 3 and calls[-1] == "worker-committer":
            # A failed turn on the thread: the connection is dropped and its results kept; the
            # next turn reconnects there and records them.
            raise OperationalError("record_and_claim", {}, Exception("injected: connection lost"))
        return real(conn, *args, **kwargs)

    monkeypatch.setattr(turn, "record_and_claim", record_and_claim)
    stats = worker.run(burst=True)

    db.session.rollback()
    statuses = Counter(db.session.scalars(select(Execution.status)))
    assert statuses == {"succeeded": RUNS}
    # One attempt each: the failed turn lost no result and claimed nothing twice.
    assert Counter(db.session.scalars(select(Attempt.status))) == {"succeeded": RUNS}
    assert stats.succeeded == RUNS
    if db.engine.dialect.name == "postgresql":
        failed_at = next(
            i for i, name in enumerate(calls) if name == "worker-committer" and calls[: i + 1].count(name) == 3
        )
        assert calls[0] == "MainThread"  # nothing claimed ahead yet: nothing to fork meanwhile
        # The thread survives its failed turn and runs turns again, on a fresh connection. Not
        # necessarily the very next one: a turn runs on the thread only while claimed-ahead runs
        # wait to be forked, and the back-off after the failure may let the main thread fork them
        # all first (it does on a loaded machine), so the next turn has nothing to overlap.
        assert "worker-committer" in calls[failed_at + 1 :], calls
        # A turn runs on the main thread only when no claimed-ahead run waits to be forked. How
        # many turns that is depends on how fast PostgreSQL commits against how fast the main
        # thread forks (a loaded machine drains `ready` during every turn), so it is not counted.
        assert waiting_on_main == [0] * len(waiting_on_main), list(zip(calls, waiting_on_main))
    else:
        assert set(calls) == {"MainThread"}
    assert db.session.execute(text("SELECT count(*) FROM attempts WHERE pid IS NULL")).scalar() == 0
