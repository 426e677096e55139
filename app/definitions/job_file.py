"""A job file: the jobs (and queues) of one project as a document kept in version control.

    project: acme/web            # ORG/PROJECT (or `--project`)
    queues:                      # optional: declared queues are created or brought in line
      - {name: reports, concurrency_limit: 2, paused: false}
    jobs:                        # the job definition's field names; `name` is the key
      - {name: nightly, task: generate_report, schedule_type: cron, schedule: {expression: "0 2 * * *"}}

The same document is read from YAML, TOML or JSON (by the file's extension). A job's fields are
loaded by the job definition (`load_job`) as a create: a field the file leaves out takes its
default, so removing a line from the file resets that field. `load_document` checks every entry
and reports every error with its path (`jobs[3].schedule`, counted from 0) before anything is
compared or written. `document_schema` is the JSON Schema of the document, generated from the job
definition, for editors.

Rule for this package: no Flask, no database session.
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

from marshmallow import RAISE, Schema, ValidationError, fields, validate

from app.clock import iso_z
from app.definitions.fields import NONE_WORDS, RateLimitText
from app.definitions.job import DESCRIPTION_MAX, QUEUE_PATTERN, JobSchema, field_messages

FORMATS = {".yaml": "yaml", ".yml": "yaml", ".toml": "toml", ".json": "json"}
FORMAT_NAMES = ("yaml", "toml", "json")
PROJECT_PATTERN = r"^[^/\s]+/[^/\s]+$"
DOCUMENT_KEYS = ("project", "queues", "jobs")
# Job fields a file may hold: what an operator sets (the server sets the rest: id, next_run_at...).
JOB_FIELDS: tuple[str, ...] = tuple(name for name, f in JobSchema().fields.items() if not f.dump_only)
SERVER_FIELDS = frozenset(name for name, f in JobSchema().fields.items() if f.dump_only)
ERRORS_SHOWN = 20  # a refused document names at most this many problems


class DocumentError(Exception):
    """A document that cannot be applied: every problem as (path, message)."""

    def __init__(self, problems: list[tuple[str, str]]) -> None:
        self.problems = list(problems)
        shown = self.problems[:ERRORS_SHOWN]
        more = len(self.problems) - len(shown)
        text = "; ".join(f"{path}: {message}" if path else message for path, message in shown)
        super().__init__(text + (f"; and {more} more" if more > 0 else ""))


class QueueDeclarationSchema(Schema):
    """A queue a file declares. Only the fields given are compared and set."""

    class Meta:
        unknown = RAISE

    name = fields.String(
        required=True,
        validate=validate.Regexp(
            QUEUE_PATTERN, error="must be 1-64 characters: lower-case letters, digits, '_', '-', '.'"
        ),
        metadata={"description": "The queue's name in the project."},
    )
    description = fields.String(
        validate=validate.Length(max=DESCRIPTION_MAX), metadata={"description": "What the queue is for."}
    )
    concurrency_limit = fields.Integer(
        allow_none=True,
        validate=validate.Range(1, 100_000),
        metadata={"description": "Running executions across all workers; null: no limit."},
    )
    rate_limit = RateLimitText(
        metadata={"description": "At most N starts per period across all workers (N/second|minute|hour); null: none."}
    )
    priority = fields.Integer(
        validate=validate.Range(-1000, 1000),
        metadata={"description": "The priority of its jobs that name none of their own (lower runs first)."},
    )
    paused = fields.Boolean(metadata={"description": "Whether workers leave its runs waiting."})


@dataclass(frozen=True)
class JobEntry:
    """One job of a document: where it is, what the file says and what that loads to."""

    path: str  # jobs[3]
    name: str
    given: dict[str, Any]  # the fields as written (what "left out" is judged by)
    values: dict[str, Any]  # loaded by the job definition: every field, defaults included


@dataclass(frozen=True)
class QueueEntry:
    path: str
    name: str
    values: dict[str, Any]  # only the fields given


@dataclass
class JobFile:
    project: str | None
    jobs: list[JobEntry] = field(default_factory=list)
    queues: list[QueueEntry] = field(default_factory=list)


# --- reading and writing the three formats --------------------------------------------------


def format_of(filename: str) -> str:
    """The format a file name's extension says (yaml, toml or json)."""
    lowered = filename.lower()
    for extension, name in FORMATS.items():
        if lowered.endswith(extension):
            return name
    raise DocumentError([("", f"{filename}: unknown extension; a job file ends in .yaml, .yml, .toml or .json")])


