"""Tasks for the workflow tests: steps that return what they saw, fail on request, or leave a
witness line, preloaded by the fork server (`PRELOAD`)."""

from __future__ import annotations

import os
import time

from app.tasks import TaskContext, task

PRELOAD = ("app.tasks.catalog", "tests.helpers.workflow_tasks")  # by name: also when run as __main__
WITNESS_ENV = "CRONWELL_TEST_WORKFLOW_WITNESS"


@task(
    "wf_emit",
    description="Return config['value'], the step's name and what its upstream steps returned.",
    schema={"type": "object"},
)
def emit(config: dict, ctx: TaskContext) -> dict:
    return {"value": config.get("value"), "step": ctx.step, "upstream": ctx.upstream_results}


@task(
    "wf_fail_unless",
    description="Fail unless the file config['path'] exists; then return config['value'].",
    schema={"type": "object"},
)
def fail_unless(config: dict, ctx: TaskContext) -> dict:
    if not os.path.exists(config["path"]):
        raise RuntimeError(f"{config['path']} is missing")
    return {"value": config.get("value"), "upstream": ctx.upstream_results}


@task(
    "wf_witness",
    description=(
        "Append 'run step pid start end' to the witness file, holding the slot config['seconds']; "
        "fail first (no line) while the file config['require'] is missing, if one is named."
    ),
    schema={"type": "object"},
    env=[WITNESS_ENV],
)
def witness(config: dict, ctx: TaskContext) -> dict:
    if config.get("require") and not os.path.exists(config["require"]):
        raise RuntimeError(f"{config['require']} is missing")
    started = time.time()
    time.sleep(config.get("seconds", 0))
    line = f"{ctx.job_id} {ctx.step} {ctx.execution_id} {os.getpid()} {started:.6f} {time.time():.6f}\n"
    fd = os.open(os.environ[WITNESS_ENV], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)
    return {"step": ctx.step, "upstream": sorted(ctx.upstream_results)}


def main() -> None:
    """A real worker process (`python -m tests.helpers.workflow_tasks --worker-id ID --slots N
    --witness FILE`) whose fork server preloads these tasks: for the workflow process tests."""
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--worker-id", required=True)
    parser.add_argument("--slots", type=int, default=1)
    parser.add_argument("--witness", required=True)
    args = parser.parse_args()
    os.environ[WITNESS_ENV] = args.witness  # the task processes receive it: their task declares it

    from app import create_app
    from app.executor import ForkServer
    from app.services.engine.worker import Worker

    app = create_app()
    with app.app_context():
        executor = ForkServer(preload=PRELOAD, kill_grace_seconds=1.0)
        Worker(app, worker_id=args.worker_id, slots=args.slots, executor=executor).run()


if __name__ == "__main__":
    main()
