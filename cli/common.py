"""What every operator command shares: the CLI secret, error handling, JSON and table output,
and how times are shown.

Commands are thin adapters: parse options, call a service with `now` and actor "cli", print.
A handled failure (ServiceError, ScheduleError) becomes one `Error: ...` line on stderr and exit
code 1 (Click's ClickException), after rolling back so nothing is written. Click itself exits 2
on usage errors.
"""

from __future__ import annotations

import functools
import hmac
import json
import math
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

import click
from flask import current_app
from sqlalchemy.exc import SQLAlchemyError

from app.models import Alert, Execution, Job
from app.models.ids import id_in_range, is_whole_number, key_max
from app.services.errors import ServiceError

ACTOR = "cli"


def _one_line(message: str) -> str:
    return " ".join(part.strip() for part in str(message).splitlines() if part.strip()) or "failed"


def _rollback() -> None:
    from app.extensions import db

    try:
        db.session.rollback()
    except SQLAlchemyError:
        pass


def _handled_errors() -> tuple[type[Exception], ...]:
    # Evaluated only when an exception reaches handle_errors: app.scheduling brings croniter and
    # dateutil, which `worker run` (whose module imports this one) never uses (its parent's memory is held under 51 MB).
    from app.scheduling import ScheduleError
    from app.secret_box import SecretKeyProblem

    return (ServiceError, ScheduleError, SecretKeyProblem)


