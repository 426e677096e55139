"""Queues as a worker sees them: names to ids when it starts, and the slots of a concurrency
limit given back when its runs leave `running` (ADR 0008)."""

from __future__ import annotations

from collections.abc import Sequence

from app.sql.transport import DBConnection, Statement, execute, with_lists

QUEUE_IDS = with_lists("SELECT name, id FROM queues WHERE name {names}", {"names": "text"})
QUEUE_NAMES = Statement("SELECT name FROM queues ORDER BY name")

# Each limited queue's slots_taken stays the number of its executions holding a slot
# (`holds_slot`, cleared next), so releasing twice gives nothing back.
RELEASE_SLOTS = with_lists(
    """
    UPDATE queues AS q SET slots_taken = GREATEST(0, q.slots_taken - r.n)
    FROM (SELECT queue_id, count(*) AS n FROM executions WHERE holds_slot AND id {ids} GROUP BY queue_id) AS r
    WHERE q.id = r.queue_id
    """,
    {"ids": "bigint"},
    sqlite_text="""
    UPDATE queues SET slots_taken = MAX(0, slots_taken - (
        SELECT count(*) FROM executions AS e WHERE e.queue_id = queues.id AND e.holds_slot AND e.id {ids}))
    WHERE id IN (SELECT queue_id FROM executions WHERE holds_slot AND id {ids})
    """,
)
# `holds_slot = false`: SQLite 3.23 and later read true and false as 1 and 0.
CLEAR_HOLDS_SLOT = with_lists(
    "UPDATE executions SET holds_slot = false WHERE holds_slot AND id {ids}", {"ids": "bigint"}
)


def queue_ids(conn: DBConnection, names: Sequence[str]) -> dict[str, int]:
    """{name: id} of the named queues that exist."""
    return dict(execute(conn, QUEUE_IDS, {"names": list(names)}).rows)


def queue_names(conn: DBConnection) -> list[str]:
    return [name for (name,) in execute(conn, QUEUE_NAMES).rows]


def release_slots(conn: DBConnection, execution_ids: Sequence[int]) -> None:
    """Give back the queue slots of executions that just left `running`."""
    if not execution_ids:
        return
    ids = sorted(execution_ids)
    execute(conn, RELEASE_SLOTS, {"ids": ids})
    execute(conn, CLEAR_HOLDS_SLOT, {"ids": ids})
