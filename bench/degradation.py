"""Degradation: claim throughput in 5-second windows while an idle transaction holds the xmin horizon.

The classic queue-table trap on PostgreSQL (MVCC): every claim turns a pending row into a
claimed, then a running, then a succeeded row version; the dead versions stay in the claimable
partial index until no transaction could still see them. One session left "idle in transaction"
with a snapshot (here REPEATABLE READ + txid_current(), like a stuck application transaction)
keeps all of them visible, so every claim walks an ever longer run of dead index entries.

Timeline: claims run for baseline + hold + after seconds (`bench.child claimloop`: the worker's
claim + start + complete statements, batch 4, one process); after `baseline` seconds the holder
opens its transaction and keeps it `hold` seconds. Three variants: as the server is (this bench
server runs with autovacuum off, so nothing ever removes dead rows); with `VACUUM executions`
every 5 s, standing in for an aggressively tuned autovacuum (it removes nothing while the holder
is there: that is the trap); and that plus `idle_in_transaction_session_timeout = 5s` on the
holder's session, which makes the server end the stuck session. The same-run limit is the
baseline rate before the holder starts.
"""

from __future__ import annotations

import threading
import time

import psycopg

from app.clock import utcnow
from bench import loaders
from bench.harness import BenchDatabase, Figure, run_children

NAME = "degradation"
BASELINE_SECONDS = 10.0
AFTER_SECONDS = 15.0
WINDOW = 5.0
SMOKE_SECONDS = 1.0  # a smoke run's baseline, after-release phase and window alike


def _hold(url: str, delay: float, seconds: float, timeout_setting: str | None, log: dict) -> None:
    time.sleep(delay)
    conn = psycopg.connect(url)
    try:
        if timeout_setting:
            conn.execute(f"SET idle_in_transaction_session_timeout = '{timeout_setting}'")
            conn.commit()
        conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        conn.execute("SELECT count(*) FROM jobs")
        log["xid"] = conn.execute("SELECT txid_current()").fetchone()[0]
        log["held_at"] = time.time()
        time.sleep(seconds)
        try:
            conn.rollback()
            log["ended_by"] = "the holder (rollback)"
        except psycopg.Error as exc:
            log["ended_by"] = f"the server: {str(exc).strip().splitlines()[0]}"
        log["released_at"] = time.time()
    finally:
        conn.close()


def _candidate_sql() -> str:
    """The claim's candidate scan (the store's own WHERE and ORDER BY), without the row locks."""
    from app.store.common import CANDIDATE_WHERE

    where = CANDIDATE_WHERE.format(queue_filter="", task_filter="").replace(":now", "now()")
    return (
        f"SELECT e.id FROM executions AS e, queues AS q WHERE {where} ORDER BY e.priority, e.available_at, e.id LIMIT 4"
    )


def _sample(url: str, sql: str, seconds: float, samples: list, vacuum: bool, window: float = WINDOW) -> None:
    """Every window for `seconds` from the go signal (when the thread starts): (VACUUM, like a
    well-tuned autovacuum would,) dead tuples, and what one claim scan (`sql`) costs (server ms,
    buffers touched)."""
    with psycopg.connect(url, autocommit=True) as conn:
        until = time.time() + seconds
        while time.time() < until:
            if vacuum:
                conn.execute("VACUUM executions")
            row = conn.execute("SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = 'executions'").fetchone()
            plan = conn.execute(sql).fetchone()[0][0]
            top = plan["Plan"]
            samples.append(
                {
                    "t": time.time(),
                    "dead_tuples": row[0] if row else None,
                    "scan_ms": plan["Execution Time"],
                    "buffers": top.get("Shared Hit Blocks", 0) + top.get("Shared Read Blocks", 0),
                }
            )
            time.sleep(window)


