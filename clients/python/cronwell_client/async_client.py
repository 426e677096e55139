"""`AsyncClient`: the same API as `Client` (client.py), awaited, on httpx.AsyncClient.

The same methods with the same parameters (a test compares the two); each builds its request
and reads its answer with cronwell_client._requests, so only the sending and the sleeping differ.
Lists are async iterators: `async for execution in client.executions.list(status="failed")`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from datetime import datetime
from typing import Any, TypeVar

import httpx

from cronwell_client import _requests as rq
from cronwell_client._version import __version__
from cronwell_client.models import Attempt, Execution, ExecutionExplain, Job, Output, Plan, Queue, QueueStats, Task

DEFAULT_TIMEOUT = 30.0
T = TypeVar("T")


class AsyncClient:
    """A Cronwell server, awaited: `async with AsyncClient(url, token) as client: await client.run(...)`
    (or `await client.aclose()`). `retries` and `httpx_options` as for `Client`; `sleep` is awaited
    before a call is sent again (asyncio.sleep; tests pass one that records)."""

    def __init__(
        self,
        base_url: str,
        token: str | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        retries: int = 3,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        **httpx_options: Any,
    ) -> None:
        self.server = rq.Server.at(base_url, token, f"cronwell-client/{__version__}")
        self.retries = retries
        self._sleep = sleep
        self._http = httpx.AsyncClient(timeout=timeout, headers=self.server.headers, **httpx_options)
        self.runs = AsyncRuns(self)
        self.jobs = AsyncJobs(self)
        self.executions = AsyncExecutions(self)
        self.tasks = AsyncTasks(self)
        self.queues = AsyncQueues(self)

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connections."""
        await self._http.aclose()

    async def request(self, call: rq.Call[T]) -> T:
        """Send `call` (again, while `rq.retry_delay` allows) and parse its answer."""
        attempt = 0
        while True:
            try:
                response = await self._http.request(
                    call.method, self.server.url(call), params=call.params or None, json=call.json, headers=call.headers
                )
            except httpx.TransportError:
                delay = rq.retry_delay(call, attempt, self.retries)
                if delay is None:
                    raise
            else:
                delay = rq.retry_delay(
                    call, attempt, self.retries, status=response.status_code, headers=response.headers
                )
                if delay is None:
                    return call.parse(rq.read(response.status_code, response.headers, response.content))
            attempt += 1
            await self._sleep(delay)

    async def pages(self, call: rq.Call[rq.Page[T]]) -> AsyncIterator[T]:
        """Every item of a list, reading its cursor pages one by one as the iteration reaches them."""
        following: rq.Call[rq.Page[T]] | None = call
        while following is not None:
            page = await self.request(following)
            for item in page.items:
                yield item
            following = page.next

    async def run(
        self,
        task: str,
        config: Mapping[str, Any] | None = None,
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
        """See `Client.run`: a one-off run; a retried call never runs it twice."""
        return await self.request(
            rq.create_run(
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
        )

    async def apply(
        self, document: Mapping[str, Any], *, dry_run: bool = True, prune: bool = False, project: str | None = None
    ) -> Plan:
        """See `Client.apply`: the plan of a job file document (applied unless dry_run)."""
        return await self.request(rq.apply(document, dry_run=dry_run, prune=prune, project=project))


class AsyncRuns:
    """See `Runs`."""

    def __init__(self, client: AsyncClient) -> None:
        self._client = client

    async def create_many(self, runs: list[Mapping[str, Any]]) -> list[Execution]:
        """Up to 1,000 one-off runs in one transaction."""
        return await self._client.request(rq.create_runs(runs))

    async def get(self, execution_id: int) -> Execution:
        """The run, with its output, error and result."""
        return await self._client.request(rq.get_execution(execution_id))

    async def wait(self, execution_id: int, timeout: float = 300.0, *, poll: float = 0.5) -> Execution:
        """The run once it has ended (any terminal status); RunTimeout after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            execution = await self.get(execution_id)
            delay = rq.poll_delay(execution, timeout=timeout, remaining=deadline - time.monotonic(), poll=poll)
            if delay is None:
                return execution
            await asyncio.sleep(delay)

    async def explain(self, execution_id: int) -> ExecutionExplain:
        """Why the run is where it is (or why it ended as it did)."""
        return await self._client.request(rq.explain_execution(execution_id))

    async def output(self, execution_id: int) -> Output:
        """What the run printed (`output`) and its error."""
        return await self._client.request(rq.execution_output(execution_id))

    async def attempts(self, execution_id: int) -> list[Attempt]:
        """The run's attempts, first to last."""
        return await self._client.request(rq.execution_attempts(execution_id))


class AsyncJobs:
    """See `Jobs`."""

    def __init__(self, client: AsyncClient) -> None:
        self._client = client

    def list(self, *, limit: int = 100) -> AsyncIterator[Job]:
        """Every job of the token's project, following the cursor pages (`limit` per page)."""
        return self._client.pages(rq.list_jobs(limit))

    async def get(self, job: int | Job) -> Job:
        """The job, with its ETag."""
        return await self._client.request(rq.get_job(job))

    async def create(self, **fields: Any) -> Job:
        """A new job from its definition's fields."""
        return await self._client.request(rq.create_job(fields))

    async def update(self, job: int | Job, /, *, if_match: str | None = None, **fields: Any) -> Job:
        """Change some fields; PreconditionFailed (412) on a stale Job or `if_match`."""
        return await self._client.request(rq.update_job(job, fields, if_match))

    async def delete(self, job: int | Job, /, *, if_match: str | None = None) -> None:
        """Delete the job and its history."""
        return await self._client.request(rq.delete_job(job, if_match))

    async def trigger(
        self,
        job: int | Job,
        /,
        *,
        delay: str | None = None,
        at: str | None = None,
        config_override: Mapping[str, Any] | None = None,
    ) -> Execution:
        """Run the job now, after `delay` or `at` an instant; a retried call never runs it twice."""
        return await self._client.request(rq.trigger_job(job, delay=delay, at=at, config_override=config_override))

    async def enable(self, job: int | Job) -> Job:
        """Enable the job: it resumes from now."""
        return await self._client.request(rq.enable_job(job))

    async def disable(self, job: int | Job) -> Job:
        """Disable the job and cancel its queued runs."""
        return await self._client.request(rq.disable_job(job))


class AsyncExecutions:
    """See `Executions`."""

    def __init__(self, client: AsyncClient) -> None:
        self._client = client

    def list(
        self,
        *,
        status: str | None = None,
        job: int | None = None,
        queue: str | None = None,
        task: str | None = None,
        one_off: bool | None = None,
        since: str | datetime | None = None,
        until: str | datetime | None = None,
        limit: int = 100,
    ) -> AsyncIterator[Execution]:
        """Every matching execution, newest first, reading the cursor pages as the iteration goes."""
        call = rq.list_executions(
            limit, status=status, job=job, queue=queue, task=task, one_off=one_off, since=since, until=until
        )
        return self._client.pages(call)

    async def get(self, execution_id: int) -> Execution:
        """One execution (the same as `runs.get`)."""
        return await self._client.request(rq.get_execution(execution_id))


class AsyncTasks:
    """See `Tasks`."""

    def __init__(self, client: AsyncClient) -> None:
        self._client = client

    async def list(self) -> list[Task]:
        """Every task a job or a run can name."""
        return await self._client.request(rq.list_tasks())

    async def get(self, name: str) -> Task:
        """One task, with its config schema and an example config."""
        return await self._client.request(rq.get_task(name))


class AsyncQueues:
    """See `Queues`."""

    def __init__(self, client: AsyncClient) -> None:
        self._client = client

    def list(self, *, limit: int = 100) -> AsyncIterator[Queue]:
        """Every queue of the token's project (or the caller's organization), with live stats."""
        return self._client.pages(rq.list_queues(limit))

    async def get(self, queue: int | Queue) -> Queue:
        """The queue with its statistics and the ETag of its settings."""
        return await self._client.request(rq.get_queue(queue))

    async def create(
        self,
        name: str,
        *,
        description: str | None = None,
        concurrency_limit: int | None = None,
        rate_limit: str | None = None,
        priority: int | None = None,
    ) -> Queue:
        """A new queue (admin); see `Queues.create`."""
        fields = {
            "description": description,
            "concurrency_limit": concurrency_limit,
            "rate_limit": rate_limit,
            "priority": priority,
        }
        return await self._client.request(rq.create_queue(name, fields))

    async def update(self, queue: int | Queue, /, *, if_match: str | None = None, **fields: Any) -> Queue:
        """Change some settings (admin); None removes a limit; PreconditionFailed on a stale ETag."""
        return await self._client.request(rq.update_queue(queue, fields, if_match))

    async def delete(self, queue: int | Queue) -> None:
        """Delete a queue no job uses (admin)."""
        return await self._client.request(rq.delete_queue(queue))

    async def pause(self, queue: int | Queue, *, reason: str | None = None) -> Queue:
        """Pause the queue: nothing new starts from it; running work finishes."""
        return await self._client.request(rq.pause_queue(queue, reason))

    async def resume(self, queue: int | Queue) -> Queue:
        """Resume a paused queue."""
        return await self._client.request(rq.resume_queue(queue))

    async def stats(self, queue: int | Queue) -> QueueStats:
        """The queue's live statistics."""
        return await self._client.request(rq.queue_stats(queue))
