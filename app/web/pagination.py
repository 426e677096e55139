"""Page numbers from the query string, and one page of a service's query.

A page number that is missing, not a number, or out of range never fails: it is clamped to the
nearest page that exists.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from flask import request
from sqlalchemy import Select, func, select

from app.extensions import db

MAX_PAGE = 1_000_000
# Counting every matching row costs a scan of all of them (about 100 ms at a million
# executions), so lists count at most this many and say "more than" beyond it.
COUNT_CAP = 50_000


@dataclass(frozen=True)
class Page:
    items: list[Any]
    page: int
    per_page: int
    total: int
    capped: bool = False  # more than COUNT_CAP rows matched; `total` is the cap

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
    """Run one page of `query` (a service's ordered select of ORM rows)."""
    counted = query.order_by(None).limit(COUNT_CAP + 1).subquery()
    total = db.session.scalar(select(func.count()).select_from(counted)) or 0
    capped = total > COUNT_CAP
    total = min(total, COUNT_CAP)
    pages = max(1, -(-total // per_page))
    page = min(max(page, 1), pages)
    items = list(db.session.scalars(query.limit(per_page).offset((page - 1) * per_page)).unique())
    return Page(items=items, page=page, per_page=per_page, total=total, capped=capped)
