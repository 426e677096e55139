"""Workflow hand-off: how soon a step starts once the steps it waits for have ended (PostgreSQL).

The hand-off happens in the worker's turn that records the upstream step's end (it creates the
next step's execution in that transaction), and the same worker claims it in the statement that
follows. Measured on the wall clock from inside the task processes (bench/workflow_tasks.py:
each step returns when its process started and ended): a hand-off is the next step's process
start minus the previous step's process end, so it includes recording the end, creating the next
step, claiming it and forking its process. Over a chain of steps run by one worker x 4; and a
fan-out (one root, then 50 steps waiting for it) on one worker x 8: from the root's process end
to the last of the 50 processes started.
"""

from __future__ import annotations

import json

from app.clock import utcnow
from bench.harness import BenchDatabase, Figure, summary

NAME = "workflows"
CHAIN = 40
FAN_OUT = 50


def _run(app, steps: list[dict], *, slots: int) -> dict[str, tuple]:
    from sqlalchemy import text

    import bench.workflow_tasks  # noqa: F401 - registers bench_stamp here too (the job's steps are checked)
    from app.executor import ForkServer
    from app.extensions import db
    from app.services.engine.worker import Worker
    from app.services.use_cases import jobs, runs

    job = jobs.create_job(
        {
            "name": f"bench workflow {len(steps)} {utcnow().timestamp()}",
            "task": "always_succeed",
            "schedule_type": "interval",
            "schedule": {"every": "1d"},
            "overlap_policy": "allow",
            "steps": steps,
        },
        now=utcnow(),
        actor="bench",
    )
    run = runs.trigger_run(job.id, {}, now=utcnow(), actor="bench")
    executor = ForkServer(preload=("app.tasks.catalog", "bench.workflow_tasks"))
    try:
        Worker(app, worker_id=f"bench-workflow-{slots}", slots=slots, executor=executor).run(burst=True)
    finally:
        executor.stop()
    db.session.rollback()
    rows = db.session.execute(
        text("SELECT step, status, result FROM executions WHERE workflow_run_id = :r"), {"r": run.id}
    )
    stamps = {row.step: (row.status, json.loads(row.result) if row.result else {}) for row in rows}
    return {step: (status, got.get("start"), got.get("end")) for step, (status, got) in stamps.items()}


def run(db: BenchDatabase, options) -> list[Figure]:
    app = db.app()
    chain_length = 4 if options.smoke else CHAIN
    fan_out = 5 if options.smoke else FAN_OUT
    with app.app_context():
        chain = [{"name": "s0", "task": "bench_stamp"}] + [
            {"name": f"s{i}", "task": "bench_stamp", "after": [f"s{i - 1}"]} for i in range(1, chain_length)
        ]
        ran = _run(app, chain, slots=4)
        handoffs = [(ran[f"s{i}"][1] - ran[f"s{i - 1}"][2]) * 1000 for i in range(1, chain_length)]
        fan = [{"name": "root", "task": "bench_stamp"}] + [
            {"name": f"leaf{i}", "task": "bench_stamp", "after": ["root"]} for i in range(fan_out)
        ]
        spread = _run(app, fan, slots=8)
    failed = sorted(step for step, (status, *_rest) in {**ran, **spread}.items() if status != "succeeded")
    stats = summary(handoffs)
    root_end = spread["root"][2]
    last_start = max(started for step, (_, started, _) in spread.items() if step != "root")
    figures = [
        Figure(
            NAME,
            "step-to-step hand-off p50 (upstream ends -> downstream starts), 1 worker x 4",
            stats["p50"],
            "ms",
            note=f"p95 {stats['p95']:.1f} ms over {len(handoffs)} hand-offs"
            + (f"; NOT succeeded: {failed}" if failed else ""),
        ).judge("<= 10"),
        Figure(
            NAME,
            f"{fan_out}-step fan-out: root ends -> last step started, 1 worker x 8",
            last_start - root_end,
            "s",
        ).judge("<= 1"),
    ]
    figures[0].extra = {"handoffs_ms": handoffs}
    return figures
