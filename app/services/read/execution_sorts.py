"""The executions list in another order than newest first: by start, finish, status or job, both
ways, paged by a keyset on (sort column, id) instead of an offset.

The order is total: the sort column, then the id in the same direction, and the rows without a
value (not started, not finished, a one-off run's missing job) after all the others in either
direction, newest first among themselves. A page is read as at most two segments (rows with a
value, then rows without), each a range scan of its index: `(started_at, id)` (migration 0028), `(finished_at)`
(ties put in id order by an incremental sort), `(status, id)` and `(job_id, id)`. So the first page and the thousandth cost the
same. A position in that order is a `Position`, handed to the browser as an opaque cursor
(`encode`), checked when it comes back (`decode`: anything malformed is None, never an error).
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Select, tuple_

from app.clock import iso_z
from app.domain.states import ExecutionStatus, values
from app.extensions import db
from app.models import Execution
from app.models.ids import key_max
from app.services.read.row_counts import COUNT_CAP, capped_counts

WITH_VALUE, WITHOUT_VALUE = 0, 1


@dataclass(frozen=True)
class Sort:
    key: str  # the `sort` query parameter
    label: str
    column: Any
    kind: str  # "time", "status" or "id": how a cursor's value is written and checked
    nullable: bool


SORTS = {
    sort.key: sort
    for sort in (
        Sort("started", "Started", Execution.started_at, "time", True),
        Sort("finished", "Finished", Execution.finished_at, "time", True),
        Sort("status", "Status", Execution.status, "status", False),
        Sort("job", "Job", Execution.job_id, "id", True),
    )
}


@dataclass(frozen=True)
class Position:
    """A row's place in a sort: its segment, its sort value (None without one) and its id."""

    segment: int
    value: Any
    id: int


@dataclass(frozen=True)
class KeysetPage:
    items: list[Any]
    next_cursor: str | None  # the page after this one (None: this is the last)
    prev_cursor: str | None  # the page before (None: this is the first)
    total: int = 0  # the rows that match, counted up to COUNT_CAP
    capped: bool = False  # more than COUNT_CAP match


def encode(sort: Sort, position: Position) -> str:
    value = iso_z(position.value) if sort.kind == "time" and position.value is not None else position.value
    raw = json.dumps([position.segment, value, position.id], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode(sort: Sort, cursor: str | None) -> Position | None:
    """The position `cursor` names in `sort`, or None when it is missing or not one of ours."""
    if not cursor or len(cursor) > 200:
        return None
    try:
        segment, value, row_id = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (binascii.Error, ValueError, TypeError):
        return None
    if segment not in (WITH_VALUE, WITHOUT_VALUE) or type(row_id) is not int or not 0 < row_id <= key_max(Execution):
        return None
    if segment == WITHOUT_VALUE:
        return Position(segment, None, row_id) if value is None and sort.nullable else None
    checked = _checked_value(sort, value)
    return None if checked is None else Position(segment, checked, row_id)


def _checked_value(sort: Sort, value: Any) -> Any:
    if sort.kind == "status":
        return value if isinstance(value, str) and value in values(ExecutionStatus) else None
    if sort.kind == "id":
        return value if type(value) is int and 0 < value <= key_max(Execution) else None
    if not isinstance(value, str) or len(value) > 40:
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment.astimezone(UTC) if moment.tzinfo is not None else None


def keyset_page(
    query: Select,
    sort: Sort,
    *,
    descending: bool,
    after: Position | None = None,
    before: Position | None = None,
    limit: int,
) -> KeysetPage:
    """One page of `query` (rows of columns led by Execution's, as `console_lists.LIST_COLUMNS`)
    in `sort`: the first, the one after `after`, or the one before `before`; with how many rows
    match (counting stops past COUNT_CAP, as on every list)."""
    counted = capped_counts(db.session, {"rows": query.with_only_columns(Execution.id).order_by(None)})["rows"]
    total, capped = min(counted, COUNT_CAP), counted > COUNT_CAP
    if before is not None:
        rows = _walk(query, sort, descending=not descending, start=before, limit=limit + 1, backwards=True)
        if len(rows) > limit:  # there is a page before this one
            rows = rows[:limit][::-1]
            return KeysetPage(rows, _cursor(sort, rows[-1]), _cursor(sort, rows[0]), total, capped)
    # Near the beginning (fewer rows before `before` than a page) the first page is shown, full.
    start = after if before is None else None
    rows = _walk(query, sort, descending=descending, start=start, limit=limit + 1)
    more, rows = len(rows) > limit, rows[:limit]
    next_cursor = _cursor(sort, rows[-1]) if more and rows else None
    prev_cursor = _cursor(sort, rows[0]) if start is not None and rows else None
    return KeysetPage(rows, next_cursor, prev_cursor, total, capped)


def _cursor(sort: Sort, row: Any) -> str:
    value = getattr(row, sort.column.key)
    return encode(sort, Position(WITH_VALUE if value is not None else WITHOUT_VALUE, value, row.id))


def _walk(
    query: Select, sort: Sort, *, descending: bool, start: Position | None, limit: int, backwards: bool = False
) -> list[Any]:
    """Up to `limit` rows strictly past `start` in the order (reversed when walking backwards:
    the rows without a value come first, each segment in the other direction)."""
    segments = [WITH_VALUE, WITHOUT_VALUE] if sort.nullable else [WITH_VALUE]
    if backwards:
        segments.reverse()
    if start is not None:
        segments = segments[segments.index(start.segment) :]
    rows: list[Any] = []
    for segment in segments:
        if len(rows) >= limit:
            break
        bound = start if start is not None and start.segment == segment else None
        rows += db.session.execute(_segment(query, sort, segment, descending, bound, limit - len(rows))).all()
    return rows


def _segment(query: Select, sort: Sort, segment: int, descending: bool, bound: Position | None, limit: int) -> Select:
    column, row_id = sort.column, Execution.id
    if segment == WITHOUT_VALUE:
        query = query.where(column.is_(None))
        if bound is not None:
            query = query.where(row_id < bound.id if descending else row_id > bound.id)
        order = [row_id.desc() if descending else row_id.asc()]
    else:
        if sort.nullable:
            query = query.where(column.is_not(None))
        if bound is not None:
            # A row comparison: one range condition on the (column, id) index, both databases.
            key = tuple_(column, row_id)
            past = (bound.value, bound.id)
            query = query.where(key < past if descending else key > past)
        order = [column.desc(), row_id.desc()] if descending else [column.asc(), row_id.asc()]
    return query.order_by(None).order_by(*order).limit(limit)
