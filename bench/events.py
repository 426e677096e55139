"""The events viewer at 1M event rows: `/events`, `GET /api/v1/events` and `flask event list` with
each filter they offer (kind, job, queue, worker, since/until, a deep cursor), p50/p95 without a cache.

Events are bulk-loaded (`load_events`): `--rows` of them, one per second back from now, for 1,000
jobs in 20 queues; mostly retries, overlap skips, misfires and triggers, one in ~700 naming one of 20
workers (lease recoveries, cancels, lost and reloaded workers), three old ones naming a retired
worker; then VACUUM ANALYZE. Each path is timed through the Flask test client (the page with
WEBUI_AUTH=0, the API with an admin's JWT) and the command through Flask's CLI runner, REPEAT
times after a warm-up; the plan of each filter's query (EXPLAIN ANALYZE, as the page runs it) goes
to the JSON, and is printed for a filter that misses. Target: every filter <= 50 ms p95, on each
of the three.
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta
from urllib.parse import urlencode

from app.clock import utcnow
from bench import loaders
from bench.dashboard import REPEAT, NeverHitBackend
from bench.harness import BenchDatabase, Figure, summary

NAME = "events"
JOBS = 1000
WORKERS = 20
RETIRED = "bench-worker-retired"  # named by three of the oldest events only
UNKNOWN = "bench-worker-unknown"  # named by none
PASSWORD = "bench-events-password"

# The kind of event n (one per second, n = 1 oldest): rare worker events at fixed strides, the
# rest by n % 100. A worker event names one of WORKERS workers, picked by a hash of n.
_KIND = """CASE WHEN g IN (10, 20, 30) THEN 'retired'
                WHEN g %% 1000 = 1 THEN 'lease_recovered'
                WHEN g %% 5000 = 2 THEN 'execution_cancelled'
                WHEN g %% 7000 = 3 THEN 'execution_cancel_requested'
                WHEN g %% 20000 = 4 THEN 'worker_lost'
                WHEN g %% 50000 = 5 THEN 'worker_reloaded'
                WHEN g %% 100 < 40 THEN 'retry_scheduled'
                WHEN g %% 100 < 60 THEN 'overlap_skipped'
                WHEN g %% 100 < 70 THEN 'misfire_coalesced'
                WHEN g %% 100 < 80 THEN 'job_triggered'
                WHEN g %% 100 < 85 THEN 'callback_created'
                WHEN g %% 100 < 90 THEN 'deduplicated'
                WHEN g %% 100 < 92 THEN 'dead_lettered'
                WHEN g %% 100 < 98 THEN 'job_updated'
                ELSE 'api_token_created' END"""
_PAYLOAD = """CASE k
    WHEN 'retired' THEN jsonb_build_object('worker_id', %(retired)s::text, 'from_status', 'running',
                                           'to_status', 'retry_scheduled')
    WHEN 'lease_recovered' THEN jsonb_build_object('worker_id', w, 'from_status', 'running',
                                                   'to_status', 'retry_scheduled')
    WHEN 'execution_cancelled' THEN jsonb_build_object('attempt', 1, 'worker_id', w, 'how', 'running task killed')
    WHEN 'execution_cancel_requested' THEN jsonb_build_object('worker_id', w, 'reason', 'benchmark')
    WHEN 'worker_lost' THEN jsonb_build_object('worker_id', w, 'last_seen', t - interval '90 seconds',
                                               'runs_in_flight', 2)
    WHEN 'worker_reloaded' THEN jsonb_build_object('worker_id', w, 'how', 'signal', 'tasks', 12,
                                                   'added', '[]'::jsonb, 'removed', '[]'::jsonb,
                                                   'changed', '{}'::jsonb)
    WHEN 'retry_scheduled' THEN jsonb_build_object('attempt', 1, 'status', 'failed', 'retry_at', t + interval '10 s')
    WHEN 'overlap_skipped' THEN jsonb_build_object('scheduled_for', t, 'active_execution_id', g - 1)
    WHEN 'misfire_coalesced' THEN jsonb_build_object('missed', 3, 'first_missed', t - interval '3 hours',
                                                     'last_missed', t - interval '1 hour')
    WHEN 'job_triggered' THEN jsonb_build_object('execution_id', g)
    WHEN 'callback_created' THEN jsonb_build_object('callback_execution_id', g + 1, 'on', 'failure')
    WHEN 'deduplicated' THEN jsonb_build_object('key', 'job:' || job, 'execution_id', g - 1)
    WHEN 'dead_lettered' THEN jsonb_build_object('reason', 'failed after 3 attempt(s): RuntimeError: boom')
    WHEN 'job_updated' THEN jsonb_build_object('fields', jsonb_build_array('schedule', 'timeout_seconds'))
    ELSE jsonb_build_object('token_id', g %% 97, 'name', 'ci') END"""
_WITHOUT_JOB = ("worker_lost", "worker_reloaded", "api_token_created")


def load_events(conn, rows: int, *, now: datetime, queues: list[str]) -> None:
    """JOBS jobs `events-N` (job n in queues[(n - 1) % len(queues)]) and `rows` events of them,
    one per second back from `now`, in chunks of loaders.LOAD_CHUNK."""
    loaders.ensure_queues(conn, queues)
    for n in range(1, JOBS + 1):
        loaders.insert_job(conn, f"events-{n}", now=now, queue=queues[(n - 1) % len(queues)])
    first_job = conn.execute("SELECT min(id) FROM jobs WHERE name LIKE 'events-%'").fetchone()[0]
    without_job = ", ".join(f"'{kind}'" for kind in _WITHOUT_JOB)
    for first in range(1, rows + 1, loaders.LOAD_CHUNK):
        conn.execute(
            f"""INSERT INTO events (type, job_id, execution_id, actor, payload, created_at)
                SELECT CASE k WHEN 'retired' THEN 'lease_recovered' ELSE k END,
                       CASE WHEN k IN ({without_job}) THEN NULL ELSE job END,
                       CASE WHEN k IN ({without_job}, 'job_updated') THEN NULL ELSE g END,
                       CASE WHEN k IN ('job_updated', 'job_triggered', 'execution_cancel_requested',
                                       'api_token_created') THEN 'admin' ELSE 'system' END,
                       {_PAYLOAD}, t
                FROM generate_series(%(first)s::int, %(last)s::int) AS g,
                     LATERAL (SELECT {_KIND}) AS x(k),
                     LATERAL (SELECT %(first_job)s::int + g %% %(jobs)s,
                                     %(now)s::timestamptz - (%(rows)s - g + 1) * interval '1 second',
                                     'bench-worker-' || lpad(abs(hashint4(g) %% %(workers)s)::text, 2, '0'))
                             AS y(job, t, w)""",
            {
                "first": first,
                "last": min(rows, first + loaders.LOAD_CHUNK - 1),
                "first_job": first_job,
                "jobs": JOBS,
                "now": now,
                "rows": rows,
                "workers": WORKERS,
                "retired": RETIRED,
            },
        )
    conn.execute("VACUUM ANALYZE events")
    conn.execute("ANALYZE jobs")


def events_for(db: BenchDatabase, options) -> dict:
    """The loaded events: afresh in the throw-away database, or with `--database` reused from an
    earlier run with the same --rows (its marker table `bench_events`), else loaded there in the
    shared 20-queue layout after deleting the events and the `events-N` jobs found."""
    with db.connect() as conn:
        marker = conn.execute("SELECT to_regclass('bench_events') IS NOT NULL").fetchone()
        if options.database and marker and marker[0]:
            found = conn.execute("SELECT rows, loaded_at FROM bench_events").fetchone()
            if found and found[0] == options.rows:
                return {"rows": found[0], "loaded_at": found[1], "seconds": 0.0, "reused": True}
    if not options.database:
        db.reset()
    now = utcnow()
    began = time.perf_counter()
    with db.connect() as conn:
        conn.execute("DROP TABLE IF EXISTS bench_events")
        conn.execute("TRUNCATE events RESTART IDENTITY")
        conn.execute("DELETE FROM jobs WHERE name LIKE 'events-%'")
        load_events(conn, options.rows, now=now, queues=list(loaders.SHARED_QUEUES))
        conn.execute("CREATE TABLE bench_events (rows bigint, loaded_at timestamptz)")
        conn.execute("INSERT INTO bench_events VALUES (%s, %s)", (options.rows, now))
    return {"rows": options.rows, "loaded_at": now, "seconds": time.perf_counter() - began, "reused": False}


def _filters(conn, loaded_at: datetime, rows: int) -> dict[str, dict[str, str]]:
    """label -> the filter's query arguments, in the page's names (`before` is the cursor)."""
    job = str(conn.execute("SELECT id FROM jobs WHERE name = 'events-5'").fetchone()[0])
    (deep,) = conn.execute("SELECT id FROM events ORDER BY id DESC OFFSET %s LIMIT 1", (rows // 2,)).fetchone()
    span = timedelta(seconds=rows)  # the history's length
    day_start = loaded_at - span / 2

    def at(instant: datetime) -> str:
        return instant.strftime("%Y-%m-%dT%H:%M:%SZ")

    return {
        "no filter": {},
        "kind (common)": {"kind": "retry_scheduled"},
        "kind (rare)": {"kind": "worker_lost"},
        "job": {"job": job},
        "job and kind": {"job": job, "kind": "dead_lettered"},
        "queue": {"queue": "queue-05"},
        "worker": {"worker": "bench-worker-07"},
        "worker (three old events)": {"worker": RETIRED},
        "worker (none)": {"worker": UNKNOWN},
        "worker and kind": {"worker": "bench-worker-07", "kind": "lease_recovered"},
        "since (last hour)": {"since": at(loaded_at - timedelta(hours=1))},
        "since and until (an hour halfway back)": {
            "since": at(day_start),
            "until": at(day_start + timedelta(hours=1)),
        },
        "until (halfway back)": {"until": at(day_start)},
        "cursor (halfway back)": {"before": str(deep)},
        "cursor and kind": {"before": str(deep), "kind": "retry_scheduled"},
        "cursor and worker": {"before": str(deep), "worker": "bench-worker-07"},
    }


def _page_path(args: dict[str, str]) -> str:
    return "/events/" + (f"?{urlencode(args)}" if args else "")


def _api_path(args: dict[str, str]) -> str:
    query = {("cursor" if key == "before" else key): value for key, value in args.items()}
    return "/api/v1/events?" + urlencode({"limit": "50", **query})


def _cli_args(args: dict[str, str]) -> list[str] | None:
    if "queue" in args:
        return None  # `flask event list` has no queue filter
    found = ["event", "list", "--limit", "50"]
    for key, value in args.items():
        found += [f"--{key}", value]
    return found


def _sample(call, repeat: int) -> dict:
    call()
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        call()
        samples.append((time.perf_counter() - started) * 1000)
    return summary(samples)


def _token(app, client) -> str:
    """An access token of an admin of the default organization (created once per database)."""
    from app.extensions import db as database
    from app.models import Membership, User
    from app.services.use_cases.tenancy import default_organization

    with app.app_context():
        if not database.session.query(User).filter_by(username="bench-events").first():
            now = utcnow()
            user = User(username="bench-events", active=True, created_at=now)
            user.set_password(PASSWORD)
            user.memberships.append(Membership(organization_id=default_organization().id, role="admin", created_at=now))
            database.session.add(user)
            database.session.commit()
    response = client.post("/api/v1/auth/login", json={"username": "bench-events", "password": PASSWORD})
    if response.status_code != 200:
        raise RuntimeError(f"sign-in failed: HTTP {response.status_code} {response.get_data(as_text=True)[:200]}")
    return response.get_json()["access_token"]


def _plan(app, args: dict[str, str]) -> str:
    """EXPLAIN ANALYZE of the events query the page runs for `args` (caught as it is sent)."""
    from sqlalchemy import event

    from app.extensions import db as database

    caught: list[tuple[str, object]] = []

    def catch(conn, cursor, statement, parameters, context, executemany):  # noqa: ARG001
        if statement.lstrip().startswith("SELECT") and "FROM events" in statement:
            caught.append((statement, parameters))

    with app.app_context():
        engine = database.engine
    event.listen(engine, "before_cursor_execute", catch)
    try:
        app.test_client().get(_page_path(args))
    finally:
        event.remove(engine, "before_cursor_execute", catch)
    if not caught:
        return "(no events query)"
    statement, parameters = caught[-1]
    with engine.connect() as conn:
        lines = conn.exec_driver_sql(f"EXPLAIN (ANALYZE, BUFFERS) {statement}", parameters).scalars()  # type: ignore[arg-type]
        return "\n".join(lines)


def run(db: BenchDatabase, options) -> list[Figure]:
    loaded = events_for(db, options)
    app = db.app(WEBUI_AUTH="0", API_TOKEN_RATE_LIMIT="1000000 per minute")
    app.extensions["cronwell_cache"].backend = NeverHitBackend()
    repeat = 2 if options.smoke else REPEAT
    with db.connect() as conn:
        filters = _filters(conn, loaded["loaded_at"], loaded["rows"])
    client = app.test_client()
    headers = {"Authorization": f"Bearer {_token(app, client)}"}
    runner = app.test_cli_runner()
    figures: list[Figure] = []
    details: dict[str, dict] = {}

    def page(args):
        return lambda: client.get(_page_path(args))

    def api(args):
        return lambda: client.get(_api_path(args), headers=headers)

    def command(args):
        return lambda: runner.invoke(args=_cli_args(args))

    for label, args in filters.items():
        details[label] = {"args": args, "plan": _plan(app, args)}
        query_ms = (
            details[label]["plan"].rsplit("Execution Time: ", 1)[-1]
            if "Execution Time" in details[label]["plan"]
            else "?"
        )
        first = {
            "page": client.get(_page_path(args)).status_code,
            "api": client.get(_api_path(args), headers=headers).status_code,
        }
        surfaces = {"page": page(args), "api": api(args)}
        if _cli_args(args) is not None:
            first["cli"] = 200 if runner.invoke(args=_cli_args(args)).exit_code == 0 else 500
            surfaces["cli"] = command(args)
        missed = False
        for surface, call in surfaces.items():
            if first[surface] != 200:
                figures.append(Figure(NAME, f"{surface}: {label}", None, "ms", note=f"HTTP {first[surface]}"))
                continue
            stats = _sample(call, repeat)
            details[label][surface] = stats
            note = f"p50 {stats['p50']:.1f} ms" + (f"; query {query_ms}" if surface == "page" else "")
            figure = Figure(NAME, f"{surface}: {label} p95", stats["p95"], "ms", note=note)
            figure.limit_name, figure.limit_value = "ms limit", 50.0
            figures.append(figure.judge("<= 50"))
            missed = missed or not figure.met
        if missed:
            print(f"-- {label} {args}: over 50 ms p95; the plan of its query:\n{details[label]['plan']}\n", flush=True)
    figures[0].note += f"; {loaded['rows']:,} events " + (
        "reused" if loaded["reused"] else f"loaded in {loaded['seconds']:.0f} s"
    )
    figures[0].extra = {"rows": loaded["rows"], "filters": details}
    return figures
