"""The catalog as operators see it: each task described once for `flask task`, /tasks and the API.

`describe_task` is the one shape (name, description, module, async, env and whether each
variable is set here, schema, example config, code version); `check_catalog` lists every problem
`flask task check` reports. Not imported by the zygote (jsonschema is heavy).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from app.tasks.loading import environment_report, task_version
from app.tasks.registry import TaskSpec, all_tasks, validate_config

# Placeholder values by JSON Schema type, for properties with no default, example or enum.
_PLACEHOLDERS: dict[str, Any] = {
    "string": "example",
    "integer": 1,
    "number": 1,
    "boolean": False,
    "array": [],
    "object": {},
}


def describe_task(spec: TaskSpec, environ: Mapping[str, str]) -> dict[str, Any]:
    """One task as the catalog shows it everywhere."""
    env = environment_report(spec, environ)
    return {
        "name": spec.name,
        "description": spec.description,
        "module": spec.module,
        "builtin": spec.builtin,
        "async": spec.is_async,
        "env": [{"name": name, "set": is_set} for name, is_set in env.items()],
        "schema": spec.schema,
        "example": example_config(spec.schema, lambda config: _valid_for(spec, config)),
        "version": task_version(spec),
    }


def describe_catalog(environ: Mapping[str, str]) -> list[dict[str, Any]]:
    """Every registered task, by name."""
    return [describe_task(spec, environ) for spec in all_tasks()]


def example_config(schema: Mapping[str, Any], valid: Callable[[dict], bool] | None = None) -> dict[str, Any]:
    """An example config for `schema`: its first `examples` entry when it has one; otherwise the
    required properties (all of them when none is required), each with its example, default,
    first enum value or a placeholder of its type. `valid` (default: the schema alone) decides
    whether the full set of properties is a usable fallback."""
    examples = schema.get("examples")
    if isinstance(examples, list) and examples and isinstance(examples[0], dict):
        return dict(examples[0])
    valid = valid or (lambda config: _valid(schema, config))
    properties = schema.get("properties") or {}
    full = {key: _example_value(key, prop) for key, prop in properties.items() if isinstance(prop, Mapping)}
    required = {key: full[key] for key in schema.get("required") or () if key in full}
    for candidate in (required, full) if required else (full,):
        if valid(candidate):
            return candidate
    return required


def _example_value(key: str, prop: Mapping[str, Any]) -> Any:
    if isinstance(prop.get("examples"), list) and prop["examples"]:
        return prop["examples"][0]
    if "default" in prop:
        return prop["default"]
    if isinstance(prop.get("enum"), list) and prop["enum"]:
        return prop["enum"][0]
    if "const" in prop:
        return prop["const"]
    kind = prop.get("type")
    if isinstance(kind, list):
        kind = next((item for item in kind if item != "null"), None)
    if kind in ("integer", "number"):
        low = prop["exclusiveMinimum"] + 1 if "exclusiveMinimum" in prop else prop.get("minimum", 1)
        return min(low, prop["maximum"]) if "maximum" in prop else low
    if kind == "string":
        if prop.get("format") == "uri" or "url" in key:
            return "https://example.com/"
        minimum = int(prop.get("minLength", 0))
        return "example".ljust(minimum, "x")
    return _PLACEHOLDERS.get(kind or "", "example")


def _valid_for(spec: TaskSpec, config: dict[str, Any]) -> bool:
    try:
        validate_config(spec.name, config)
    except Exception:  # TaskConfigError, or an invalid schema (check_catalog reports it)
        return False
    return True


def _valid(schema: Mapping[str, Any], config: dict[str, Any]) -> bool:
    try:
        import jsonschema

        return jsonschema.Draft202012Validator(schema).is_valid(config)
    except Exception:  # an invalid schema is check_catalog's to report
        return False


def check_catalog(environ: Mapping[str, str], load_errors: list[str] | None = None) -> list[str]:
    """Every problem with the catalog: modules that did not load, schemas that are not valid JSON
    Schema, declared variables not set in `environ`. Empty: all is well."""
    import jsonschema

    problems = list(load_errors or [])
    for spec in all_tasks():
        try:
            jsonschema.Draft202012Validator.check_schema(spec.schema)
        except jsonschema.SchemaError as exc:
            where = ".".join(str(part) for part in exc.path) or "the schema"
            problems.append(
                f"task {spec.name} ({spec.module}): its schema is not valid JSON Schema at {where}: {exc.message}"
            )
        for name, is_set in environment_report(spec, environ).items():
            if not is_set:
                problems.append(f"task {spec.name} ({spec.module}) needs environment variable {name}, not set here")
    return problems