def parse_document(text: str, fmt: str) -> Any:
    """The document a YAML, TOML or JSON text holds. Dates and times the format itself parsed
    (YAML and TOML read unquoted timestamps) come back as ISO 8601 text, as JSON gives them."""
    try:
        if fmt == "json":
            document = json.loads(text)
        elif fmt == "toml":
            document = tomllib.loads(text)
        else:
            import yaml

            document = yaml.safe_load(text)
    except Exception as exc:  # each parser has its own error classes; all mean "not readable"
        raise DocumentError([("", f"not valid {fmt.upper()}: {' '.join(str(exc).split())}")]) from None
    return _plain(document)


def render_document(document: dict[str, Any], fmt: str) -> str:
    """The document as YAML, TOML or JSON text. TOML has no null: a field whose value is none is
    written as the word "none", which the job definition reads back as none."""
    if fmt == "json":
        return json.dumps(document, indent=2, ensure_ascii=False) + "\n"
    if fmt == "toml":
        import tomli_w

        return str(tomli_w.dumps(_without_nulls(document)))
    import yaml

    return str(yaml.safe_dump(document, sort_keys=False, allow_unicode=True, default_flow_style=False, width=120))


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    if isinstance(value, datetime):
        return iso_z(value) if value.tzinfo is not None else value.isoformat()
    if isinstance(value, date):
        return value.isoformat()
    return value


def _without_nulls(document: dict[str, Any]) -> dict[str, Any]:
    """A job's top-level none becomes the word "none"; a queue's none field is left out (a
    declaration states only what it gives). A null anywhere else (inside a config) has no TOML."""
    ready = dict(document)
    ready["queues"] = [{k: v for k, v in q.items() if v is not None} for q in document.get("queues") or []]
    ready["jobs"] = [{k: "none" if v is None else v for k, v in job.items()} for job in document.get("jobs") or []]
    if not ready["queues"]:
        ready.pop("queues")
    _refuse_nulls(ready, "")
    return ready


def _refuse_nulls(value: Any, path: str) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            _refuse_nulls(item, f"{path}.{key}" if path else key)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _refuse_nulls(item, f"{path}[{index}]")
    elif value is None:
        raise DocumentError([(path, "is null, which TOML cannot hold; export as yaml or json")])


# --- loading ---------------------------------------------------------------------------------


def load_document(document: Any, *, now: datetime, defaults: dict[str, Any] | None = None) -> JobFile:
    """Check a parsed document: its shape, every queue and every job (by the job definition, as a
    create). Raises DocumentError naming every problem; returns the loaded entries otherwise."""
    if not isinstance(document, dict):
        raise DocumentError([("", "a job file is a mapping with `project`, `jobs` and optional `queues`")])
    problems: list[tuple[str, str]] = [
        (key, "unknown key; a job file holds project, queues and jobs") for key in document if key not in DOCUMENT_KEYS
    ]
    project = document.get("project")
    if project is not None and not (isinstance(project, str) and _is_project(project)):
        problems.append(("project", "must be ORG/PROJECT, e.g. acme/web"))
    result = JobFile(project=project if isinstance(project, str) else None)
    queues = document.get("queues") or []
    if not isinstance(queues, list):
        problems.append(("queues", "must be a list of queues"))
        queues = []
    jobs = document.get("jobs")
    if jobs is None:
        problems.append(("jobs", "is required (a list of jobs; [] for none)"))
        jobs = []
    elif not isinstance(jobs, list):
        problems.append(("jobs", "must be a list of jobs"))
        jobs = []
    seen: dict[str, str] = {}
    for index, item in enumerate(queues):
        path = f"queues[{index}]"
        try:
            values = QueueDeclarationSchema().load(item if isinstance(item, dict) else {"": item})
        except ValidationError as exc:
            problems.extend((f"{path}.{key}", message) for key, message in _messages(exc).items())
            continue
        if values["name"] in seen:
            problems.append((f"{path}.name", f"{values['name']!r} is declared twice (also {seen[values['name']]})"))
            continue
        seen[values["name"]] = path
        result.queues.append(QueueEntry(path=path, name=values["name"], values=values))
    names: dict[str, str] = {}
    # One schema for every entry: building one copies ~45 fields, which a thousand-job file notices.
    loader = JobSchema(now=now, defaults=defaults)
    for index, item in enumerate(jobs):
        path = f"jobs[{index}]"
        if not isinstance(item, dict):
            problems.append((path, "must be a mapping of job fields"))
            continue
        entry_problems = [(f"{path}.{key}", _stray_key_message(key)) for key in item if key not in JOB_FIELDS]
        given = {key: value for key, value in item.items() if key in JOB_FIELDS}
        try:
            values = loader.load(given)
        except ValidationError as exc:
            entry_problems.extend((f"{path}.{key}", message) for key, message in field_messages(exc).items())
            values = None
        name = given.get("name")
        if isinstance(name, str) and name.strip():
            label = f" (job {name.strip()!r})"
            entry_problems = [(p, m + label) for p, m in entry_problems]
            key = name.strip().lower()
            if key in names:
                entry_problems.append((f"{path}.name", f"{name.strip()!r} appears twice (also {names[key]})"))
            names.setdefault(key, path)
        problems.extend(entry_problems)
        if values is not None and not entry_problems:
            result.jobs.append(JobEntry(path=path, name=values["name"], given=given, values=values))
    if problems:
        raise DocumentError(problems)
    return result


