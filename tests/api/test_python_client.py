"""The Python client (clients/python, `cronwell_client`) against a live server the test starts
(gunicorn on the test's database, and a real worker where a run must finish).

Every method is exercised through both clients: a test that takes `connect` runs once with
`Client` and once with `AsyncClient` (the `flavor`), through the same lines. Run + wait on a real
worker (and the README's quick start, executed); the automatic Idempotency-Key (an answer lost at
the httpx transport, the call sent again, one run in the database); pagination over 250
executions; a 422 raised with its field messages; jobs with the ETag/If-Match conflict; apply;
the task catalog; queues (settings with the ETag conflict, pause and resume, live statistics,
each role's refusals); the package installed with pip; and the drift tests: the models regenerated
from the live OpenAPI document equal the committed ones, and every request the client builds
names an operation, body fields and query parameters the document publishes."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import subprocess
import sys
import urllib.request
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.clock import utcnow
from app.services.caller import Caller
from app.services.use_cases import tokens
from tests.factories import make_user
from tests.helpers.api import PASSWORD, job_body

CLIENT_ROOT = Path(__file__).resolve().parents[2] / "clients" / "python"
sys.path.insert(0, str(CLIENT_ROOT))

import cronwell_client  # noqa: E402  (from its source folder: the package is not installed in the venv)
from cronwell_client import _requests as rq  # noqa: E402
from generate_models import render  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


@dataclass(frozen=True)
class Live:
    base: str
    token: str


@pytest.fixture
def live(app, api_server) -> Live:
    """The server's base URL and an operator's API token for default/default."""
    base, _log = api_server
    user = make_user("client-operator", PASSWORD, role="operator")
    token = tokens.create_token(
        Caller.cli(), name="client", project="default/default", role="operator", user_id=user.id, now=utcnow()
    ).secret
    return Live(base, token)


@pytest.fixture
def admin_token(live) -> str:
    """An admin's API token for default/default: queues' settings are an admin's to change."""
    user = make_user("client-admin", PASSWORD, role="admin")
    return tokens.create_token(
        Caller.cli(), name="client-admin", project="default/default", role="admin", user_id=user.id, now=utcnow()
    ).secret


# --- both clients through the same lines -------------------------------------------------------


class Recorder(httpx.BaseTransport):
    """httpx's own transport, recording each request; with `drop`, the answer to the first request
    of that method is lost after the server handled it (a connection dropped on the way back)."""

    def __init__(self, drop: str | None = None) -> None:
        self.inner = httpx.HTTPTransport()
        self.sent: list[httpx.Request] = []
        self.drop = drop

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.sent.append(request)
        response = self.inner.handle_request(request)
        if request.method == self.drop:
            self.drop = None
            response.close()
            raise httpx.ReadError("the connection dropped before the answer came back", request=request)
        return response

    def close(self) -> None:
        self.inner.close()


class AsyncRecorder(httpx.AsyncBaseTransport):
    """`Recorder` for httpx.AsyncClient."""

    def __init__(self, drop: str | None = None) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.sent: list[httpx.Request] = []
        self.drop = drop

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.sent.append(request)
        response = await self.inner.handle_async_request(request)
        if request.method == self.drop:
            self.drop = None
            await response.aclose()
            raise httpx.ReadError("the connection dropped before the answer came back", request=request)
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


class Driver:
    """How a test gets results from a client of either flavor: `call(client.jobs.get(1))` is the
    value itself for `Client` and the awaited coroutine for `AsyncClient` (on the test's event
    loop); `call.items(...)` and `call.first(...)` read an iterator or an async iterator."""

    def __init__(self, runner: asyncio.Runner | None) -> None:
        self.runner = runner

    def __call__(self, result: Any) -> Any:
        return self.runner.run(result) if self.runner else result

    def items(self, iterator: Iterator[Any] | AsyncIterator[Any]) -> list[Any]:
        if self.runner is None:
            return list(iterator)  # type: ignore[arg-type]

        async def collect() -> list[Any]:
            return [item async for item in iterator]  # type: ignore[union-attr]

        return self.runner.run(collect())

    def first(self, iterator: Iterator[Any] | AsyncIterator[Any]) -> Any:
        return self.runner.run(anext(iterator)) if self.runner else next(iterator)  # type: ignore[arg-type]


