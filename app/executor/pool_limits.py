"""When the zygote replaces a pool process (app/executor/pool.py).

Its own module, free of the pool's imports, because the worker needs it too (to pass the
settings to the zygote) and the worker parent is kept lean.
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_MAX_TASKS = 1000
DEFAULT_MAX_MEMORY_MB = 512


@dataclass(frozen=True)
class PoolLimits:
    """When a pool process is replaced: after `max_tasks` attempts, or when its resident size
    after an attempt exceeds `max_memory_mb` (0: no memory cap)."""

    max_tasks: int = DEFAULT_MAX_TASKS
    max_memory_mb: int = DEFAULT_MAX_MEMORY_MB

    def __post_init__(self) -> None:
        if self.max_tasks < 1:
            raise ValueError(f"max_tasks must be at least 1, got {self.max_tasks}")
        if self.max_memory_mb < 0:
            raise ValueError(f"max_memory_mb must be 0 (no cap) or more, got {self.max_memory_mb}")

    @classmethod
    def from_config(cls, config) -> PoolLimits:
        """From the app's WORKER_POOL_MAX_TASKS_PER_CHILD and WORKER_POOL_MAX_MEMORY_MB."""
        return cls(
            max_tasks=config.get("WORKER_POOL_MAX_TASKS_PER_CHILD", DEFAULT_MAX_TASKS),
            max_memory_mb=config.get("WORKER_POOL_MAX_MEMORY_MB", DEFAULT_MAX_MEMORY_MB),
        )

    def retire(self, tasks_run: int, rss_kb: int) -> str | None:
        """Why a process that has run `tasks_run` attempts and now holds `rss_kb` is replaced."""
        if tasks_run >= self.max_tasks:
            return "max_tasks"
        if self.max_memory_mb and rss_kb > self.max_memory_mb * 1024:
            return "max_memory"
        return None