def _is_project(text: str) -> bool:
    import re

    return re.match(PROJECT_PATTERN, text) is not None


def _stray_key_message(key: str) -> str:
    if key in SERVER_FIELDS:
        return "is set by the server; leave it out of a job file"
    return "unknown field; see `flask job schema` for a job's fields"


def _messages(error: ValidationError) -> dict[str, str]:
    messages = field_messages(error)
    return {("value" if key == "" else key): message for key, message in messages.items()}


def is_none_word(value: Any) -> bool:
    """Whether a value means none (null, or the words TOML files use for it)."""
    return value is None or (isinstance(value, str) and value.strip().lower() in NONE_WORDS)


# --- the JSON Schema -------------------------------------------------------------------------


def document_schema(task_names: list[str] | None = None) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a job file, from the job definition's fields. With
    `task_names`, the task fields list the catalog's tasks."""
    from apispec import APISpec
    from apispec.ext.marshmallow import MarshmallowPlugin

    plugin = MarshmallowPlugin()
    APISpec("Cronwell job file", "1", "3.1.0", plugins=[plugin])
    job = plugin.converter.schema2jsonschema(JobSchema())
    properties = {name: job["properties"][name] for name in JOB_FIELDS}
    for name, prop in properties.items():
        kinds = prop.get("type")
        if isinstance(kinds, list) and "null" in kinds:
            # TOML has no null: the word "none" says it there (and anywhere else).
            description = prop.pop("description", None)
            properties[name] = {"anyOf": [prop, {"const": "none"}]}
            if description:
                properties[name]["description"] = description
    if task_names:
        properties["task"]["enum"] = list(task_names)
        for name in ("on_success", "on_failure"):
            properties[name] = {
                "anyOf": [{"type": "null"}, {"enum": [*task_names, "", "none"]}],
                "description": properties[name].get("description", ""),
            }
    required = [name for name in JOB_FIELDS if JobSchema().fields[name].required]
    queue = plugin.converter.schema2jsonschema(QueueDeclarationSchema())
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "Cronwell job file",
        "description": "The jobs (and queues) of one project; apply with `flask job apply FILE`.",
        "type": "object",
        "additionalProperties": False,
        "required": ["jobs"],
        "properties": {
            "project": {
                "type": "string",
                "pattern": PROJECT_PATTERN,
                "description": "The project, ORG/PROJECT (or give `--project`).",
            },
            "queues": {
                "type": "array",
                "items": {**queue, "required": ["name"], "additionalProperties": False},
                "description": "Queues created if missing and given the declared fields.",
            },
            "jobs": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": required,
                    "additionalProperties": False,
                    "properties": properties,
                },
                "description": "The project's jobs; `name` is the key. A field left out takes its default.",
            },
        },
    }
