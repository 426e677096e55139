"""Run the web app, the scheduler and the worker together in one terminal (`make run`).

Ctrl-C (or SIGTERM) stops all three gracefully; if one of them exits, the others are stopped
too, so a half-running product never pretends to be whole.

Their output is relayed line by line in one format: log records already are (the same
formatter in all three); the few plain lines the commands print ("scheduler ... started") get the
same time, level and name, as text or as a JSON object like the others (LOG_FORMAT).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
HOST = os.environ.get("HOST", "127.0.0.1")
PORT = os.environ.get("PORT", "8000")

PROCESSES = {
    "web": [str(BIN / "gunicorn"), "--config", "gunicorn.conf.py", "--bind", f"{HOST}:{PORT}", "wsgi:app"],
    # `python -m cli` is `flask` without Flask's plugin scan: a smaller long-running parent.
    "scheduler": [sys.executable, "-m", "cli", "scheduler", "run"],
    "worker": [sys.executable, "-m", "cli", "worker", "run", "--workers", os.environ.get("WORKER_SLOTS", "4")],
}


# A line that is already a log record: `2026-...Z LEVEL name: ...` (text) or a JSON object.
_FORMATTED = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z \w+ |\{)")


def uniform(line: str, process: str, as_json: bool) -> str:
    """`line` as a log record of `process` unless it already is one."""
    # Continuation lines of a multi-line record (a traceback, SQL) stay as they are.
    if not line.strip() or _FORMATTED.match(line) or line.startswith((" ", "\t", "[", "(", "Traceback")):
        return line
    moment = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")  # noqa: TID251 - a relay's own stamp
    if as_json:
        record = {"time": moment, "level": "INFO", "logger": process, "message": line, "event": "log"}
        return json.dumps(record, ensure_ascii=False)
    return f"{moment} INFO {process}: {line}"


def relay(stream, process: str, as_json: bool) -> None:
    for raw in iter(stream.readline, ""):
        sys.stdout.write(uniform(raw.rstrip("\n"), process, as_json) + "\n")
        sys.stdout.flush()


def sign_in_hint(env: dict) -> str:
    """How to sign in, as this database stands: admin/admin only if that account exists with
    that password (the development default of `flask ensure-dev-user`)."""
    from werkzeug.security import check_password_hash

    from app import create_app
    from app.extensions import db
    from app.models import User

    app = create_app(env=env, kind="web")
    with app.app_context():
        admin = db.session.query(User).filter_by(username="admin", active=True).one_or_none()
        if admin is not None and admin.password_hash and check_password_hash(admin.password_hash, "admin"):
            return "sign in as admin/admin (the development account; change it)"
        if db.session.query(User.id).filter_by(active=True).first() is None:
            return "no user yet: create one with `flask user create NAME --superuser`"
        return "sign in with your account (`flask user list` shows who exists)"


def main() -> int:
    env = dict(os.environ, FLASK_APP="app", PYTHONUNBUFFERED="1")
    sys.path.insert(0, str(ROOT))  # run as a script: the project's config module
    from config import load_settings

    as_json = load_settings(env)["LOG_FORMAT"] == "json"
    children: dict[str, subprocess.Popen] = {}
    stopping = False

    def stop(_signum=None, _frame=None):
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    for name, command in PROCESSES.items():
        # Own process groups: Ctrl-C reaches only us, and we stop the children in order.
        children[name] = subprocess.Popen(
            command,
            cwd=ROOT,
            env=env,
            start_new_session=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
        )
        threading.Thread(target=relay, args=(children[name].stdout, name, as_json), daemon=True).start()
    try:
        hint = sign_in_hint(env)
    except Exception as exc:  # noqa: BLE001 - the banner must never stop the processes
        hint = f"could not read the users ({type(exc).__name__})"
    print(f"Cronwell is running: http://{HOST}:{PORT}/  ({hint}; Ctrl-C stops)", flush=True)
    exit_code = 0
    while not stopping:
        for name, child in children.items():
            if child.poll() is not None:
                print(f"{name} exited with code {child.returncode}; stopping the others", file=sys.stderr)
                exit_code = child.returncode or 1
                stopping = True
                break
        time.sleep(0.2)
    for child in children.values():
        if child.poll() is None:
            child.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + 40
    for child in children.values():
        try:
            child.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            child.kill()
    return exit_code


if __name__ == "__main__":
    sys.exit(main())
