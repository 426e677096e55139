"""The job file document without a database: the three formats, every problem reported with its
path, TOML's missing null, and the generated JSON Schema."""

from __future__ import annotations

from datetime import UTC, datetime

import jsonschema
import pytest

from app.definitions.job_file import (
    DocumentError,
    document_schema,
    format_of,
    load_document,
    parse_document,
    render_document,
)
from app.tasks import load_catalog

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


@pytest.fixture(scope="module", autouse=True)
def catalog():
    load_catalog()  # the built-in tasks, which configs are checked against


def job(name: str, **fields) -> dict:
    return {
        "name": name,
        "task": "always_succeed",
        "schedule_type": "cron",
        "schedule": {"expression": "0 2 * * *"},
        **fields,
    }


def problems(document) -> list[tuple[str, str]]:
    with pytest.raises(DocumentError) as refused:
        load_document(document, now=NOW)
    return refused.value.problems


@pytest.mark.parametrize(
    ("filename", "fmt"),
    [("jobs.yaml", "yaml"), ("a/b.YML", "yaml"), ("jobs.toml", "toml"), ("jobs.json", "json")],
)
def test_the_extension_gives_the_format(filename, fmt):
    assert format_of(filename) == fmt


def test_an_unknown_extension_is_refused():
    with pytest.raises(DocumentError, match="unknown extension"):
        format_of("jobs.txt")


@pytest.mark.parametrize("fmt", ["yaml", "toml", "json"])
def test_each_format_round_trips_with_none_values(fmt):
    document = {
        "project": "acme/web",
        "jobs": [job("a", task="sleep_for_seconds", timeout_seconds=None, config={"seconds": 2})],
    }
    text = render_document(document, fmt)
    loaded = load_document(parse_document(text, fmt), now=NOW)
    assert loaded.project == "acme/web"
    assert loaded.jobs[0].values["timeout_seconds"] is None
    assert loaded.jobs[0].values["config"] == {"seconds": 2}


def test_unquoted_timestamps_read_as_text_in_yaml_and_toml():
    yaml_text = "jobs:\n  - {name: a, task: always_succeed, schedule_type: one_time, schedule: {run_at: 2030-01-01T12:00:00Z}}\n"
    toml_text = '[[jobs]]\nname = "a"\ntask = "always_succeed"\nschedule_type = "one_time"\nschedule = {run_at = 2030-01-01T12:00:00Z}\n'
    for text, fmt in ((yaml_text, "yaml"), (toml_text, "toml")):
        assert parse_document(text, fmt)["jobs"][0]["schedule"] == {"run_at": "2030-01-01T12:00:00Z"}


def test_a_null_inside_a_config_cannot_be_written_as_toml():
    with pytest.raises(DocumentError, match=r"jobs\[0\].config.x: is null"):
        render_document({"jobs": [job("a", config={"x": None})]}, "toml")


def test_every_problem_is_reported_with_its_path_and_job():
    found = dict(
        problems(
            {
                "project": "no-slash",
                "extra": 1,
                "queues": [{"name": "Bad Name"}],
                "jobs": [job("a"), job("b", schedule={"expression": "61 * * * *"}), "nope", job("A"), job("c", id=4)],
            }
        )
    )
    assert set(found) == {
        "project",
        "extra",
        "queues[0].name",
        "jobs[1].schedule",
        "jobs[2]",
        "jobs[3].name",
        "jobs[4].id",
    }
    assert found["jobs[1].schedule"].endswith("(job 'b')")
    assert "appears twice (also jobs[0])" in found["jobs[3].name"]
    assert found["jobs[4].id"].startswith("is set by the server")


def test_jobs_is_required_and_a_document_is_a_mapping():
    assert problems({"project": "a/b"}) == [("jobs", "is required (a list of jobs; [] for none)")]
    assert problems([1, 2])[0][0] == ""


def test_unreadable_text_is_one_problem():
    with pytest.raises(DocumentError, match="not valid JSON"):
        parse_document("{", "json")


def test_the_schema_is_valid_and_agrees_with_the_loader():
    schema = document_schema(["always_succeed"])
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    good = {"project": "acme/web", "jobs": [job("a", timeout_seconds="none", max_runs=None)]}
    assert list(validator.iter_errors(good)) == []
    load_document(good, now=NOW)
    for bad in ({"jobs": [job("a", max_attempts=0)]}, {"jobs": [job("a", task="nope")]}, {"jobs": [{"name": "x"}]}):
        assert list(validator.iter_errors(bad))
        with pytest.raises(DocumentError):
            load_document(bad, now=NOW)
