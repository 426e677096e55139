"""Every kind of event the code writes has its explanation on the events page."""

from __future__ import annotations

import ast
from pathlib import Path

from app.domain.event_kinds import EVENT_KINDS

ROOT = Path(__file__).resolve().parents[2]


def written_kinds() -> set[str]:
    """The kinds passed as a literal to record_event (first argument) or insert_event (second)."""
    found = set()
    for path in (ROOT / "app").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call):
                continue
            name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
            position = {"record_event": 0, "insert_event": 1}.get(name or "")
            if position is None or len(node.args) <= position:
                continue
            argument = node.args[position]
            if isinstance(argument, ast.Constant) and isinstance(argument.value, str):
                found.add(argument.value)
    return found


def test_every_written_kind_is_explained():
    kinds = written_kinds()
    assert {"misfire_coalesced", "overlap_skipped", "lease_recovered", "job_created"} <= kinds  # the scan works
    missing = sorted(kinds - set(EVENT_KINDS))
    assert not missing, f"explain these event kinds in app/domain/event_kinds.py: {missing}"
    assert all(text.endswith(".") and len(text) > 12 for text in EVENT_KINDS.values())
