"""Four example tasks, registered when Cronwell imports this module (entry point `cronwell.tasks`).

Module level holds imports and definitions only: the worker's fork server imports this module
once and forks every task process from it, so nothing here may start a thread or open a
connection (docs/tasks.md, "Preload rules"). httpx is imported at module level on purpose: it is
preloaded once, and each task process starts with it already imported.
"""

from __future__ import annotations

import asyncio
import os

import httpx

from app.tasks import TaskContext, task


@task(
    "example_word_count",
    description="Count the words of `text`; returns the count and the longest word.",
    schema={
        "type": "object",
        "properties": {
            "text": {"type": "string", "minLength": 1, "maxLength": 100000, "examples": ["the quick brown fox"]},
        },
        "required": ["text"],
        "additionalProperties": False,
    },
)
def word_count(config: dict, ctx: TaskContext) -> dict:
    words = config["text"].split()
    print(f"execution {ctx.execution_id}: {len(words)} words")
    return {"words": len(words), "longest": max(words, key=len) if words else None}


@task(
    "example_wait",
    description="Wait `seconds` without blocking an event loop, then return a string.",
    schema={
        "type": "object",
        "properties": {"seconds": {"type": "number", "minimum": 0, "maximum": 3600, "default": 1}},
        "additionalProperties": False,
    },
)
async def wait(config: dict, ctx: TaskContext) -> str:
    await asyncio.sleep(config.get("seconds", 1))
    return f"waited {config.get('seconds', 1)} s"


@task(
    "example_notify",
    description="Post `text` to the webhook in EXAMPLE_WEBHOOK_URL (a declared secret).",
    schema={
        "type": "object",
        "properties": {"text": {"type": "string", "minLength": 1, "maxLength": 2000, "examples": ["deploy done"]}},
        "required": ["text"],
        "additionalProperties": False,
    },
    env=["EXAMPLE_WEBHOOK_URL"],
)
def notify(config: dict, ctx: TaskContext) -> dict:
    url = os.environ["EXAMPLE_WEBHOOK_URL"]  # only this task's process has it
    response = httpx.post(url, json={"text": config["text"]}, timeout=10)
    response.raise_for_status()
    return {"status": response.status_code}


@task(
    "example_fetch_json",
    description="GET `url` with httpx and return the JSON it answers (async).",
    schema={
        "type": "object",
        "properties": {
            "url": {"type": "string", "minLength": 1, "maxLength": 2048, "examples": ["http://127.0.0.1:8000/healthz"]},
            "timeout_seconds": {"type": "number", "minimum": 0.1, "maximum": 60, "default": 10},
        },
        "required": ["url"],
        "additionalProperties": False,
    },
)
async def fetch_json(config: dict, ctx: TaskContext):
    async with httpx.AsyncClient(timeout=config.get("timeout_seconds", 10)) as client:
        response = await client.get(config["url"])
    response.raise_for_status()
    return response.json()
