"""Fuzzing job creation through the service, on SQLite and PostgreSQL: any combination of fields
either creates a job whose schedule works or is refused with ValidationFailed / ServiceError
(which the CLI prints as one line and the web shows inline). No other exception may escape (a
database error would be a 500 or a traceback), and a refusal stores nothing: no job, no event.

The path traversal and SSRF attempts go through the whole stack here (service, CLI, web form):
jobs for `write_file_artifact` and `http_health_check_local` with a hostile target are refused.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from sqlalchemy import func, select

from app.extensions import db
from app.models import Event, Job
from app.services.errors import ServiceError, ValidationFailed
from app.services.use_cases import jobs as job_service
from tests.factories import make_user
from tests.fuzz.strategies import FUZZ_DB, NASTY, SSRF, TRAVERSAL, hostile_text, json_values, schedule_values
from tests.helpers.web import WebClient, job_form

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
INT_FIELDS = (
    "misfire_grace_seconds",
    "max_attempts",
    "retry_backoff_seconds",
    "timeout_seconds",
    "retention_count",
    "retention_days",
    "priority",
)
CHOICE_FIELDS = {
    "overlap_policy": ["skip", "queue", "allow"],
    "misfire_policy": ["coalesce", "catch_up", "skip"],
    "alert_mode": ["web", "log_only"],
}


def stored() -> tuple[int, int]:
    db.session.rollback()
    return (
        db.session.scalar(select(func.count()).select_from(Job)),
        db.session.scalar(select(func.count()).select_from(Event)),
    )


def loose(values: list) -> st.SearchStrategy:
    """Mostly valid choices, sometimes anything."""
    return st.one_of(st.sampled_from(values), st.sampled_from(values), json_values)


@st.composite
def job_data(draw) -> dict:
    schedule_type = draw(st.one_of(st.sampled_from(["one_time", "interval", "cron"]), hostile_text(12)))
    data = {
        "name": draw(st.one_of(hostile_text(), st.uuids().map(str))),
        "task": draw(
            loose(
                [
                    "always_succeed",
                    "sleep_for_seconds",
                    "write_file_artifact",
                    "http_health_check_local",
                    "generate_report",
                ]
            )
        ),
        "schedule_type": schedule_type,
        "schedule": draw(
            schedule_values(schedule_type) if schedule_type in ("one_time", "interval", "cron") else json_values
        ),
    }
    optional = {
        "description": st.one_of(hostile_text(), st.text(min_size=1990, max_size=2010)),
        "config": st.one_of(json_values, hostile_text()),
        "timezone": st.one_of(st.sampled_from(["UTC", "Europe/Paris", "America"]), hostile_text(40)),
        "queue": st.one_of(st.sampled_from(["default", "reports"]), hostile_text(70)),
        "enabled": json_values,
        **{field: st.one_of(st.integers(), hostile_text(12), json_values) for field in INT_FIELDS},
        **{field: loose(values) for field, values in CHOICE_FIELDS.items()},
    }
    for field, strategy in optional.items():
        if draw(st.booleans()):
            data[field] = draw(strategy)
    return data


@FUZZ_DB
@given(data=job_data())
@example(
    data={
        "name": "nul",
        "task": "always_succeed",
        "schedule_type": "interval",
        "schedule": {"every": "1m"},
        "description": "a\x00b",
    }
)
@example(
    data={
        "name": "nul-config",
        "task": "always_succeed",
        "schedule_type": "interval",
        "schedule": {"every": "1m"},
        "config": {"message": "a\x00b"},
    }
)
@example(
    data={
        "name": "tz",
        "task": "always_succeed",
        "schedule_type": "interval",
        "schedule": {"every": "1m"},
        "timezone": "America",
    }
)
@example(data={"name": "list-task", "task": [None], "schedule_type": "one_time", "schedule": {}})
@example(
    data={
        "name": "big",
        "task": "always_succeed",
        "schedule_type": "interval",
        "schedule": {"every": "1m"},
        "priority": 10**30,
    }
)
def test_create_job_creates_a_working_job_or_refuses_cleanly(app, data):
    before = stored()
    try:
        job = job_service.create_job(data, now=NOW, actor="fuzz")
    except ServiceError as error:
        assert str(error).strip()
        assert stored() == before, "a refused job left rows behind"
        return
    assert stored() == (before[0] + 1, before[1] + 1)
    assert job.next_run_at is None or job.next_run_at > NOW or job.schedule_type == "one_time"
    job_service.schedule_of(job).describe()
    job_service.preview_job(job.id, after=NOW, count=3)


# --- path traversal and SSRF through the whole stack ------------------------------------------------

HOSTILE_TARGETS = [("write_file_artifact", {"filename": name, "content": "pwned"}) for name in TRAVERSAL] + [
    ("http_health_check_local", {"url": url}) for url in SSRF if "[0:0" not in url
]


@pytest.mark.parametrize("task, config", HOSTILE_TARGETS)
def test_hostile_targets_are_refused_by_the_service(app, task, config):
    before = stored()
    with pytest.raises(ValidationFailed) as refused:
        job_service.create_job(
            {
                "name": "hostile",
                "task": task,
                "schedule_type": "interval",
                "schedule": {"every": "1m"},
                "config": config,
            },
            now=NOW,
            actor="fuzz",
        )
    assert set(refused.value.errors) == {"config"}
    assert stored() == before


def test_hostile_targets_are_refused_by_the_cli(app):
    import json

    runner = app.test_cli_runner()
    before = stored()
    for task, config in HOSTILE_TARGETS:
        result = runner.invoke(
            args=["job", "add", "hostile", task, "interval", "--every", "1m", "--config", json.dumps(config)]
        )
        assert result.exit_code == 1, (task, config, result.output)
        assert result.stderr.startswith("Error: config: ") and result.stderr.count("\n") == 1, result.stderr
        assert "Traceback" not in result.output
    assert stored() == before


def test_hostile_targets_are_refused_by_the_web_form(app):
    import json

    make_user("fuzz-admin", role="admin")
    client = WebClient(app)
    assert client.login("fuzz-admin").status_code == 302
    before = stored()
    for task, config in HOSTILE_TARGETS:
        response = client.post("/jobs/new", job_form(task=task, config=json.dumps(config)))
        assert response.status_code == 400, (task, config, response.status_code)
        assert "config" in response.get_data(as_text=True)
    assert stored()[0] == before[0]


def test_nasty_samples_are_known_to_the_strategies():
    assert "America" in NASTY and "../../etc/passwd" in NASTY
