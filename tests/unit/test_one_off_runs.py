"""The values a one-off run (no job) has in place of its job's columns agree with the job
definition's defaults, and render into SQL that reads the run's own columns."""

from __future__ import annotations

import pytest
from marshmallow import missing

from app.definitions.job import JobSchema
from app.domain.one_off import JOB_VALUES, OWN_COLUMNS, job_column_sql
from app.sql.rows import ClaimedExecution, claimed_sql_list


def test_a_one_off_run_has_the_job_definitions_defaults():
    declared = JobSchema().load_fields
    for column, value in JOB_VALUES.items():
        if column in ("enabled", "config", "on_success", "on_failure"):
            continue  # nothing disables a one-off run; its config is its own; it has no callbacks
        default = declared[column].load_default
        assert value == (None if default is missing else default), column


def test_every_job_column_the_worker_reads_has_a_one_off_value():
    from dataclasses import fields

    for f in fields(ClaimedExecution):
        if f.metadata["table"] == "jobs":
            assert f.metadata["column"] in JOB_VALUES or f.metadata["column"] in OWN_COLUMNS | {"name"}, f.name
    rendered = claimed_sql_list(execution_alias="x", job_alias="j")
    assert "CASE WHEN x.job_id IS NULL THEN x.task ELSE COALESCE(x.task, j.task) END AS task" in rendered
    assert (
        "CASE WHEN x.job_id IS NULL THEN x.timeout_seconds ELSE COALESCE(x.timeout_seconds, j.timeout_seconds) END"
        " AS timeout_seconds"
    ) in rendered
    assert "CASE WHEN x.job_id IS NULL THEN 'web' ELSE j.alert_mode END AS alert_mode" in rendered


def test_a_column_without_a_one_off_value_is_refused():
    with pytest.raises(KeyError):
        job_column_sql("schedule", execution_alias="e", job_alias="j")
