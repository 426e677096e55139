"""Workflow hand-off: how soon a step starts once the steps it waits for have ended (PostgreSQL).

The hand-off happens in the worker's turn that records the upstream step's end (it creates the
next step's execution in that transaction), and the same worker claims it in the statement that
follows. Measured on the wall clock from inside the task processes (bench/workflow_tasks.py:
each step returns when its process started and ended): a hand-off is the next step's process
start minus the previous step's process end, so it includes recording the end, creating the next
step, claiming it and forking its process. Over a chain of steps run by one worker x 4; and a
fan-out (one root, then 50 steps waiting for it, then one step waiting for all 50) on one worker
x 8: from the root's process end to the last of the 50 processes started, from the last of the 50
ending to the join's start, and the whole run from the root's start to the join's end, which
over 52 steps that do nothing is the per-step overhead of the orchestration (record, hand-off,
claim, fork).
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
        leaves = [f"leaf{i}" for i in range(fan_out)]
        fan = [
            {"name": "root", "task": "bench_stamp"},
            *({"name": leaf, "task": "bench_stamp", "after": ["root"]} for leaf in leaves),
            {"name": "join", "task": "bench_stamp", "after": leaves},
        ]
        spread = _run(app, fan, slots=8)
    failed = sorted(step for step, (status, *_rest) in {**ran, **spread}.items() if status != "succeeded")
    stats = summary(handoffs)
    (_, root_start, root_end), (_, join_start, join_end) = spread["root"], spread["join"]
    last_start = max(spread[leaf][1] for leaf in leaves)
    last_end = max(spread[leaf][2] for leaf in leaves)
    wall = join_end - root_start
    figures = [
        Figure(
            NAME,
            "step-to-step hand-off p50 (upstream ends -> downstream starts), 1 worker x 4",
            stats["p50"],
            "ms",
            note=f"over {len(handoffs)} hand-offs" + (f"; NOT succeeded: {failed}" if failed else ""),
        ).judge("<= 10"),
        Figure(NAME, "step-to-step hand-off p95, 1 worker x 4", stats["p95"], "ms"),
        Figure(
            NAME,
            f"{fan_out}-step fan-out: root ends -> last step started, 1 worker x 8",
            last_start - root_end,
            "s",
        ).judge("<= 1"),
        Figure(NAME, f"{fan_out}-step fan-out: last step ends -> join starts", (join_start - last_end) * 1000, "ms"),
        Figure(NAME, f"{fan_out}-step fan-out and join: root starts -> join ends (wall)", wall, "s"),
        Figure(
            NAME,
            f"{fan_out}-step fan-out and join: overhead per step (wall / {len(fan)} steps of no work)",
            wall * 1000 / len(fan),
            "ms",
        ),
    ]
    figures[0].extra = {"handoffs_ms": handoffs}
    return figures
