"""Run the web app, the scheduler and the worker together in one terminal (`make run`).

Ctrl-C (or SIGTERM) stops all three gracefully; if one of them exits, the others are stopped
too, so a half-running product never pretends to be whole.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
HOST = os.environ.get("HOST", "127.0.0.1")
PORT = os.environ.get("PORT", "8000")

PROCESSES = {
    "web": [str(BIN / "gunicorn"), "--config", "gunicorn.conf.py", "--bind", f"{HOST}:{PORT}", "wsgi:app"],
    "scheduler": [str(BIN / "flask"), "scheduler", "run"],
    "worker": [str(BIN / "flask"), "worker", "run", "--workers", os.environ.get("WORKER_SLOTS", "4")],
}


def main() -> int:
    env = dict(os.environ, FLASK_APP="app", PYTHONUNBUFFERED="1")
    children: dict[str, subprocess.Popen] = {}
    stopping = False

    def stop(_signum=None, _frame=None):
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    for name, command in PROCESSES.items():
        # Own process groups: Ctrl-C reaches only us, and we stop the children in order.
        children[name] = subprocess.Popen(command, cwd=ROOT, env=env, start_new_session=True)
    print(
        f"Cronwell is running: http://{HOST}:{PORT}/  (sign in as admin/admin in development; Ctrl-C stops)", flush=True
    )
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
