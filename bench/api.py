"""The REST API at 1M executions through gunicorn: GET /api/v1/executions?limit=50 and
GET /api/v1/queues/{id}/stats p95, and what verifying a JWT costs per request.

History is the dashboard benchmark's (`bench.loaders.load_history`), then VACUUM ANALYZE. A real
gunicorn (1 worker, 4 threads) serves the benchmark database; requests go over one keep-alive
connection with a JWT of an admin of the default organization, REQUESTS times each after a warm-up.
Targets: both endpoints <= 50 ms p95; JWT verification (signature and claims, without the denylist
query) <= 1 ms per request.
"""

from __future__ import annotations

import http.client
import json
import signal
import socket
import subprocess
import sys
import time

from app.clock import utcnow
from bench import loaders
from bench.dashboard import JOBS
from bench.harness import PROJECT_ROOT, BenchDatabase, Figure, summary

NAME = "api"
REQUESTS = 200
PASSWORD = "bench-api-password"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _request(conn: http.client.HTTPConnection, method: str, path: str, token: str | None = None, body=None):
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    conn.request(method, path, body=json.dumps(body) if body is not None else None, headers=headers)
    response = conn.getresponse()
    return response.status, response.read()


def _time(conn, path: str, token: str, requests: int = REQUESTS) -> dict:
    status, payload = _request(conn, "GET", path, token)
    if status != 200:
        raise RuntimeError(f"GET {path}: HTTP {status}: {payload[:300]!r}")
    for _ in range(5):
        _request(conn, "GET", path, token)
    samples = []
    for _ in range(requests):
        started = time.perf_counter()
        _request(conn, "GET", path, token)
        samples.append((time.perf_counter() - started) * 1000)
    return summary(samples)


def _jwt_cost(app, n: int = 5000) -> tuple[float, float]:
    """Microseconds per decode+verify of an access token, and per full check (with the denylist query)."""
    from flask_jwt_extended import create_access_token, decode_token

    from app.services.use_cases import auth

    with app.app_context():
        token = create_access_token(identity="1", additional_claims={"org": 1, "rjti": "r" * 32})
        started = time.perf_counter()
        for _ in range(n):
            decode_token(token)
        verify_us = (time.perf_counter() - started) / n * 1e6
        claims = decode_token(token)
        started = time.perf_counter()
        checks = max(1, n // 10)
        for _ in range(checks):
            decode_token(token)
            auth.is_revoked(claims["jti"], claims["rjti"])
        full_us = (time.perf_counter() - started) / checks * 1e6
    return verify_us, full_us


def run(db: BenchDatabase, options) -> list[Figure]:
    now = utcnow()
    loaded = loaders.history_for(db, options, JOBS, now=now)
    load_seconds = loaded["seconds"]
    with db.connect() as conn:
        queue_id = conn.execute("SELECT id FROM queues WHERE name = 'default'").fetchone()[0]
    app = db.app()
    with app.app_context():
        from app.extensions import db as database
        from app.models import Membership, User
        from app.services.use_cases.tenancy import default_organization

        if not database.session.query(User).filter_by(username="bench-api").first():  # a reused database has it
            user = User(username="bench-api", active=True, created_at=now)
            user.set_password(PASSWORD)
            user.memberships.append(Membership(organization_id=default_organization().id, role="admin", created_at=now))
            database.session.add(user)
            database.session.commit()
    port = _free_port()
    env = db.env(
        GUNICORN_BIND=f"127.0.0.1:{port}",
        GUNICORN_WORKERS="1",
        GUNICORN_THREADS="4",
        API_TOKEN_RATE_LIMIT="1000000 per minute",
        PROMETHEUS_MULTIPROC_DIR=str(db.instance_dir / "prometheus"),
    )
    log_path = db.instance_dir / "gunicorn-api.log"
    with open(log_path, "wb") as log:
        server = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "--config", "gunicorn.conf.py", "wsgi:app"],
            cwd=PROJECT_ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        conn = None
        for _ in range(300):
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                if _request(conn, "GET", "/healthz")[0] == 200:
                    break
            except OSError:
                time.sleep(0.1)
        status, payload = _request(
            conn, "POST", "/api/v1/auth/login", body={"username": "bench-api", "password": PASSWORD}
        )
        if status != 200:
            raise RuntimeError(f"sign-in failed: HTTP {status} {payload[:200]!r}\n{log_path.read_text()[-2000:]}")
        token = json.loads(payload)["access_token"]
        requests = 5 if options.smoke else REQUESTS
        listing = _time(conn, "/api/v1/executions?limit=50", token, requests)
        stats = _time(conn, f"/api/v1/queues/{queue_id}/stats", token, requests)
        me = _time(conn, "/api/v1/me", token, requests)
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
    verify_us, full_us = _jwt_cost(app, 50 if options.smoke else 5000)
    figures = [
        Figure(NAME, "GET /api/v1/executions?limit=50 p95", listing["p95"], "ms", note=f"p50 {listing['p50']:.1f} ms"),
        Figure(NAME, "GET /api/v1/queues/{id}/stats p95", stats["p95"], "ms", note=f"p50 {stats['p50']:.1f} ms"),
        Figure(NAME, "GET /api/v1/me p95 (auth + one user read)", me["p95"], "ms", note=f"p50 {me['p50']:.1f} ms"),
        Figure(NAME, "JWT decode + verify per request", verify_us / 1000, "ms", note=f"{verify_us:.0f} us"),
        Figure(NAME, "JWT check with the denylist query", full_us / 1000, "ms", note=f"{full_us:.0f} us"),
    ]
    figures[0].judge("<= 50")
    figures[1].judge("<= 50")
    figures[3].judge("<= 1")
    figures[0].note += f"; {options.rows:,} rows " + (
        "reused" if loaded["reused"] else f"loaded in {load_seconds:.0f} s"
    )
    figures[0].note += "; gunicorn 1 worker x 4 threads"
    figures[0].extra = {"rows": options.rows, "executions": listing, "stats": stats, "me": me}
    return figures