def _variant(
    db: BenchDatabase,
    hold: float,
    timeout_setting: str | None,
    vacuum: bool,
    timeline: tuple[float, float, float] = (BASELINE_SECONDS, AFTER_SECONDS, WINDOW),
) -> dict:
    baseline, after, window = timeline
    total = baseline + hold + after
    db.reset()
    with db.connect() as conn:
        job = loaders.insert_job(conn, "degradation", now=utcnow(), overlap_policy="allow")
        loaders.insert_pending(conn, job, int(2500 * total), now=utcnow())
        conn.execute("VACUUM ANALYZE executions")
    log: dict = {}
    samples: list = []
    scan = "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + _candidate_sql()  # imports the store: before the clock
    threads = [
        threading.Thread(target=_hold, args=(db.url, baseline, hold, timeout_setting, log), daemon=True),
        threading.Thread(target=_sample, args=(db.url, scan, total, samples, vacuum, window), daemon=True),
    ]
    go, reports = run_children(
        [["claimloop", "--slots", "4", "--seconds", str(total), "--windows", str(window)]],
        db.env(),
        before_go=lambda: [t.start() for t in threads],
    )
    for thread in threads:
        thread.join(timeout=hold + 30)
    counts = reports[0]["counts"]
    rates = [c / window for c in counts]
    held_from = (log.get("held_at", go) - go) / window
    held_to = (log.get("released_at", go) - go) / window
    phases = ["before" if i + 1 <= held_from else "held" if i < held_to else "after" for i in range(len(rates))]
    return {
        "rates": rates,
        "phases": phases,
        "batch_ms_p50": reports[0]["batch_ms_p50"],
        "log": log,
        "samples": [dict(x, t=round(x["t"] - go, 1)) for x in samples],
    }


def run(db: BenchDatabase, options) -> list[Figure]:
    hold = options.hold_seconds
    settings = {
        "no vacuum": (None, False),
        "VACUUM every 5 s": (None, True),
        "VACUUM every 5 s + idle_in_transaction_session_timeout=5s": ("5s", True),
    }
    timeline = (BASELINE_SECONDS, AFTER_SECONDS, WINDOW)
    if options.smoke:  # the last variant goes through every step (the VACUUM and the server's timeout)
        settings = dict(list(settings.items())[-1:])
        timeline = (SMOKE_SECONDS, SMOKE_SECONDS, SMOKE_SECONDS)
    variants = {
        label: _variant(db, hold, timeout_setting, vacuum, timeline)
        for label, (timeout_setting, vacuum) in settings.items()
    }
    figures: list[Figure] = []
    for label, result in variants.items():
        rates, phases = result["rates"], result["phases"]
        before = [r for r, p in zip(rates, phases) if p == "before"] or rates[:1]
        held = [r for r, p in zip(rates, phases) if p == "held"] or [0.0]
        after = [r for r, p in zip(rates, phases) if p == "after"] or [0.0]
        baseline = sum(before) / len(before)
        windows = " ".join(f"{r:.0f}{'*' if p == 'held' else ''}" for r, p in zip(rates, phases))
        scans = result["samples"]
        first_scan = scans[0] if scans else {}
        worst_scan = max(scans, key=lambda x: x["buffers"]) if scans else {}
        figures += [
            Figure(
                NAME,
                f"one claim scan, worst sample ({label})",
                worst_scan.get("scan_ms"),
                "ms",
                "same scan before the holder",
                first_scan.get("scan_ms"),
                note=f"buffers {first_scan.get('buffers')} -> {worst_scan.get('buffers')}; dead tuples "
                f"{first_scan.get('dead_tuples')} -> {worst_scan.get('dead_tuples')}",
            ),
            Figure(
                NAME,
                f"claims/s, worst 5 s window while held ({label})",
                min(held),
                "/s",
                "baseline before the holder",
                baseline,
                note=f"windows (* = held): {windows}",
            ),
            Figure(
                NAME,
                f"claims/s, last window after release ({label})",
                after[-1],
                "/s",
                "baseline before the holder",
                baseline,
                note=f"holder ended by {result['log'].get('ended_by')}",
            ),
        ]
    figures[0].extra = variants
    return figures
