"""Page numbers from the query string, and one page of a service's query.

A page number that is missing, not a number, or out of range never fails: it is clamped to the
nearest page that exists. Lists count at most COUNT_CAP matching rows and say "more than"
beyond it, so pages past the cap are not offered: narrowing the list with filters is the way
further back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from flask import request
from sqlalchemy import Select

from app.extensions import db
from app.services.read.row_counts import COUNT_CAP, capped_counts

MAX_PAGE = 1_000_000


@dataclass(frozen=True)
class Page:
    items: list[Any]
    page: int
    per_page: int
    total: int
    capped: bool = False  # more than COUNT_CAP rows matched; `total` is the cap
    requested: int = 1  # the page asked for, before clamping

    @property
    def past_cap(self) -> bool:
        """A page beyond the counted rows was asked for (and the last counted page is shown)."""
        return self.capped and self.requested > self.page

    @property
    def pages(self) -> int:
        return max(1, -(-self.total // self.per_page))

    @property
    def has_prev(self) -> bool:
        return self.page > 1

    @property
    def has_next(self) -> bool:
        return self.page < self.pages

    @property
    def first_index(self) -> int:
        return 0 if not self.total else (self.page - 1) * self.per_page + 1

    @property
    def last_index(self) -> int:
        return min(self.total, self.page * self.per_page)


def page_number(arg: str = "page") -> int:
    """The requested page (1-based) from the query string; 1 when missing or malformed."""
    raw = request.args.get(arg, "1")
    try:
        value = int(raw)
    except (TypeError, ValueError):
        return 1
    return min(max(value, 1), MAX_PAGE)


def paginate(query: Select, *, page: int, per_page: int) -> Page:
    """Run one page of `query`: a service's ordered select of ORM objects of one entity, or of
    columns led by an entity's (then the page's items are rows)."""
    # Counting every matching row costs a scan of all of them (about 100 ms at a million
    # executions), so the count stops at COUNT_CAP + 1.
    total = capped_counts(db.session, {"rows": _keys_of(query).order_by(None)}, COUNT_CAP)["rows"]
    capped = total > COUNT_CAP
    total = min(total, COUNT_CAP)
    pages = max(1, -(-total // per_page))
    requested, page = page, min(max(page, 1), pages)
    # Deferred join: OFFSET must step over every row before the page. Stepping over primary keys
    # in an index (an index-only scan when an index covers the filter and the order) costs a few
    # milliseconds at 50,000 rows; stepping over whole rows, each joined to its eager-loaded
    # relationships, cost about 45 ms. So the page's keys are found first and only those rows
    # are loaded.
    offset = (page - 1) * per_page
    # The last counted page stops at the cap, as the pager says ("51-60 of more than 60").
    keys = _keys_of(query).limit(max(0, min(per_page, total - offset))).offset(offset)
    key = _primary_key(query)
    page_query = query.where(key.in_(keys.scalar_subquery()))
    if _selects_entity(query):
        items = list(db.session.scalars(page_query).unique())
    else:
        items = list(db.session.execute(page_query))
    return Page(items=items, page=page, per_page=per_page, total=total, capped=capped, requested=requested)


def _selects_entity(query: Select) -> bool:
    (first, *rest) = query.column_descriptions
    return not rest and first["expr"] is first["entity"]


def _primary_key(query: Select):
    entity = query.column_descriptions[0]["entity"]
    (key,) = entity.__mapper__.primary_key
    return key


def _keys_of(query: Select) -> Select:
    """`query` selecting only its entity's primary key (same filters, same order)."""
    return query.with_only_columns(_primary_key(query))
