"""How long a worker with nothing to do sleeps, and how little it reads while it does.

With LISTEN working, NOTIFY wakes a worker for every change that concerns it: new work (a
trigger, an occurrence written, a retry scheduled, a recovered lease), an order or a cancel
request naming it. Polling is then a safety net, so a worker that runs nothing and found nothing
waiting at its last look sleeps up to WORKER_IDLE_POLL_SECONDS, and each safety look is one read
(`app.sql.waiting.idle_look`: the earliest waiting row and whether an order waits) instead of a
turn, an outlook and an order check. Rows that wait but could not be claimed (a limit, a paused
queue, a busy job) are looked at every WORKER_POLL_SECONDS as without LISTEN, since what frees
them (a slot, a rate window) sends no NOTIFY. The heartbeat of a worker whose registry row
already shows it idle is written every IDLE_HEARTBEAT_SECONDS rather than every few seconds.

Pure functions of what the worker read and its settings: no database, no clock of its own.
"""

from __future__ import annotations

from datetime import datetime

from app.sql.waiting import IdleLook, Outlook

IDLE_HEARTBEAT_SECONDS = 15.0
# An idle worker's heartbeat stays well inside the staleness limit (at least four beats in it).
BEATS_PER_STALE_WINDOW = 4


def until(at: datetime | None, now: datetime, cap: float) -> float:
    """Seconds from `now` to `at` (0 when it has come), at most `cap`; `cap` when `at` is None."""
    if at is None:
        return cap
    return max(0.0, min(cap, (at - now).total_seconds()))


def rest_after_look(look: IdleLook, *, now: datetime, idle_poll: float) -> float:
    """How much longer a quiet worker may sleep after its safety look: 0 when an order waits or a
    row is claimable now (the worker then runs a turn), else until the earliest waiting row
    becomes claimable, at most `idle_poll`."""
    if look.orders:
        return 0.0
    return until(look.earliest, now, idle_poll)


def wait_after_turn(outlook: Outlook, *, now: datetime, poll: float, idle_poll: float, quiet: bool) -> float:
    """How long a worker with a free slot sleeps after a turn: until the next row becomes
    claimable, at most `poll`, or `idle_poll` when it is `quiet` (listening, running nothing)
    and nothing it could not claim is waiting."""
    cap = idle_poll if quiet and not outlook.held_back else poll
    return until(outlook.next_at, now, cap)


def heartbeat_every(*, busy: bool, listening: bool, normal: float, stale_seconds: float) -> float:
    """Seconds between heartbeats: `normal` while the worker runs something or its last beat
    showed it running something (or without LISTEN), else the idle cadence, kept at least
    BEATS_PER_STALE_WINDOW beats inside the staleness limit."""
    if busy or not listening:
        return normal
    return max(normal, min(IDLE_HEARTBEAT_SECONDS, stale_seconds / BEATS_PER_STALE_WINDOW))