@pytest.fixture(params=["sync", "async"])
def flavor(request) -> str:
    return request.param


@pytest.fixture
def connect(live, flavor):
    """connect(drop=None, token=None) -> (client, call, recorder): a client of the flavor under
    test on the live server (with the operator's token unless another is given), sending through
    a Recorder; all are closed at the end of the test."""
    runner = asyncio.Runner() if flavor == "async" else None
    opened = []

    def connect_(drop: str | None = None, *, token: str | None = None, **options: Any):
        secret = token or live.token
        if runner is None:
            recorder: Recorder | AsyncRecorder = Recorder(drop)
            client: Any = cronwell_client.Client(live.base, secret, transport=recorder, **options)
        else:
            recorder = AsyncRecorder(drop)
            client = cronwell_client.AsyncClient(live.base, secret, transport=recorder, **options)
        opened.append(client)
        return client, Driver(runner), recorder

    yield connect_
    for client in opened:
        if runner is None:
            client.close()
        else:
            runner.run(client.aclose())
    if runner is not None:
        runner.close()


@pytest.fixture
def executions_in_db(db, sql):
    """The ids of the executions in the database, newly read (what the server committed since)."""

    def read(**where: Any) -> list[int]:
        db.session.rollback()  # end the read transaction: SQLite would keep showing its snapshot
        condition = " AND ".join(f"{column} = :{column}" for column in where) or "1 = 1"
        return [row[0] for row in sql(f"SELECT id FROM executions WHERE {condition} ORDER BY id", **where)]

    return read


def _posts(recorder: Recorder | AsyncRecorder, path: str) -> list[httpx.Request]:
    return [request for request in recorder.sent if request.method == "POST" and request.url.path == path]


def test_a_run_whose_answer_was_lost_is_sent_again_and_runs_once(connect, executions_in_db):
    client, call, recorder = connect(drop="POST")
    run = call(client.run("echo", {"message": "once"}, delay="1h"))
    assert run.one_off and run.task == "echo" and run.config_override == {"message": "once"}
    sent = _posts(recorder, "/api/v1/runs")
    assert len(sent) == 2  # the first answer was lost; the same request went again...
    assert sent[0].headers["Idempotency-Key"] == sent[1].headers["Idempotency-Key"]
    assert sent[0].content == sent[1].content
    assert executions_in_db() == [run.id]  # ...and the server ran it once

    # The caller's own key: a second call with it answers the first run.
    keyed = [call(client.run("echo", delay="1h", idempotency_key="user-42")) for _ in range(2)]
    assert keyed[0].id == keyed[1].id != run.id
    assert len(call.items(client.executions.list(one_off=True))) == 2

    # A trigger is sent again the same way.
    job = call(client.jobs.create(**job_body("lost answer")))
    client_again, call, recorder = connect(drop="POST")
    triggered = call(client_again.jobs.trigger(job, delay="1h"))
    assert len(_posts(recorder, f"/api/v1/jobs/{job.id}/trigger")) == 2
    assert executions_in_db(job_id=job.id) == [triggered.id]


def test_pagination_over_250_executions(connect):
    client, call, recorder = connect()
    created = call(
        client.runs.create_many([{"task": "echo", "config": {"message": str(n)}, "in": "1h"} for n in range(250)])
    )
    assert len(created) == 250
    newest_first = sorted((execution.id for execution in created), reverse=True)

    pages_read = len(recorder.sent)
    first = call.first(client.executions.list(task="echo", limit=100))
    assert first.id == newest_first[0] and len(recorder.sent) == pages_read + 1  # one page read, no more

    listed = call.items(client.executions.list(task="echo", limit=100))
    assert [execution.id for execution in listed] == newest_first
    gets = [request for request in recorder.sent[pages_read + 1 :] if request.method == "GET"]
    assert len(gets) == 3  # 100 + 100 + 50, each page through the last one's `next` link
    assert [request.url.params.get("cursor") for request in gets] == [
        None,
        str(newest_first[99]),
        str(newest_first[199]),
    ]
    assert call.items(client.executions.list(task="echo", status="succeeded")) == []


