"""Reloading a worker's task code without restarting it (SIGHUP, `flask worker reload`, the Reload button).

A reload is asked (`ask`: only a flag, safe in a signal handler), begun at the next wake-up
(`begin`: the worker claims nothing more), and done once nothing runs there any more (`swap`):
every attempt has finished with the code it started on and is recorded. The swap imports the
deployer's modules again in this process (what the worker advertises, the versions it records,
the variables it hands tasks) and starts a fresh fork server, a new interpreter that preloads the
code now on disk. If the new code does not load, the old catalog and fork server stay and the
worker goes on as it was.

It never claims, records or stops a run; the loop decides when a swap may happen and puts the
new fork server and catalog in place.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, NamedTuple

from app.executor import ExecutorCrashed, ForkServer
from app.services.engine import task_env
from app.sql.connections import Database, is_database_trouble
from app.sql.events import insert_event
from app.tasks.loading import (
    TaskModuleError,
    catalog_state,
    catalog_versions,
    preload_modules,
    reload_task_modules,
    restore_catalog,
)

log = logging.getLogger("cronwell.worker")


class NewCode(NamedTuple):
    """A reload's result: the fresh fork server, the catalog it loaded, and how it was asked."""

    executor: ForkServer
    tasks: dict[str, str]  # {task: code version}
    how: str | None


class CodeReload:
    """One worker's reload: asked, under way, swapped (see the module docstring)."""

    def __init__(
        self,
        *,
        database: Database,
        clock: Callable[[], datetime],
        worker_id: str,
        settings: Mapping[str, Any],
        listed_preload: tuple[str, ...],
    ) -> None:
        self.database = database
        self.clock = clock
        self.worker_id = worker_id
        self.settings = settings
        # The catalog's modules as this worker listed them for its fork server; whatever else a
        # given executor preloads (a test's helper module) is kept across reloads (_next_preload).
        self._listed_preload = listed_preload
        self.asked: str | None = None  # how a reload was asked (SIGHUP, command), not begun
        self.under_way: str | None = None  # a reload under way: nothing claimed until nothing runs

    def ask(self, how: str) -> None:
        """Reload at the next wake-up (safe in a signal handler: it only sets a flag)."""
        if self.under_way is None:
            self.asked = how

    def begin(self, *, busy: int, exiting: bool) -> bool:
        """Stop claiming until every attempt that runs (or waits, claimed ahead) has finished with
        the code it started on and is recorded; then `swap`. Whether the reload is now under way:
        a worker that is `exiting` only logs it, as its next start runs the new code anyway."""
        how, self.asked = self.asked, None
        log.info(
            "worker told to reload its task code",
            extra={"event": "worker_reload_received", "worker_id": self.worker_id, "how": how, "busy": busy},
        )
        if exiting:
            return False
        self.under_way = how
        return True

    def swap(self, executor: ForkServer) -> NewCode | None:
        """The reload, once nothing runs: the new catalog loaded and a fresh fork server started
        for it; None, with the old catalog restored and the failure recorded, if the new code
        does not load. `executor` is the running one (its settings are kept); the caller stops it
        once the new one is in place, then calls `swapped`."""
        how, self.under_way = self.under_way, None
        state = catalog_state()
        try:
            reload_task_modules(self.settings.get("CRONWELL_TASK_MODULES"))
            tasks = catalog_versions()
            fresh = ForkServer(
                kill_grace_seconds=executor.kill_grace_seconds,
                preload=self._next_preload(executor),
                pool=executor.pool,
                result_max_bytes=executor.result_max_bytes,
                withhold=task_env.declared_names(),
            )
            fresh.start()
        except (TaskModuleError, ExecutorCrashed) as exc:
            restore_catalog(state)
            error = " ".join(str(exc).split())[:300]
            log.error(
                "reload failed; the worker goes on with the code it had",
                extra={"event": "worker_reload_failed", "worker_id": self.worker_id, "how": how, "error": error},
            )
            self.record_event("worker_reload_failed", how=how, error=error)
            return None
        return NewCode(fresh, tasks, how)

    def swapped(self, new: NewCode, before: dict[str, str]) -> None:
        """The new fork server and catalog are in place: say what changed in the event log."""
        tasks = new.tasks
        self.record_event(
            "worker_reloaded",
            how=new.how,
            tasks=len(tasks),
            added=sorted(set(tasks) - set(before)),
            removed=sorted(set(before) - set(tasks)),
            changed={
                name: [before[name], version] for name, version in tasks.items() if before.get(name, version) != version
            },
        )

    def _next_preload(self, executor: ForkServer) -> tuple[str, ...]:
        """What a fresh fork server preloads: the catalog's modules listed again (a new entry
        point counts), then whatever else the previous one preloaded."""
        listed = preload_modules(self.settings.get("CRONWELL_TASK_MODULES"))
        extra = [module for module in executor.preload if module not in self._listed_preload]
        self._listed_preload = listed
        return tuple(dict.fromkeys([*listed, *extra]))

    def record_event(self, type_: str, **payload: Any) -> None:
        """An event of this worker's in the event log (and its log line); a database that does
        not answer costs the row, not the worker."""
        try:
            with self.database.write_transaction() as conn:
                insert_event(conn, type_, now=self.clock(), worker_id=self.worker_id, **payload)
        except Exception as exc:
            if not is_database_trouble(exc):
                raise
            log.warning(
                "could not record a worker event",
                extra={"event": type_, "worker_id": self.worker_id, "payload": payload, "error": str(exc)[:300]},
            )
