"""Click parameters for the job fields, generated from the job definition (app/definitions/job.py).

`job add` takes the fields marked `cli="argument"` as arguments (NAME TASK {one_time|interval|cron})
and the other fields marked for the CLI as options; `job edit` takes all of them as options. The
schedule is `--schedule-value JSON` or the text of its type's input (`--every`, `--cron`,
`--run-at`: SCHEDULE_INPUTS). Whole numbers and choices are checked by Click (a usage error, exit
2); everything else by the job service (one `Error:` line, exit 1).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import click
from marshmallow import fields

from app.definitions import JobSchema
from app.scheduling import SCHEDULE_INPUTS, schedule_value_from_options

_DEFINITION = JobSchema()


def cli_fields() -> list[tuple[str, fields.Field]]:
    """The definition's fields the CLI takes, in declaration order."""
    return [(name, field) for name, field in _DEFINITION.load_fields.items() if field.metadata.get("cli")]


def _param_type(field: fields.Field) -> click.ParamType | None:
    if field.kind == "number" and not getattr(field, "optional", False):
        return click.INT  # an optional number (`--timeout-seconds none`) is text the schema reads
    if field.kind == "choice":
        return click.Choice(field.choices)
    if field.kind == "flag":
        return click.BOOL  # `--unique true|false`
    if field.metadata.get("cli_file"):
        return click.File("r")  # `--steps FILE`: its text is the value (JSON or YAML)
    return None


def _decorate(params: list[Callable]) -> Callable:
    def decorate(func: Callable) -> Callable:
        for param in reversed(params):
            func = param(func)
        return func

    return decorate


def job_arguments() -> Callable:
    """The positional arguments of `job add`: the fields marked `cli="argument"`."""
    return _decorate(
        [
            click.argument(
                name,
                type=_param_type(field),
                # A choice shows its values; other arguments keep Click's NAME, TASK.
                metavar=field.metadata.get("metavar") if field.kind == "choice" else None,
            )
            for name, field in cli_fields()
            if field.metadata["cli"] == "argument"
        ]
    )


def job_options(*, edit: bool) -> Callable:
    """The options of `job add` (edit=False) or `job edit` (edit=True, arguments become options)."""
    params = []
    for name, field in cli_fields():
        meta = field.metadata
        if field.kind == "schedule":
            params.append(click.option("--schedule-value", "schedule_value", metavar="JSON", help=meta["cli_help"]))
            for schedule_input in SCHEDULE_INPUTS.values():
                shown = meta["inputs"][schedule_input.option]
                params.append(
                    click.option(
                        schedule_input.flag, schedule_input.option, metavar=shown["metavar"], help=shown["cli_help"]
                    )
                )
            continue
        if meta["cli"] == "argument":
            if not edit:
                continue
            help_text = meta.get("cli_edit_help", meta["description"])
        else:
            help_text = meta.get("cli_help", meta["description"])
        metavar = meta.get("metavar", "N" if field.kind == "number" else None)
        params.append(
            click.option("--" + name.replace("_", "-"), name, type=_param_type(field), metavar=metavar, help=help_text)
        )
    return _decorate(params)


def _file_value(handle) -> Any:
    """A file option's content: JSON, or YAML (a superset) when it is not JSON."""
    text = handle.read()
    try:
        return json.loads(text)
    except ValueError:
        import yaml

        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise click.UsageError(f"{handle.name}: neither JSON nor YAML: {exc}") from None


def schedule_given(options: dict[str, Any]) -> bool:
    """Whether any schedule option (`--schedule-value` or a type's input) was given."""
    return any(options.get(key) is not None for key in ("schedule_value", *_input_options()))


def job_data(options: dict[str, Any], *, schedule_type: str | None) -> dict[str, Any]:
    """The job service's input from parsed options: each field given, and the schedule value
    (for `schedule_type`) when `schedule_type` is given (`job add`: always; `job edit`: when a
    schedule option was)."""
    data = {
        name: _file_value(options[name]) if field.metadata.get("cli_file") else options[name]
        for name, field in cli_fields()
        if field.kind != "schedule" and options.get(name) is not None
    }
    if schedule_type is not None:
        data["schedule"] = schedule_value_from_options(
            schedule_type,
            schedule_value=options.get("schedule_value"),
            **{option: options.get(option) for option in _input_options()},
        )
    return data


def _input_options() -> tuple[str, ...]:
    return tuple(schedule_input.option for schedule_input in SCHEDULE_INPUTS.values())
