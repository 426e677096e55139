"""Which package may import which (docs/architecture.md, "Which package may import which").

Every module is parsed, not imported, so this runs in a fraction of a second and a broken module
still gets checked. An import counts wherever it is written (module level or inside a function):
a function-level import is still a dependency. The zygote rule alone is about module level,
because what it guards is what importing a task module loads before every fork.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PURE = ("app.domain", "app.scheduling", "app.clock")
FRAMEWORKS = (
    "flask",
    "flask_login",
    "flask_wtf",
    "flask_sqlalchemy",
    "flask_migrate",
    "werkzeug",
    "wtforms",
    "sqlalchemy",
    "alembic",
    "psycopg",
    "redis",
    "marshmallow",
)
IO_MODULES = ("socket", "subprocess", "sqlite3", "urllib.request", "http.client", "requests", "shutil")
# The wiring: create_app (app/__init__.py) and register_web (app/web/__init__.py, which create_app
# calls) attach every adapter, the blueprints and the cli/ command groups, inside their functions.
# They are exempt from the layer rules for function-level imports only, so importing `app` or
# `app.web` stays free of what they wire.
COMPOSITION_ROOTS = ("app", "app.web")
# Hypothesis strategies of the fuzz package. They belong in tests/helpers/ like every other shared
# helper; they stay where they are, named here as the one exception.
TEST_HELPERS_OUTSIDE_HELPERS = ("tests.fuzz.strategies",)


@dataclass(frozen=True)
class Import:
    path: str  # the importing file, relative to the repository
    module: str  # the importing module, dotted
    target: str  # what it imports, dotted (`from a import b` yields both `a` and `a.b`)
    line: int
    top_level: bool  # written at module level (class bodies and if/try blocks included)
    type_only: bool = False  # under `if TYPE_CHECKING:`: read by the type checker, never run

    def __str__(self) -> str:
        where = "module level" if self.top_level else "inside a function"
        return f"{self.path}:{self.line} imports {self.target} ({where})"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path) -> list[Import]:
    """Every import statement in the file, resolved to absolute dotted names."""
    module = module_name(path)
    relative = str(path.relative_to(ROOT))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: list[Import] = []

    def visit(node: ast.AST, top_level: bool, type_only: bool = False) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                visit(child, False, type_only)
                continue
            if isinstance(child, ast.If) and ast.unparse(child.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
                visit(ast.Module(body=child.body, type_ignores=[]), top_level, True)
                visit(ast.Module(body=child.orelse, type_ignores=[]), top_level, type_only)
                continue
            if isinstance(child, ast.Import):
                found.extend(
                    Import(relative, module, alias.name, child.lineno, top_level, type_only) for alias in child.names
                )
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = package.split(".")[: len(package.split(".")) - child.level + 1]
                    target = ".".join(base + ([child.module] if child.module else []))
                else:
                    target = child.module or ""
                found.append(Import(relative, module, target, child.lineno, top_level, type_only))
                found.extend(
                    Import(relative, module, f"{target}.{alias.name}", child.lineno, top_level, type_only)
                    for alias in child.names
                )
            visit(child, top_level)

    visit(ast.parse(path.read_text(), filename=str(path)), True)
    return found


def under(name: str, *prefixes: str) -> bool:
    return any(name == prefix or name.startswith(prefix + ".") for prefix in prefixes)


def python_files(*folders: str) -> list[Path]:
    return sorted(path for folder in folders for path in (ROOT / folder).rglob("*.py"))


APP_IMPORTS = [imp for path in python_files("app") for imp in imports_of(path)]
CLI_IMPORTS = [imp for path in python_files("cli") for imp in imports_of(path)]
TEST_IMPORTS = [imp for path in python_files("tests") for imp in imports_of(path)]
# Feature packages with a blueprint (app/jobs, app/alerts, ...), the metrics endpoint and the REST API: adapters.
BLUEPRINTS = tuple(
    sorted(module_name(path.parent) for path in (ROOT / "app").glob("*/routes.py")) + ["app.metrics_routes"]
)
ADAPTERS = (*BLUEPRINTS, "app.api", "cli")


def wiring(imp: Import) -> bool:
    return imp.module in COMPOSITION_ROOTS and not imp.top_level


def violations(imports: list[Import], source: tuple[str, ...], forbidden: tuple[str, ...], *, top_level_only=False):
    return [
        str(imp)
        for imp in imports
        if under(imp.module, *source)
        and under(imp.target, *forbidden)
        and (imp.top_level or not top_level_only)
        and not wiring(imp)
    ]


def assert_none(found: list[str], rule: str) -> None:
    assert not found, f"{rule}:\n  " + "\n  ".join(sorted(set(found)))


def test_the_map_found_the_code():
    # Guards the guard: a wrong ROOT or a parser that finds nothing would pass every rule below.
    assert len(APP_IMPORTS) > 300 and len(CLI_IMPORTS) > 50 and len(TEST_IMPORTS) > 300
    assert {"app.jobs", "app.executions", "app.alerts"} <= set(BLUEPRINTS)


def test_pure_rules_import_no_framework_no_io_and_nothing_above_them():
    found = [
        str(imp)
        for imp in APP_IMPORTS
        if under(imp.module, *PURE)
        and (under(imp.target, *FRAMEWORKS, *IO_MODULES) or (under(imp.target, "app") and not under(imp.target, *PURE)))
    ]
    assert_none(found, "app/domain, app/scheduling and app/clock.py are pure (no Flask, SQLAlchemy or I/O)")


def test_models_import_no_store_services_or_adapters():
    forbidden = ("app.store", "app.services", "app.definitions", "app.web", "app.executor", "app.tasks", *ADAPTERS)
    assert_none(violations(APP_IMPORTS, ("app.models",), forbidden), "app/models sits below the store")


def test_the_store_imports_no_services_or_adapters():
    forbidden = ("app.services", "app.definitions", "app.web", *ADAPTERS)
    assert_none(violations(APP_IMPORTS, ("app.store",), forbidden), "app/store sits below the services")


def test_the_statements_import_only_the_pure_rules():
    # app/sql is what the worker parent is to run without SQLAlchemy or Flask (ADR 0012); psycopg
    # is imported where a PostgreSQL value needs it, never by a SQLite caller.
    frameworks = tuple(name for name in FRAMEWORKS if name != "psycopg")
    found = [
        str(imp)
        for imp in APP_IMPORTS
        if under(imp.module, "app.sql")
        and (under(imp.target, *frameworks) or (under(imp.target, "app") and not under(imp.target, "app.sql", *PURE)))
    ]
    assert_none(found, "app/sql imports only the pure rules (no SQLAlchemy, Flask, models or store)")


def test_definitions_import_no_services_or_adapters():
    forbidden = ("app.services", "app.web", *ADAPTERS)
    assert_none(violations(APP_IMPORTS, ("app.definitions",), forbidden), "app/definitions sits below the services")


def test_services_import_no_adapters():
    forbidden = ("app.web", *ADAPTERS)
    assert_none(violations(APP_IMPORTS, ("app.services",), forbidden), "app/services sits below the adapters")


def test_the_engine_does_not_import_use_cases():
    found = violations(APP_IMPORTS, ("app.services.engine",), ("app.services.use_cases",))
    assert_none(found, "app/services/engine runs without the use cases (they may call the engine, not back)")


def test_the_web_toolkit_imports_no_blueprint():
    assert_none(violations(APP_IMPORTS, ("app.web",), ADAPTERS), "app/web serves the blueprints, not the other way")


def test_the_zygote_side_imports_no_flask_database_or_services_at_module_level():
    forbidden = (
        *FRAMEWORKS,
        "app.extensions",
        "app.models",
        "app.store",
        "app.services",
        "app.definitions",
        "app.web",
        *ADAPTERS,
    )
    found = violations(APP_IMPORTS, ("app.executor", "app.tasks"), forbidden, top_level_only=True)
    assert_none(found, "app/executor and app/tasks are loaded by the zygote before every fork")


def test_app_imports_neither_cli_nor_tests_except_the_factory():
    found = [str(imp) for imp in APP_IMPORTS if under(imp.target, "cli", "tests") and not wiring(imp)]
    assert_none(found, "nothing in app/ imports cli/ or tests/ (create_app wires the CLI inside the function)")


def test_cli_imports_no_tests():
    assert_none(violations(CLI_IMPORTS, ("cli",), ("tests",)), "cli/ never imports tests/")


def test_test_modules_share_code_only_through_helpers_factories_and_conftest():
    allowed = ("tests.helpers", "tests.factories", *TEST_HELPERS_OUTSIDE_HELPERS)
    found = [str(imp) for imp in TEST_IMPORTS if under(imp.target, "tests") and not under(imp.target, *allowed)]
    assert_none(
        found,
        "a test module imports another test module or a conftest; move shared fixtures to the nearest "
        "conftest.py and shared functions to tests/helpers/ (rows: tests/factories/)",
    )


def module_graph(imports: list[Import], modules: set[str]) -> dict[str, set[str]]:
    """Module -> the modules it imports, wherever the import is written (the wiring aside).

    `from package import submodule` depends on the submodule; the package's `__init__` it also
    runs is counted only when what is imported is a name defined there."""
    statements: dict[tuple[str, int], set[str]] = {}
    for imp in imports:
        statements.setdefault((imp.path, imp.line), set()).add(imp.target)
    graph: dict[str, set[str]] = {module: set() for module in modules}
    for imp in imports:
        if wiring(imp) or imp.type_only or imp.target not in modules or imp.target == imp.module:
            continue
        siblings = statements[(imp.path, imp.line)]
        if any(other.startswith(imp.target + ".") and other in modules for other in siblings):
            continue
        graph[imp.module].add(imp.target)
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Each strongly connected set of more than one module, as one cycle through it (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                connect(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(component)

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return [_one_cycle(graph, set(component)) for component in components]


def _one_cycle(graph: dict[str, set[str]], component: set[str]) -> list[str]:
    """A shortest path from the component's first module back to itself, for the message."""
    start = min(component)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for target in sorted(graph[node] & component):
                if target == start:
                    return paths[node] + [start]
                if target not in paths:
                    paths[target] = paths[node] + [target]
                    following.append(target)
        frontier = following
    return sorted(component)


def test_the_cycle_finder_finds_a_planted_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert import_cycles(graph) == [["a", "b", "c", "a"]]
    assert import_cycles({"a": {"b"}, "b": set()}) == []


def test_no_module_imports_itself_back_through_others():
    modules = {module_name(path) for path in python_files("app", "cli")}
    cycles = import_cycles(module_graph(APP_IMPORTS + CLI_IMPORTS, modules))
    assert not cycles, "import cycles (module level or inside functions alike):\n  " + "\n  ".join(
        " -> ".join(cycle) for cycle in cycles
    )
