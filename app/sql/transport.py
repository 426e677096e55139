"""A statement as text, run on whatever connection the caller holds (docs/adr/0012-worker-parent-on-dbapi.md).

The worker parent is to run its statements on a bare DB-API connection (psycopg, sqlite3) so it
need not import SQLAlchemy; every other process runs the same statements on the DB-API
connection under its SQLAlchemy `Connection`, inside the caller's transaction. So a statement
is written once, in the named style (`:name`), and this module does what SQLAlchemy's column
types did for it, and nothing else:

- an aware datetime goes to PostgreSQL as it is and to SQLite as naive UTC text in the format
  `UTCDateTime` stores ("YYYY-MM-DD HH:MM:SS.ffffff", so old and new rows compare and sort
  alike); a naive one is refused, as `UTCDateTime` refuses it;
- a JSON document goes to PostgreSQL as `Jsonb` and to SQLite as `json.dumps` text;
- a list (ids, names) goes to PostgreSQL as an array (`= ANY(CAST(:ids AS bigint[]))`) and to
  SQLite as a JSON array (`IN (SELECT value FROM json_each(:ids))`): one parameter either way,
  so the text is constant however long the list, and psycopg can prepare it;
- result columns named as datetimes come back aware UTC.

This module imports neither SQLAlchemy nor psycopg: a SQLAlchemy connection is recognised by its
`exec_driver_sql`, a psycopg one by its module, and psycopg's `Jsonb` is imported on first use.
Transactions stay the caller's: nothing here begins, commits or rolls back. In the PostgreSQL
text a literal `%` is written as it is (it is doubled here) and a cast is `CAST(x AS t)`, never
`x::t`, which would read as a parameter.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cached_property
from types import SimpleNamespace
from typing import Any

POSTGRESQL = "postgresql"
SQLITE = "sqlite"
_PARAMETER = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")

# A SQLAlchemy `Connection` or a bare DB-API one (psycopg, sqlite3). The three share no declared
# type this module could name without importing them, so they are told apart by what they have
# (`dialect_of`, `execute`): to the type checker, any object.
DBConnection = Any


@dataclass(frozen=True)
class Statement:
    """One statement: its text (the SQLite text, when it differs, beside it) and which
    parameters and result columns need converting."""

    text: str
    sqlite_text: str | None = None
    datetimes: tuple[str, ...] = ()  # parameters holding aware datetimes
    documents: tuple[str, ...] = ()  # parameters holding JSON documents
    lists: tuple[str, ...] = ()  # parameters holding lists (of ids, of names)
    returns_datetimes: tuple[int, ...] = ()  # result columns (by position) that are datetimes
    returns_documents: tuple[int, ...] = ()  # result columns (by position) that are JSON documents

    @cached_property
    def _postgresql_text(self) -> str:
        return _PARAMETER.sub(r"%(\1)s", self.text.replace("%", "%%"))

    def text_for(self, dialect: str, *, with_parameters: bool = True) -> str:
        if dialect == POSTGRESQL:
            # psycopg reads `%` as a placeholder only when parameters are passed
            return self._postgresql_text if with_parameters else self.text
        return self.sqlite_text if self.sqlite_text is not None else self.text


def with_lists(text: str, lists: Mapping[str, str], *, sqlite_text: str | None = None, **options: Any) -> Statement:
    """A statement whose `{name}` places test membership in the list parameter `name`, of the SQL
    type `lists[name]`: `= ANY(CAST(:name AS type[]))` on PostgreSQL, `IN (SELECT value FROM
    json_each(:name))` on SQLite (`sqlite_text`, when the rest differs too)."""
    postgresql = {name: f"= ANY(CAST(:{name} AS {sql_type}[]))" for name, sql_type in lists.items()}
    sqlite = {name: f"IN (SELECT value FROM json_each(:{name}))" for name in lists}
    return Statement(
        text.format(**postgresql),
        sqlite_text=(sqlite_text if sqlite_text is not None else text).format(**sqlite),
        lists=tuple(lists),
        **options,
    )


@dataclass
class Result:
    rows: list[tuple[Any, ...]] = field(default_factory=list)
    rowcount: int = -1
    columns: list[str] = field(default_factory=list)

    def scalar(self) -> Any:
        return self.rows[0][0] if self.rows else None

    def records(self) -> list[SimpleNamespace]:
        """The rows with their columns as attributes (`row.job_id`)."""
        return [SimpleNamespace(**dict(zip(self.columns, row, strict=True))) for row in self.rows]


def dialect_of(conn: DBConnection) -> str:
    """ "postgresql" or "sqlite", for a SQLAlchemy connection or a bare DB-API one."""
    if hasattr(conn, "exec_driver_sql"):
        return str(conn.dialect.name)
    module = type(conn).__module__
    if module.startswith("psycopg"):
        return POSTGRESQL
    if module.startswith("sqlite3"):
        return SQLITE
    raise TypeError(f"not a database connection this store knows: {type(conn).__name__}")


def execute(conn: DBConnection, statement: Statement, params: Mapping[str, Any] | None = None) -> Result:
    """Run `statement` on `conn` (a SQLAlchemy Connection or a psycopg/sqlite3 connection) in
    the caller's transaction; rows converted as the statement says."""
    dialect = dialect_of(conn)
    bound = _bind(statement, dict(params), dialect) if params else None
    if hasattr(conn, "exec_driver_sql"):
        # SQLAlchemy hands the driver an empty parameter set even when there is none, so psycopg
        # always reads `%` as a placeholder there.
        result = conn.exec_driver_sql(statement.text_for(dialect), bound)
        rows = [tuple(row) for row in result] if result.returns_rows else []
        columns = list(result.keys()) if result.returns_rows else []
        rowcount = result.rowcount
    else:
        cursor = conn.cursor()
        try:
            if bound is None:
                cursor.execute(statement.text_for(dialect, with_parameters=False))
            else:
                cursor.execute(statement.text_for(dialect), bound)
            described = cursor.description is not None
            rows = [tuple(row) for row in cursor.fetchall()] if described else []
            columns = [column[0] for column in cursor.description] if described else []
            rowcount = cursor.rowcount
        finally:
            cursor.close()
    if statement.returns_datetimes or statement.returns_documents:
        rows = [_convert_row(statement, row, dialect) for row in rows]
    return Result(rows, rowcount, columns)


