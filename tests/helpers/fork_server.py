"""What the fork-server tests share: a task context, and an owner process (a script that starts a
ForkServer and prints the pids it wants watched) to kill or close from outside."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys

from tests.helpers.processes import PROJECT_ROOT


def task_context(artifact_dir, execution_id: int = 1, *, job_name: str = "executor-test") -> dict:
    return {
        "execution_id": execution_id,
        "job_id": None,
        "job_name": job_name,
        "idempotency_key": f"test-{execution_id}",
        "attempt": 1,
        "artifact_dir": str(artifact_dir),
        "marker_dir": str(artifact_dir),
    }


def start_owner(script: str, *args: str) -> tuple[subprocess.Popen, dict]:
    """Run `script` (python -c) with `args`, and read the JSON line of pids it prints first. The
    owner's stdin is a pipe, so a script can wait there for the test to say when to act."""
    owner = subprocess.Popen(
        [sys.executable, "-c", script, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=PROJECT_ROOT,
        env={**os.environ, "PYTHONPATH": str(PROJECT_ROOT)},
    )
    readable, _, _ = select.select([owner.stdout], [], [], 20)
    if not readable:
        owner.kill()
        owner.wait()
        owner.stdin.close()
        owner.stdout.close()
        raise AssertionError("owner script did not report its pids")
    return owner, json.loads(owner.stdout.readline())
