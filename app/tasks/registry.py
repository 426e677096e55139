"""Task registry: adding a task is one decorated function.

    from app.tasks import task, TaskContext

    @task("nightly_export", description="...", schema={...JSON Schema...}, env=["EXPORT_TOKEN"])
    def nightly_export(config: dict, ctx: TaskContext) -> dict | str | None: ...

A task receives its validated config and a TaskContext. Whatever it prints goes to the
execution's output; what it returns (None, a string, or anything JSON-serialisable) is the
execution's `result`, stored apart from the output; an exception marks the attempt failed with
the traceback as the error. An `async def` task is awaited in its own event loop.

`env` names the environment variables the task's process receives from the worker's environment
(with a small base: PATH, HOME, LANG, TZ). Cronwell's own secrets cannot be declared.

This module is imported into the executor's zygote: standard library only, nothing heavy.
"""

from __future__ import annotations

import math
import re
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

TaskFunc = Callable[[dict, "TaskContext"], Any]


class UnknownTaskError(ValueError):
    """Raised for a task name that is not in the catalog."""


class TaskConfigError(ValueError):
    """Raised when a config does not satisfy its task's schema; the message names the key."""


class TaskDefinitionError(ValueError):
    """A task that cannot be registered: a duplicate name, a bad or forbidden `env` name."""


# The flag CPython sets on the code object of an `async def` function (inspect.CO_COROUTINE),
# read directly: `inspect` is a heavy import for the zygote.
CO_COROUTINE = 0x80
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class TaskContext:
    """What a running task may know about its execution and environment."""

    execution_id: int
    job_id: int | None
    job_name: str
    idempotency_key: str
    attempt: int
    artifact_dir: str
    marker_dir: str
    # Only for tasks registered with needs_database=True; None for every other task, whose process
    # also starts without DATABASE_URL or any other secret in its environment.
    database_url: str | None = None
    # The retention settings (`retention.retention_settings`: audit days, session hours), with the
    # URL: a task that prunes applies the same limits as `flask prune-history`.
    retention: dict | None = None
    # A callback's parent execution and what its task returned (its `result`, decoded); None for
    # every other run.
    parent_execution_id: int | None = None
    parent_result: Any = None
    # A workflow step's name and what each step it waited for returned (step name -> result);
    # None and empty for every other run.
    step: str | None = None
    upstream_results: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class TaskSpec:
    name: str
    description: str
    schema: dict
    func: TaskFunc = field(repr=False)
    needs_database: bool = False
    env: tuple[str, ...] = ()  # the environment variables its process receives (besides the base)
    module: str = ""  # the module that defined it

    @property
    def is_async(self) -> bool:
        code = getattr(self.func, "__code__", None)
        return bool(code is not None and code.co_flags & CO_COROUTINE)

    @property
    def builtin(self) -> bool:
        return self.module.startswith("app.tasks.catalog")

    def run(self, config: dict, ctx: TaskContext) -> Any:
        """Call the task; an `async def` task's coroutine is run to completion here."""
        returned = self.func(config, ctx)
        if _is_coroutine(returned):
            import asyncio  # only in the task process of an async task

            returned = asyncio.run(returned)
        return returned


def _is_coroutine(value: Any) -> bool:
    return isinstance(value, types.CoroutineType)


_REGISTRY: dict[str, TaskSpec] = {}


def task(
    name: str,
    *,
    description: str,
    schema: dict | None = None,
    needs_database: bool = False,
    env: list[str] | tuple[str, ...] | None = None,
) -> Callable[[TaskFunc], TaskFunc]:
    """Register a function as a task under `name` with a JSON Schema for its config.

    `env` lists the environment variables its process receives from the worker (never one of
    Cronwell's own secrets: refused here). `needs_database=True` gives the task
    `ctx.database_url` (with its password); no other task gets it.
    """
    schema = schema or {"type": "object", "properties": {}, "additionalProperties": False}
    # The schema itself is checked when a config is first validated (and by `flask task check`),
    # not here: jsonschema is heavy, and this module is imported into the executor's zygote.
    declared = _checked_env(name, env)

    def decorate(func: TaskFunc) -> TaskFunc:
        module = getattr(func, "__module__", "") or ""
        existing = _REGISTRY.get(name)
        if existing is not None and existing.func is not func:
            if existing.module == module and getattr(existing.func, "__qualname__", None) == getattr(
                func, "__qualname__", None
            ):
                pass  # the same module imported again (e.g. reloaded): the newer function wins
            else:
                where = f"both {existing.module} and {module}" if existing.module != module else f"{module} twice"
                raise TaskDefinitionError(f"task {name!r} is defined in {where}")
        _REGISTRY[name] = TaskSpec(
            name=name,
            description=description,
            schema=schema,
            func=func,
            needs_database=needs_database,
            env=declared,
            module=module,
        )
        return func

    return decorate


def _checked_env(name: str, env: list[str] | tuple[str, ...] | None) -> tuple[str, ...]:
    if env is None:
        return ()
    if isinstance(env, str) or not all(isinstance(item, str) for item in env):
        raise TaskDefinitionError(f"task {name!r}: env must be a list of variable names")
    from app.sensitive import is_own_secret

    for variable in env:
        if not ENV_NAME.match(variable):
            raise TaskDefinitionError(f"task {name!r}: {variable!r} is not an environment variable name")
        if is_own_secret(variable):
            raise TaskDefinitionError(f"task {name!r} may not declare {variable}: it is one of Cronwell's own secrets")
    return tuple(dict.fromkeys(env))


