"""The store's status guards come from the state machine table, never from hand-written lists.

Scans the store's modules and the worker's turn, whose statements moved to app/sql (ADR 0012): no status value may appear as a literal (in Python or inside SQL
text), and no `.in_(...)` on a status may list enum members by hand; the sets must be names
derived from `app.domain.states.ALLOWED` (`sources_of`, `guard_for`, CLAIMABLE, ...). A new
guard written as `status IN ('pending', 'claimed')` fails here.
"""

import ast
import re
from pathlib import Path

import app.sql
import app.store
from app.domain.states import AttemptStatus, ExecutionStatus

STORE = Path(app.store.__file__).parent
TURN = [Path(app.sql.__file__).parent / name for name in ("turn.py", "turn_postgresql.py", "candidates.py")]
MODULES = sorted(STORE.glob("*.py")) + TURN
STATUS_VALUES = {s.value for s in ExecutionStatus} | {s.value for s in AttemptStatus}
_ANY_STATUS = "|".join(sorted(STATUS_VALUES))
QUOTED = re.compile(rf"""['"]({_ANY_STATUS})['"]""")


def test_the_store_has_its_modules():
    assert {p.name for p in MODULES} >= {"interface.py", "common.py", "postgres.py", "sqlite.py", "rows.py"}


def test_no_status_literal_in_any_store_module():
    for path in MODULES:
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                assert node.value not in STATUS_VALUES, f"{path.name}:{node.lineno}: status literal {node.value!r}"
                match = QUOTED.search(node.value)
                assert match is None, f"{path.name}:{node.lineno}: status {match.group(0)} written into SQL"


def test_no_in_guard_lists_statuses_by_hand():
    for path in MODULES:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "in_":
                for argument in node.args:
                    for inner in ast.walk(argument):
                        hand_written = isinstance(inner, (ast.List, ast.Tuple, ast.Set)) and any(
                            isinstance(element, ast.Attribute) for element in inner.elts
                        )
                        assert not hand_written, f"{path.name}:{node.lineno}: a status set written by hand"


def test_the_scan_would_catch_a_hand_written_guard():
    sample = "update(e).where(e.c.status.in_([S.PENDING.value, S.CLAIMED.value]))\nSQL = \"x.status IN ('running')\"\n"
    tree = ast.parse(sample)
    assert any(isinstance(n, ast.Constant) and QUOTED.search(str(n.value)) for n in ast.walk(tree))
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "in_"]
    assert calls and isinstance(calls[0].args[0], ast.List)


def test_the_store_uses_the_table():
    source = "\n".join(path.read_text() for path in MODULES)
    for name in ("sources_of", "can_transition", "lease_duration"):
        assert re.search(rf"\b{name}\(", source), f"the store never calls {name}"
