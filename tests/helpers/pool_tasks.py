"""Test-only tasks for pooled isolation: they show which process ran them and what it kept.

Preloaded into the zygote with `ForkServer(preload=("tests.helpers.pool_tasks",))`; importing this
module in the test process registers them there too (job validation looks them up). Names start
with `test_pool_`.
"""

from __future__ import annotations

import os

from app.tasks.registry import TaskContext, task

ANY_CONFIG = {"type": "object"}
# Module state survives between attempts in one pool process, and only there.
_runs = 0
_kept: list[bytes] = []


@task("test_pool_count", description="Return this process's pid and how many attempts it has run.", schema=ANY_CONFIG)
def count(config: dict, ctx: TaskContext) -> dict:
    global _runs
    _runs += 1
    print(f"attempt {ctx.attempt} of execution {ctx.execution_id}")
    return {"pid": os.getpid(), "runs": _runs}


@task("test_pool_grow", description="Keep config['megabytes'] MB alive in the process.", schema=ANY_CONFIG)
def grow(config: dict, ctx: TaskContext) -> dict:
    _kept.append(b"\x01" * (int(config["megabytes"]) << 20))  # written, so resident
    return {"pid": os.getpid()}