def test_a_refused_request_raises_with_its_field_messages(connect):
    client, call, recorder = connect()
    with pytest.raises(cronwell_client.ValidationFailed) as refused:
        call(client.run("sleep_for_seconds", {"seconds": "long"}, queue="nowhere"))
    assert refused.value.status == 422 and "config" in refused.value.errors
    assert "config" in str(refused.value)
    with pytest.raises(cronwell_client.ValidationFailed) as refused:
        call(client.runs.create_many([{"task": "echo"}, {"task": "echo", "queue": "nowhere"}]))
    assert list(refused.value.errors) == ["[1].queue"]
    with pytest.raises(cronwell_client.NotFound):
        call(client.runs.get(999_999))
    with pytest.raises(cronwell_client.ValidationFailed) as refused:
        call(client.jobs.create(**job_body("bad", schedule={"every": "soon"})))
    assert refused.value.errors

    job = call(client.jobs.create(**job_body("disabled")))
    call(client.jobs.disable(job))
    with pytest.raises(cronwell_client.Conflict):  # a disabled job: refused once, not sent again
        call(client.jobs.trigger(job))
    assert len(_posts(recorder, f"/api/v1/jobs/{job.id}/trigger")) == 1

    anonymous = cronwell_client.Client(client.server.base_url, "cw_not-a-token")
    with anonymous, pytest.raises(cronwell_client.Unauthorized):
        anonymous.tasks.list()


def test_jobs_with_the_etag_conflict(connect):
    client, call, _recorder = connect()
    job = call(client.jobs.create(**job_body("client job", task="echo")))
    read = call(client.jobs.get(job.id))
    assert read.name == "client job" and read.etag

    edited = call(client.jobs.update(read, description="edited"))  # If-Match: the ETag as read
    assert edited.description == "edited" and edited.etag and edited.etag != read.etag
    with pytest.raises(cronwell_client.PreconditionFailed) as stale:
        call(client.jobs.update(read, description="stale"))  # `read` is older than `edited`
    assert stale.value.status == 412
    with pytest.raises(cronwell_client.PreconditionFailed):
        call(client.jobs.update(job.id, description="stale", if_match=read.etag))
    with pytest.raises(cronwell_client.PreconditionFailed):
        call(client.jobs.delete(read))
    assert call(client.jobs.get(job.id)).description == "edited"
    assert call(client.jobs.update(job.id, priority=3)).priority == 3  # an id alone: unconditional

    triggered = call(client.jobs.trigger(job.id, delay="1h", config_override={"message": "override"}))
    assert triggered.job_id == job.id and triggered.status == "pending"
    assert triggered.config_override == {"message": "override"}
    assert call(client.jobs.disable(job)).enabled is False
    assert call(client.jobs.enable(job.id)).enabled is True

    second = call(client.jobs.create(**job_body("second job")))
    assert [j.id for j in call.items(client.jobs.list(limit=1))] == [job.id, second.id]  # two pages of one
    call(client.jobs.delete(call(client.jobs.get(job.id))))  # fresh ETag: deleted
    call(client.jobs.delete(second.id))
    with pytest.raises(cronwell_client.NotFound):
        call(client.jobs.get(job.id))
    assert call.items(client.jobs.list()) == []


def test_apply_and_the_task_catalog(connect):
    client, call, _recorder = connect()
    document = {"project": "default/default", "jobs": [job_body("from a file")]}
    plan = call(client.apply(document))  # a dry run unless told otherwise
    assert isinstance(plan, cronwell_client.Plan) and plan.dry_run is True and plan.changed is True
    assert [item["name"] for item in plan.created] == ["from a file"] and plan["created"] == plan.created
    assert call.items(client.jobs.list()) == []
    applied = call(client.apply(document, dry_run=False))
    assert applied.dry_run is False and [j.name for j in call.items(client.jobs.list())] == ["from a file"]
    again = call(client.apply(document, dry_run=False))
    assert again.changed is False and [item["name"] for item in again.unchanged] == ["from a file"]
    with pytest.raises(ValueError):
        call(client.apply({"jobs": []}))  # no project named: refused before anything is sent

    catalog = call(client.tasks.list())
    by_name = {task.name: task for task in catalog}
    assert {"echo", "always_succeed", "generate_report"} <= set(by_name)
    assert all(isinstance(task, cronwell_client.Task) and task.version for task in catalog)
    echo = call(client.tasks.get("echo"))
    assert echo == by_name["echo"] and echo.builtin is True and echo.async_ is False
    assert echo.schema is not None and set(echo.schema["properties"]) == {"message", "fail"}
    with pytest.raises(cronwell_client.NotFound):
        call(client.tasks.get("no_such_task"))


