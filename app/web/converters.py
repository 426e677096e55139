"""URL converters bounded to the column they address.

`<id:job_id>` matches a whole number from 1 to the largest value an `Integer` primary key holds
(2**31 - 1 on PostgreSQL). Anything else (zero, a sign, another script's digits, a number beyond
the column) does not match the rule, so the visitor gets the normal 404 page: an id no row can
have is a missing object, and it never reaches the database, where PostgreSQL would refuse it as
"integer out of range" (a 500).

`<queue:queue_name>` matches only what a queue name may be (the queues use case's rule), so a
name that no queue can have is the 404 page before any lookup, and a NUL or a 5,000-character
name never reaches PostgreSQL.
"""

from __future__ import annotations

from flask import Flask
from werkzeug.routing import BaseConverter, ValidationError

from app.models import Job
from app.models.ids import id_in_range, key_max
from app.services.use_cases.queues import NAME_PATTERN


class IdConverter(BaseConverter):
    """A primary key of an `Integer` column: jobs, executions and alerts."""

    regex = "[0-9]+"
    largest = key_max(Job)  # from the model: widening the key widens the route

    def to_python(self, value: str) -> int:
        number = id_in_range(value, self.largest)
        if number is None:
            raise ValidationError()
        return number

    def to_url(self, value) -> str:
        return str(int(value))


class QueueNameConverter(BaseConverter):
    """A queue's name: what `flask queue add` accepts, and nothing else."""

    regex = NAME_PATTERN.pattern.removeprefix("^").removesuffix("$")


def register_converters(app: Flask) -> None:
    """Make `<id:...>` and `<queue:...>` available to the blueprints' rules (before they are registered)."""
    app.url_map.converters["id"] = IdConverter
    app.url_map.converters["queue"] = QueueNameConverter
