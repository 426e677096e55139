"""Dashboard and lists at 1M execution rows, without a cache and with Redis.

History is bulk-loaded with generate_series (1,000 jobs; executions one per second back from
now, ~98 % finished, 280 pending, 20 running, 50 open alerts), then VACUUM ANALYZE. Timed twice:
- the service functions and list queries the pages are built from (in an app context);
- the pages themselves through the Flask test client (server time: routing, queries, templates;
  WEBUI_AUTH=0 so no sign-in round trip).
"No cache" swaps the cache backend for one that never hits, so every call recomputes from the
database (what happens after each invalidation and on every TTL expiry; without REDIS_URL each
web process otherwise keeps its own short-lived in-process copy). "Redis" runs against the local
Redis under a per-run key prefix, warm. Target: every page <= 50 ms p95 without a cache.

Counts above 50,000 rows may be estimates as long as the UI says so: the summary's counts are
exact up to 50,000 per status and planner estimates above, so the run also reports how far each
estimate is from the exact count the loader took. Lists count at most 50,000 rows; the deep pages
timed are the last counted page of each list (page 1000 of all executions, the last pages of a
status and of a job).
"""

from __future__ import annotations

import time

from app.clock import utcnow
from bench import loaders
from bench.harness import REDIS_URL, BenchDatabase, Figure, summary, timed

NAME = "dashboard"
JOBS = 1000
REPEAT = 20


class NeverHitBackend:
    """A cache backend that stores nothing: every read misses."""

    def get(self, key):
        return None

    def set(self, key, value, ttl):
        pass

    def delete(self, *keys):
        pass

    def incr(self, key, ttl):
        return 1

    def ping(self):
        return True


def _services(app, job_id: int) -> dict:
    """name -> zero-argument callable, each one read the pages make."""
    from app.extensions import db
    from app.services.read import dashboard
    from app.services.use_cases import executions
    from app.services.use_cases import jobs as job_service
    from app.web.pagination import paginate

    now = lambda: utcnow()  # noqa: E731

    def page(query, number=1, per_page=50):
        return lambda: paginate(query(), page=number, per_page=per_page)

    def job_detail_upcoming():
        return dashboard.job_upcoming(db.session.get(job_service.Job, job_id), now())

    return {
        "summary_counts": dashboard.summary_counts,
        "queue_depth": lambda: dashboard.queue_depth(now()),
        "upcoming_runs": lambda: dashboard.upcoming_runs(now()),
        "recent_activity": dashboard.recent_activity,
        "open_alerts": dashboard.open_alerts,
        "heartbeats": lambda: dashboard.heartbeats(now(), 60),
        "dashboard_jobs": dashboard.dashboard_jobs,
        "job_stats": lambda: dashboard.job_stats(job_id),
        "job_upcoming": job_detail_upcoming,
        "executions page 1": page(executions.list_query),
        "executions page 1000": page(executions.list_query, 1000),
        "executions status=failed page 100": page(lambda: executions.list_query(status="failed"), 100),
        "executions status=failed": page(lambda: executions.list_query(status="failed")),
        "executions status=pending": page(lambda: executions.list_query(status="pending")),
        "job executions page 1": page(lambda: executions.list_query(job_id=job_id), per_page=30),
        "jobs page 1": page(job_service.list_query),
    }


PAGES = [
    "/dashboard/",
    "/dashboard/panels/summary",
    "/dashboard/panels/queue",
    "/dashboard/panels/upcoming",
    "/dashboard/panels/activity",
    "/dashboard/panels/alerts",
    "/dashboard/panels/heartbeats",
    "/dashboard/panels/jobs",
    "/jobs/",
    "/jobs/{job}",
    "/executions/",
    "/executions/?status=failed",
    "/executions/?job={job}",
    "/executions/?page=1000",
    "/executions/?status=failed&page=100",
    "/executions/?job={job}&page=20",
    "/executions/{execution}",
    "/alerts/",
    "/health/",
]


def _time_services(app, job_id: int, repeat: int = REPEAT) -> dict:
    from app.extensions import db

    found = {}
    with app.app_context():
        for name, call in _services(app, job_id).items():

            def once():
                call()
                db.session.remove()

            found[name] = summary(timed(once, repeat, warmup=2))
    return found


