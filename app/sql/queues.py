"""Queues as a worker sees them: names to ids when it starts, and the slots of a concurrency
limit given back when its runs leave `running` (ADR 0008)."""

from __future__ import annotations

from collections.abc import Sequence

from app.sql.transport import Statement, execute

QUEUE_IDS = Statement(
    "SELECT name, id FROM queues WHERE name = ANY(CAST(:names AS text[]))",
    sqlite_text="SELECT name, id FROM queues WHERE name IN (SELECT value FROM json_each(:names))",
    lists=("names",),
)
QUEUE_NAMES = Statement("SELECT name FROM queues ORDER BY name")

# Each limited queue's slots_taken stays the number of its executions holding a slot
# (`holds_slot`, cleared next), so releasing twice gives nothing back.
RELEASE_SLOTS = Statement(
    """
    UPDATE queues AS q SET slots_taken = GREATEST(0, q.slots_taken - r.n)
    FROM (SELECT queue_id, count(*) AS n FROM executions
          WHERE holds_slot AND id = ANY(CAST(:ids AS bigint[])) GROUP BY queue_id) AS r
    WHERE q.id = r.queue_id
    """,
    sqlite_text="""
    UPDATE queues SET slots_taken = MAX(0, slots_taken - (
        SELECT count(*) FROM executions AS e
        WHERE e.queue_id = queues.id AND e.holds_slot AND e.id IN (SELECT value FROM json_each(:ids))))
    WHERE id IN (SELECT queue_id FROM executions WHERE holds_slot AND id IN (SELECT value FROM json_each(:ids)))
    """,
    lists=("ids",),
)
CLEAR_HOLDS_SLOT = Statement(
    "UPDATE executions SET holds_slot = false WHERE holds_slot AND id = ANY(CAST(:ids AS bigint[]))",
    sqlite_text="UPDATE executions SET holds_slot = 0 WHERE holds_slot AND id IN (SELECT value FROM json_each(:ids))",
    lists=("ids",),
)


def queue_ids(conn, names: Sequence[str]) -> dict[str, int]:
    """{name: id} of the named queues that exist."""
    return dict(execute(conn, QUEUE_IDS, {"names": list(names)}).rows)


def queue_names(conn) -> list[str]:
    return [name for (name,) in execute(conn, QUEUE_NAMES).rows]


def release_slots(conn, execution_ids: Sequence[int]) -> None:
    """Give back the queue slots of executions that just left `running`."""
    if not execution_ids:
        return
    ids = sorted(execution_ids)
    execute(conn, RELEASE_SLOTS, {"ids": ids})
    execute(conn, CLEAR_HOLDS_SLOT, {"ids": ids})
