"""The lease watchdog: a worker that cannot renew its leases stops its tasks before they expire.

A worker holds each running execution under a lease, renewed with its heartbeat
(`Store.renew_leases`). If the worker is cut off from the database it can neither renew nor
record, and once a lease expires another process's recovery retries the execution elsewhere:
left alone, the cut-off copy would keep running next to the new one. So the worker must stop
its own task first. The rule:

    A lease ends at E, measured on the worker's monotonic clock from the last statement that
    granted or renewed it: E = t_read + (lease_expires_at - now), where `now` is the instant the
    statement stamped (read at monotonic t_read, before it was sent) and lease_expires_at what
    it wrote. The watchdog sends SIGTERM to the task's process group at E - margin and SIGKILL
    at E - margin / 2, where margin = min(LEASE_SECONDS / 4, kill grace + 5 s).

Measuring from before the statement was sent makes E early, never late; only durations cross
from the database to the worker, so a skewed worker clock does not move E. Recovery takes a row
only when its lease is past (`lease_expires_at < now` on the recovering process's clock, which
the engine keeps on the database's clock, see app/clock.py), so the cut-off copy is dead before
a second copy can start: the overlap window is zero as long as a process dies within margin / 2
of SIGKILL and the recoverer's clock error is below margin / 2.

It runs in its own thread because the worker's main thread may be the one that hangs: a
statement on a frozen connection can block for as long as TCP keeps the socket open. The thread
only signals processes; the task's result then reaches the worker like any other (`failed`,
with the watchdog's reason), and the guards refuse it if the row changed hands meanwhile.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

log = logging.getLogger("cronwell.worker")

SAFETY_SECONDS = 5.0  # beyond the kill grace: scheduling delays, the recoverer's clock error
CHECK_EVERY = 1.0  # seconds: the thread's longest sleep


def margin_for(lease_seconds: float, kill_grace_seconds: float) -> float:
    """How long before a lease ends the watchdog starts stopping its task (see the module rule)."""
    return min(lease_seconds / 4, kill_grace_seconds + SAFETY_SECONDS)


def renew_every(lease_seconds: float, heartbeat_seconds: float) -> float:
    """How often a worker renews: with its heartbeat, and at least five times per lease, so a
    healthy worker always renews well before the watchdog's margin (lease / 4) is reached."""
    return min(heartbeat_seconds, lease_seconds / 5)


@dataclass
class _Lease:
    ends_at: float  # monotonic
    signalled: int = 0  # 0 none, 1 SIGTERM sent, 2 SIGKILL sent


class LeaseWatchdog:
    """Tracks when each held lease ends and stops the task of any lease about to lapse.

    The worker calls `hold` when it starts an execution, `renewed` after each successful
    renewal and `release` when it records (or gives up) the execution; `start` runs the thread.
    `pid_of(execution_id)` gives the task's process group (None until the fork is reported);
    `fallback()` stops every task at once (the fork server) when that is not known yet.
    """

    def __init__(
        self,
        *,
        margin: float,
        pid_of: Callable[[int], int | None],
        fallback: Callable[[], None],
        monotonic: Callable[[], float] = time.monotonic,
        kill: Callable[[int, int], None] = os.killpg,
    ) -> None:
        self.margin = margin
        self._pid_of = pid_of
        self._fallback = fallback
        self._monotonic = monotonic
        self._kill = kill
        self._leases: dict[int, _Lease] = {}
        self._lock = threading.Lock()
        self._changed = threading.Event()
        self._stopping = False
        self._thread: threading.Thread | None = None
        self.stopped: dict[int, float] = {}  # execution id -> monotonic time of its SIGTERM

    # --- what the worker tells it -------------------------------------------------------------

    def hold(self, execution_id: int, *, lease_expires_at: datetime, now: datetime, read_at: float) -> None:
        """A lease granted (or renewed) by a statement stamped `now`, read at monotonic `read_at`."""
        ends_at = read_at + (lease_expires_at - now).total_seconds()
        with self._lock:
            lease = self._leases.get(execution_id)
            if lease is None:
                self._leases[execution_id] = _Lease(ends_at)
            elif lease.signalled == 0:
                lease.ends_at = max(lease.ends_at, ends_at)
        # The thread looks again within CHECK_EVERY anyway; waking it for every started run cost a
        # thread switch per execution. Only a lease that needs action sooner wakes it now.
        if ends_at - self.margin - self._monotonic() < CHECK_EVERY:
            self._changed.set()

    def renewed(self, leases: dict[int, datetime], *, now: datetime, read_at: float) -> None:
        for execution_id, expires_at in leases.items():
            self.hold(execution_id, lease_expires_at=expires_at, now=now, read_at=read_at)

    def release(self, execution_id: int) -> None:
        with self._lock:
            self._leases.pop(execution_id, None)
        self.stopped.pop(execution_id, None)

    def held(self) -> set[int]:
        with self._lock:
            return set(self._leases)

    def seconds_left(self, execution_id: int) -> float | None:
        """Seconds until the watchdog stops this execution's task (None: not held)."""
        with self._lock:
            lease = self._leases.get(execution_id)
            return None if lease is None else lease.ends_at - self.margin - self._monotonic()

    # --- the check ------------------------------------------------------------------------------

    def check(self) -> float | None:
        """Signal every task whose lease is about to lapse; return seconds until the next check is
        needed (None: nothing held)."""
        now = self._monotonic()
        actions: list[tuple[int, int]] = []  # (execution id, signal)
        next_at: float | None = None
        with self._lock:
            for execution_id, lease in self._leases.items():
                term_at, kill_at = lease.ends_at - self.margin, lease.ends_at - self.margin / 2
                if lease.signalled == 0 and now >= term_at:
                    lease.signalled = 1
                    actions.append((execution_id, signal.SIGTERM))
                if lease.signalled == 1 and now >= kill_at:
                    lease.signalled = 2
                    actions.append((execution_id, signal.SIGKILL))
                upcoming = term_at if lease.signalled == 0 else kill_at if lease.signalled == 1 else None
                if upcoming is not None:
                    next_at = upcoming if next_at is None else min(next_at, upcoming)
        for execution_id, signum in actions:
            self._signal(execution_id, signum, now)
        return None if next_at is None else max(0.0, next_at - now)

    def _signal(self, execution_id: int, signum: int, now: float) -> None:
        if signum == signal.SIGTERM:
            self.stopped[execution_id] = now
            log.error(
                "lease about to expire without renewal; stopping the task",
                extra={
                    "event": "lease_watchdog_stop",
                    "execution_id": execution_id,
                    "signal": signal.Signals(signum).name,
                    "margin_seconds": round(self.margin, 3),
                },
            )
        pid = self._pid_of(execution_id)
        try:
            if pid is None:
                self._fallback()  # the fork not reported yet: stop every task (the fork server)
            else:
                self._kill(pid, signum)
        except (ProcessLookupError, PermissionError):
            pass  # already gone
        except Exception:
            log.exception("lease watchdog could not signal a task", extra={"event": "lease_watchdog_failed"})

    # --- the thread -------------------------------------------------------------------------------

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="lease-watchdog", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopping = True
        self._changed.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stopping:
            self._changed.clear()  # before the check, so a lease held during it wakes the next wait
            wait = self.check()
            self._changed.wait(timeout=CHECK_EVERY if wait is None else min(wait, CHECK_EVERY))
