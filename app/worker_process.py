"""`python -m app.worker_process`: the worker parent without SQLAlchemy or Flask (ADR 0012).

`flask worker run` (and `python -m cli worker run`) checks its options and the settings, then
replaces itself with this module (`os.execv`, so the pid, the signals and the supervisor's view
of the process are unchanged): the options as arguments, the settings from the same environment
(`config.load_settings`). What it loads is the worker engine, the executor's client, psycopg or
sqlite3 and the task registry, which is what keeps the parent's memory low
(docs/performance.md, "Memory"); tests/unit/test_worker_imports.py keeps SQLAlchemy and Flask out.

It can be run directly with the same options as `flask worker run`; errors are one line on stderr
and exit 1, as there.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from collections.abc import Sequence

from config import InsecureSettings, load_settings, refuse_insecure_start

log = logging.getLogger("cronwell.worker")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line and exit 1, as the CLI's usage errors
        print(f"Error: {message}", file=sys.stderr)
        raise SystemExit(1)


def arguments(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = _Parser(prog="python -m app.worker_process", description="Cronwell's worker (see `flask worker run`).")
    parser.add_argument("--workers", dest="slots", type=int, default=4)
    parser.add_argument("--once", action="store_true")
    parser.add_argument("--worker-id", default=None)
    parser.add_argument("--queues", default=None)
    parser.add_argument("--metrics-port", type=int, default=None)
    parser.add_argument("--metrics-host", default="127.0.0.1")
    args = parser.parse_args(argv)
    if not 1 <= args.slots <= 256:
        parser.error(f"--workers {args.slots} is not in the range 1<=x<=256")
    if args.metrics_port is not None and not 1 <= args.metrics_port <= 65535:
        parser.error(f"--metrics-port {args.metrics_port} is not in the range 1<=x<=65535")
    args.queues = queue_names(args.queues, parser)
    return args


def queue_names(value: str | None, parser: argparse.ArgumentParser | None = None) -> list[str] | None:
    """`--queues a,b` as names; None for all queues."""
    if not value:
        return None
    names = [name.strip() for name in value.split(",") if name.strip()]
    if not names:
        message = "give at least one queue name, e.g. --queues default,reports"
        if parser is None:
            raise ValueError(message)
        parser.error(message)
    return names


def command_line(
    *, slots: int, once: bool, worker_id: str | None, queues: str | None, metrics_port: int | None, metrics_host: str
) -> list[str]:
    """The arguments `flask worker run` hands this module (its own options, checked)."""
    args = ["-m", __name__, "--workers", str(slots), "--metrics-host", metrics_host]
    if once:
        args.append("--once")
    if worker_id:
        args += ["--worker-id", worker_id]
    if queues:
        args += ["--queues", queues]
    if metrics_port is not None:
        args += ["--metrics-port", str(metrics_port)]
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = arguments(argv)
    settings = load_settings()
    from app.logs import configure_logging

    configure_logging(settings["LOG_FORMAT"], settings["LOG_LEVEL"])
    try:
        refuse_insecure_start(settings, seals_channels=False)  # the worker never reads a channel
    except InsecureSettings as exc:
        log.critical(str(exc), extra={"event": "refused_to_start"})
        return 1
    from pathlib import Path

    from app.services.engine.runtime import WorkerRuntime
    from app.tasks import load_catalog
    from app.tasks.loading import TaskModuleError

    Path(settings["INSTANCE_DIR"]).mkdir(parents=True, exist_ok=True)
    try:
        # The registry: which tasks get the database URL (needs_database), their declared env.
        load_catalog(settings["CRONWELL_TASK_MODULES"])
    except TaskModuleError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1
    return serve(
        WorkerRuntime.from_settings(settings),
        slots=args.slots,
        once=args.once,
        worker_id=args.worker_id,
        queues=args.queues,
        metrics_port=args.metrics_port,
        metrics_host=args.metrics_host,
    )


def serve(
    runtime,
    *,
    slots: int,
    once: bool,
    worker_id: str | None,
    queues: list[str] | None,
    metrics_port: int | None,
    metrics_host: str,
) -> int:
    """Run a worker on `runtime` until it is stopped (`once`: until nothing is due or running),
    saying so as `flask worker run` always has; the exit code. `flask worker run` calls this
    in its own process when it cannot hand over to this module (an app built with settings the
    environment alone would not give, as in tests)."""
    from app.process_status import Status
    from app.services.engine.heartbeats import sync_clock_at_start
    from app.services.engine.worker import Worker
    from app.services.errors import ServiceError
    from app.stop_flag import StopFlag

    sync_clock_at_start(runtime.database)
    try:
        # Unknown queue names stop the process here, before the fork server or anything else starts.
        worker = Worker(runtime, worker_id=worker_id, slots=slots, queues=queues)
    except ServiceError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1
    status = Status("worker", worker.id, as_log=not once and runtime.settings["LOG_FORMAT"] == "json")
    if metrics_port is not None:
        from app import metrics_exposition

        try:
            metrics_exposition.serve(metrics_port, metrics_host, role="worker")
        except OSError as exc:
            print(
                f"Error: cannot serve metrics on {metrics_host}:{metrics_port}: {exc.strerror or exc}", file=sys.stderr
            )
            return 1
        where = f"http://{metrics_host}:{metrics_port}/metrics"
        status.emit("metrics", f"worker metrics on {where} port={metrics_port}", port=metrics_port, host=metrics_host)
    stop = StopFlag().install()
    if not once:
        # SIGHUP: finish what runs, restart the fork server with the code now on disk, go on
        # (the same as `flask worker reload`; the handler only sets a flag the loop reads).
        signal.signal(signal.SIGHUP, lambda signum, frame: worker.request_reload("SIGHUP"))
    served = ",".join(queues) if queues else "all"
    if not once:
        status.emit(
            "started", f"worker {worker.id} started ({slots} slots, queues {served})", slots=slots, queues=served
        )
    stats = worker.run(burst=once, should_stop=stop, echo=status)
    if stats.gave_up:
        print(f"Error: the database kept failing, giving up: {stats.gave_up}", file=sys.stderr)
        return 1
    if not once:
        status.emit("stopped", f"worker {worker.id} stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
