"""The task catalog everywhere: `flask task list|show|check` in-process, the /tasks pages (linked
from the job form, which fills a task's example), `GET /api/v1/tasks[/{name}]` and the OpenAPI
document; an execution's result on its page, in `flask execution inspect --json` and in the API."""

from __future__ import annotations

import html
import json
import re

import pytest

from app.clock import utcnow
from app.extensions import db
from app.tasks import TaskDefinitionError, task
from app.tasks.describe import example_config
from app.tasks.registry import all_tasks
from tests.factories import make_execution, make_job, make_user
from tests.helpers.api import ApiClient
from tests.helpers.web import signed_in_client

SECRET_TASK = "catalog_test_secret_task"


@pytest.fixture(scope="module", autouse=True)
def deployer_task():
    """A deployer's task declaring a variable (registered once in this process)."""

    @task(
        SECRET_TASK,
        description="Uses CATALOG_TEST_TOKEN.",
        schema={"type": "object", "properties": {"days": {"type": "integer", "minimum": 1}}, "required": ["days"]},
        env=["CATALOG_TEST_TOKEN"],
    )
    async def secret_task(config, ctx):
        return None


def test_task_list_json_names_module_async_env_and_schema(cli, monkeypatch):
    monkeypatch.delenv("CATALOG_TEST_TOKEN", raising=False)
    result = cli("task", "list", "--json")

    assert result.exit_code == 0, result.output
    by_name = {item["name"]: item for item in json.loads(result.output)}
    mine = by_name[SECRET_TASK]
    assert mine["module"] == __name__ and mine["async"] is True and mine["builtin"] is False
    assert mine["env"] == [{"name": "CATALOG_TEST_TOKEN", "set": False}]
    assert mine["schema"]["required"] == ["days"] and mine["example"] == {"days": 1}
    assert by_name["echo"]["builtin"] is True and by_name["echo"]["env"] == []


def test_task_show_prints_the_example_and_task_check_reports_missing_env(cli, monkeypatch):
    # Other tasks this process registered (test helpers, an installed example package) declare
    # variables of their own: set those, so only the one under test is missing.
    for spec in all_tasks():
        for name in spec.env:
            monkeypatch.setenv(name, "set-by-the-test")
    monkeypatch.delenv("CATALOG_TEST_TOKEN", raising=False)
    shown = cli("task", "show", SECRET_TASK)
    unknown = cli("task", "show", "no_such_task")
    missing = cli("task", "check")
    monkeypatch.setenv("CATALOG_TEST_TOKEN", "value-1234")
    fine = cli("task", "check")

    assert shown.exit_code == 0 and "example config:" in shown.output and '"days": 1' in shown.output
    assert "CATALOG_TEST_TOKEN (NOT SET)" in shown.output
    assert unknown.exit_code == 1 and "unknown task 'no_such_task'" in unknown.stderr
    assert missing.exit_code == 1
    assert f"Error: task {SECRET_TASK} ({__name__}) needs environment variable CATALOG_TEST_TOKEN" in missing.stderr
    assert fine.exit_code == 0 and fine.output.startswith("ok:")


def test_own_secrets_and_bad_names_cannot_be_declared():
    for name in ("DATABASE_URL", "SECRET_KEY", "REDIS_URL", "JWT_SECRET_KEY", "SMTP_PASSWORD", "PGPASSWORD"):
        with pytest.raises(TaskDefinitionError, match=f"may not declare {name}: it is one of Cronwell's own secrets"):
            task("catalog_test_forbidden", description="x", env=[name])
    with pytest.raises(TaskDefinitionError, match="not an environment variable name"):
        task("catalog_test_forbidden", description="x", env=["NOT-A-NAME"])
    with pytest.raises(TaskDefinitionError, match="list of variable names"):
        task("catalog_test_forbidden", description="x", env="ONE_STRING")


