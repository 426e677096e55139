"""Row counts that stay cheap on big tables: exact up to a cap, an estimate beyond it.

Counting every row with a given status costs a scan of all of them: about 100 ms for the
succeeded rows of a million executions, on every dashboard refresh. Counting stops at
COUNT_CAP + 1 instead (an index-only scan of at most that many entries, a few milliseconds), so
every count up to the cap is exact. Only a count that reaches the cap asks PostgreSQL's planner
how many rows it expects (the statistics of the last ANALYZE, scaled to the table's current
size), and is labelled as an estimate wherever it is shown, so nobody reads an estimate as an
exact figure. SQLite has no planner estimates, so its counts stay exact.

The pure rules (`settle`, `settle_total`, `round_estimate`) come first; the SQL after them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Select, func, select, text
from sqlalchemy.orm import Session, scoped_session

COUNT_CAP = 50_000

EXACT = "exact"
ESTIMATE = "estimate"  # the planner's figure, rounded: shown as "about N"
MORE_THAN = "more_than"  # past the cap, and the planner expects fewer: shown as "more than N"


@dataclass(frozen=True)
class RowCount:
    value: int
    kind: str = EXACT


def round_estimate(rows: float) -> int:
    """An estimate to three significant figures: its last digits would only look precise."""
    rows = max(0, int(round(rows)))
    digits = len(str(rows))
    if digits <= 3:
        return rows
    unit = 10 ** (digits - 3)
    return int(round(rows / unit)) * unit


def settle(counted: int, estimate: float | None, cap: int = COUNT_CAP) -> RowCount:
    """What to show for one count that stopped at cap + 1, given the planner's estimate."""
    if counted <= cap:
        return RowCount(counted)
    if estimate is None or estimate <= cap:
        # Statistics from before the rows arrived: all we know for sure is "more than the cap".
        return RowCount(cap, MORE_THAN)
    return RowCount(round_estimate(estimate), ESTIMATE)


def settle_total(counts: Iterable[RowCount]) -> RowCount:
    """The sum of several counts, as inexact as the least exact of them."""
    counts = list(counts)
    value = sum(c.value for c in counts)
    kinds = {c.kind for c in counts}
    if MORE_THAN in kinds:
        return RowCount(value, MORE_THAN)
    if ESTIMATE in kinds:
        return RowCount(round_estimate(value), ESTIMATE)
    return RowCount(value)


def capped_counts(
    session: Session | scoped_session[Any], queries: Mapping[str, Select], cap: int = COUNT_CAP
) -> dict[str, int]:
    """How many rows each query returns, counting no further than cap + 1; one round trip."""
    if not queries:
        return {}
    names = list(queries)
    columns = [
        select(func.count()).select_from(queries[name].limit(cap + 1).subquery()).scalar_subquery().label(f"c{i}")
        for i, name in enumerate(names)
    ]
    row = session.execute(select(*columns)).one()
    return {name: int(row[i]) for i, name in enumerate(names)}


def planner_rows(session: Session | scoped_session[Any], query: Select) -> float | None:
    """The number of rows PostgreSQL's planner expects `query` to return; None elsewhere."""
    bind = session.get_bind()
    if bind.dialect.name != "postgresql":
        return None
    # The values bound here are code-defined (statuses), never user input, so they are inlined:
    # EXPLAIN cannot take bind parameters.
    sql = str(query.compile(dialect=bind.dialect, compile_kwargs={"literal_binds": True}))
    plan = session.execute(text("EXPLAIN (FORMAT JSON) " + sql)).scalar()
    if isinstance(plan, str):
        plan = json.loads(plan)
    return float(plan[0]["Plan"]["Plan Rows"])
