"""Status sets of app.domain.states as SQL: for `column.in_(...)` and for text statements."""

from __future__ import annotations

from collections.abc import Iterable

from app.domain.states import AttemptStatus, ExecutionStatus
from app.domain.states import ExecutionStatus as S


def status_values(statuses: Iterable[ExecutionStatus]) -> list[str]:
    """A status set from app.domain.states as sorted values, for `column.in_(...)`."""
    return sorted(S(status).value for status in statuses)


def sql_statuses(statuses: Iterable[ExecutionStatus]) -> str:
    """A status set rendered as the body of an SQL IN-list (each value single-quoted) for text
    statements. The values come from the enum, never from input, so quoting them is safe."""
    values = status_values(statuses)
    if not values:
        raise ValueError("an empty status set makes a guard that matches nothing")
    return ", ".join(f"'{value}'" for value in values)


def sql_status(status: ExecutionStatus | AttemptStatus) -> str:
    """One status (a SET target) as an SQL literal."""
    return f"'{status.value}'"
