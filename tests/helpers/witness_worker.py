"""A real worker process whose task processes leave a witness: for the kill-at-random test.

    python -m tests.helpers.witness_worker --worker-id ID --slots N --witness FILE [--ahead-wait S]

Runs `Worker.run()` (the real loop, fork server and turn) with the app configured from the
environment, and preloads `test_witness`, a no-op task that first appends one line
"execution_id attempt pid time" to FILE (time: `time.time()` as the task starts), then sleeps
config["seconds"] (default 0) (one O_APPEND write, so lines from concurrent task processes
never interleave and a line survives the worker being SIGKILLed right after it). `--ahead-wait`
sets how much work the worker claims ahead (AHEAD_WAIT_SECONDS: a deeper buffer).
"""

from __future__ import annotations

import argparse
import os
import time

from app.tasks.registry import TaskContext, task

WITNESS_ENV = "CRONWELL_TEST_WITNESS_FILE"


@task(
    "test_witness",
    description="Append 'execution attempt pid time' to the witness file.",
    schema={"type": "object"},
    env=[WITNESS_ENV],  # a task process receives only the variables its task declares
)
def witness(config: dict, ctx: TaskContext) -> None:
    fd = os.open(os.environ[WITNESS_ENV], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{ctx.execution_id} {ctx.attempt} {os.getpid()} {time.time():.6f}\n".encode())
    finally:
        os.close(fd)
    time.sleep(config.get("seconds", 0))  # then hold the slot, if asked (runs queue behind it)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--worker-id", required=True)
    parser.add_argument("--slots", type=int, default=4)
    parser.add_argument("--witness", required=True)
    parser.add_argument("--ahead-wait", type=float, default=None)
    args = parser.parse_args()
    os.environ[WITNESS_ENV] = args.witness  # inherited by the zygote and every task process

    from app import create_app
    from app.executor import ForkServer
    from app.services.engine import run_book
    from app.services.engine.worker import Worker

    if args.ahead_wait is not None:
        run_book.AHEAD_WAIT_SECONDS = args.ahead_wait

    app = create_app()
    with app.app_context():
        executor = ForkServer(preload=("app.tasks.catalog", "tests.helpers.witness_worker"), kill_grace_seconds=1.0)
        Worker(app, worker_id=args.worker_id, slots=args.slots, executor=executor).run()


if __name__ == "__main__":
    main()
