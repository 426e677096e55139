"""Two hosts whose clocks are wrong by +30 s and -30 s (CRONWELL_CLOCK_OFFSET_SECONDS, read by
app/clock.py), each running a scheduler and a worker on the private PostgreSQL.

Every long-running process measures its host clock against the database's at start and with each
heartbeat and follows the database (app/clock.py, heartbeats.sync_clock), so the skew changes
nothing observable:
- due times: an observer polling the executions table on the database's clock never sees an
  occurrence started before its scheduled time (a worker 30 s ahead would otherwise start it 30 s
  early), and never sees one written more than the scheduler's lead time (SCHEDULER_LEAD_MS,
  default 2 s) before it (a scheduler 30 s ahead would otherwise write it 30 s early);
- leases: a 6 s task with no timeout under a 4 s lease runs on whichever worker takes it and is
  never recovered by the other host (a worker 30 s behind would otherwise write leases that are
  already expired for everyone else);
- heartbeats: every process's `last_seen` stays within seconds of the database's clock, so no
  process looks stale or from the future in the worker registry;
and the ledger is clean.
"""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import psycopg
import pytest

from tests.factories import make_job
from tests.helpers.pg import plain_url
from tests.helpers.processes import wait_for
from tests.helpers.scenario import assert_alive, check_ledger, log_events, rows, scalar, stop_gracefully, utcnow

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.timeout(110)]

SKEW = 30
LEAD_SECONDS = 2
RUN_SECONDS = 16
ENV = {
    "LEASE_SECONDS": "4",
    "LEASE_BUFFER_SECONDS": "0",
    "WORKER_POLL_SECONDS": "1",
    "SCHEDULER_LEAD_MS": str(LEAD_SECONDS * 1000),
}


class Observer:
    """Polls the database every 100 ms, on its own connection: when each execution first became
    visible (database clock), and how far each heartbeat's last_seen is from the database's now."""

    def __init__(self, url: str) -> None:
        self.first_seen: dict[int, tuple] = {}  # id -> (scheduled_for, seen at)
        self.first_started: dict[int, tuple] = {}  # id -> (scheduled_for, first seen no longer pending)
        self.heartbeat_gaps: list[float] = []  # database now - last_seen, seconds
        self._conn = psycopg.connect(plain_url(url), autocommit=True)
        self._running = True
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while self._running:
            seen_at = self._conn.execute("SELECT clock_timestamp()").fetchone()[0]
            for execution_id, scheduled_for, status in self._conn.execute(
                "SELECT id, scheduled_for, status FROM executions WHERE trigger = 'schedule'"
            ):
                self.first_seen.setdefault(execution_id, (scheduled_for, seen_at))
                if status != "pending":
                    self.first_started.setdefault(execution_id, (scheduled_for, seen_at))
            for (gap,) in self._conn.execute(
                "SELECT extract(epoch FROM clock_timestamp() - last_seen) FROM heartbeats "
                "WHERE coalesce(info->>'state', '') <> 'stopped'"
            ):
                self.heartbeat_gaps.append(float(gap))
            time.sleep(0.1)

    def stop(self) -> None:
        self._running = False
        self._thread.join(timeout=5)
        self._conn.close()

    def earliness(self) -> list[float]:
        """Seconds each occurrence was seen started before its scheduled time (negative: after)."""
        return [(scheduled - seen).total_seconds() for scheduled, seen in self.first_started.values()]

    def written_ahead(self) -> list[float]:
        """Seconds each occurrence became visible before its scheduled time (the lead time)."""
        return [(scheduled - seen).total_seconds() for scheduled, seen in self.first_seen.values()]


def test_hosts_30_s_apart_change_nothing_observable(hosts, fault_app, fault_db):
    ahead, behind = hosts.add("ahead", clock_offset=SKEW), hosts.add("behind", clock_offset=-SKEW)
    everyone = []
    for host in (ahead, behind):
        everyone += [
            hosts.start_scheduler(host, "--tick-seconds", "1", env=ENV),
            hosts.start_worker(host, "--workers", "3", env=ENV),
        ]
    wait_for(
        lambda: scalar("SELECT count(*) FROM heartbeats") == 4,
        within=30,
        what=lambda: "four heartbeats\n" + hosts.processes.outputs()[-4000:],
    )
    observer = Observer(fault_db)
    try:
        now = utcnow()
        for n in range(6):
            make_job(now=now, every="2s", name=f"tick-{n}")
        long_runs = [
            make_job(
                now=now - timedelta(hours=1) + timedelta(seconds=2 + n),
                every="1h",
                name=f"long-{n}",
                task="sleep_for_seconds",
                config={"seconds": 6},
                timeout_seconds="none",
                max_attempts=2,
                retry_backoff_seconds=1,
            )
            for n in range(2)
        ]
        until = time.monotonic() + RUN_SECONDS

        def ran_long_enough():
            assert_alive(*everyone)
            return time.monotonic() >= until

        wait_for(ran_long_enough, within=RUN_SECONDS + 5, what="the run to last", interval=0.5)
        wait_for(
            lambda: (
                scalar(
                    "SELECT count(*) FROM executions WHERE job_id = ANY(:ids) AND status = 'succeeded'",
                    ids=[job.id for job in long_runs],
                )
                == 2
            ),
            within=20,
            what=lambda: "the long runs to finish\n" + hosts.processes.outputs()[-4000:],
        )
    finally:
        observer.stop()
    stop_gracefully(*everyone)

    corrections = {
        process.args[3]: [round(r["correction_seconds"]) for r in log_events(process, "clock_corrected")]
        for process in everyone
    }
    earliness, ahead = observer.earliness(), observer.written_ahead()
    long_attempts = rows(
        "SELECT e.job_id, a.number, a.worker_id, a.status FROM attempts AS a JOIN executions AS e "
        "ON e.id = a.execution_id WHERE e.job_id = ANY(:ids) ORDER BY 1, 2",
        ids=[job.id for job in long_runs],
    )
    recovered = scalar("SELECT count(*) FROM events WHERE type = 'lease_recovered'")
    gaps = observer.heartbeat_gaps
    figures = {
        "corrections_s": corrections,
        "occurrences_seen": len(earliness),
        "earliest_s": round(max(earliness), 3),
        "latest_s": round(-min(earliness), 3),
        "written_ahead_s": round(max(ahead), 3),
        "heartbeat_gap_s": (round(min(gaps), 2), round(max(gaps), 2)),
        "long_runs": [tuple(r) for r in long_attempts],
        "leases_recovered": recovered,
    }
    check_ledger("clock skew +-30 s")
    print("\n[clock skew +-30 s] " + " ".join(f"{key}={value}" for key, value in figures.items()))

    # Every process found its clock 30 s off and followed the database's.
    for process_id, seen in corrections.items():
        expected = -SKEW if "ahead" in process_id else SKEW
        assert seen[:1] == [expected], (process_id, seen)
    # Due times: nothing started early, nothing written earlier than the lead time (100 ms
    # polling, 0.5 s allowance for the measurement).
    assert len(earliness) >= 6 * RUN_SECONDS / 2 * 0.6, figures
    assert max(earliness) < 0.5, figures
    assert max(ahead) < LEAD_SECONDS + 0.5, figures
    # Leases: the long runs ran once each, never recovered.
    assert recovered == 0 and [r[1:] for r in long_attempts if r[1] != 1] == [], figures
    assert all(status == "succeeded" for *_, status in long_attempts), figures
    # Heartbeats: fresh and never from the future.
    assert -1.0 < min(gaps) and max(gaps) < 10.0, figures  # a skew would show as +-30 s