def get_task(name: str) -> TaskSpec:
    """Return the registered task or raise UnknownTaskError listing what exists."""
    if not isinstance(name, str):
        raise UnknownTaskError(f"task must be a registered task name, not {type(name).__name__}")
    try:
        return _REGISTRY[name]
    except KeyError:
        known = ", ".join(sorted(_REGISTRY)) or "none"
        raise UnknownTaskError(f"unknown task {name!r} (registered tasks: {known})") from None


def needs_database(name: str) -> bool:
    """Whether task `name` was registered with needs_database=True (False for an unknown name)."""
    spec = _REGISTRY.get(name) if isinstance(name, str) else None
    return spec is not None and spec.needs_database


def registered_task(name: str) -> TaskSpec | None:
    """The registered task `name`, or None."""
    return _REGISTRY.get(name) if isinstance(name, str) else None


def all_tasks() -> list[TaskSpec]:
    return sorted(_REGISTRY.values(), key=lambda spec: spec.name)


def registry_snapshot() -> dict[str, TaskSpec]:
    """The catalog as registered now (a copy), for `restore_registry` should a reload fail."""
    return dict(_REGISTRY)


def restore_registry(snapshot: dict[str, TaskSpec]) -> None:
    """Put back the catalog `registry_snapshot` took."""
    _REGISTRY.clear()
    _REGISTRY.update(snapshot)


def forget_tasks_of(modules: set[str]) -> list[str]:
    """Unregister every task defined in one of `modules` or a submodule of one (a reload imports
    them again, so a task removed from the code leaves the catalog); returns their names."""
    gone = [name for name, spec in _REGISTRY.items() if in_modules(spec.module, modules)]
    for name in gone:
        del _REGISTRY[name]
    return gone


def in_modules(name: str, modules: set[str]) -> bool:
    """Whether module `name` is one of `modules` or inside one of them (a package's submodule)."""
    return any(name == module or name.startswith(module + ".") for module in modules)


def validate_config(name: str, config: Any) -> dict:
    """Validate `config` for task `name`; return it (never mutated) or raise TaskConfigError."""
    spec = get_task(name)
    if config is None:
        config = {}
    if not isinstance(config, dict):
        raise TaskConfigError(f"config for task {name!r} must be a JSON object, not {type(config).__name__}")
    non_finite = _find_non_finite(config)
    if non_finite is not None:
        # Python's json module accepts NaN and Infinity, and NaN slips through every numeric bound.
        raise TaskConfigError(f"invalid config for task {name!r}: key {non_finite!r} must be a finite number")
    validator = _validator_of(spec)
    errors = sorted(validator.iter_errors(config), key=lambda e: (list(e.absolute_path), e.message))
    if errors:
        raise TaskConfigError(f"invalid config for task {name!r}: {_describe(errors[0])}")
    check = getattr(spec.func, "extra_validation", None)
    if check is not None:
        try:
            check(config)
        except ValueError as exc:
            raise TaskConfigError(f"invalid config for task {name!r}: {exc}") from None
    return config


# The checked validator of each task's schema, made once per registration: checking a schema costs
# tens of milliseconds, which an apply of a thousand-job file would otherwise pay a thousand times.
_VALIDATORS: dict[str, tuple[TaskSpec, Any]] = {}


def _validator_of(spec: TaskSpec):
    cached = _VALIDATORS.get(spec.name)
    if cached is not None and cached[0] is spec:
        return cached[1]
    import jsonschema

    jsonschema.Draft202012Validator.check_schema(spec.schema)
    validator = jsonschema.Draft202012Validator(spec.schema)
    _VALIDATORS[spec.name] = (spec, validator)
    return validator


def _find_non_finite(value: Any, path: str = "") -> str | None:
    """Return the dotted path of the first NaN or infinite float in `value`, or None."""
    if isinstance(value, float) and not math.isfinite(value):
        return path
    if isinstance(value, dict):
        items = ((str(key), item) for key, item in value.items())
    elif isinstance(value, list):
        items = ((str(index), item) for index, item in enumerate(value))
    else:
        return None
    for key, item in items:
        found = _find_non_finite(item, f"{path}.{key}" if path else key)
        if found is not None:
            return found
    return None


def _describe(error) -> str:
    """Turn a jsonschema error into one line that names the offending key."""
    path = ".".join(str(p) for p in error.absolute_path)
    if error.validator == "additionalProperties":
        extra = sorted(set(error.instance) - set(error.schema.get("properties", {})))
        return f"unknown key(s) {', '.join(repr(k) for k in extra)}"
    if error.validator == "required":
        return error.message.replace(" is a required property", " is required")
    where = f"key {path!r}" if path else "config"
    if error.validator == "type":
        expected = error.validator_value
        return f"{where} must be of type {expected}, got {type(error.instance).__name__} {error.instance!r}"
    return f"{where}: {error.message}"
