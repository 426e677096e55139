"""The task catalog: the only code Cronwell will ever run.

Operators pick a registered task by name and give it a JSON config that is validated against
the task's schema. There is no way to run a shell command or arbitrary code: the catalog holds
the built-in tasks and the tasks of the modules the deployer installs (app/tasks/loading.py).

    from app.tasks import task, TaskContext      # the public API for task modules
"""

from app.tasks.registry import (
    TaskConfigError,
    TaskContext,
    TaskDefinitionError,
    TaskSpec,
    UnknownTaskError,
    all_tasks,
    get_task,
    task,
    validate_config,
)

__all__ = [
    "TaskConfigError",
    "TaskContext",
    "TaskDefinitionError",
    "TaskSpec",
    "UnknownTaskError",
    "all_tasks",
    "get_task",
    "load_catalog",
    "task",
    "validate_config",
]


def load_catalog(modules: str | None = None, errors: list[str] | None = None) -> None:
    """Import the built-in tasks, then the deployer's task modules: `modules` (a
    CRONWELL_TASK_MODULES value; default: the environment's) and the `cronwell.tasks` entry
    points. Raises app.tasks.loading.TaskModuleError (one line) when one cannot be loaded, or
    with `errors` collects those lines there."""
    import os

    from app.tasks.loading import MODULES_VARIABLE, load_task_modules

    load_task_modules(os.environ.get(MODULES_VARIABLE) if modules is None else modules, errors)