def _time_pages(app, job_id: int, execution_id: int, repeat: int = REPEAT) -> dict:
    found = {}
    client = app.test_client()
    for template in PAGES:
        path = template.format(job=job_id, execution=execution_id)
        response = client.get(path)
        if response.status_code != 200:
            found[path] = {"error": f"HTTP {response.status_code}"}
            continue
        samples = []
        client.get(path)
        for _ in range(repeat):
            started = time.perf_counter()
            response = client.get(path)
            samples.append((time.perf_counter() - started) * 1000)
        found[path] = summary(samples) | {"status": response.status_code}
    return found


def _summary_as_shown(app) -> dict:
    """The summary's execution counts and how each was obtained (exact, estimate, more_than)."""
    from app.services.read import dashboard

    with app.app_context():
        summary = dashboard.summary_counts()
    return {
        status: {"value": value, "kind": summary["count_kinds"][status]}
        for status, value in summary["executions_by_status"].items()
    }


def _estimate_figures(shown: dict, exact: dict) -> list[Figure]:
    """How far each estimated count is from the exact count (right after VACUUM ANALYZE)."""
    figures = []
    for status, count in shown.items():
        if count["kind"] == "exact":
            if count["value"] != exact.get(status, 0):  # an exact count must be exact
                figures.append(
                    Figure(
                        NAME,
                        f"summary count {status} (exact)",
                        count["value"],
                        "rows",
                        "exact count",
                        exact.get(status, 0),
                        note="MISMATCH",
                    )
                )
            continue
        truth = exact.get(status, 0)
        error = 100.0 * (count["value"] - truth) / truth if truth else None
        figures.append(
            Figure(
                NAME,
                f"summary count {status} ({count['kind']})",
                count["value"],
                "rows",
                "exact count",
                truth,
                note=f"error {error:+.2f} %" if error is not None else "no such rows",
            )
        )
    return figures


def _redis_available() -> bool:
    try:
        import redis

        return bool(redis.Redis.from_url(REDIS_URL, socket_timeout=0.5).ping())
    except Exception:
        return False


def _drop_redis_keys(prefix: str) -> None:
    import redis

    client = redis.Redis.from_url(REDIS_URL)
    keys = list(client.scan_iter(match=prefix + "*", count=1000))
    if keys:
        client.delete(*keys)


def run(db: BenchDatabase, options) -> list[Figure]:
    db.reset()
    began = time.perf_counter()
    with db.connect() as conn:
        counts = loaders.load_history(conn, options.rows, JOBS, now=utcnow())
        execution_id = conn.execute("SELECT max(id) FROM executions WHERE status = 'failed'").fetchone()[0]
    load_seconds = time.perf_counter() - began
    job_id = 1 + JOBS // 2
    nocache = db.app(WEBUI_AUTH="0")
    nocache.extensions["cronwell_cache"].backend = NeverHitBackend()
    shown = _summary_as_shown(nocache)
    repeat = 2 if options.smoke else REPEAT
    results = {
        "rows": options.rows,
        "by_status": counts,
        "load_seconds": load_seconds,
        "summary_shown": shown,
        "nocache": {
            "services": _time_services(nocache, job_id, repeat),
            "pages": _time_pages(nocache, job_id, execution_id, repeat),
        },
    }
    prefix = f"{db.name}:"
    if _redis_available():
        cached = db.app(WEBUI_AUTH="0", REDIS_URL=REDIS_URL, CACHE_KEY_PREFIX=prefix)
        try:
            results["redis"] = {
                "services": _time_services(cached, job_id, repeat),
                "pages": _time_pages(cached, job_id, execution_id, repeat),
            }
        finally:
            _drop_redis_keys(prefix)
    figures: list[Figure] = []
    redis = results.get("redis", {})
    for kind in ("services", "pages"):
        for name, stats in results["nocache"][kind].items():
            if "error" in stats:
                figures.append(Figure(NAME, f"{kind[:-1]} {name}", None, "ms", note=stats["error"]))
                continue
            warm = redis.get(kind, {}).get(name, {})
            figure = Figure(
                NAME,
                f"{kind[:-1]} {name} p95, no cache",
                stats["p95"],
                "ms",
                "with Redis p95" if warm else None,
                warm.get("p95"),
                note=f"p50 {stats['p50']:.1f} ms; Redis p50 {warm.get('p50') or 0:.1f} ms",
            )
            if kind == "pages":
                figure.judge("<= 50")
            figures.append(figure)
    figures.extend(_estimate_figures(shown, counts))
    figures[0].note += f"; {options.rows:,} rows loaded in {load_seconds:.0f} s"
    figures[0].extra = results
    return figures
