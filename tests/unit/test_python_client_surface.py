"""The Python client without a server: `AsyncClient` has exactly `Client`'s surface (the same
methods, parameters and results, awaited or async-iterated), each method of both calls the same
request builder of cronwell_client._requests, and the shared pieces (the retry rule, the wait
step, the models, If-Match) behave. tests/api/test_python_client.py runs both against a server."""

from __future__ import annotations

import ast
import asyncio
import inspect
import sys
from pathlib import Path

import httpx
import pytest

from app.domain.states import TERMINAL

CLIENT_ROOT = Path(__file__).resolve().parents[2] / "clients" / "python"
sys.path.insert(0, str(CLIENT_ROOT))

import cronwell_client  # noqa: E402  (from its source folder: the package is not installed in the venv)
from cronwell_client import _requests as rq  # noqa: E402
from cronwell_client import async_client, client  # noqa: E402

PAIRS = [
    (client.Client, async_client.AsyncClient),
    (client.Runs, async_client.AsyncRuns),
    (client.Jobs, async_client.AsyncJobs),
    (client.Executions, async_client.AsyncExecutions),
    (client.Tasks, async_client.AsyncTasks),
    (client.Queues, async_client.AsyncQueues),
]
RENAMED = {"close": "aclose", "__enter__": "__aenter__", "__exit__": "__aexit__"}  # httpx's names
SYNC_NAMES = {awaited: sync for sync, awaited in RENAMED.items()}


def _methods(cls: type) -> dict[str, object]:
    return {
        name: member
        for name, member in vars(cls).items()
        if inspect.isfunction(member) and (not name.startswith("_") or name in RENAMED or name in RENAMED.values())
    }


@pytest.mark.parametrize(("sync", "awaited"), PAIRS, ids=[pair[0].__name__ for pair in PAIRS])
def test_the_async_client_has_the_sync_clients_surface(sync, awaited):
    sync_methods, async_methods = _methods(sync), _methods(awaited)
    assert sorted(RENAMED.get(name, name) for name in sync_methods) == sorted(async_methods)
    for name, method in sync_methods.items():
        twin = async_methods[RENAMED.get(name, name)]
        mine, theirs = inspect.signature(method), inspect.signature(twin)
        assert list(mine.parameters.values()) == list(theirs.parameters.values()), name
        returns = str(mine.return_annotation)
        if returns.startswith("Iterator["):  # a list: an async iterator, called without await
            assert theirs.return_annotation == "Async" + returns, name
            assert not inspect.iscoroutinefunction(twin), name
        else:
            assert theirs.return_annotation == {"Client": "AsyncClient"}.get(returns, returns), name
            assert inspect.iscoroutinefunction(twin) or inspect.isasyncgenfunction(twin), name


def test_both_clients_take_the_same_options():
    sync, awaited = inspect.signature(client.Client), inspect.signature(async_client.AsyncClient)
    assert list(sync.parameters) == list(awaited.parameters)
    for name, parameter in sync.parameters.items():
        if name != "sleep":  # time.sleep, or asyncio.sleep awaited
            assert parameter == awaited.parameters[name], name


def test_both_clients_have_the_same_namespaces():
    sync, awaited = cronwell_client.Client("http://cronwell.test"), cronwell_client.AsyncClient("http://cronwell.test")
    try:
        spaces = {name for name, value in vars(sync).items() if type(value) in {pair[0] for pair in PAIRS}}
        assert spaces == {"runs", "jobs", "executions", "tasks", "queues"}
        for name in spaces:
            assert (type(getattr(sync, name)), type(getattr(awaited, name))) in PAIRS
    finally:
        sync.close()
        asyncio.run(awaited.aclose())


def _builders_called(path: Path) -> dict[tuple[str, str], set[str]]:
    """(class, method) -> the names of cronwell_client._requests (as `rq.`) each method uses."""
    uses: dict[tuple[str, str], set[str]] = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.ClassDef):
            for method in node.body:
                if isinstance(method, ast.FunctionDef | ast.AsyncFunctionDef):
                    name = SYNC_NAMES.get(method.name, method.name)
                    uses[(node.name.removeprefix("Async"), name)] = {
                        sub.attr
                        for sub in ast.walk(method)
                        if isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name) and sub.value.id == "rq"
                    }
    return uses


def test_each_method_of_both_clients_builds_its_request_with_the_same_shared_function():
    package = CLIENT_ROOT / "cronwell_client"
    sync, awaited = _builders_called(package / "client.py"), _builders_called(package / "async_client.py")
    assert sync == awaited
    builders = {
        name for name, value in vars(rq).items() if inspect.isfunction(value) and value.__module__ == rq.__name__
    }
    used = set().union(*sync.values())
    unused = {name for name in builders - used if not name.startswith("_")} - {"body_of", "page", "read"}
    assert unused == set(), "a request builder no client method calls"
    for source in ("client.py", "async_client.py"):
        tree = ast.parse((package / source).read_text())
        built = [
            node
            for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "Call"
        ]
        assert built == [], f"{source} builds a request itself (the shared module's work)"


def test_the_terminal_statuses_are_the_servers():
    assert rq.TERMINAL == {status.value for status in TERMINAL}


