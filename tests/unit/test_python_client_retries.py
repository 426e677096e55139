"""How the Python client (clients/python, `cronwell_client`) answers a 429 or a 503, over an
httpx.MockTransport that plays the server's answers in order, through `Client` and `AsyncClient`
alike: a call that is safe to repeat (a read, a POST with its Idempotency-Key) is sent again after
the Retry-After seconds, the same request each time, a bounded number of times; any other call
raises RateLimited at once. The sleep is the client's injected one, recorded, so nothing waits."""

from __future__ import annotations

import asyncio
import inspect
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

CLIENT_ROOT = Path(__file__).resolve().parents[2] / "clients" / "python"
sys.path.insert(0, str(CLIENT_ROOT))

import cronwell_client  # noqa: E402  (from its source folder: the package is not installed in the venv)

LIMITED = {"title": "Too many requests", "status": 429, "detail": "10 per 1 minute"}
JOB = {"id": 7, "name": "nightly", "task": "echo"}
RUN = {"id": 11, "task": "echo", "status": "pending", "one_off": True}


def limited(retry_after: str | None = "2") -> httpx.Response:
    headers = {"Content-Type": "application/problem+json"}
    if retry_after is not None:
        headers["Retry-After"] = retry_after
    return httpx.Response(429, json=LIMITED, headers=headers)


def overloaded(retry_after: str) -> httpx.Response:
    problem = {"title": "Service unavailable", "status": 503, "detail": "draining"}
    return httpx.Response(503, json=problem, headers={"Retry-After": retry_after})


class Server:
    """The answers to send, in order (the last one again once they run out), and the requests."""

    def __init__(self, *answers: httpx.Response) -> None:
        self.answers = list(answers)
        self.sent: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.sent.append(request)
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]


class Sender:
    """send(server, use, **options): `use(client)` on a client of the flavor under test over
    `server`, awaited for AsyncClient; `slept` holds the seconds the client waited (also after
    an exception)."""

    def __init__(self, flavor: str) -> None:
        self.flavor = flavor
        self.slept: list[float] = []

    def __call__(self, server: Server, use: Callable[[Any], Any], **options: Any) -> Any:
        transport = httpx.MockTransport(server)
        if self.flavor == "sync":
            sleep = self.slept.append
            with cronwell_client.Client(
                "http://cronwell.test", "cw_t", transport=transport, sleep=sleep, **options
            ) as api:
                return use(api)

        async def record(seconds: float) -> None:
            self.slept.append(seconds)

        async def run() -> Any:
            async with cronwell_client.AsyncClient(
                "http://cronwell.test", "cw_t", transport=transport, sleep=record, **options
            ) as api:
                result = use(api)
                return await result if inspect.isawaitable(result) else result

        return asyncio.run(run())


@pytest.fixture(params=["sync", "async"])
def send(request) -> Sender:
    return Sender(request.param)


def test_a_read_answered_429_is_sent_again_after_its_retry_after(send):
    server = Server(limited("2"), httpx.Response(200, json=JOB, headers={"ETag": '"v1"'}))
    job = send(server, lambda api: api.jobs.get(7))
    assert isinstance(job, cronwell_client.Job) and job.name == "nightly" and job.etag == '"v1"'
    assert [(r.method, r.url.path) for r in server.sent] == [("GET", "/api/v1/jobs/7")] * 2
    assert send.slept == [2.0]


def test_a_run_is_sent_again_with_its_idempotency_key_after_a_429_and_a_503(send):
    server = Server(limited("1"), overloaded("3"), httpx.Response(201, json=RUN))
    run = send(server, lambda api: api.run("echo", {"n": 1}, delay="1h"))
    assert run.id == 11 and run.status == "pending"
    assert len(server.sent) == 3 and {r.url.path for r in server.sent} == {"/api/v1/runs"}
    keys = {r.headers["Idempotency-Key"] for r in server.sent}
    assert len(keys) == 1 and keys != {""}  # one key, so the server creates the run at most once
    assert {r.content for r in server.sent} == {server.sent[0].content}
    assert json.loads(server.sent[0].content) == {"task": "echo", "config": {"n": 1}, "in": "1h"}
    assert send.slept == [1.0, 3.0]


def test_a_429_without_retry_after_is_sent_again_after_the_backoff(send):
    server = Server(limited(None), limited(None), httpx.Response(200, json=[]))
    tasks = send(server, lambda api: api.tasks.list())
    assert tasks == [] and len(server.sent) == 3
    assert send.slept == [0.25, 0.5]


def test_the_retries_are_bounded_then_the_429_is_raised(send):
    server = Server(limited("1"))  # the server keeps refusing
    with pytest.raises(cronwell_client.RateLimited) as refused:
        send(server, lambda api: api.queues.stats(3), retries=2)
    assert len(server.sent) == 3 and send.slept == [1.0, 1.0]  # the first try and two more
    assert refused.value.status == 429 and refused.value.retry_after == 1.0


def test_a_retry_after_longer_than_the_client_waits_is_raised_at_once(send):
    server = Server(limited("120"), httpx.Response(200, json=JOB))
    with pytest.raises(cronwell_client.RateLimited) as refused:
        send(server, lambda api: api.jobs.get(7))
    assert len(server.sent) == 1 and send.slept == []
    assert refused.value.retry_after == 120.0 and "retry after 120 s" in str(refused.value)


UNSAFE = {
    "jobs.delete": lambda api: api.jobs.delete(7),
    "jobs.update": lambda api: api.jobs.update(7, priority=1),
    "jobs.enable": lambda api: api.jobs.enable(7),
    "queues.create": lambda api: api.queues.create("reports"),
    "queues.update": lambda api: api.queues.update(3, concurrency_limit=2),
    "queues.pause": lambda api: api.queues.pause(3, reason="deploying"),
    "apply": lambda api: api.apply({"project": "default/default", "jobs": []}, dry_run=False),
}


@pytest.mark.parametrize("use", UNSAFE.values(), ids=UNSAFE.keys())
def test_a_call_not_safe_to_repeat_raises_the_429_at_once(send, use):
    server = Server(limited("2"), httpx.Response(200, json=JOB))
    with pytest.raises(cronwell_client.RateLimited) as refused:
        send(server, use)
    assert len(server.sent) == 1 and send.slept == []  # never sent a second time: it might act twice
    assert "Idempotency-Key" not in server.sent[0].headers
    assert refused.value.retry_after == 2.0
    assert str(refused.value) == "429 Too many requests: 10 per 1 minute; retry after 2 s"


def test_a_503_of_an_unsafe_call_stands_too(send):
    server = Server(overloaded("1"), httpx.Response(204))
    with pytest.raises(cronwell_client.CronwellError) as refused:
        send(server, lambda api: api.queues.delete(3))
    assert refused.value.status == 503 and len(server.sent) == 1


def test_a_503_asking_for_longer_than_the_client_waits_is_raised_at_once_as_it_is(send):
    server = Server(overloaded("120"), httpx.Response(200, json=JOB))
    with pytest.raises(cronwell_client.CronwellError) as refused:
        send(server, lambda api: api.jobs.get(7))
    assert not isinstance(refused.value, cronwell_client.RateLimited)
    assert refused.value.status == 503 and len(server.sent) == 1 and send.slept == []
