"""The zygote's imports stay lean, because every task pays for them at fork time.

Not a timing test: it checks the reason for the cost. `threading` registers an after-fork hook
that runs Python code in every forked child (measured: about 0.3 ms more CPU per fork of the
zygote), and it arrives with `subprocess`, which only the worker side of the executor needs.
Flask, SQLAlchemy and jsonschema would grow the zygote (and every fork) by tens of megabytes;
hashlib initialises OpenSSL (about 4 MB of the zygote's 19 MB peak), so a task that needs it
imports it when it runs.
"""

import json
import subprocess
import sys

from app.executor.client import ForkServer

KEPT_OUT = ("threading", "subprocess", "flask", "sqlalchemy", "jsonschema", "psycopg", "alembic", "hashlib")


def test_the_zygote_and_its_preload_import_nothing_heavy():
    preload = "; ".join(f"import {module}" for module in ForkServer().preload)
    probe = (
        f"import sys, json; import app.executor.zygote; {preload}; "
        f"print(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}} & set({KEPT_OUT!r}))))"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert json.loads(result.stdout) == []