def test_only_calls_safe_to_send_again_are_sent_again():
    keyed = rq.create_run("echo", {})
    assert keyed.retry and keyed.headers["Idempotency-Key"]
    assert rq.create_run("echo", {}).headers != keyed.headers  # a new key for each method call
    assert rq.retry_delay(keyed, 0, 3) == 0.25  # the connection dropped
    assert rq.retry_delay(keyed, 1, 3, status=503) == 0.5
    assert rq.retry_delay(keyed, 3, 3) is None  # retries spent
    assert rq.retry_delay(keyed, 0, 3, status=409, headers={"Retry-After": "1"}) == 1.0  # the key's first try runs
    assert rq.retry_delay(keyed, 0, 3, status=409, headers={}) is None  # a conflict of state stands
    assert rq.retry_delay(keyed, 0, 3, status=422) is None
    unsafe = rq.update_job(7, {"priority": 1}, None)
    assert not unsafe.retry and rq.retry_delay(unsafe, 0, 3) is None
    assert rq.retry_delay(unsafe, 0, 3, status=429, headers={"Retry-After": "1"}) is None
    assert rq.get_job(7).retry and rq.list_jobs(10).retry


def test_a_rate_limit_or_an_overload_is_sent_again_after_its_retry_after():
    read = rq.get_queue(3)
    assert rq.retry_delay(read, 0, 3, status=429, headers={"Retry-After": "7"}) == 7.0
    assert rq.retry_delay(read, 2, 3, status=503, headers={"Retry-After": "0"}) == 0.0
    assert rq.retry_delay(read, 1, 3, status=429, headers={}) == 0.5  # no Retry-After: the backoff
    assert rq.retry_delay(read, 1, 3, status=429, headers={"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.5
    assert rq.retry_delay(read, 0, 3, status=503, headers={"Retry-After": "nan"}) == 0.25
    assert rq.retry_delay(read, 0, 3, status=503, headers={"Retry-After": "-5"}) == 0.25
    cap = rq.MAX_RETRY_AFTER_SECONDS
    assert rq.retry_delay(read, 0, 3, status=429, headers={"Retry-After": str(cap)}) == cap
    assert rq.retry_delay(read, 0, 3, status=429, headers={"Retry-After": str(cap + 1)}) is None  # raised at once
    assert rq.retry_delay(read, 3, 3, status=429, headers={"Retry-After": "1"}) is None  # retries spent
    assert rq.retry_delay(read, 0, 3, status=409, headers={"Retry-After": "30"}) == rq.MAX_BACKOFF_SECONDS


def test_only_reads_and_keyed_posts_may_be_sent_again():
    assert rq.Call("GET", "/api/v1/queues", retry=True).retry
    assert rq.Call("POST", "/api/v1/runs", headers={"Idempotency-Key": "k"}, retry=True).retry
    for method in ("POST", "PATCH", "DELETE", "PUT"):
        with pytest.raises(ValueError, match="not safe to send again"):
            rq.Call(method, "/api/v1/queues/3", retry=True)
    for unkeyed in (rq.create_queue("q", {}), rq.pause_queue(3, None), rq.resume_queue(3), rq.delete_queue(3)):
        assert not unkeyed.retry, unkeyed.path
    assert rq.update_queue(3, {"concurrency_limit": None}, None).json == {"concurrency_limit": None}
    with pytest.raises(TypeError, match="unknown queue fields: paused"):
        rq.update_queue(3, {"paused": True}, None)


def test_the_wait_step():
    pending, done = cronwell_client.Execution(id=1, status="pending"), cronwell_client.Execution(id=1, status="failed")
    assert rq.poll_delay(done, timeout=5, remaining=-1, poll=0.5) is None
    assert rq.poll_delay(pending, timeout=5, remaining=0.2, poll=0.5) == 0.2
    with pytest.raises(cronwell_client.RunTimeout) as late:
        rq.poll_delay(pending, timeout=5, remaining=0, poll=0.5)
    assert late.value.execution is pending and "still pending after 5 s" in str(late.value)


def test_if_match_comes_from_the_job_as_read_or_the_caller():
    read = cronwell_client.Job.from_dict({"id": 7, "name": "n"}, etag='"v1"')
    assert rq.update_job(read, {}, None).headers == {"If-Match": '"v1"'}
    assert rq.update_job(read, {}, '"v2"').headers == {"If-Match": '"v2"'}
    assert rq.update_job(7, {}, None).headers == {}
    assert rq.delete_job(read, None).headers == {"If-Match": '"v1"'}
    assert rq.get_job(read).path == rq.get_job(7).path == "/api/v1/jobs/7"


def test_models_keep_what_they_do_not_know_and_read_keyword_fields():
    task = cronwell_client.Task.from_dict({"name": "t", "async": True, "added_later": 1})
    assert task.name == "t" and task.async_ is True and task["added_later"] == 1 and task.etag is None
    assert "added_later" not in repr(task)


def test_a_problem_document_becomes_its_exception():
    def refuse(request: httpx.Request) -> httpx.Response:
        problem = {"title": "Precondition failed", "status": 412, "detail": "the object changed"}
        return httpx.Response(412, json=problem, headers={"Content-Type": "application/problem+json"})

    with cronwell_client.Client("http://cronwell.test", transport=httpx.MockTransport(refuse)) as api:
        with pytest.raises(cronwell_client.PreconditionFailed) as refused:
            api.jobs.update(7, name="x")
    assert refused.value.status == 412 and refused.value.detail == "the object changed"
    with pytest.raises(cronwell_client.ValidationFailed) as unprocessable:
        rq.read(422, {}, b'{"title": "t", "detail": "d", "errors": {"config": "bad"}}')
    assert unprocessable.value.errors == {"config": "bad"} and str(unprocessable.value) == "422 t: d (config: bad)"
    with pytest.raises(cronwell_client.RateLimited) as limited:
        rq.read(429, {"Retry-After": "12"}, b'{"title": "Too many requests", "detail": "10 per 1 minute"}')
    assert limited.value.retry_after == 12.0
    assert str(limited.value) == "429 Too many requests: 10 per 1 minute; retry after 12 s"
