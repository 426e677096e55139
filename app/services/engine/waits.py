"""When a worker sleeps, for how long, and what wakes it.

A worker sleeps on the executor's socket (a result) and the PostgreSQL LISTEN socket (a NOTIFY
about new work, or an order naming it) together, in short slices so a stop signal or a reload
request is seen within half a second (`sleep`). After a turn with a slot idle it sleeps until the
next waiting row becomes claimable, at most the poll interval (`until_claimable`). With LISTEN
working, running nothing and no NOTIFY since its last look, a wake-up is a safety look (one read,
`look`) rather than a turn, and the worker sleeps again when nothing is claimable yet; rows it
could not claim (a limit, a paused queue, a busy job) keep it looking every poll interval, since
what frees them sends no NOTIFY (app/services/engine/idle_pacing.py has the arithmetic).

It only reads (the outlook and the idle look, on the worker's kept connection) and only waits:
it never claims, records or signals anything.
"""

from __future__ import annotations

import select
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from app.executor import ForkServer
from app.services.engine import idle_pacing, wakeups
from app.services.engine.kept_connection import KeptConnection
from app.services.engine.run_book import RunBook
from app.services.engine.worker_commands import ControlCheck
from app.sql import waiting


class Waits:
    """One worker's sleeps (see the module docstring)."""

    def __init__(
        self,
        *,
        worker_id: str,
        clock: Callable[[], datetime],
        connection: KeptConnection,
        book: RunBook,
        control: ControlCheck,
        queue_ids: list[int] | None,
        poll_seconds: float,
        idle_poll_seconds: float,
        executor: Callable[[], ForkServer],
        wake_early: Callable[[], bool],
    ) -> None:
        self.worker_id = worker_id
        self.clock = clock
        self.connection = connection
        self.book = book
        self.control = control
        self.queue_ids = queue_ids
        self.poll_seconds = poll_seconds
        self.idle_poll_seconds = idle_poll_seconds  # listening and running nothing: the longest sleep
        self.executor = executor  # the worker's current one (a new one after a crash or a reload)
        self.wake_early = wake_early  # asked to stop or to reload: the sleep ends at once
        self.listening = False  # LISTEN worked for the last wait (a run_once given a listener)
        # Whether the next wake-up must run a turn rather than a safety look: a NOTIFY came, rows
        # it could not claim wait, or it has not looked since it (re)started listening.
        self.notified = True
        self.held_back = True

    def may_look(self, *, changing: bool) -> bool:
        """Whether this wake-up may be a safety look rather than a turn; `changing`: the worker
        is stopping, draining or reloading (then it runs turns)."""
        book = self.book
        return (
            self.listening
            and not (self.notified or self.held_back or self.control.due)
            and not (book.running or book.unrecorded or book.ready)
            and not changing
        )

    def look(self) -> tuple[float, bool]:
        """A quiet worker's safety look (one read): how much longer it may sleep (0: run a turn),
        and whether a lease expired somewhere (the idle worker's recovery has work)."""
        now = self.clock()
        look = self.connection.read(
            lambda conn: waiting.idle_look(conn, worker_id=self.worker_id, now=now, queue_ids=self.queue_ids)
        )
        self.control.looked(orders=look.orders)
        return idle_pacing.rest_after_look(
            look, now=self.clock(), idle_poll=self.idle_poll_seconds
        ), look.expired_leases

    def until_claimable(self, *, since: datetime) -> float:
        """Seconds until the earliest waiting row in this worker's queues becomes claimable (its
        available_at; never before it, so nothing starts early), at most the poll interval (the
        idle one when quiet and nothing it could not claim waits).

        `since` is the time the turn claimed at: a row that became claimable after it (while the
        turn ran, e.g. the first rows of a burst written ahead) is due now, so the wait is zero
        rather than a whole poll interval."""
        ahead = self.connection.read(lambda conn: waiting.outlook(conn, after=since, queue_ids=self.queue_ids))
        self.held_back = ahead.held_back
        return idle_pacing.wait_after_turn(
            ahead,
            now=self.clock(),
            poll=self.poll_seconds,
            idle_poll=self.idle_poll_seconds,
            quiet=self.listening and not self.book.running and not self.book.unrecorded,
        )

    def sleep(self, timeout: float, listener: wakeups.Listener | None) -> None:
        """Sleep up to `timeout` seconds, until a result, a NOTIFY or a request to stop or reload."""
        if timeout <= 0:
            return
        fds = [self.executor().fileno()]
        if listener is not None and listener.active:
            fds.append(listener.fileno())
        # Sleep in short slices: select() resumes after a signal handler runs (PEP 475), so one
        # long select would keep a SIGTERMed worker asleep for the whole poll interval.
        deadline = time.monotonic() + timeout
        readable: list[Any] = []
        while not readable and not self.wake_early():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            readable, _, _ = select.select(fds, [], [], min(remaining, 0.5))
        self.notified = False
        if listener is not None and listener.active and listener.fileno() in readable:
            listener.drain()
            self.control.heard(listener.take(wakeups.CONTROL_CHANNEL))
            self.notified = bool(listener.take(wakeups.WORK_CHANNEL))
        if listener is not None and not listener.active:
            self.notified = True  # the connection was lost: what was sent meanwhile is unheard
