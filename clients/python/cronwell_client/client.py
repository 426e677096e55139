"""`Client` (sync) and `AsyncClient` (async) for a Cronwell server's REST API (/api/v1)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx

from cronwell_client import _requests as rq
from cronwell_client.errors import CronwellError, RunTimeout
from cronwell_client.models import Execution, ExecutionExplain, Job

DEFAULT_TIMEOUT = 30.0


class _Base:
    def __init__(self, base_url: str, token: str | None, retries: int) -> None:
        self.base_url = base_url.rstrip("/")
        self.api = self.base_url + "/api/v1"
        self.retries = retries
        self.headers = {"Accept": "application/json", "User-Agent": "cronwell-client/0.1"}
        if token:
            self.headers["Authorization"] = f"Bearer {token}"

    def _url(self, path: str) -> str:
        if path.startswith("http://") or path.startswith("https://"):
            return path
        if path.startswith("/api/"):
            return self.base_url + path  # a `next` link
        return self.api + path

    def _should_retry(self, call: rq.Call, attempt: int, error: Exception | None, status: int | None) -> bool:
        if not call.retry or attempt >= self.retries:
            return False
        return error is not None or status in rq.RETRIED_STATUSES


# --- sync ------------------------------------------------------------------------------------


class Client(_Base):
    """A Cronwell server: `Client("http://host:8000", token)`. Use as a context manager, or `close()`."""

    def __init__(
        self,
        base_url: str,
        token: str | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        retries: int = 3,
        **httpx_options: Any,
    ) -> None:
        super().__init__(base_url, token, retries)
        self._http = httpx.Client(timeout=timeout, headers=self.headers, **httpx_options)
        self.runs = Runs(self)
        self.jobs = Jobs(self)
        self.executions = Executions(self)
        self.tasks = Tasks(self)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def request(self, call: rq.Call) -> Any:
        attempt = 0
        while True:
            try:
                response = self._http.request(
                    call.method, self._url(call.path), params=call.params or None, json=call.json, headers=call.headers
                )
            except httpx.TransportError as exc:
                if not self._should_retry(call, attempt, exc, None):
                    raise
            else:
                if not self._should_retry(call, attempt, None, response.status_code):
                    return rq.read(response)
            attempt += 1
            time.sleep(min(0.25 * 2**attempt, 4.0))

    def run(
        self,
        task: str,
        config: dict[str, Any] | None = None,
        *,
        delay: str | None = None,
        at: str | None = None,
        queue: str | None = None,
        priority: int | None = None,
        max_attempts: int | None = None,
        timeout_seconds: int | None = None,
        idempotency_key: str | None = None,
        project: str | None = None,
    ) -> Execution:
        """Run `task` once without a job (a one-off run), now, after `delay` ("30s") or `at` an ISO
        instant. A retried call never runs it twice (an Idempotency-Key goes with every call)."""
        call = rq.run_call(
            task,
            config,
            delay=delay,
            at=at,
            queue=queue,
            priority=priority,
            max_attempts=max_attempts,
            timeout_seconds=timeout_seconds,
            idempotency_key=idempotency_key,
            project=project,
        )
        return Execution.from_dict(self.request(call))

    def apply(
        self, document: dict[str, Any], *, dry_run: bool = True, prune: bool = False, project: str | None = None
    ) -> dict[str, Any]:
        """Plan (dry_run, the default) or apply a job file document; the plan."""
        return self.request(rq.apply_call(document, dry_run=dry_run, prune=prune, project=project))


class Runs:
    def __init__(self, client: Client) -> None:
        self._client = client

    def create_many(self, runs: list[dict[str, Any]]) -> list[Execution]:
        """Up to 1,000 one-off runs in one transaction (the API's field names: task, config, in, ...)."""
        answer = self._client.request(rq.many_call(runs))
        return [Execution.from_dict(item) for item in answer["items"]]

    def get(self, execution_id: int) -> Execution:
        return Execution.from_dict(self._client.request(rq.Call("GET", f"/executions/{execution_id}", retry=True)))

    def wait(self, execution_id: int, timeout: float = 300.0, *, poll: float = 0.5) -> Execution:
        """The run once it has ended (any terminal status); RunTimeout after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            execution = self.get(execution_id)
            if execution.status in rq.TERMINAL:
                return execution
            if time.monotonic() >= deadline:
                raise RunTimeout(execution, timeout)
            time.sleep(min(poll, max(0.0, deadline - time.monotonic())))

    def explain(self, execution_id: int) -> ExecutionExplain:
        answer = self._client.request(rq.Call("GET", f"/executions/{execution_id}/explain", retry=True))
        return ExecutionExplain.from_dict(answer)


class Jobs:
    def __init__(self, client: Client) -> None:
        self._client = client

    def list(self, *, limit: int = 100) -> Iterator[Job]:
        for item in _pages(self._client, "/jobs", {"limit": limit}):
            yield Job.from_dict(item)

    def get(self, job_id: int) -> Job:
        return Job.from_dict(self._client.request(rq.Call("GET", f"/jobs/{job_id}", retry=True)))

    def create(self, **fields: Any) -> Job:
        import uuid

        call = rq.Call("POST", "/jobs", json=fields, headers={"Idempotency-Key": uuid.uuid4().hex}, retry=True)
        return Job.from_dict(self._client.request(call))

    def update(self, job_id: int, **fields: Any) -> Job:
        return Job.from_dict(self._client.request(rq.Call("PATCH", f"/jobs/{job_id}", json=fields)))

    def delete(self, job_id: int) -> None:
        self._client.request(rq.Call("DELETE", f"/jobs/{job_id}"))

    def trigger(self, job_id: int, **fields: Any) -> Execution:
        import uuid

        call = rq.Call(
            "POST",
            f"/jobs/{job_id}/trigger",
            json=fields or None,
            headers={"Idempotency-Key": uuid.uuid4().hex},
            retry=True,
        )
        return Execution.from_dict(self._client.request(call))

    def enable(self, job_id: int) -> Job:
        return Job.from_dict(self._client.request(rq.Call("POST", f"/jobs/{job_id}/enable")))

    def disable(self, job_id: int) -> Job:
        return Job.from_dict(self._client.request(rq.Call("POST", f"/jobs/{job_id}/disable")))


class Executions:
    def __init__(self, client: Client) -> None:
        self._client = client

    def list(
        self,
        *,
        status: str | None = None,
        job: int | None = None,
        queue: str | None = None,
        task: str | None = None,
        one_off: bool | None = None,
        since: str | None = None,
        until: str | None = None,
        limit: int = 100,
    ) -> Iterator[Execution]:
        """Every matching execution, newest first, following the cursor pages as it goes."""
        params = rq.list_params(
            status=status, job=job, queue=queue, task=task, one_off=one_off, since=since, until=until, limit=limit
        )
        for item in _pages(self._client, "/executions", params):
            yield Execution.from_dict(item)

    def get(self, execution_id: int) -> Execution:
        return self._client.runs.get(execution_id)


class Tasks:
    def __init__(self, client: Client) -> None:
        self._client = client

    def list(self) -> list[dict[str, Any]]:
        """The server's task catalog (GET /api/v1/tasks)."""
        answer = self._client.request(rq.Call("GET", "/tasks", retry=True))
        return answer["items"] if isinstance(answer, dict) and "items" in answer else answer


def _pages(client: Client, path: str, params: dict[str, Any]) -> Iterator[dict[str, Any]]:
    call: rq.Call | None = rq.Call("GET", path, params=params, retry=True)
    while call is not None:
        page = client.request(call)
        yield from page["items"]
        call = rq.Call("GET", page["next"], retry=True) if page.get("next") else None


# --- async -----------------------------------------------------------------------------------


class AsyncClient(_Base):
    """The same API, awaited: `async with AsyncClient(url, token) as client: await client.run(...)`."""

    def __init__(
        self,
        base_url: str,
        token: str | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        retries: int = 3,
        **httpx_options: Any,
    ) -> None:
        super().__init__(base_url, token, retries)
        self._http = httpx.AsyncClient(timeout=timeout, headers=self.headers, **httpx_options)
        self.runs = AsyncRuns(self)
        self.jobs = AsyncJobs(self)
        self.executions = AsyncExecutions(self)

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def request(self, call: rq.Call) -> Any:
        attempt = 0
        while True:
            try:
                response = await self._http.request(
                    call.method, self._url(call.path), params=call.params or None, json=call.json, headers=call.headers
                )
            except httpx.TransportError as exc:
                if not self._should_retry(call, attempt, exc, None):
                    raise
            else:
                if not self._should_retry(call, attempt, None, response.status_code):
                    return rq.read(response)
            attempt += 1
            await asyncio.sleep(min(0.25 * 2**attempt, 4.0))

    async def run(self, task: str, config: dict[str, Any] | None = None, **options: Any) -> Execution:
        """See `Client.run`."""
        call = rq.run_call(
            task,
            config,
            **{
                name: options.get(name)
                for name in (
                    "delay",
                    "at",
                    "queue",
                    "priority",
                    "max_attempts",
                    "timeout_seconds",
                    "idempotency_key",
                    "project",
                )
            },
        )
        return Execution.from_dict(await self.request(call))

    async def apply(
        self, document: dict[str, Any], *, dry_run: bool = True, prune: bool = False, project: str | None = None
    ) -> dict[str, Any]:
        return await self.request(rq.apply_call(document, dry_run=dry_run, prune=prune, project=project))


class AsyncRuns:
    def __init__(self, client: AsyncClient) -> None:
        self._client = client

    async def get(self, execution_id: int) -> Execution:
        answer = await self._client.request(rq.Call("GET", f"/executions/{execution_id}", retry=True))
        return Execution.from_dict(answer)

    async def wait(self, execution_id: int, timeout: float = 300.0, *, poll: float = 0.5) -> Execution:
        deadline = time.monotonic() + timeout
        while True:
            execution = await self.get(execution_id)
            if execution.status in rq.TERMINAL:
                return execution
            if time.monotonic() >= deadline:
                raise RunTimeout(execution, timeout)
            await asyncio.sleep(min(poll, max(0.0, deadline - time.monotonic())))


class AsyncJobs:
    def __init__(self, client: AsyncClient) -> None:
        self._client = client

    async def get(self, job_id: int) -> Job:
        return Job.from_dict(await self._client.request(rq.Call("GET", f"/jobs/{job_id}", retry=True)))

    async def list(self, *, limit: int = 100) -> AsyncIterator[Job]:
        async for item in _apages(self._client, "/jobs", {"limit": limit}):
            yield Job.from_dict(item)


class AsyncExecutions:
    def __init__(self, client: AsyncClient) -> None:
        self._client = client

    async def list(self, **filters: Any) -> AsyncIterator[Execution]:
        params = rq.list_params(**{"limit": 100, **filters})
        async for item in _apages(self._client, "/executions", params):
            yield Execution.from_dict(item)


async def _apages(client: AsyncClient, path: str, params: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
    call: rq.Call | None = rq.Call("GET", path, params=params, retry=True)
    while call is not None:
        page = await client.request(call)
        for item in page["items"]:
            yield item
        call = rq.Call("GET", page["next"], retry=True) if page.get("next") else None


__all__ = ["AsyncClient", "Client", "CronwellError"]