def handle_errors(func: Callable) -> Callable:
    """Turn handled failures into one `Error: ...` line on stderr and exit code 1, writing nothing."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except _handled_errors() as exc:
            _rollback()
            raise click.ClickException(_one_line(str(exc))) from None
        except SQLAlchemyError as exc:
            _rollback()
            detail = getattr(exc, "orig", None) or exc
            if isinstance(detail, _handled_errors()):  # raised by a column type while binding a value
                raise click.ClickException(_one_line(str(detail))) from None
            raise click.ClickException(_one_line(f"database error: {detail}")) from None

    return wrapper


class IdType(click.ParamType):
    """The id of a `model` row: a whole number in ASCII digits (anything else is a usage error, exit 2).

    A number no row can have (zero, negative, beyond the key column's type) is a missing object:
    `Error: <noun> N does not exist` and exit 1, the line the services print for any unknown id.
    It is raised here, so the value never reaches the database (PostgreSQL refuses an out-of-range
    parameter as "integer out of range", SQLite's driver with an OverflowError).
    """

    def __init__(self, noun: str, model) -> None:
        self.noun = noun
        self.name = f"{noun} id"
        self.largest = key_max(model)

    def get_metavar(self, param, ctx=None) -> str:
        return f"{self.noun.upper()}_ID"

    def convert(self, value, param, ctx) -> int:
        if isinstance(value, int) and not isinstance(value, bool):
            text = str(value)
        else:
            text = str(value).strip()
        digits = text[1:] if text[:1] in ("+", "-") else text
        if not is_whole_number(digits):
            article = "an" if self.noun[0] in "aeiou" else "a"
            self.fail(f"{_clip(str(value))!r} is not a valid integer ({article} {self.noun} id)", param, ctx)
        found = None if text.startswith("-") else id_in_range(digits, self.largest)
        if found is None:
            raise click.ClickException(f"{self.noun} {_clip(text)} does not exist")
        return found


def _clip(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else f"{text[:20]}... ({len(text)} characters)"


class FiniteFloatRange(click.FloatRange):
    """`click.FloatRange` that also refuses nan, which compares false with both bounds and so passes them."""

    def convert(self, value, param, ctx) -> float:
        number = super().convert(value, param, ctx)
        if math.isnan(number):
            self.fail(f"{value!r} is not a number", param, ctx)
        return number


JOB_ID = IdType("job", Job)
EXECUTION_ID = IdType("execution", Execution)
ALERT_ID = IdType("alert", Alert)


def check_cli_secret(given: str | None) -> None:
    """Refuse a mutation unless --cli-secret matches SCHEDULER_CLI_SECRET (when that is set)."""
    expected = current_app.config.get("SCHEDULER_CLI_SECRET")
    if not expected:
        return
    if given is None:
        raise click.ClickException("this command needs --cli-secret (SCHEDULER_CLI_SECRET is set)")
    # Constant time, so the comparison leaks nothing about how much of a guess was right.
    if not hmac.compare_digest(given.encode("utf-8"), expected.encode("utf-8")):
        raise click.ClickException("wrong --cli-secret")


def mutating(func: Callable) -> Callable:
    """Add --cli-secret to a command that writes, and check it before anything else runs."""

    @click.option(
        "--cli-secret",
        "cli_secret",
        metavar="S",
        default=None,
        help="Shared secret; required when SCHEDULER_CLI_SECRET is set.",
    )
    @functools.wraps(func)
    def wrapper(*args, cli_secret: str | None, **kwargs):
        check_cli_secret(cli_secret)
        return func(*args, **kwargs)

    return wrapper


json_option = click.option(
    "--json", "as_json", is_flag=True, help="Print exactly one JSON document on stdout instead of text."
)


def emit_json(document: Any) -> None:
    click.echo(json.dumps(document, indent=2, ensure_ascii=False))


def warn(message: str) -> None:
    click.echo(f"Warning: {message}", err=True)


def print_table(headers: Sequence[str], rows: Iterable[Sequence[Any]], *, empty: str = "(none)") -> None:
    """Left-aligned columns sized to their widest cell; `-` for empty cells."""
    cells = [[_cell(value) for value in row] for row in rows]
    if not cells:
        click.echo(empty)
        return
    widths = [max(len(h), *(len(row[i]) for row in cells)) for i, h in enumerate(headers)]
    for row in [list(headers), *cells]:
        click.echo("  ".join(value.ljust(width) for value, width in zip(row, widths)).rstrip())


def print_fields(pairs: Iterable[tuple[str, Any]]) -> None:
    """`key: value` lines with the values aligned."""
    pairs = [(key, _cell(value)) for key, value in pairs]
    width = max(len(key) for key, _ in pairs) + 1
    for key, value in pairs:
        click.echo(f"{(key + ':').ljust(width)} {value}")


def _cell(value: Any) -> str:
    if value is None or value == "":
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def fmt_utc(value: datetime | None) -> str | None:
    """`2026-06-01 12:00:00Z`, seconds precision, for human output."""
    if value is None:
        return None
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def tz_option(func: Callable) -> Callable:
    """`--tz ZONE`, the one definition every list that prints times shares: print the table's
    times in that IANA zone (ISO 8601 with its offset; `fmt_instant`); `--json` stays UTC. An
    unknown zone is one line on stderr and exit 1, before the command does anything."""
    return click.option(
        "--tz",
        "tz",
        metavar="ZONE",
        default=None,
        callback=lambda _context, _param, value: check_tz(value),
        help="Show times in this IANA zone (ISO 8601 with its offset) instead of UTC; --json stays UTC.",
    )(func)


def tz_header(label: str, tz: str | None) -> str:
    """A time column's header, naming the zone when --tz gave one."""
    return f"{label} ({tz})" if tz else label


def check_tz(tz: str | None) -> str | None:
    """The zone given to --tz, or a one-line error naming it."""
    if tz is None:
        return None
    from app.scheduling.timezones import resolve_timezone

    try:
        resolve_timezone(tz)
    except Exception:
        raise click.ClickException(
            f"--tz: unknown time zone {tz[:80]!r}; give an IANA name such as Asia/Tokyo"
        ) from None
    return tz


def fmt_instant(value: datetime | None, tz: str | None) -> str | None:
    """An instant for a table: `fmt_utc` without a zone, else ISO 8601 in `tz` with its offset
    (`2026-06-01T21:00:05+09:00`)."""
    if value is None or tz is None:
        return fmt_utc(value)
    from zoneinfo import ZoneInfo

    return value.astimezone(ZoneInfo(tz)).isoformat(timespec="seconds")


def fmt_local(value: datetime | None, zone_name: str) -> str | None:
    """The instant on the wall clock of `zone_name`, with the zone abbreviation."""
    from app.scheduling.timezones import resolve_timezone  # app.scheduling: see _handled_errors

    if value is None:
        return None
    local = value.astimezone(resolve_timezone(zone_name))
    return f"{local:%Y-%m-%d %H:%M:%S} {local.tzname()}"


def fmt_both(value: datetime | None, zone_name: str) -> str | None:
    """UTC, plus the local wall-clock time when the zone is not UTC."""
    from app.scheduling.timezones import resolve_timezone  # app.scheduling: see _handled_errors

    if value is None:
        return None
    if resolve_timezone(zone_name).key == "UTC":
        return fmt_utc(value)
    return f"{fmt_utc(value)} ({fmt_local(value, zone_name)})"


def fmt_age(seconds: float | None) -> str | None:
    """A short duration: `45s`, `3m05s`, `2h04m`, `3d02h`."""
    if seconds is None:
        return None
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    if seconds < 86400:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    return f"{seconds // 86400}d{seconds % 86400 // 3600:02d}h"


def fmt_duration(seconds: float | None) -> str | None:
    """How long a run took: `0.42s` under a minute, then as fmt_age."""
    if seconds is None:
        return None
    return f"{seconds:.2f}s" if seconds < 60 else fmt_age(seconds)


def parse_after(text: str | None, zone_name: str, now: datetime) -> datetime:
    """--after as an aware UTC instant; a value without an offset is local to `zone_name`."""
    from app.scheduling.timezones import parse_instant, resolve_timezone  # see _handled_errors

    if text is None:
        return now
    return parse_instant(text, resolve_timezone(zone_name), "--after")
