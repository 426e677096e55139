"""Which modules hold the catalog's tasks, importing them, and the code version of each task.

The built-in tasks (app.tasks.catalog) come first, then the deployer's own modules: those named
by CRONWELL_TASK_MODULES (comma-separated importable names), then those the entry points of the
`cronwell.tasks` group name (one module each, from any installed distribution). Every process
kind that needs the catalog imports the same list (web, scheduler, worker, CLI), and the worker
hands it to its fork server to preload.

A module that fails to import, or a task name defined twice, is a `TaskModuleError` whose message
is one line naming the module(s): the process entry points print it and exit 1.

A worker told to reload (`flask worker reload`, SIGHUP) imports the deployer's modules again from
disk (`reload_task_modules`): the list is resolved again (a new entry point counts), the modules
and their submodules are dropped from `sys.modules` and imported afresh, so the catalog and each
task's version are those of the code now deployed; if one fails, the catalog stays as it was.

importlib.metadata (a heavy import) is used only here, in the processes that resolve the list;
the zygote is handed plain module names.
"""

from __future__ import annotations

import hashlib
import importlib
import sys
from collections.abc import Mapping
from dataclasses import dataclass

from app.tasks.registry import (
    TaskDefinitionError,
    TaskSpec,
    all_tasks,
    forget_tasks_of,
    in_modules,
    registry_snapshot,
    restore_registry,
)

BUILTIN_MODULE = "app.tasks.catalog"
MODULES_VARIABLE = "CRONWELL_TASK_MODULES"
ENTRY_POINT_GROUP = "cronwell.tasks"


class TaskModuleError(RuntimeError):
    """A task module that cannot be loaded; the message is one line naming the module(s)."""


@dataclass(frozen=True)
class TaskModule:
    """One deployer module: its importable name, where it was named, and its distribution's version
    (entry points only)."""

    name: str
    source: str  # "CRONWELL_TASK_MODULES" or "entry point NAME of DIST"
    version: str | None = None


def module_names_from(value: str | None) -> list[str]:
    """The module names of a CRONWELL_TASK_MODULES value (comma-separated; blanks ignored)."""
    return [name.strip() for name in (value or "").split(",") if name.strip()]


def deployer_modules(configured: str | None) -> list[TaskModule]:
    """The deployer's task modules: CRONWELL_TASK_MODULES's, then the entry points', each once."""
    found: dict[str, TaskModule] = {}
    for name in module_names_from(configured):
        found.setdefault(name, TaskModule(name, MODULES_VARIABLE))
    for entry in _entry_points():
        module = entry.value.split(":", 1)[0].strip()
        dist = getattr(entry, "dist", None)
        dist_name = getattr(dist, "name", None) if dist is not None else None
        version = getattr(dist, "version", None) if dist is not None else None
        source = f"entry point {entry.name} of {dist_name}" if dist_name else f"entry point {entry.name}"
        if module:
            found.setdefault(module, TaskModule(module, source, version))
    return list(found.values())


def _entry_points() -> list:
    from importlib.metadata import entry_points

    return sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda entry: entry.name)


def preload_modules(configured: str | None) -> tuple[str, ...]:
    """What the fork server imports before it forks: the built-ins and every deployer module."""
    return (BUILTIN_MODULE, *(module.name for module in deployer_modules(configured)))


_LOADED: dict[str, TaskModule] = {}


def load_task_modules(configured: str | None, errors: list[str] | None = None) -> list[TaskModule]:
    """Import the built-ins and the deployer's modules (their decorators register the tasks).

    Raises TaskModuleError naming the module that failed, or the task defined twice and both
    modules that define it; with `errors`, appends each such line there and goes on instead
    (`flask task check` lists them all)."""
    try:
        importlib.import_module(BUILTIN_MODULE)
    except TaskDefinitionError as exc:
        raise TaskModuleError(str(exc)) from exc
    modules = deployer_modules(configured)
    for module in modules:
        try:
            import_task_module(module.name)
        except TaskModuleError as exc:
            if errors is None:
                raise
            errors.append(str(exc))
            continue
        _LOADED[module.name] = module
    return modules


