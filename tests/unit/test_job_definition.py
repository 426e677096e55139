"""The job definition (app/definitions/job.py) and the adapters derived from it: the model, the web
form and its template, the CLI options and the JSON shape must all agree with the one declaration,
and loading keeps the messages operators know."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import pytest
from flask import Flask
from marshmallow import missing, validate

from app.definitions import EDITABLE, REFERENCES, JobSchema, dump_job
from app.jobs.forms import JobForm, form_fields
from app.models import Job, Queue
from app.scheduling import SCHEDULE_INPUTS
from app.services.errors import ValidationFailed
from app.services.validation import clean_job_fields
from app.tasks import load_catalog
from cli.job import add_job, edit_job

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
DEFINITION = JobSchema()
TEMPLATE = Path(__file__).resolve().parents[2] / "templates" / "jobs" / "form.html"
# Columns the server sets, never an operator.
SERVER_COLUMNS = {
    "id",
    "next_run_at",
    "created_at",
    "updated_at",
    "runs_created",
    "disabled_reason",
    "project_id",
    "managed_by",
    "rate_starts",
}


@pytest.fixture(scope="module", autouse=True)
def catalog():
    load_catalog()


def valid(**fields) -> dict:
    return {
        "name": "nightly",
        "task": "always_succeed",
        "schedule_type": "interval",
        "schedule": {"every": "5m"},
        **fields,
    }


def refusal(data: dict, current: dict | None = None) -> dict[str, str]:
    with pytest.raises(ValidationFailed) as refused:
        clean_job_fields(data, now=NOW, current=current)
    return refused.value.errors


# --- the model ----------------------------------------------------------------------------------


def test_every_job_column_is_declared_and_every_declared_field_is_a_column():
    columns = {column.name for column in Job.__table__.columns}

    def as_columns(names) -> set[str]:
        return {REFERENCES.get(name, name) for name in names}

    assert as_columns(DEFINITION.fields) == columns
    assert as_columns(DEFINITION.dump_fields) == columns
    assert as_columns(DEFINITION.load_fields) == columns - SERVER_COLUMNS


def test_the_model_defaults_are_the_definition_defaults():
    for name, field in DEFINITION.load_fields.items():
        if name in REFERENCES:
            continue  # a name in the definition, a key in the table: no column default to compare
        column = Job.__table__.columns[name]
        if field.load_default is missing:
            assert column.default is None, name
            continue
        default = field.load_default() if callable(field.load_default) else field.load_default
        model_default = column.default.arg
        assert (model_default({}) if callable(model_default) else model_default) == default, name
        if column.server_default is not None:
            server = column.server_default.arg
            expected = str(default).lower() if isinstance(default, bool) else str(default)
            assert str(getattr(server, "text", server)) == expected, name


# --- loading ------------------------------------------------------------------------------------


def test_a_create_gets_every_default_from_the_definition():
    cleaned = clean_job_fields(valid(), now=NOW)
    for name, field in DEFINITION.load_fields.items():
        if field.load_default is not missing and name != "schedule":
            default = field.load_default() if callable(field.load_default) else field.load_default
            assert cleaned[name] == default, name
    # an interval without start_at is anchored one interval after creation
    assert cleaned["schedule"] == {"every": "5m", "start_at": "2026-06-01T12:05:00Z"}


def test_an_edit_returns_only_what_was_given():
    current = clean_job_fields(valid(), now=NOW)
    assert clean_job_fields({"priority": "4", "name": None, "bogus": 1}, now=NOW, current=current) == {"priority": 4}
    assert clean_job_fields({"enabled": False}, now=NOW, current=current) == {"enabled": False}


def test_loading_what_was_loaded_gives_the_same_values():
    cleaned = clean_job_fields(valid(timezone="Europe/Paris", config='{"message": "hi"}'), now=NOW)
    assert clean_job_fields(cleaned, now=datetime(2030, 1, 1, tzinfo=UTC)) == cleaned


@pytest.mark.parametrize(
    "fields, errors",
    [
        ({"name": ""}, {"name": "is required"}),
        ({"name": "   "}, {"name": "must not be empty"}),
        ({"name": "x" * 201}, {"name": "must be at most 200 characters (got 201)"}),
        ({"name": "a\u200bb"}, {"name": "must not contain control or invisible characters"}),
        ({"description": "a\x00b"}, {"description": "must not contain NUL characters"}),
        ({"max_attempts": "0"}, {"max_attempts": "must be between 1 and 100, got 0"}),
        ({"priority": 10**30}, {"priority": f"must be between -1000 and 1000, got {10**30}"}),
        ({"timeout_seconds": "abc"}, {"timeout_seconds": "must be a whole number, got 'abc'"}),
        ({"timeout_seconds": True}, {"timeout_seconds": "must be a whole number"}),
        ({"overlap_policy": "maybe"}, {"overlap_policy": "must be one of skip, queue, allow, got 'maybe'"}),
        ({"queue": "Bad Queue"}, {"queue": "must be 1-64 characters: lower-case letters, digits, '_', '-', '.'"}),
        ({"enabled": "yes"}, {"enabled": "must be true or false"}),
        ({"config": "[1]"}, {"config": "config must be a JSON object, got list"}),
        (
            {"task": "sleep_for_seconds"},
            {"config": "invalid config for task 'sleep_for_seconds': 'seconds' is required"},
        ),
        ({"timezone": "Mars/Base"}, {"timezone": "unknown timezone 'Mars/Base'"}),
        ({"schedule": {}}, {"schedule": "interval schedule needs 'every'"}),
    ],
)
def test_create_refusals_keep_their_messages(fields, errors):
    assert refusal(valid(**fields)) == errors


def test_every_field_error_is_reported_at_once_keyed_by_its_field():
    errors = refusal(valid(name="", queue="?", max_attempts="many", timezone="Nowhere/Else"))
    assert set(errors) == {"name", "timezone", "max_attempts", "queue"}


def test_edit_refusals_check_the_given_fields_against_the_stored_ones():
    current = clean_job_fields(valid(config={"message": "hi"}), now=NOW)
    assert refusal({"schedule_type": "cron"}, current) == {
        "schedule": "changing the schedule type needs a new schedule value"
    }
    assert refusal({"task": "sleep_for_seconds"}, current) == {
        "config": "invalid config for task 'sleep_for_seconds': 'seconds' is required"
    }
    assert refusal({"name": ""}, current) == {"name": "must not be empty"}


# --- the JSON shape -----------------------------------------------------------------------------


def test_dump_keeps_the_section_3_names_in_order_and_utc_z_instants():
    cleaned = clean_job_fields(valid(), now=NOW)
    job = Job(
        id=7,
        queue_row=Queue(id=1, name=cleaned.pop("queue")),
        **cleaned,
        next_run_at=datetime(2026, 6, 1, 12, 5, tzinfo=UTC),
        created_at=NOW,
        updated_at=NOW,
    )
    document = dump_job(job)
    assert list(document) == list(DEFINITION.dump_fields)
    # today's names keep their order (a new field may sit anywhere among them)
    today = [
        "id",
        "name",
        "description",
        "task",
        "config",
        "schedule_type",
        "schedule",
        "timezone",
        "enabled",
        "next_run_at",
        "overlap_policy",
        "misfire_policy",
        "misfire_grace_seconds",
        "max_attempts",
        "retry_backoff_seconds",
        "timeout_seconds",
        "alert_mode",
        "retention_count",
        "retention_days",
        "queue",
        "priority",
        "created_at",
        "updated_at",
    ]
    assert [name for name in document if name in today] == today
    assert document["next_run_at"] == "2026-06-01T12:05:00Z" and document["created_at"] == "2026-06-01T12:00:00Z"
    assert document["id"] == 7 and document["enabled"] is True and document["schedule"]["every"] == "5m"


def test_limits_are_validators_an_openapi_generator_can_read():
    kinds = {name: [type(v) for v in field.validators] for name, field in DEFINITION.load_fields.items()}
    for name, field in DEFINITION.load_fields.items():
        if field.kind == "number":
            assert validate.Range in kinds[name], name
        if field.kind == "choice":
            assert validate.OneOf in kinds[name], name
        assert field.metadata.get("description"), f"{name} has no help text"
    assert any(issubclass(kind, validate.Length) for kind in kinds["name"])
    assert validate.Regexp in kinds["queue"]


# --- the web form -------------------------------------------------------------------------------


def test_the_form_has_one_control_per_form_field_and_one_input_per_schedule_type():
    app = Flask(__name__)
    app.config.update(SECRET_KEY="test", WTF_CSRF_ENABLED=False)
    with app.test_request_context():
        form = JobForm()
    expected = set()
    for name, field in form_fields():
        if field.kind == "schedule":
            expected |= {schedule_input.option for schedule_input in SCHEDULE_INPUTS.values()}
            continue
        expected.add(name)
        control = form[name]
        assert control.label.text == field.metadata["label"], name
        if field.kind == "choice":
            assert [choice.value for choice in control.iter_choices()] == list(field.choices), name
        if field.kind in ("choice", "number", "text") and field.load_default is not missing:
            assert str(control.data) == str(field.metadata.get("form_default", field.load_default)), name
    assert {control.name for control in form} == expected
    assert expected >= {"name", "task", "config", "schedule_type", "every", "cron", "run_at", "timezone", "enabled"}


def test_the_live_preview_reads_the_schedule_type_its_inputs_and_the_zone():
    # The preview fragment includes every `.schedule-input` control (hx-include in the template).
    app = Flask(__name__)
    app.config.update(SECRET_KEY="test", WTF_CSRF_ENABLED=False)
    with app.test_request_context():
        form = JobForm()
        previewed = {control.name for control in form if 'class="schedule-input"' in str(control())}
    inputs = {schedule_input.option for schedule_input in SCHEDULE_INPUTS.values()}
    # timeout_seconds too: schedule lint warns when runs fire closer together than the timeout.
    assert previewed == {"schedule_type", "timezone", "timeout_seconds", *inputs}


def test_the_form_template_shows_every_form_field():
    shown = set(re.findall(r"\bfield\(form\.(\w+)", TEMPLATE.read_text()))
    for name, field in form_fields():
        if field.kind != "schedule":  # the schedule inputs are shown by a loop over SCHEDULE_INPUTS
            assert name in shown, f"templates/jobs/form.html has no control for {name}"


def test_every_schedule_input_is_described_for_the_form_and_the_cli():
    inputs = DEFINITION.fields["schedule"].metadata["inputs"]
    assert set(inputs) == {schedule_input.option for schedule_input in SCHEDULE_INPUTS.values()}
    for shown in inputs.values():
        assert {"label", "metavar", "cli_help", "form_help", "placeholder"} <= set(shown)


# --- the CLI ------------------------------------------------------------------------------------


def _options(command) -> set[str]:
    return {flag for param in command.params for flag in getattr(param, "opts", ()) if flag.startswith("--")}


def test_job_add_and_edit_take_every_cli_field_and_keep_their_option_names():
    legacy = {
        "--schedule-value",
        "--run-at",
        "--every",
        "--cron",
        "--timezone",
        "--description",
        "--config",
        "--overlap-policy",
        "--misfire-policy",
        "--misfire-grace-seconds",
        "--max-attempts",
        "--retry-backoff-seconds",
        "--timeout-seconds",
        "--alert-mode",
        "--retention-count",
        "--retention-days",
        "--queue",
        "--priority",
        "--cli-secret",
        "--json",
    }
    arguments = [param.name for param in add_job.params if not getattr(param, "opts", [""])[0].startswith("--")]
    assert arguments == ["name", "task", "schedule_type"]
    assert _options(add_job) >= legacy | {"--disabled"}
    assert _options(edit_job) >= legacy | {"--name", "--task", "--schedule-type", "--enabled", "--disabled"}
    for name, field in DEFINITION.load_fields.items():
        flag = "--" + name.replace("_", "-")
        if field.metadata.get("cli") is True and field.kind != "schedule":
            assert flag in _options(add_job) and flag in _options(edit_job), name
        if field.metadata.get("cli") == "argument":
            assert flag in _options(edit_job), name


def test_editable_is_every_loadable_field_but_enabled():
    assert set(EDITABLE) == set(DEFINITION.load_fields) - {"enabled"}
