"""A batch's aggregate status from its items' statuses: a pure rule (no I/O, no Flask, no SQL)."""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum

from app.domain.states import TERMINAL
from app.domain.states import ExecutionStatus as S


class BatchStatus(str, Enum):
    RUNNING = "running"  # some item has not ended yet
    SUCCEEDED = "succeeded"  # every item succeeded
    FAILED = "failed"  # every item ended, none succeeded
    PARTIALLY_FAILED = "partially_failed"  # every item ended, some succeeded and some did not
    CANCELLED = "cancelled"  # an operator cancelled the batch (items already running finish)

    def __str__(self) -> str:
        return self.value


# Statuses with no item in them still appear in a batch's counts (as 0), in this order.
COUNTED = tuple(status.value for status in S)


def batch_status(counts: Mapping[str, int], *, cancelled: bool) -> BatchStatus:
    """The aggregate of a batch whose items are `counts` ({status: how many}).

    A cancelled batch is `cancelled` whatever its items did; otherwise `running` while any item
    has not reached a terminal status, then `succeeded` (all succeeded), `failed` (none did) or
    `partially_failed`. An item that was cancelled, missed or expired counts as not succeeded.
    """
    if cancelled:
        return BatchStatus.CANCELLED
    terminal = {status.value for status in TERMINAL}
    if any(count for status, count in counts.items() if status not in terminal):
        return BatchStatus.RUNNING
    succeeded = counts.get(S.SUCCEEDED.value, 0)
    total = sum(counts.values())
    if total == 0 or succeeded == total:
        return BatchStatus.SUCCEEDED
    return BatchStatus.FAILED if succeeded == 0 else BatchStatus.PARTIALLY_FAILED


def full_counts(counts: Mapping[str, int]) -> dict[str, int]:
    """Every execution status with its count (0 when absent), in the state machine's order."""
    return {status: int(counts.get(status, 0)) for status in COUNTED}
