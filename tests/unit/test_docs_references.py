"""Every path, module, heading link and `flask` command the docs and README name exists."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.doc_references import anchors, flask_command_tree, stale_references

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def commands():
    return flask_command_tree()


def test_the_repository_docs_name_only_what_exists(commands):
    assert stale_references(ROOT, commands) == []


def _tree(tmp_path: Path, readme: str, doc: str = "# Guide\n\n## Where to look\n") -> Path:
    (tmp_path / "app" / "store").mkdir(parents=True)
    (tmp_path / "app" / "__init__.py").write_text("def create_app():\n    pass\n")
    (tmp_path / "app" / "store" / "__init__.py").write_text("")
    (tmp_path / "app" / "store" / "common.py").write_text("class CommonStore:\n    pass\n")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "guide.md").write_text(doc)
    (tmp_path / "README.md").write_text(readme)
    return tmp_path


def test_a_clean_readme_passes(tmp_path, commands):
    root = _tree(
        tmp_path,
        "See `app/store/common.py`, `app.store.common.CommonStore`, [the guide](docs/guide.md#where-to-look)\n"
        "and `flask job add nightly always_succeed interval --every 5m --json`.\n",
    )
    assert stale_references(root, commands) == []


@pytest.mark.parametrize(
    ("readme", "problem"),
    [
        ("Statements live in `app/store/executions.py`.", "README.md: app/store/executions.py does not exist"),
        ("```\npython -m app.nowhere\n```", "README.md: module app.nowhere does not exist"),
        ("`app.store.common.Store`", "README.md: app.store.common.Store: app.store.common has no Store"),
        ("[guide](docs/missing.md)", "README.md: link docs/missing.md does not exist"),
        ("[guide](docs/guide.md#nowhere)", "README.md: link docs/guide.md#nowhere: no such heading"),
        ("`flask frobnicate`", "README.md: flask frobnicate: no such command"),
        ("```\n$ flask job frobnicate 3\n```", "README.md: flask job frobnicate: no such command"),
        ("`flask queue add|edit|frob`", "README.md: flask queue frob: no such command"),
        ("`flask worker run --id w1`", "README.md: flask worker run: no option --id"),
        ("`flask alerts channel nope`", "README.md: flask alerts channel nope: no such command"),
    ],
)
def test_a_planted_stale_reference_is_reported(tmp_path, commands, readme, problem):
    root = _tree(tmp_path, readme + "\n")
    assert stale_references(root, commands) == [problem]


def test_a_stale_reference_in_docs_is_reported_relative_to_its_file(tmp_path, commands):
    root = _tree(tmp_path, "Nothing here.\n", doc="# Guide\n\nSee [the readme](../README.md) and [x](other.md).\n")
    assert stale_references(root, commands) == ["docs/guide.md: link other.md does not exist"]


def test_heading_anchors_follow_github():
    text = "# Performance\n\n## Throughput and the peers\n\n### 10M executions\n\n## Many hosts (`tests/faults/`)\n"
    assert anchors(text) == {"performance", "throughput-and-the-peers", "10m-executions", "many-hosts-testsfaults"}


def test_prose_and_python_imports_are_not_commands(tmp_path, commands):
    root = _tree(tmp_path, "Flask runs it.\n\n```python\nfrom flask import Blueprint\n```\n")
    assert stale_references(root, commands) == []
