"""A job's workflow `steps` through the adapters, on both databases: `flask job add --steps FILE`
(JSON or YAML) stores them, `--json` and the API show them, and a bad graph is refused naming the
step (CLI: one line, exit 1; API: 422 with the field's message). Running them:
tests/integration/test_workflow_runs.py."""

from __future__ import annotations

import json

from app.extensions import db
from app.models import Job
from tests.factories import make_user
from tests.helpers.api import PASSWORD, ApiClient

DIAMOND_YAML = """
- {name: export, task: always_succeed}
- {name: report-a, task: echo, config: {message: a}, after: [export]}
- {name: report-b, task: always_succeed, after: [export], max_attempts: 2, timeout_seconds: 60}
- {name: mail, task: always_succeed, after: [report-a, report-b]}
"""


def test_job_add_takes_steps_from_a_yaml_file_and_shows_them(app, tmp_path):
    path = tmp_path / "steps.yaml"
    path.write_text(DIAMOND_YAML)
    runner = app.test_cli_runner()
    added = runner.invoke(
        args=["job", "add", "nightly", "always_succeed", "cron", "--cron", "0 2 * * *", "--steps", str(path), "--json"]
    )
    assert added.exit_code == 0, added.output
    steps = json.loads(added.output)["steps"]
    assert [step["name"] for step in steps] == ["export", "report-a", "report-b", "mail"]
    assert steps[3]["after"] == ["report-a", "report-b"]
    db.session.rollback()
    assert db.session.get(Job, json.loads(added.output)["id"]).steps == steps


def test_a_cycle_is_refused_on_one_line_naming_the_step(app, tmp_path):
    path = tmp_path / "steps.json"
    path.write_text(
        json.dumps(
            [
                {"name": "a", "task": "always_succeed", "after": ["c"]},
                {"name": "b", "task": "always_succeed", "after": ["a"]},
                {"name": "c", "task": "always_succeed", "after": ["b"]},
            ]
        )
    )
    refused = app.test_cli_runner().invoke(
        args=["job", "add", "loop", "always_succeed", "interval", "--every", "1h", "--steps", str(path)]
    )
    assert refused.exit_code == 1
    assert "steps: step 'a': is part of a cycle: a -> c -> b -> a" in refused.output
    assert len(refused.output.strip().splitlines()) == 1
    assert db.session.query(Job).count() == 0


def test_the_api_refuses_an_unknown_task_in_a_step_naming_it(app):
    make_user("operator", PASSWORD, role="operator")
    api = ApiClient(app)
    api.login("operator")
    body = {
        "name": "wf",
        "task": "always_succeed",
        "schedule_type": "interval",
        "schedule": {"every": "1h"},
        "steps": [{"name": "export", "task": "always_succeed"}, {"name": "send", "task": "nope", "after": ["export"]}],
    }
    answer = api.post("/api/v1/jobs", json=body)
    assert answer.status_code == 422, answer.get_data(as_text=True)
    assert "step 'send': unknown task 'nope'" in json.dumps(answer.json)