def test_example_config_prefers_examples_then_defaults_then_placeholders():
    assert example_config({"type": "object", "examples": [{"a": 2}]}) == {"a": 2}
    schema = {
        "type": "object",
        "properties": {
            "n": {"type": "integer", "minimum": 5},
            "mode": {"type": "string", "enum": ["fast", "slow"]},
            "url": {"type": "string"},
            "flag": {"type": "boolean", "default": True},
        },
        "additionalProperties": False,
    }
    assert example_config(schema) == {"n": 5, "mode": "fast", "url": "https://example.com/", "flag": True}
    assert example_config({**schema, "required": ["n"]}) == {"n": 5}


def test_the_tasks_page_renders_each_schema_and_example_and_the_job_form_links_to_it(app):
    viewer = signed_in_client(app, role="viewer")
    admin = signed_in_client(app, role="admin")

    page = viewer.get("/tasks/")
    one = viewer.get(f"/tasks/{SECRET_TASK}")
    missing = viewer.get("/tasks/no_such_task")
    form = admin.get("/jobs/new")

    body = page.get_data(as_text=True)
    assert page.status_code == 200
    assert f'id="task-{SECRET_TASK}"' in body and "http_request" in body and "CATALOG_TEST_TOKEN" in body
    assert '<td class="mono">days</td>' in body and 'data-task-example="http_request"' in body
    assert one.status_code == 200 and "Uses CATALOG_TEST_TOKEN." in one.get_data(as_text=True)
    assert missing.status_code == 404
    form_body = form.get_data(as_text=True)
    assert form.status_code == 200 and 'href="/tasks/"' in form_body and 'href="/tasks/http_request"' in form_body
    # The button (and choosing a task) fills the example: each attribute holds the whole JSON document.
    examples = [json.loads(html.unescape(value)) for value in re.findall(r"data-fill-example='([^']*)'", form_body)]
    assert examples and {"days": 1} in examples


def test_the_api_lists_and_shows_tasks_and_documents_them(app):
    make_user("viewer", "right-password", role="viewer")
    api = ApiClient(app)
    api.login("viewer")

    listed = api.get("/api/v1/tasks")
    one = api.get(f"/api/v1/tasks/{SECRET_TASK}")
    missing = api.get("/api/v1/tasks/no_such_task")
    document = api.get("/api/v1/openapi.json").get_json()

    assert listed.status_code == 200
    names = [item["name"] for item in listed.get_json()]
    assert SECRET_TASK in names and "http_request" in names
    body = one.get_json()
    assert body["async"] is True and body["env"] == [{"name": "CATALOG_TEST_TOKEN", "set": False}]
    assert body["example"] == {"days": 1} and body["module"] == __name__
    assert missing.status_code == 404 and missing.mimetype == "application/problem+json"
    assert "/api/v1/tasks" in document["paths"] and "/api/v1/tasks/{name}" in document["paths"]
    assert "result" in document["components"]["schemas"]["Execution"]["properties"]


def test_an_executions_result_is_on_its_page_in_inspect_json_and_in_the_api(app, cli):
    job = make_job(now=utcnow(), task="echo")
    execution = make_execution(job, "succeeded")
    execution.result = json.dumps({"rows": 3, "file": "export.csv"})
    execution.task_version = "sha256:0123456789ab"
    db.session.commit()
    make_user("viewer2", "right-password", role="viewer")
    api = ApiClient(app)
    api.login("viewer2")

    page = signed_in_client(app, role="viewer").get(f"/executions/{execution.id}").get_data(as_text=True)
    inspected = cli("execution", "inspect", execution.id, "--json")
    shown = cli("execution", "inspect", execution.id)
    from_api = api.get(f"/api/v1/executions/{execution.id}").get_json()

    assert 'id="execution-result"' in page and "&#34;rows&#34;: 3" in page and "sha256:0123456789ab" in page
    assert json.loads(inspected.output)["result"] == {"rows": 3, "file": "export.csv"}
    assert json.loads(inspected.output)["task_version"] == "sha256:0123456789ab"
    assert "Result:" in shown.output and '"file": "export.csv"' in shown.output
    assert from_api["result"] == {"rows": 3, "file": "export.csv"}
    assert from_api["task_version"] == "sha256:0123456789ab"
