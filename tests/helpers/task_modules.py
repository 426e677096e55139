"""A deployer's task module written to a temporary directory, as a deployment would have one on
PYTHONPATH and name it in CRONWELL_TASK_MODULES."""

from __future__ import annotations

import sys
from pathlib import Path

ACME_MODULE = "cronwell_test_acme_tasks"
ACME_SOURCE = '''
"""Tasks of a made-up deployer, for the task-module tests."""

import asyncio
import os
import time

from app.tasks import TaskContext, task


@task(
    "acme_greet",
    description="Greet someone; returns what it did.",
    schema={
        "type": "object",
        "properties": {"who": {"type": "string", "minLength": 1, "default": "world"}},
        "additionalProperties": False,
    },
)
def greet(config: dict, ctx: TaskContext) -> dict:
    print(f"hello {config.get('who', 'world')}")
    return {"greeted": config.get("who", "world"), "attempt": ctx.attempt}


@task("acme_async", description="An async task that sleeps, then returns a string.", schema={"type": "object"})
async def wait_then_answer(config: dict, ctx: TaskContext) -> str:
    await asyncio.sleep(config.get("seconds", 0))
    return config.get("answer", "done")


@task("acme_secret", description="Uses ACME_TOKEN and prints it.", schema={"type": "object"}, env=["ACME_TOKEN"])
def use_secret(config: dict, ctx: TaskContext) -> dict:
    token = os.environ["ACME_TOKEN"]
    print(f"calling the partner with {token}")
    return {"names": sorted(os.environ), "token_length": len(token)}


@task("acme_returns", description="Returns config['kind'] of value.", schema={"type": "object"})
def returns(config: dict, ctx: TaskContext):
    kind = config.get("kind")
    if kind == "big":
        return "x" * config["size"]
    if kind == "object":
        return object()
    if kind == "string":
        return "plain text"
    return None


@task("acme_callback", description="Returns what its parent returned.", schema={"type": "object"})
def callback(config: dict, ctx: TaskContext) -> dict:
    return {"parent_execution_id": ctx.parent_execution_id, "parent_result": ctx.parent_result}


@task("acme_sleep", description="Sleeps config['seconds'] (blocking).", schema={"type": "object"})
def sleep(config: dict, ctx: TaskContext) -> None:
    time.sleep(config.get("seconds", 1))
'''


def write_module(directory: Path, name: str, source: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.py"
    path.write_text(source)
    return path


def install_acme(directory: Path) -> str:
    """Write the acme module into `directory`, put it on this process's path, and return its name."""
    write_module(directory, ACME_MODULE, ACME_SOURCE)
    if str(directory) not in sys.path:
        sys.path.insert(0, str(directory))
    return ACME_MODULE


RELOADABLE_MODULE = "cronwell_test_reloadable_tasks"
RELOADABLE_WITNESS = "RELOADABLE_WITNESS_FILE"


def reloadable_source(code: str) -> str:
    """A task module whose `reloadable_witness` task appends "execution attempt pid CODE" to the
    file named by RELOADABLE_WITNESS (one O_APPEND write), then holds its slot config["seconds"]
    (default 0.02): each version of the module writes its own CODE, so a line says which code ran
    the attempt."""
    return f'''
"""Reloadable tasks for the rolling-deploy tests: code {code}."""

import os
import time

from app.tasks import TaskContext, task

CODE = {code!r}


@task(
    "reloadable_witness",
    description="Witness the attempt and the code that ran it.",
    schema={{"type": "object", "properties": {{"seconds": {{"type": "number"}}}}}},
    env=[{RELOADABLE_WITNESS!r}],
)
def witness(config: dict, ctx: TaskContext) -> str:
    fd = os.open(os.environ[{RELOADABLE_WITNESS!r}], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{{ctx.execution_id}} {{ctx.attempt}} {{os.getpid()}} {{CODE}}\\n".encode())
    finally:
        os.close(fd)
    time.sleep(config.get("seconds", 0.02))
    return CODE
'''
