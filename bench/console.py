"""The console's lists with their filters at 1M execution rows: jobs search and filters
with last run / last outcome / 24 h success rate, executions by job name, trigger, queue and date.

History is the dashboard benchmark's (`bench.loaders.load_history`: 1,000 jobs `history-N`,
executions one per second back from now, all of trigger `schedule`), then VACUUM ANALYZE. Pages
are timed through the Flask test client without a cache (WEBUI_AUTH=0), each REPEAT times after a
warm-up. Target: every page <= 50 ms p95. The first two pages existed before the filters and are
there to compare with on a busy machine.
"""

from __future__ import annotations

import time
from datetime import timedelta

from app.clock import utcnow
from bench import loaders
from bench.dashboard import JOBS, REPEAT, NeverHitBackend
from bench.harness import BenchDatabase, Figure, summary

NAME = "console"


def _pages(now) -> list[str]:
    day = (now - timedelta(days=3)).date().isoformat()
    hour = (now - timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M")
    return [
        # References: pages from before the filters (docs/performance.md), to read the others
        # against when the machine is busy.
        "/executions/",
        "/executions/?status=failed",
        "/jobs/",
        "/jobs/?page=20",
        "/jobs/?q=history-5",
        "/jobs/?q=dashboard+benchmark&page=10",
        "/jobs/?enabled=yes&queue=default",
        "/jobs/?task=always_succeed&page=20",
        "/jobs/?outcome=failed",
        "/jobs/?outcome=never",
        "/executions/?job=history-500",
        "/executions/?job=history-5",
        "/executions/?job=history-5&page=100",
        "/executions/?trigger=schedule",
        "/executions/?trigger=manual",
        "/executions/?trigger=schedule&page=1000",
        "/executions/?queue=default&trigger=schedule",
        f"/executions/?created_from={day}&created_to={day}",
        f"/executions/?created_from={hour}",
        f"/executions/?created_from={day}&status=failed",
        f"/executions/?created_from={day}&created_to={day}&page=1000",
    ]


def _time_pages(app, paths: list[str], repeat: int = REPEAT) -> dict:
    found = {}
    client = app.test_client()
    for path in paths:
        response = client.get(path)
        if response.status_code != 200:
            found[path] = {"error": f"HTTP {response.status_code}"}
            continue
        client.get(path)
        samples = []
        for _ in range(repeat):
            started = time.perf_counter()
            client.get(path)
            samples.append((time.perf_counter() - started) * 1000)
        found[path] = summary(samples)
    return found


def run(db: BenchDatabase, options) -> list[Figure]:
    loaded = loaders.history_for(db, options, JOBS, now=utcnow())
    now, load_seconds = loaded["loaded_at"], loaded["seconds"]
    app = db.app(WEBUI_AUTH="0")
    app.extensions["cronwell_cache"].backend = NeverHitBackend()
    results = _time_pages(app, _pages(now), 2 if options.smoke else REPEAT)
    figures: list[Figure] = []
    for path, stats in results.items():
        if "error" in stats:
            figures.append(Figure(NAME, f"page {path}", None, "ms", note=stats["error"]))
            continue
        figure = Figure(NAME, f"page {path} p95, no cache", stats["p95"], "ms", note=f"p50 {stats['p50']:.1f} ms")
        figure.judge("<= 50")
        figures.append(figure)
    figures[0].note += f"; {options.rows:,} rows " + (
        "reused" if loaded["reused"] else f"loaded in {load_seconds:.0f} s"
    )
    figures[0].extra = {"rows": options.rows, "pages": results}
    return figures
