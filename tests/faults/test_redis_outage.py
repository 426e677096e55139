"""Redis (a private server) stops under a running web process and comes back.

Redis only accelerates the dashboard, previews and the sign-in limiter, so every page must keep
working from the database while it is down (public pages, the signed-in dashboard and its
HTMX panels, the health page, and signing in itself, where the limiter fails open), `/readyz`
must say 503 naming Redis (also when Redis hangs instead of refusing connections), and once
Redis is back the cache must fill again and `/readyz` must return to 200.
"""

from __future__ import annotations

import time

import pytest
import redis

from app.extensions import db
from tests.factories import make_job, make_user
from tests.helpers.http import Browser
from tests.helpers.processes import wait_for
from tests.helpers.scenario import readyz, start_web, utcnow
from tests.helpers.servers import free_port

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.timeout(120)]

PASSWORD = "redis-outage-password"
PREFIX = "cronwell-fault-redis:"


def make_operator(username: str) -> None:
    user = make_user(username, PASSWORD, role="operator", now=utcnow())
    user.set_password(PASSWORD)  # the real (slow) hash, as production stores it
    db.session.commit()


def pages(job_id: int) -> list[str]:
    return [
        "/",
        "/jobs/",
        f"/jobs/{job_id}",
        "/executions/",
        "/dashboard/",
        "/dashboard/panels/summary",
        "/dashboard/panels/queue",
        "/dashboard/panels/upcoming",
        "/health/",
        "/alerts/",
    ]


def assert_pages_work(browser: Browser, job_id: int, phase: str) -> None:
    for path in pages(job_id):
        htmx = {"HX-Request": "true"} if "/panels/" in path else {}
        answer = browser.get(path, headers=htmx)
        assert answer.status == 200, f"{phase}: GET {path} -> {answer.status}\n{answer.body[:2000]}"


def test_redis_outage_degrades_to_the_database(fault_app, fault_env, private_redis, processes):
    job = make_job(now=utcnow(), every="1m", name="cached-job")
    make_operator("ops")
    make_operator("late-ops")
    port = free_port()
    start_web(processes, port, env={"REDIS_URL": private_redis.url, "CACHE_KEY_PREFIX": PREFIX})
    base = f"http://127.0.0.1:{port}"
    browser = Browser(base)
    assert browser.sign_in("ops", PASSWORD).status == 302
    client = redis.Redis.from_url(private_redis.url)

    assert_pages_work(browser, job.id, "Redis up")
    status, body = readyz(base)
    assert status == 200 and body["checks"]["redis"] == {"ok": True}
    assert client.keys(PREFIX + "*"), "the dashboard did not use the cache"

    # Hung rather than down: the client's short socket timeout bounds every page.
    private_redis.freeze()
    started = time.monotonic()
    assert readyz(base)[0] == 503
    assert_pages_work(browser, job.id, "Redis hung")
    hung_seconds = time.monotonic() - started
    print(f"\n[Redis hung] /readyz and {len(pages(job.id))} pages answered in {hung_seconds:.1f} s")
    assert hung_seconds < 15
    private_redis.thaw()

    private_redis.stop()
    status, body = readyz(base)
    assert status == 503 and body["checks"]["redis"]["ok"] is False and body["checks"]["database"]["ok"] is True
    assert_pages_work(browser, job.id, "Redis down")
    # Signing in goes through the limiter, which fails open rather than locking operators out.
    late = Browser(base)
    assert late.sign_in("late-ops", PASSWORD).status == 302
    assert_pages_work(late, job.id, "Redis down, new session")

    private_redis.start()
    client.flushdb()  # a restarted Redis without persistence comes back empty anyway
    wait_for(lambda: readyz(base)[0] == 200, within=30, what="/readyz to see Redis again", interval=0.25)

    def cache_refilled():
        assert_pages_work(browser, job.id, "Redis back")
        return client.keys(PREFIX + "*")

    # The cache stays out of the way for a few seconds after an error, then fills again.
    wait_for(cache_refilled, within=30, what="the cache to be used again", interval=0.5)
