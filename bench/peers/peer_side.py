"""The peers' side of `python -m bench peers`: runs with the PEER virtual environment's Python.

    python peer_side.py SYSTEM load --count N      # put N no-op jobs on the system's queue, exit
    python peer_side.py SYSTEM worker [...]        # get ready, print `ready`, wait for a line on
                                                   # stdin (the go signal), then work

SYSTEM is `procrastinate` (PEERS_PG_URL), `rq` or `celery` (PEERS_REDIS_URL). Worker output goes
to stderr (the harness's log file); stdout carries only `ready`. This file imports nothing from
Cronwell and only the peer it is asked for, so it runs where only the peers are installed.
Celery has no timestamps of its own without a result backend, so its worker appends one fixed-width
line per finished task (`F<ns since epoch>`) and one per pool process for its first start
(`S<ns>`) to PEERS_STAMPS from the task_prerun/task_postrun signals: one write(2) per task.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

QUEUE = "peers"
STAMP_WIDTH = 21  # "F" + 19 digits + "\n"


def noop() -> None:
    """The job every system runs: nothing."""


def _ready_then_go() -> None:
    print("ready", flush=True)
    sys.stdin.readline()
    os.dup2(2, 1)  # from here on anything printed goes to the log, not the harness's pipe


# --- Procrastinate -----------------------------------------------------------------------------


def _procrastinate_app():
    import procrastinate

    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=os.environ["PEERS_PG_URL"]))
    app.task(name="peers.noop", queue=QUEUE)(noop)
    return app


def procrastinate_load(count: int) -> None:
    app = _procrastinate_app()
    with app.open():
        app.schema_manager.apply_schema()
        task = app.tasks["peers.noop"]
        for start in range(0, count, 1000):
            task.batch_defer(*[{} for _ in range(min(1000, count - start))])


def procrastinate_worker(concurrency: int) -> None:
    app = _procrastinate_app()
    with app.open():
        _ready_then_go()
        app.run_worker(queues=[QUEUE], concurrency=concurrency, wait=False, install_signal_handlers=True)


# --- rq ------------------------------------------------------------------------------------------


def _redis():
    from redis import Redis

    return Redis.from_url(os.environ["PEERS_REDIS_URL"])


def rq_load(count: int) -> None:
    from rq import Queue

    queue = Queue(QUEUE, connection=_redis())
    for start in range(0, count, 500):
        batch = [
            Queue.prepare_data("peer_side.noop", result_ttl=3600, ttl=3600) for _ in range(min(500, count - start))
        ]
        queue.enqueue_many(batch)


def rq_worker(name: str) -> None:
    from rq import Worker

    worker = Worker([QUEUE], connection=_redis(), name=name)
    _ready_then_go()
    worker.work(burst=True, logging_level="WARNING")


# --- Celery --------------------------------------------------------------------------------------


def _celery_app():
    from celery import Celery, signals

    app = Celery("peers", broker=os.environ["PEERS_REDIS_URL"])
    app.conf.update(task_ignore_result=True, result_backend=None, worker_hijack_root_logger=False)
    app.task(name="peers.noop", ignore_result=True)(noop)
    stamps = os.environ.get("PEERS_STAMPS")
    state = {"fd": None}

    def write(kind: str) -> None:
        if state["fd"] is None:
            state["fd"] = os.open(stamps, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            os.write(state["fd"], f"S{time.time_ns():019d}\n".encode())
        if kind == "F":
            os.write(state["fd"], f"F{time.time_ns():019d}\n".encode())

    if stamps:
        signals.task_prerun.connect(lambda **_: write("S"), weak=False)
        signals.task_postrun.connect(lambda **_: write("F"), weak=False)
    return app


def celery_load(count: int) -> None:
    app = _celery_app()
    with app.producer_or_acquire() as producer:
        for _ in range(count):
            app.send_task("peers.noop", queue=QUEUE, producer=producer)


def celery_worker(concurrency: int) -> None:
    app = _celery_app()
    _ready_then_go()
    app.worker_main(
        [
            "worker",
            "--pool=prefork",
            f"--concurrency={concurrency}",
            f"--queues={QUEUE}",
            "--loglevel=WARNING",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("system", choices=["procrastinate", "rq", "celery"])
    parser.add_argument("mode", choices=["load", "worker"])
    parser.add_argument("--count", type=int, default=3000)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--name", default=f"peers-{os.getpid()}")
    args = parser.parse_args()
    if args.mode == "load":
        {"procrastinate": procrastinate_load, "rq": rq_load, "celery": celery_load}[args.system](args.count)
    elif args.system == "procrastinate":
        procrastinate_worker(args.concurrency)
    elif args.system == "rq":
        rq_worker(args.name)
    else:
        celery_worker(args.concurrency)


if __name__ == "__main__":
    main()
