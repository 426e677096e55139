"""One retention batch and one attempt insert, foreign keys against migration 0016's triggers, on
the same rows (ADR 0011, docs/performance.md "10M executions").

    python -m bench.retention_batch postgresql://postgres@127.0.0.1:5432/cronwell_bench_10m

Needs a history with Attempts on its oldest finished rows (what `python -m bench retention` leaves)
at schema 0015 (the five foreign keys). Each measurement runs in a transaction that is rolled
back; the "trigger" side first runs 0016's upgrade inside it (creating the triggers and dropping
the constraints), the "none" side only drops the constraints (no integrity at all: the floor that
dropping a partition would approach). So every side deletes exactly the same rows of the same
database, in rotating order. Prints wall and server-backend CPU per 5,000-row DELETE, and per
attempt INSERT of 1 and of 4 rows (the claim's turn inserts one per claimed run).
"""

from __future__ import annotations

import importlib.util
import statistics
import sys
import time

import psycopg

from bench.harness import PROJECT_ROOT
from bench.retention import _process_cpu

MIGRATION = PROJECT_ROOT / "migrations" / "versions" / "0016_execution_references_by_statement.py"
ATTEMPT = (
    "INSERT INTO attempts (execution_id, number, worker_id, status, started_at, output, error)"
    " SELECT id, %s, 'bench', 'running', now(), '', '' FROM executions WHERE id = ANY(%s)"
)


def _migration_sql() -> tuple[list[str], list[str]]:
    """0016's upgrade as statements: (create the triggers, drop the constraints)."""
    spec = importlib.util.spec_from_file_location("migration_0016", MIGRATION)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    actions = "\n    ".join(m._on_delete(table, column, action) for table, column, action, _ in m.REFERENCES)
    create = [m.DELETED.replace("{actions}", actions)]
    create += [m.CHECK.format(column=column) for column in sorted({c for _, c, _, _ in m.REFERENCES})]
    create += [m.CHECK_TRIGGERS.format(table=t, column=c, name=n) for t, c, _, n in m.REFERENCES]
    return create, [f"ALTER TABLE {table} DROP CONSTRAINT {name}" for table, _, _, name in m.REFERENCES]


def _timed(conn: psycopg.Connection, pid: int, work) -> tuple[float, float]:
    cpu, wall = _process_cpu(pid), time.perf_counter()
    work()
    return time.perf_counter() - wall, _process_cpu(pid) - cpu


def main(url: str, pairs: int = 12, batch: int = 5000, inserts: int = 2000) -> None:
    create, drop = _migration_sql()
    setup = {"fk": [], "trigger": create + drop, "none": drop}
    conn = psycopg.connect(url)
    pid = conn.info.backend_pid
    ids = [
        row[0]
        for row in conn.execute(
            "SELECT e.id FROM executions AS e WHERE e.status IN ('succeeded', 'failed', 'timed_out')"
            " AND EXISTS (SELECT 1 FROM attempts AS a WHERE a.execution_id = e.id) ORDER BY e.id LIMIT %s",
            (batch * pairs,),
        )
    ]
    top = conn.execute("SELECT max(id) FROM executions").fetchone()[0]
    conn.rollback()
    deletes: dict[str, list] = {side: [] for side in setup}
    attempts: dict[tuple[str, int], list] = {(side, k): [] for side in ("fk", "trigger") for k in (1, 4)}
    sides = list(setup)
    for n in range(pairs):
        rows = ids[n * batch : (n + 1) * batch]
        for side in sides[n % 3 :] + sides[: n % 3]:
            for sql in setup[side]:
                conn.execute(sql)
            deletes[side].append(
                _timed(conn, pid, lambda: conn.execute("DELETE FROM executions WHERE id = ANY(%s)", (rows,)))
            )
            conn.rollback()
            if side == "none":
                continue
            for sql in setup[side]:
                conn.execute(sql)
            for k in (1, 4):
                targets = list(range(top - 400_000, top - 400_000 + inserts * k))

                def insert(k=k, targets=targets):
                    for i in range(inserts):
                        conn.execute(ATTEMPT, (76 + k, targets[i * k : (i + 1) * k]), prepare=True)

                wall, cpu = _timed(conn, pid, insert)
                attempts[(side, k)].append((wall / inserts, cpu / inserts))
            conn.rollback()
    conn.close()
    for side, found in deletes.items():
        print(
            f"DELETE of {batch} rows, {side}: wall ms median {1000 * statistics.median(w for w, _ in found):.1f},"
            f" backend CPU ms median {1000 * statistics.median(c for _, c in found):.1f}"
        )
    ratios = [t[0] / f[0] for f, t in zip(deletes["fk"], deletes["trigger"], strict=True)]
    print(
        f"trigger / fk wall, per pair: {' '.join(f'{r:.2f}' for r in ratios)}; median {statistics.median(ratios):.3f}"
    )
    for k in (1, 4):
        fk, tr = attempts[("fk", k)], attempts[("trigger", k)]
        print(
            f"attempt INSERT of {k}: backend CPU us median fk {1e6 * statistics.median(c for _, c in fk):.0f},"
            f" trigger {1e6 * statistics.median(c for _, c in tr):.0f}; wall us fk"
            f" {1e6 * statistics.median(w for w, _ in fk):.0f}, trigger {1e6 * statistics.median(w for w, _ in tr):.0f}"
        )


if __name__ == "__main__":
    main(*sys.argv[1:2])
