"""What the Markdown under docs/ and README.md names, checked against the repository.

A reader follows a path, a module or a `flask <noun> <verb>` from the docs and expects it to be
there. `stale_references(root, commands)` returns one line per name that is not: a file or
directory path (in code or a link), a link's `#anchor` into a Markdown file, a module run with
`python -m` or named with dots (`app.metrics.read_snapshot`), and a `flask` command checked
against `commands`, the real command tree (`flask_command_tree()`). Only names in code spans,
fenced blocks and links are read: prose may say "Flask" or "the app" freely.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

# Top-level places and files a doc may point into.
_PATH = re.compile(
    r"(?<![\w./-])((?:app|cli|tests|bench|docs|migrations|templates|static|scripts|\.ci)/[\w./<>*{}-]*"
    r"|(?:config|wsgi|gunicorn\.conf)\.py|Makefile|Dockerfile|compose(?:\.prod)?\.yaml"
    r"|requirements(?:-dev)?\.txt|\.env\.example|setup\.cfg|ruff\.toml)"
)
# Generated or gitignored: named by the docs, absent from a clean checkout.
GENERATED = ("bench/results", "bench/.peers-venv")
_DOTTED = re.compile(r"(?<![\w./-])((?:app|cli|bench|tests)(?:\.\w+)+)(?![\w/-])")
# Dotted names that are not modules: the Flask app object's attribute, a static file.
NOT_MODULES = {"app.url_map", "app.js"}
_RUN_MODULE = re.compile(r"python -m ([\w.]+)")
_FLASK = re.compile(r"(?<![\w.-])(?<!from )(?<!import )flask\s+([a-z][\w-]*)(?:[ \t]+([a-z][\w|-]*))?([^\n`#;&]*)")
_OPTION = re.compile(r"(?<![\w-])(--[a-z][\w-]*)")
_FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
_CODE_SPAN = re.compile(r"`([^`\n]+)`")
_LINK = re.compile(r"\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", re.M)

# Flask's own commands and those its extensions register on the app: their subcommands and
# options are not checked.
FLASK_BUILTINS = ("run", "shell", "routes", "openapi")


def flask_command_tree() -> dict:
    """Every `flask` command by name: Cronwell's Click commands and groups (cli/), and None for
    Flask's own and its extensions'."""
    from cli import _COMMANDS

    tree: dict = dict.fromkeys(FLASK_BUILTINS)
    for module_name, attr in _COMMANDS:
        command = getattr(importlib.import_module(f"cli.{module_name}"), attr)
        tree[command.name] = command
    from flask_migrate.cli import db  # `flask db` becomes Flask-Migrate's group when it runs

    tree["db"] = db
    return tree


def _options(command) -> set[str]:
    return {"--help"} | {opt for param in command.params for opt in (*param.opts, *param.secondary_opts)}


def markdown_files(root: Path) -> list[Path]:
    """README.md and every Markdown file under docs/."""
    return [root / "README.md", *sorted((root / "docs").rglob("*.md"))]


def anchors(text: str) -> set[str]:
    """The `#anchor` of each heading, as GitHub renders it."""
    found = set()
    for heading in _HEADING.findall(_FENCE.sub("", text)):
        plain = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
        found.add(re.sub(r"[^\w\- ]", "", plain).replace(" ", "-"))
    return found


def _code(text: str) -> list[str]:
    """The text of fenced blocks and code spans: where names are written to be used as they are."""
    blocks = [m.group(0) for m in _FENCE.finditer(text)]
    return blocks + _CODE_SPAN.findall(_FENCE.sub("", text))


def _module_file(root: Path, dotted: str) -> Path | None:
    base = root / Path(*dotted.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _check_dotted(root: Path, dotted: str, runnable: bool) -> str | None:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        module = _module_file(root, ".".join(parts[:cut]))
        if module is None:
            continue
        if cut == len(parts):
            if runnable and module.name == "__init__.py" and not (module.parent / "__main__.py").is_file():
                return f"module {dotted} cannot be run with python -m (no __main__.py)"
            return None
        name = parts[cut]
        if runnable:
            return f"module {dotted} does not exist"
        if re.search(rf"^\s*(?:def|class|async def)\s+{name}\b|^\s*{name}\s*[:=]|\b{name}\b", module.read_text()):
            return None
        return f"{dotted}: {'.'.join(parts[:cut])} has no {name}"
    return f"module {dotted} does not exist"


def _check_flask(noun: str, verbs: str, rest: str, commands: dict) -> list[str]:
    """`flask NOUN [VERB[|VERB...]] [ARGS]`: the command, each verb, and each `--option` in ARGS."""
    import click

    if noun not in commands:
        return [f"flask {noun}: no such command"]
    command = commands[noun]
    if command is None:
        return []
    if not isinstance(command, click.Group):
        targets = [(noun, command)]
        rest = f"{verbs} {rest}"  # a command's first argument, not a verb
    elif not verbs:
        return []  # the group itself, as a pointer
    else:
        targets = []
        for verb in verbs.split("|"):
            if verb not in command.commands:
                return [f"flask {noun} {verb}: no such command"]
            targets.append((f"{noun} {verb}", command.commands[verb]))
        words = rest.split()
        while len(targets) == 1 and isinstance(targets[0][1], click.Group) and words and words[0].isidentifier():
            name, group = targets[0]
            if words[0] not in group.commands:
                return [f"flask {name} {words[0]}: no such command"]
            targets = [(f"{name} {words[0]}", group.commands[words[0]])]
            rest = rest.split(words.pop(0), 1)[1]
    problems = []
    for name, target in targets:
        problems += [f"flask {name}: no option {o}" for o in _OPTION.findall(rest) if o not in _options(target)]
    return problems if len(targets) == 1 else []


def stale_references(root: Path, commands: dict[str, set[str] | None]) -> list[str]:
    """One line per path, anchor, module or command the Markdown names that does not exist."""
    problems: list[str] = []
    for doc in markdown_files(root):
        text = doc.read_text()
        where = doc.relative_to(root)
        code = _code(text)
        names: set[str] = set()
        for chunk in code:
            names.update(m.group(1).rstrip(".,:;") for m in _PATH.finditer(chunk))
            for noun, verbs, rest in _FLASK.findall(chunk.replace("\\|", "|")):
                problems += [f"{where}: {p}" for p in _check_flask(noun, verbs, rest, commands)]
            for module in _RUN_MODULE.findall(chunk):
                if (problem := _check_dotted(root, module.rstrip("."), runnable=True)) is not None:
                    problems.append(f"{where}: {problem}")
            for dotted in set(_DOTTED.findall(_RUN_MODULE.sub("", chunk))) - NOT_MODULES:
                if (problem := _check_dotted(root, dotted.rstrip("."), runnable=False)) is not None:
                    problems.append(f"{where}: {problem}")
        for name in sorted(names):
            if any(c in name for c in "<*{") or name.startswith(GENERATED) or "..." in name:
                continue
            path = root / name.split("::")[0]
            if not path.exists() and not path.with_name(path.name + ".py").exists():
                problems.append(f"{where}: {name} does not exist")
        for target in _LINK.findall(_FENCE.sub("", text)):
            if re.match(r"[a-z]+:", target):
                continue  # http(s), mailto
            path, _, anchor = target.partition("#")
            linked = (doc.parent / path).resolve() if path else doc
            if not linked.exists():
                problems.append(f"{where}: link {target} does not exist")
            elif anchor and linked.suffix == ".md" and anchor not in anchors(linked.read_text()):
                problems.append(f"{where}: link {target}: no such heading")
    return problems
