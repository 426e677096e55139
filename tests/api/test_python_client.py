"""The Python client (clients/python, `cronwell_client`) against a live server the test starts
(gunicorn on the test's database, and a real worker where a run must finish): run + wait, sync
and async; the automatic Idempotency-Key; pagination over 250 executions; a 422 raised with its
field messages; jobs and apply; and its models regenerated from the live OpenAPI document equal
the committed ones (a drift test)."""

from __future__ import annotations

import asyncio
import json
import sys
import urllib.request
from pathlib import Path

import pytest

from app.clock import utcnow
from app.services.caller import Caller
from app.services.use_cases import tokens
from tests.factories import make_user
from tests.helpers.api import PASSWORD, job_body

CLIENT_ROOT = Path(__file__).resolve().parents[2] / "clients" / "python"
sys.path.insert(0, str(CLIENT_ROOT))

import cronwell_client  # noqa: E402  (from its source folder: the package is not installed in the venv)
from generate_models import render  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


@pytest.fixture
def live(app, api_server):
    base, _log = api_server
    user = make_user("client-operator", PASSWORD, role="operator")
    token = tokens.create_token(
        Caller.cli(), name="client", project="default/default", role="operator", user_id=user.id, now=utcnow()
    ).secret
    with cronwell_client.Client(base, token) as client:
        yield base, token, client


def test_models_match_the_published_document(live):
    base, _token, _client = live
    with urllib.request.urlopen(f"{base}/api/v1/openapi.json") as response:
        document = json.load(response)
    committed = (CLIENT_ROOT / "cronwell_client" / "models.py").read_text()
    assert render(document) == committed, "regenerate: python clients/python/generate_models.py URL/api/v1/openapi.json"


def test_run_and_wait_on_a_real_worker_sync_and_async(live, flask_processes):
    base, token, client = live
    worker = flask_processes.start_worker("--workers", "2", "--worker-id", "client-worker")
    try:
        run = client.run("echo", {"message": "from the client"})
        assert run.job_id is None and run.one_off and run.task == "echo"
        done = client.runs.wait(run.id, timeout=60)
        assert done.status == "succeeded", worker.output()
        assert json.loads(
            client.request(cronwell_client.client.rq.Call("GET", f"/executions/{run.id}/output"))["output"]
        ) == {"message": "from the client"}

        async def run_async():
            async with cronwell_client.AsyncClient(base, token) as aclient:
                started = await aclient.run("echo", {"message": "async", "fail": True}, max_attempts=1)
                return await aclient.runs.wait(started.id, timeout=60)

        failed = asyncio.run(run_async())
        assert failed.status == "failed" and failed.attempts == 1
    finally:
        flask_processes.cleanup()


def test_a_retried_call_never_runs_twice(live):
    _base, _token, client = live
    call = cronwell_client.client.rq.run_call(
        "echo",
        {},
        delay="1h",
        at=None,
        queue=None,
        priority=None,
        max_attempts=None,
        timeout_seconds=None,
        idempotency_key=None,
        project=None,
    )
    first, again = client.request(call), client.request(call)  # the same call sent twice: the same key
    assert first["id"] == again["id"]
    keyed = [client.run("echo", delay="1h", idempotency_key="user-42") for _ in range(2)]
    assert keyed[0].id == keyed[1].id
    assert len(list(client.executions.list(one_off=True))) == 2


def test_pagination_over_250_executions(live):
    _base, _token, client = live
    created = client.runs.create_many([{"task": "echo", "config": {"message": str(n)}, "in": "1h"} for n in range(250)])
    assert len(created) == 250
    listed = [execution.id for execution in client.executions.list(task="echo", limit=100)]
    assert listed == sorted((execution.id for execution in created), reverse=True)


def test_a_refused_run_raises_with_its_field_messages(live):
    _base, _token, client = live
    with pytest.raises(cronwell_client.ValidationFailed) as refused:
        client.run("sleep_for_seconds", {"seconds": "long"}, queue="nowhere")
    assert refused.value.status == 422 and "config" in refused.value.errors
    with pytest.raises(cronwell_client.ValidationFailed) as refused:
        client.runs.create_many([{"task": "echo"}, {"task": "echo", "queue": "nowhere"}])
    assert list(refused.value.errors) == ["[1].queue"]
    with pytest.raises(cronwell_client.NotFound):
        client.runs.get(999_999)


def test_jobs_and_apply(live):
    _base, _token, client = live
    job = client.jobs.create(**job_body("client job"))
    assert client.jobs.get(job.id).name == "client job"
    assert client.jobs.update(job.id, description="edited").description == "edited"
    triggered = client.jobs.trigger(job.id)
    assert triggered.job_id == job.id
    assert client.jobs.disable(job.id).enabled is False
    assert client.jobs.enable(job.id).enabled is True
    assert [j.id for j in client.jobs.list()] == [job.id]
    plan = client.apply({"project": "default/default", "jobs": [job_body("from a file")]}, dry_run=True)
    assert [item["name"] for item in plan["created"]] == ["from a file"]
    client.jobs.delete(job.id)
    with pytest.raises(cronwell_client.NotFound):
        client.jobs.get(job.id)