def _bind(statement: Statement, params: dict[str, Any], dialect: str) -> dict[str, Any]:
    for name in statement.datetimes:
        params[name] = bind_datetime(params[name], dialect)
    for name in statement.documents:
        params[name] = _bind_document(params[name], dialect)
    for name in statement.lists:
        values = list(params[name])
        params[name] = values if dialect == POSTGRESQL else json.dumps(values)
    return params


def bind_datetime(value: datetime | None, dialect: str) -> Any:
    if value is None:
        return None
    if value.tzinfo is None:
        raise ValueError(f"naive datetime {value!r} given where an aware UTC datetime is required")
    value = value.astimezone(UTC)
    if dialect == POSTGRESQL:
        return value
    return (
        f"{value.year:04d}-{value.month:02d}-{value.day:02d} "
        f"{value.hour:02d}:{value.minute:02d}:{value.second:02d}.{value.microsecond:06d}"
    )


def read_datetime(value: datetime | str | None) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


def _bind_document(value: Any, dialect: str) -> Any:
    if value is None:
        return None
    if dialect == POSTGRESQL:
        from psycopg.types.json import Jsonb

        return Jsonb(value)
    return json.dumps(value)


def _convert_row(statement: Statement, row: Sequence[Any], dialect: str) -> tuple[Any, ...]:
    values = list(row)
    for position in statement.returns_datetimes:
        values[position] = read_datetime(values[position])
    if dialect == SQLITE:
        for position in statement.returns_documents:
            if isinstance(values[position], str):
                values[position] = json.loads(values[position])
    return tuple(values)