@dataclass(frozen=True)
class CatalogState:
    """What the catalog was at one moment: the registered tasks, the deployer modules loaded and
    the versions computed, so a failed reload can put it back as it was."""

    tasks: dict[str, TaskSpec]
    loaded: dict[str, TaskModule]
    versions: dict[str, str]


def catalog_state() -> CatalogState:
    return CatalogState(registry_snapshot(), dict(_LOADED), dict(_VERSIONS))


def restore_catalog(state: CatalogState) -> None:
    restore_registry(state.tasks)
    _LOADED.clear()
    _LOADED.update(state.loaded)
    _VERSIONS.clear()
    _VERSIONS.update(state.versions)


def reload_task_modules(configured: str | None) -> list[TaskModule]:
    """Import the deployer's task modules again from the code on disk (a deploy replaced it).

    The list is resolved again (entry points included), each module and its submodules are
    dropped from `sys.modules` with their tasks and imported afresh, and every version is computed
    again. Raises TaskModuleError (one line) when one fails, leaving the catalog and `sys.modules`
    as they were."""
    state = catalog_state()
    # Finders cache directory listings and distribution metadata: a file or a distribution the
    # deploy added since the last import would not be found without this.
    importlib.invalidate_caches()
    modules = deployer_modules(configured)
    names = {module.name for module in modules} | set(_LOADED)
    saved = {name: module for name, module in sys.modules.items() if in_modules(name, names)}
    forget_tasks_of(names)
    for name in saved:
        del sys.modules[name]
    _LOADED.clear()
    _VERSIONS.clear()
    try:
        for module in modules:
            import_task_module(module.name)
            _LOADED[module.name] = module
    except TaskModuleError:
        for name in [name for name in sys.modules if in_modules(name, names)]:
            del sys.modules[name]
        sys.modules.update(saved)
        restore_catalog(state)
        raise
    return modules


def catalog_versions() -> dict[str, str]:
    """Every registered task and its code version (`task_version`): what a worker advertises."""
    return {spec.name: task_version(spec) for spec in all_tasks()}


def import_task_module(name: str) -> None:
    """Import one task module, turning any failure into a one-line TaskModuleError."""
    try:
        importlib.import_module(name)
    except TaskDefinitionError as exc:
        sys.modules.pop(name, None)
        raise TaskModuleError(f"task module {name}: {exc}") from exc
    except BaseException as exc:  # noqa: BLE001 - SyntaxError, SystemExit at import: all one line
        if isinstance(exc, KeyboardInterrupt):
            raise
        detail = " ".join(str(exc).split()) or "no message"
        raise TaskModuleError(f"task module {name} failed to import: {type(exc).__name__}: {detail}") from exc


_VERSIONS: dict[str, str] = {}


def task_version(spec: TaskSpec) -> str:
    """The code version of `spec`: its distribution's version when an entry point brought its
    module, otherwise `sha256:` and the first 12 hex digits of the hash of its module's file."""
    cached = _VERSIONS.get(spec.module)
    if cached is not None:
        return cached
    loaded = _LOADED.get(spec.module) or _LOADED.get(spec.module.split(".", 1)[0])
    if loaded is not None and loaded.version:
        version = loaded.version
    else:
        version = _file_hash(spec.module)
    _VERSIONS[spec.module] = version
    return version


def _file_hash(module_name: str) -> str:
    module = sys.modules.get(module_name)
    path = getattr(module, "__file__", None)
    if not path:
        return "unknown"
    try:
        with open(path, "rb") as source:
            return "sha256:" + hashlib.sha256(source.read()).hexdigest()[:12]
    except OSError:
        return "unknown"


def environment_report(spec: TaskSpec, environ: Mapping[str, str]) -> dict[str, bool]:
    """Each variable `spec` declares, and whether it is set (non-empty) in `environ`."""
    return {name: bool(environ.get(name)) for name in spec.env}