def test_queues_settings_pause_and_stats(connect, admin_token):
    admin, call, recorder = connect(token=admin_token)
    operator, _call, _recorder = connect()
    [default] = call.items(operator.queues.list())
    assert isinstance(default, cronwell_client.Queue) and default.name == "default"
    assert default.project == "default/default" and default.paused is False and default.stats["pending"] == 0

    with pytest.raises(cronwell_client.Forbidden):  # an operator may pause a queue, not create one
        call(operator.queues.create("reports"))
    with pytest.raises(cronwell_client.ValidationFailed) as refused:
        call(admin.queues.create("Not A Name"))
    assert "name" in refused.value.errors
    reports = call(admin.queues.create("reports", description="nightly reports", concurrency_limit=2, priority=5))
    assert (reports.name, reports.description, reports.concurrency_limit, reports.priority, reports.paused) == (
        "reports",
        "nightly reports",
        2,
        5,
        False,
    )
    assert [queue.name for queue in call.items(operator.queues.list(limit=1))] == ["default", "reports"]  # 2 pages

    read = call(admin.queues.get(reports.id))
    assert read.id == reports.id and read.etag
    edited = call(admin.queues.update(read, concurrency_limit=4, rate_limit="10/minute"))  # If-Match: as read
    assert edited.concurrency_limit == 4 and edited.rate_limit == "10/minute" and edited.etag != read.etag
    with pytest.raises(cronwell_client.PreconditionFailed):
        call(admin.queues.update(read, priority=1))  # `read` is older than `edited`
    with pytest.raises(TypeError, match="unknown queue fields: paused"):
        call(admin.queues.update(reports, paused=True))  # refused before anything is sent
    unlimited = call(admin.queues.update(reports.id, concurrency_limit=None, rate_limit=None))
    assert unlimited.concurrency_limit is None and unlimited.rate_limit is None
    assert unlimited.priority == 5  # the stale edit changed nothing
    patches = [request for request in recorder.sent if request.method == "PATCH"]
    assert [request.headers.get("If-Match") for request in patches] == [read.etag, read.etag, None]

    paused = call(operator.queues.pause(reports, reason="deploying"))
    assert paused.paused is True and paused.paused_reason == "deploying" and paused.paused_at
    assert call(admin.queues.get(reports.id)).paused is True  # read back from the server
    resumed = call(operator.queues.resume(reports.id))
    assert resumed.paused is False and resumed.paused_reason is None
    assert call(operator.queues.get(reports)).paused is False

    call(operator.run("echo", queue="reports"))  # no worker runs: it stays pending
    call(operator.run("echo", queue="reports", delay="1h"))
    stats = call(operator.queues.stats(reports))
    assert isinstance(stats, cronwell_client.QueueStats)
    assert (stats.pending, stats.scheduled_later, stats.running) == (1, 1, 0)
    assert call(operator.queues.stats(default)).pending == 0

    with pytest.raises(cronwell_client.Conflict):
        call(admin.queues.delete(reports))  # it still holds the two runs
    scratch = call(admin.queues.create("scratch"))
    assert call(admin.queues.delete(scratch)) is None
    with pytest.raises(cronwell_client.NotFound):
        call(operator.queues.get(scratch.id))
    assert [queue.name for queue in call.items(operator.queues.list())] == ["default", "reports"]


# --- a real worker -----------------------------------------------------------------------------


