"""`Client`: a Cronwell server's REST API (/api/v1), synchronous, on httpx.Client.

Every method builds its request and reads its answer with cronwell_client._requests; this module
only sends (retrying what is safe to send again) and sleeps. async_client.py mirrors it line for line.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime
from typing import Any, TypeVar

import httpx

from cronwell_client import _requests as rq
from cronwell_client._version import __version__
from cronwell_client.models import Attempt, Execution, ExecutionExplain, Job, Output, Plan, Queue, QueueStats, Task

DEFAULT_TIMEOUT = 30.0
T = TypeVar("T")


class Client:
    """A Cronwell server: `Client("http://host:8000", token)`. Use as a context manager, or `close()`.

    `retries`: how many times a call that is safe to send again (reads, and runs, jobs and
    triggers created with their Idempotency-Key) is sent again after a dropped connection, a
    502/503/504 or a 429 (after its Retry-After: see README.md); `sleep` is how the client waits
    before sending again (tests pass one that records); `httpx_options` go to httpx.Client (a
    `transport`, `verify`, ...)."""

    def __init__(
        self,
        base_url: str,
        token: str | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        retries: int = 3,
        sleep: Callable[[float], None] = time.sleep,
        **httpx_options: Any,
    ) -> None:
        self.server = rq.Server.at(base_url, token, f"cronwell-client/{__version__}")
        self.retries = retries
        self._sleep = sleep
        self._http = httpx.Client(timeout=timeout, headers=self.server.headers, **httpx_options)
        self.runs = Runs(self)
        self.jobs = Jobs(self)
        self.executions = Executions(self)
        self.tasks = Tasks(self)
        self.queues = Queues(self)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connections."""
        self._http.close()

    def request(self, call: rq.Call[T]) -> T:
        """Send `call` (again, while `rq.retry_delay` allows) and parse its answer."""
        attempt = 0
        while True:
            try:
                response = self._http.request(
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
            self._sleep(delay)

    def pages(self, call: rq.Call[rq.Page[T]]) -> Iterator[T]:
        """Every item of a list, reading its cursor pages one by one as the iteration reaches them."""
        following: rq.Call[rq.Page[T]] | None = call
        while following is not None:
            page = self.request(following)
            yield from page.items
            following = page.next

    def run(
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
        """Run `task` once without a job (a one-off run), now, after `delay` ("30s") or `at` an ISO
        instant. A retried call never runs it twice (an Idempotency-Key goes with every call);
        `idempotency_key` is yours: a second run with it answers the first run."""
        return self.request(
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

    def apply(
        self, document: Mapping[str, Any], *, dry_run: bool = True, prune: bool = False, project: str | None = None
    ) -> Plan:
        """Plan (dry_run, the default) or apply a job file document (`project`, `jobs`, `queues`)."""
        return self.request(rq.apply(document, dry_run=dry_run, prune=prune, project=project))


class Runs:
    """Runs (executions) by id: create, read, wait for."""

    def __init__(self, client: Client) -> None:
        self._client = client

    def create_many(self, runs: list[Mapping[str, Any]]) -> list[Execution]:
        """Up to 1,000 one-off runs in one transaction (the API's field names: task, config, in, ...)."""
        return self._client.request(rq.create_runs(runs))

    def get(self, execution_id: int) -> Execution:
        """The run, with its output, error and result."""
        return self._client.request(rq.get_execution(execution_id))

    def wait(self, execution_id: int, timeout: float = 300.0, *, poll: float = 0.5) -> Execution:
        """The run once it has ended (any terminal status); RunTimeout after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            execution = self.get(execution_id)
            delay = rq.poll_delay(execution, timeout=timeout, remaining=deadline - time.monotonic(), poll=poll)
            if delay is None:
                return execution
            time.sleep(delay)

    def explain(self, execution_id: int) -> ExecutionExplain:
        """Why the run is where it is (or why it ended as it did)."""
        return self._client.request(rq.explain_execution(execution_id))

    def output(self, execution_id: int) -> Output:
        """What the run printed (`output`) and its error."""
        return self._client.request(rq.execution_output(execution_id))

    def attempts(self, execution_id: int) -> list[Attempt]:
        """The run's attempts, first to last."""
        return self._client.request(rq.execution_attempts(execution_id))


class Jobs:
    """Jobs: `update` and `delete` take a Job as read (its ETag becomes If-Match) or an id."""

    def __init__(self, client: Client) -> None:
        self._client = client

    def list(self, *, limit: int = 100) -> Iterator[Job]:
        """Every job of the token's project, following the cursor pages (`limit` per page)."""
        return self._client.pages(rq.list_jobs(limit))

    def get(self, job: int | Job) -> Job:
        """The job, with its ETag."""
        return self._client.request(rq.get_job(job))

    def create(self, **fields: Any) -> Job:
        """A new job from its definition's fields (name, task, schedule_type, schedule, ...)."""
        return self._client.request(rq.create_job(fields))

    def update(self, job: int | Job, /, *, if_match: str | None = None, **fields: Any) -> Job:
        """Change some fields. PreconditionFailed (412) when the job changed since `job` (a Job as
        read) or the ETag `if_match` was read; with an id and no if_match the edit is unconditional."""
        return self._client.request(rq.update_job(job, fields, if_match))

    def delete(self, job: int | Job, /, *, if_match: str | None = None) -> None:
        """Delete the job and its history (PreconditionFailed as for `update`)."""
        return self._client.request(rq.delete_job(job, if_match))

    def trigger(
        self,
        job: int | Job,
        /,
        *,
        delay: str | None = None,
        at: str | None = None,
        config_override: Mapping[str, Any] | None = None,
    ) -> Execution:
        """Run the job now, after `delay` or `at` an instant, optionally with a config override;
        sent with an Idempotency-Key (a retried call never runs it twice)."""
        return self._client.request(rq.trigger_job(job, delay=delay, at=at, config_override=config_override))

    def enable(self, job: int | Job) -> Job:
        """Enable the job: it resumes from now."""
        return self._client.request(rq.enable_job(job))

    def disable(self, job: int | Job) -> Job:
        """Disable the job and cancel its queued runs."""
        return self._client.request(rq.disable_job(job))


class Executions:
    """Executions, listed with filters (the runs of jobs and one-off runs alike)."""

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
        since: str | datetime | None = None,
        until: str | datetime | None = None,
        limit: int = 100,
    ) -> Iterator[Execution]:
        """Every matching execution, newest first, reading the cursor pages as the iteration goes."""
        call = rq.list_executions(
            limit, status=status, job=job, queue=queue, task=task, one_off=one_off, since=since, until=until
        )
        return self._client.pages(call)

    def get(self, execution_id: int) -> Execution:
        """One execution (the same as `runs.get`)."""
        return self._client.request(rq.get_execution(execution_id))


class Tasks:
    """The server's task catalog."""

    def __init__(self, client: Client) -> None:
        self._client = client

    def list(self) -> list[Task]:
        """Every task a job or a run can name."""
        return self._client.request(rq.list_tasks())

    def get(self, name: str) -> Task:
        """One task, with its config schema and an example config."""
        return self._client.request(rq.get_task(name))


class Queues:
    """Queues: `update` takes a Queue as read (its ETag becomes If-Match) or an id, as for jobs."""

    def __init__(self, client: Client) -> None:
        self._client = client

    def list(self, *, limit: int = 100) -> Iterator[Queue]:
        """Every queue of the token's project (or the caller's organization), with live stats."""
        return self._client.pages(rq.list_queues(limit))

    def get(self, queue: int | Queue) -> Queue:
        """The queue with its statistics and the ETag of its settings."""
        return self._client.request(rq.get_queue(queue))

    def create(
        self,
        name: str,
        *,
        description: str | None = None,
        concurrency_limit: int | None = None,
        rate_limit: str | None = None,
        priority: int | None = None,
    ) -> Queue:
        """A new queue (admin): `concurrency_limit` caps its running executions across all
        workers, `rate_limit` its starts ("10/minute"), `priority` is its jobs' default."""
        fields = {
            "description": description,
            "concurrency_limit": concurrency_limit,
            "rate_limit": rate_limit,
            "priority": priority,
        }
        return self._client.request(rq.create_queue(name, fields))

    def update(self, queue: int | Queue, /, *, if_match: str | None = None, **fields: Any) -> Queue:
        """Change description, concurrency_limit, rate_limit or priority (admin); None removes a
        limit. PreconditionFailed (412) when the queue changed since `queue` (as read) or `if_match`."""
        return self._client.request(rq.update_queue(queue, fields, if_match))

    def delete(self, queue: int | Queue) -> None:
        """Delete a queue no job uses (admin); Conflict (409) for `default` or a queue in use."""
        return self._client.request(rq.delete_queue(queue))

    def pause(self, queue: int | Queue, *, reason: str | None = None) -> Queue:
        """Pause the queue: nothing new starts from it; running work finishes."""
        return self._client.request(rq.pause_queue(queue, reason))

    def resume(self, queue: int | Queue) -> Queue:
        """Resume a paused queue."""
        return self._client.request(rq.resume_queue(queue))

    def stats(self, queue: int | Queue) -> QueueStats:
        """The queue's live statistics: pending, running, retrying, finished in the last hour, ..."""
        return self._client.request(rq.queue_stats(queue))
