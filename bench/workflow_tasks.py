"""The task the workflow benchmark's steps run: it returns when its process started and ended
(wall clock), so a hand-off is measured from one step's process ending to the next one's start."""

from __future__ import annotations

import time

from app.tasks import TaskContext, task


@task("bench_stamp", description="Return this process's start and end (time.time()).", schema={"type": "object"})
def stamp(config: dict, ctx: TaskContext) -> dict:
    started = time.time()
    return {"start": started, "end": time.time()}
