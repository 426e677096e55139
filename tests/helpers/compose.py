"""compose.yaml read as docker compose reads it: YAML anchors resolved, variables interpolated.

Shared by the compose checks (tests/web/test_deploy_compose.py) and the smoke test that runs the
same commands as real processes (tests/integration/test_smoke_processes.py).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
_VARIABLE = re.compile(r"\$\$|\$\{(?P<name>[A-Z_][A-Z0-9_]*)(?:(?P<op>:-|:\?)(?P<arg>[^}]*))?\}")


class MissingVariable(Exception):
    """What `docker compose` reports for `${VAR:?message}` with VAR unset or empty."""


def load_compose(name: str = "compose.yaml") -> dict:
    """The compose file as data (YAML anchors and `<<` merge keys resolved, no interpolation)."""
    return yaml.safe_load((ROOT / name).read_text())


def interpolate(value, env: Mapping[str, str]):
    """Compose variable interpolation for the forms these files use: ${VAR}, ${VAR:-default},
    ${VAR:?message} and $$ (a literal $, left for the container's shell)."""
    if isinstance(value, dict):
        return {key: interpolate(item, env) for key, item in value.items()}
    if isinstance(value, list):
        return [interpolate(item, env) for item in value]
    if not isinstance(value, str):
        return value

    def replace(match: re.Match) -> str:
        if match.group(0) == "$$":
            return "$"
        name, op, arg = match.group("name"), match.group("op"), match.group("arg")
        current = env.get(name) or ""
        if op == ":?" and not current:
            raise MissingVariable(f"{name}: {arg}")
        if op == ":-" and not current:
            return arg
        return current

    return _VARIABLE.sub(replace, value)


def merged_environment(service: str, env: Mapping[str, str], files=("compose.yaml",)) -> dict[str, str]:
    """A service's environment after compose merges `files` (later mappings win) and interpolates."""
    merged: dict[str, str] = {}
    for name in files:
        merged.update(load_compose(name)["services"].get(service, {}).get("environment") or {})
    return {key: str(value) for key, value in interpolate(merged, env).items()}


def service_command(service: str, env: Mapping[str, str]) -> list[str]:
    """A service's command from compose.yaml with its variables interpolated."""
    return interpolate(load_compose()["services"][service]["command"], env)
