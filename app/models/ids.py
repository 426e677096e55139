"""Which values a primary key can hold, so an id is checked where it is parsed (URL, CLI, form).

A row's id is a positive integer no larger than its column type allows. PostgreSQL refuses a bound
parameter beyond the column's type ("integer out of range") and SQLite's driver cannot bind one
beyond 64 bits, so an id outside the range must be turned into "does not exist" before any query:
no row can have it. The bounds come from the models, so widening a key widens every parser.
"""

from __future__ import annotations

import re

from sqlalchemy import BigInteger, Integer, SmallInteger

# Subclasses before Integer: BigInteger and SmallInteger are Integers too.
_TYPE_MAX = ((BigInteger, 2**63 - 1), (SmallInteger, 2**15 - 1), (Integer, 2**31 - 1))
_DIGITS = re.compile(r"[0-9]+")  # ASCII only: "²" and "١٢" are digits to str.isdigit() and int()


def key_max(model) -> int:
    """The largest id the primary key of `model` (one integer column) can hold."""
    (column,) = model.__table__.primary_key.columns
    for kind, largest in _TYPE_MAX:
        if isinstance(column.type, kind):
            return largest
    raise TypeError(f"{model.__name__}'s primary key is not an integer column")


def is_whole_number(text: str) -> bool:
    """`text` is one or more ASCII digits (no sign, no spaces, no other script's digits)."""
    return _DIGITS.fullmatch(text) is not None


def id_in_range(text: str, largest: int) -> int | None:
    """The id `text` names when it is a whole number from 1 to `largest`, else None.

    The length is checked before `int()`, which refuses strings of more than 4,300 digits.
    """
    if not is_whole_number(text):
        return None
    significant = text.lstrip("0")
    if not significant or len(significant) > len(str(largest)):
        return None
    value = int(significant)
    return value if value <= largest else None