def _readme_code(live: Live) -> str:
    text = (CLIENT_ROOT / "README.md").read_text()
    code = text.split("```python\n", 1)[1].split("```", 1)[0]
    assert len([line for line in code.splitlines() if line]) == 5, "the README's quick start is five lines"
    assert '"http://127.0.0.1:8000"' in code and '"cw_..."' in code
    return code.replace('"http://127.0.0.1:8000"', repr(live.base)).replace('"cw_..."', repr(live.token))


def test_run_and_wait_on_a_real_worker_and_the_readme(live, flask_processes):
    worker = flask_processes.start_worker("--workers", "2", "--worker-id", "client-worker")
    try:
        with cronwell_client.Client(live.base, live.token) as client:
            run = client.run("echo", {"message": "from the client"})
            done = client.runs.wait(run.id, timeout=60)
            assert done.status == "succeeded", worker.output()
            assert json.loads(client.runs.output(run.id).output) == {"message": "from the client"}
            assert [attempt.status for attempt in client.runs.attempts(run.id)] == ["succeeded"]
            assert client.runs.explain(run.id).execution_id == run.id
            assert client.executions.get(run.id).status == "succeeded"
            later = client.run("echo", delay="1h")
            with pytest.raises(cronwell_client.RunTimeout) as waited:
                client.runs.wait(later.id, timeout=0.3, poll=0.1)
            assert waited.value.execution.status == "pending"

        async def run_async() -> tuple[Any, ...]:
            async with cronwell_client.AsyncClient(live.base, live.token) as aclient:
                started = await aclient.run("echo", {"message": "async", "fail": True}, max_attempts=1)
                failed = await aclient.runs.wait(started.id, timeout=60)
                output = await aclient.runs.output(started.id)
                attempts = await aclient.runs.attempts(started.id)
                explained = await aclient.runs.explain(started.id)
                listed = await aclient.executions.get(started.id)
                return failed, output, attempts, explained, listed

        failed, output, attempts, explained, got = asyncio.run(run_async())
        assert failed.status == "failed" and failed.attempts == 1 and got.status == "failed"
        assert "async" in output.error and [attempt.status for attempt in attempts] == ["failed"]
        assert explained.execution_id == failed.id

        quick_start = subprocess.run(
            [sys.executable, "-c", _readme_code(live)],
            env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(CLIENT_ROOT)},
            capture_output=True,
            text=True,
            timeout=150,
        )
        assert quick_start.returncode == 0, quick_start.stderr
        assert quick_start.stdout.startswith("succeeded"), quick_start.stdout + worker.output()
    finally:
        flask_processes.cleanup()


# --- the published document and the package ----------------------------------------------------


def _document(live: Live) -> dict:
    with urllib.request.urlopen(f"{live.base}/api/v1/openapi.json") as response:
        return json.load(response)


@pytest.mark.parametrize("backend", ["sqlite"])  # the document does not depend on the database
def test_models_match_the_published_document(live):
    committed = (CLIENT_ROOT / "cronwell_client" / "models.py").read_text()
    assert render(_document(live)) == committed, (
        "regenerate: python clients/python/generate_models.py URL/api/v1/openapi.json"
    )


def _every_call() -> list[rq.Call]:
    job = cronwell_client.Job(id=7, etag='"v1"')
    queue = cronwell_client.Queue(id=3, etag='"q1"')
    return [
        rq.create_run("echo", {}, **dict.fromkeys(rq.RUN_FIELDS, "x")),
        rq.create_runs([{"task": "echo"}]),
        rq.get_execution(1),
        rq.explain_execution(1),
        rq.execution_output(1),
        rq.execution_attempts(1),
        rq.list_executions(10, **dict.fromkeys(rq.EXECUTION_FILTERS, "x")),
        rq.list_jobs(10),
        rq.get_job(job),
        rq.create_job({"name": "x"}),
        rq.update_job(job, {"name": "y"}, None),
        rq.delete_job(job, None),
        rq.trigger_job(job, **dict.fromkeys(rq.TRIGGER_FIELDS, "x")),
        rq.enable_job(job),
        rq.disable_job(job),
        rq.apply({"project": "default/default", "jobs": []}, dry_run=True, prune=False, project=None),
        rq.list_tasks(),
        rq.get_task("echo"),
        rq.list_queues(10),
        rq.get_queue(queue),
        rq.create_queue("reports", dict.fromkeys(rq.QUEUE_FIELDS, "x")),
        rq.update_queue(queue, dict.fromkeys(rq.QUEUE_FIELDS, "x"), None),
        rq.delete_queue(queue),
        rq.pause_queue(queue, "deploying"),
        rq.resume_queue(queue),
        rq.queue_stats(queue),
    ]


