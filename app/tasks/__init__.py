"""The task catalog: the only code Cronwell will ever run.

Operators pick a registered task by name and give it a JSON config that is validated against
the task's schema. There is no way to run a shell command or arbitrary code.
"""

from app.tasks.registry import (
    TaskConfigError,
    TaskContext,
    TaskSpec,
    UnknownTaskError,
    all_tasks,
    get_task,
    validate_config,
)

__all__ = [
    "TaskConfigError",
    "TaskContext",
    "TaskSpec",
    "UnknownTaskError",
    "all_tasks",
    "get_task",
    "validate_config",
    "load_catalog",
]


def load_catalog() -> None:
    """Import the built-in task modules so their decorators register them."""
    import app.tasks.catalog  # noqa: F401
