"""Batches as operators see them: aggregate status and counts per status, read from the items.

Nothing about a batch's progress is stored: the counts are one GROUP BY over its items
(`Store.batch_counts`, on the partial index ix_executions_batch_id), and the status is the pure
rule of app/domain/batches.py over them, so the page, the CLI and the callback's context agree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import defer

from app.clock import iso_z
from app.domain.batches import BatchStatus, batch_status, full_counts
from app.extensions import db
from app.models import Batch, Execution
from app.store import store_for


@dataclass(frozen=True)
class BatchView:
    batch: Batch
    status: BatchStatus
    counts: dict[str, int]  # every execution status, 0 when none
    callback: Execution | None  # the on-complete execution, once created

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def finished(self) -> int:
        return self.total - sum(self.counts.get(s, 0) for s in ("pending", "claimed", "running", "retry_scheduled"))


def views(batches: list[Batch]) -> list[BatchView]:
    """The views of `batches` (one count query and one callback query for all of them)."""
    if not batches:
        return []
    ids = [batch.id for batch in batches]
    conn = db.session.connection()
    counts = store_for(conn).batch_counts(conn, ids)
    callbacks = {
        execution.batch_id: execution
        for execution in db.session.scalars(
            select(Execution).where(Execution.batch_id.in_(ids), Execution.trigger == "callback")
        )
    }
    result = []
    for batch in batches:
        tally = full_counts(counts.get(batch.id, {}))
        status = batch_status(tally, cancelled=batch.cancelled_at is not None)
        result.append(BatchView(batch, status, tally, callbacks.get(batch.id)))
    return result


def view(batch: Batch) -> BatchView:
    return views([batch])[0]


def items_query(batch_id: int):
    """A batch's items, in submission order (for the detail page and `batch inspect`)."""
    return select(Execution).where(Execution.batch_id == batch_id, Execution.trigger == "batch").order_by(Execution.id)


def items(batch_id: int) -> list[Execution]:
    """A batch's items in submission order, without their output (lists do not show it)."""
    return list(db.session.scalars(items_query(batch_id).options(defer(Execution.output), defer(Execution.error))))


def to_dict(item: BatchView) -> dict[str, Any]:
    """The JSON shape of a batch (`flask batch ... --json`, later the API)."""
    batch = item.batch
    return {
        "id": batch.id,
        "job_id": batch.job_id,
        "job_name": batch.job.name if batch.job is not None else None,
        "status": item.status.value,
        "items": batch.item_count,
        "counts": item.counts,
        "on_complete": batch.on_complete,
        "on_complete_config": batch.on_complete_config or {},
        "callback_execution_id": item.callback.id if item.callback is not None else None,
        "created_by": batch.created_by,
        "created_at": iso_z(batch.created_at),
        "cancelled_at": iso_z(batch.cancelled_at),
        "cancelled_by": batch.cancelled_by,
        "completed_at": iso_z(batch.completed_at),
    }