def _operation(document: dict, call: rq.Call) -> dict:
    for template, operations in document["paths"].items():
        if re.fullmatch(re.sub(r"\\{[^/]+?\\}", "[^/]+", re.escape(template)), call.path):
            if call.method.lower() in operations:
                return operations[call.method.lower()]
    raise AssertionError(f"{call.method} {call.path}: no such operation in the document")


def _properties(document: dict, schema: dict) -> set[str]:
    """The property names of a request body schema (a $ref, or the object form of an anyOf)."""
    if "anyOf" in schema:
        return set().union(*(_properties(document, option) for option in schema["anyOf"] if "items" not in option))
    if "$ref" in schema:
        return _properties(document, document["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]])
    return set(schema.get("properties", {}))


@pytest.mark.parametrize("backend", ["sqlite"])
def test_every_request_the_client_builds_is_one_the_document_publishes(live):
    document = _document(live)
    for call in _every_call():
        operation = _operation(document, call)
        parameters = {p["name"]: p for p in operation.get("parameters", [])}
        assert set(call.params) <= {name for name, p in parameters.items() if p["in"] == "query"}, call
        assert {name for name in call.headers} <= {name for name, p in parameters.items() if p["in"] == "header"}, call
        if call.json is not None and isinstance(call.json, dict):
            schema = operation["requestBody"]["content"]["application/json"]["schema"]
            assert set(call.json) <= _properties(document, schema), call

    runs = document["paths"]["/api/v1/runs"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert {"task", "config", *rq.RUN_FIELDS.values()} == _properties(document, runs)
    trigger = document["paths"]["/api/v1/jobs/{job_id}/trigger"]["post"]["requestBody"]["content"]
    assert set(rq.TRIGGER_FIELDS.values()) == _properties(document, trigger["application/json"]["schema"])
    schemas = document["components"]["schemas"]
    assert {"name", *rq.QUEUE_FIELDS} == _properties(document, schemas["QueueCreate"])
    assert set(rq.QUEUE_FIELDS) == _properties(document, schemas["QueueEdit"])
    listing = document["paths"]["/api/v1/executions"]["get"]["parameters"]
    assert {*rq.EXECUTION_FILTERS, "limit", "cursor"} == {p["name"] for p in listing if p["in"] == "query"}


def test_the_package_installs_with_pip(tmp_path):
    source = tmp_path / "source"
    shutil.copytree(CLIENT_ROOT, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    target = tmp_path / "site"
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(source)],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert installed.returncode == 0, installed.stderr
    probe = (
        "import importlib.metadata as m, json, cronwell_client;"
        "d = m.distribution('cronwell-client');"
        "print(json.dumps([cronwell_client.__file__, cronwell_client.__version__, d.version,"
        " d.requires, sorted(str(f) for f in d.files if f.parts[0] == 'cronwell_client' and f.suffix != '.pyc')]))"
    )
    shown = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, env={"PYTHONPATH": str(target)}, capture_output=True, text=True
    )
    assert shown.returncode == 0, shown.stderr
    where, version, distributed, requires, files = json.loads(shown.stdout)
    assert where.startswith(str(target)) and version == distributed == cronwell_client.__version__
    assert re.fullmatch(r"\d+\.\d+\.\d+", version)
    assert requires == ["httpx<1,>=0.27"] or requires == ["httpx>=0.27,<1"], requires
    modules = sorted(
        f"cronwell_client/{p.name}" for p in (CLIENT_ROOT / "cronwell_client").iterdir() if p.suffix == ".py"
    )
    assert files == sorted([*modules, "cronwell_client/py.typed"])
