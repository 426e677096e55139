"""The job-default settings (config.py) and how the job definition takes them."""

from datetime import UTC, datetime

import pytest

from app.definitions.job import defaults_from, load_job
from app.tasks import load_catalog
from config import load_settings

NOW = datetime(2026, 6, 1, 12, tzinfo=UTC)


@pytest.fixture(scope="module", autouse=True)
def catalog():
    load_catalog()


def test_the_defaults_when_nothing_is_set():
    settings = load_settings({})
    assert settings["DEFAULT_JOB_TIMEOUT_SECONDS"] == 30
    assert (settings["DEFAULT_SUCCESS_TTL_SECONDS"], settings["DEFAULT_FAILURE_TTL_SECONDS"]) == (-1, -1)
    assert settings["DEFAULT_QUEUED_TTL_SECONDS"] is None
    assert settings["EXECUTIONS_PER_PAGE"] == 50


def test_none_and_numbers_are_read():
    settings = load_settings(
        {
            "DEFAULT_JOB_TIMEOUT_SECONDS": "none",
            "DEFAULT_SUCCESS_TTL_SECONDS": "0",
            "DEFAULT_FAILURE_TTL_SECONDS": "3600",
            "DEFAULT_QUEUED_TTL_SECONDS": "120",
            "EXECUTIONS_PER_PAGE": "25",
        }
    )
    assert settings["DEFAULT_JOB_TIMEOUT_SECONDS"] is None
    assert (settings["DEFAULT_SUCCESS_TTL_SECONDS"], settings["DEFAULT_FAILURE_TTL_SECONDS"]) == (0, 3600)
    assert (settings["DEFAULT_QUEUED_TTL_SECONDS"], settings["EXECUTIONS_PER_PAGE"]) == (120, 25)


@pytest.mark.parametrize(
    "env, message",
    [
        ({"DEFAULT_JOB_TIMEOUT_SECONDS": "0"}, "DEFAULT_JOB_TIMEOUT_SECONDS must be >= 1, got 0"),
        ({"DEFAULT_SUCCESS_TTL_SECONDS": "-2"}, "DEFAULT_SUCCESS_TTL_SECONDS must be >= -1, got -2"),
        ({"DEFAULT_QUEUED_TTL_SECONDS": "soon"}, "DEFAULT_QUEUED_TTL_SECONDS must be an integer, got 'soon'"),
    ],
)
def test_bad_settings_are_refused(env, message):
    with pytest.raises(ValueError, match=message):
        load_settings(env)


def test_a_create_takes_its_defaults_from_the_settings():
    settings = load_settings({"DEFAULT_JOB_TIMEOUT_SECONDS": "none", "DEFAULT_QUEUED_TTL_SECONDS": "90"})
    data = {"name": "x", "task": "always_succeed", "schedule_type": "interval", "schedule": {"every": "1m"}}
    cleaned = load_job(data, now=NOW, defaults=defaults_from(settings))
    assert (cleaned["timeout_seconds"], cleaned["queued_ttl_seconds"], cleaned["success_ttl_seconds"]) == (None, 90, -1)
    given = load_job({**data, "timeout_seconds": "5"}, now=NOW, defaults=defaults_from(settings))
    assert given["timeout_seconds"] == 5


def test_json_null_clears_a_field_that_may_be_none_and_means_not_given_elsewhere():
    data = {"name": "x", "task": "always_succeed", "schedule_type": "interval", "schedule": {"every": "1m"}}
    assert load_job({**data, "timeout_seconds": None}, now=NOW)["timeout_seconds"] is None
    current = load_job({**data, "max_runs": 3}, now=NOW)
    assert load_job({"max_runs": None, "priority": None}, now=NOW, current=current) == {"max_runs": None}
