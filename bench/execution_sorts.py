"""The executions list sorted by started, finished, status and job at 1M execution rows: the
first page and a deep page (the position 50,000 rows in, page 1,000 of 50) of each sort, both
directions, p50/p95 through the Flask test client without a cache.

History is the dashboard benchmark's (`bench.loaders.load_history`), then VACUUM ANALYZE. A sorted
list is paged by a keyset on (sort column, id) (app/services/read/execution_sorts.py), so a deep
page is one index range like the first; the deep page's cursor is the row found at that depth
with OFFSET (once, outside the timing). Target: every page <= 50 ms p95, as the console's lists.
"""

from __future__ import annotations

import time

from sqlalchemy import text

from app.clock import utcnow
from bench import loaders
from bench.dashboard import JOBS, REPEAT, NeverHitBackend
from bench.harness import BenchDatabase, Figure, summary

NAME = "sorts"
DEPTH = 50_000  # rows before the deep page: page 1,000 at 50 a page


def _deep_cursor(app, key: str, descending: bool, depth: int) -> str | None:
    """The cursor of the row `depth` rows into the sort (the rows with a value: the segment a deep
    page of a big history is in)."""
    from app.extensions import db
    from app.services.read import execution_sorts

    sort = execution_sorts.SORTS[key]
    column = sort.column.key
    way = "DESC" if descending else "ASC"
    with app.app_context():
        row = db.session.execute(
            text(
                f"SELECT {column}, id FROM executions WHERE {column} IS NOT NULL"
                f" ORDER BY {column} {way}, id {way} OFFSET :depth LIMIT 1"
            ).columns(sort.column, db.metadata.tables["executions"].c.id),
            {"depth": depth},
        ).first()
        if row is None:
            return None
        return execution_sorts.encode(sort, execution_sorts.Position(execution_sorts.WITH_VALUE, row[0], row[1]))


def _paths(app, depth: int) -> list[str]:
    from app.services.read.execution_sorts import SORTS

    paths = ["/executions/"]  # the default order, to read the others against
    for key in SORTS:
        for direction in ("desc", "asc"):
            base = f"/executions/?sort={key}&dir={direction}"
            paths.append(base)
            cursor = _deep_cursor(app, key, direction == "desc", depth)
            if cursor is not None:
                paths.append(f"{base}&after={cursor}")
    return paths


def _time(app, paths: list[str], repeat: int) -> dict:
    found = {}
    client = app.test_client()
    for path in paths:
        response = client.get(path)
        if response.status_code != 200 or b'rel="next"' not in response.data:
            found[path] = {
                "error": f"HTTP {response.status_code}" + ("" if response.status_code != 200 else ", no next page")
            }
            continue
        client.get(path)
        samples = []
        for _ in range(repeat):
            started = time.perf_counter()
            client.get(path)
            samples.append((time.perf_counter() - started) * 1000)
        found[path] = summary(samples)
    return found


def _label(path: str) -> str:
    if "sort=" not in path:
        return "default order (newest first), first page"
    query = path.split("?", 1)[1]
    sort, direction = (part.split("=", 1)[1] for part in query.split("&")[:2])
    return f"{sort} {direction}, {'deep page' if 'after=' in path else 'first page'}"


def run(db: BenchDatabase, options) -> list[Figure]:
    loaded = loaders.history_for(db, options, JOBS, now=utcnow())
    app = db.app(WEBUI_AUTH="0")
    app.extensions["cronwell_cache"].backend = NeverHitBackend()
    depth = min(DEPTH, options.rows // 2)
    results = _time(app, _paths(app, depth), 2 if options.smoke else REPEAT)
    figures: list[Figure] = []
    for path, stats in results.items():
        if "error" in stats:
            figures.append(Figure(NAME, _label(path), None, "ms", note=stats["error"]))
            continue
        figure = Figure(NAME, f"{_label(path)} p95, no cache", stats["p95"], "ms", note=f"p50 {stats['p50']:.1f} ms")
        figures.append(figure.judge("<= 50"))
    figures[0].note += (
        f"; {options.rows:,} rows "
        + ("reused" if loaded["reused"] else f"loaded in {loaded['seconds']:.0f} s")
        + f"; deep pages {depth:,} rows in"
    )
    figures[0].extra = {"rows": options.rows, "depth": depth, "pages": results}
    return figures
