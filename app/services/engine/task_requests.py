"""What a claimed run's task process is handed: its config, its context, its environment, its timeout.

The context is `app.tasks.registry.TaskContext`'s keywords: the run's identity and attempt, the
directories every task may write to, the database URL and the retention settings only for a task
registered with needs_database=True, a callback's parent and a workflow step's upstream results.
The environment is exactly what a deployer's task declared (app/services/engine/task_env.py).

It builds the request and nothing else: it never reads the database, never starts a process and
never decides whether a run may start.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from app.domain.pacing import retention_settings
from app.executor import TaskRequest
from app.services.engine import task_env
from app.sql.rows import ClaimedExecution
from app.tasks.registry import needs_database, registered_task


class TaskRequests:
    """Builds the TaskRequest of each run one worker starts, from its settings."""

    def __init__(self, settings: Mapping[str, Any], *, worker_id: str, database_url: str) -> None:
        self.worker_id = worker_id
        self._context_base = {"artifact_dir": settings["ARTIFACT_DIR"], "marker_dir": settings["MARKER_DIR"]}
        self._callback_timeout = settings.get("CALLBACK_TIMEOUT_SECONDS", 60)
        # Given only to tasks registered with needs_database=True (app/tasks/registry.py).
        self._database_url = database_url
        self._retention = retention_settings(settings)  # for them too: cleanup_old_runs prunes by these

    def for_run(self, item: ClaimedExecution, attempt: int) -> TaskRequest:
        """The request that runs `attempt` of the claimed run `item`."""
        context = dict(
            self._context_base,
            execution_id=item.id,
            job_id=item.job_id,
            job_name=item.job_name,
            idempotency_key=item.idempotency_key,
            attempt=attempt,
        )
        if needs_database(item.task_to_run):
            context["database_url"] = self._database_url
            context["retention"] = self._retention
        if item.callback_task:
            parent = (item.config_override or {}).get("parent")
            if isinstance(parent, dict) and parent.get("id") is not None:
                context["parent_execution_id"] = parent["id"]
                context["parent_result"] = parent.get("result")
        if item.step:
            context["step"] = item.step
            context["upstream_results"] = dict(item.upstream_results or {})
        env, refused = task_env.request_environment(
            registered_task(item.task_to_run), os.environ, worker_id=self.worker_id
        )
        return TaskRequest(
            execution_id=item.id,
            task_name=item.task_to_run,  # a callback runs its own task
            config=item.config_to_run,  # the job's config with the run's override merged over it
            context=context,
            timeout_seconds=self._callback_timeout if item.callback_task else item.timeout_seconds,
            isolation=item.isolation,  # process: a fork per attempt; pool: a reused process
            env=env,  # a deployer's task: exactly its declared variables and the base
            refused=refused,  # a declared variable missing here: fails without running
        )
