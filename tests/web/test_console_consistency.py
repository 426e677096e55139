"""One rule for a run's time in the past (job creation and a trigger, web, CLI and API alike),
API tags named for resources, ReDoc loading nothing from outside this host, and wording."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from pathlib import Path

from app.clock import utcnow
from app.domain.run_times import past_run_time_problem
from app.services.caller import Caller
from app.services.use_cases import tokens
from tests.factories import make_job, make_user
from tests.helpers.api import ApiClient
from tests.helpers.web import signed_in_client

STATIC = Path(__file__).resolve().parents[2] / "static"


def test_the_past_rule_allows_the_grace_and_refuses_earlier():
    now = utcnow()
    assert past_run_time_problem(now - timedelta(seconds=30), now=now, grace_seconds=60) is None
    assert "in the past" in past_run_time_problem(now - timedelta(seconds=61), now=now, grace_seconds=60)


def test_a_trigger_at_a_past_instant_is_refused_like_a_one_time_job(app):
    job = make_job("nightly")
    past = "2020-01-01T00:00:00Z"
    runner = app.test_cli_runner()
    cli = runner.invoke(args=["job", "trigger", str(job.id), "--at", past])
    assert cli.exit_code == 1 and "is in the past" in cli.output
    created = runner.invoke(
        args=["job", "add", "once", "always_succeed", "one_time", "--schedule-value", json.dumps({"run_at": past})]
    )
    assert created.exit_code == 1 and "is in the past" in created.output
    admin = make_user("consistency-admin", role="admin")
    secret = tokens.create_token(
        Caller.cli(), name="c", project=None, role="admin", user_id=admin.id, now=utcnow()
    ).secret
    answer = ApiClient(app, token=secret).post(f"/api/v1/jobs/{job.id}/trigger", {"at": past})
    assert answer.status_code == 422 and "is in the past" in answer.get_data(as_text=True)
    web = signed_in_client(app, "operator")
    page = web.post(f"/jobs/{job.id}/trigger", {"run_at": past})
    assert page.status_code == 400 and "is in the past" in page.get_data(as_text=True)


def test_api_tags_are_the_resources(app):
    document = app.test_client().get("/api/v1/openapi.json").get_json()
    names = {tag["name"] for tag in document["tags"]}
    assert {"jobs", "queues", "executions", "job files"} <= names
    assert not [name for name in names if name.startswith("api_")]
    used = {
        tag
        for item in document["paths"].values()
        for op in item.values()
        if isinstance(op, dict)
        for tag in op.get("tags", [])
    }
    assert used <= names


def test_the_api_doc_pages_load_nothing_from_outside_this_host(app):
    client = app.test_client()
    for page in ("/api/redoc", "/api/docs"):
        body = client.get(page).get_data(as_text=True)
        assert not re.search(r'(src|href)="(https?:)?//', body), page
    vendored = (STATIC / "vendor" / "redoc" / "redoc.standalone.js").read_text()
    assert "cdn.redoc.ly" not in vendored
