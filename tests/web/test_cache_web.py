"""The cache against a real Redis (127.0.0.1:6379): which keys each action deletes, that deletes
wait for the commit, that a rollback deletes nothing, and that pages work with Redis unreachable.

Every test uses its own key prefix and removes only its own keys: the Redis may be shared.
"""

from __future__ import annotations

import os
import uuid
from datetime import UTC

import pytest
import redis

from app import cache, create_app
from app.extensions import db
from app.models import Job
from app.services.use_cases.tenancy import default_organization
from tests.factories import make_execution, make_job, make_queue
from tests.helpers.web import WebClient, job_form, signed_in_client

REDIS_URL = os.environ.get("CRONWELL_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
UNREACHABLE_REDIS_URL = "redis://127.0.0.1:1/0"


@pytest.fixture
def redis_client():
    client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=1)
    try:
        client.ping()
    except redis.RedisError as exc:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"Redis unreachable at {REDIS_URL}: {exc} (CI=true: cache tests must run)")
        pytest.skip(f"Redis unreachable at {REDIS_URL}: {exc}")
    return client


@pytest.fixture
def prefix(redis_client):
    value = f"cronwell-test-{uuid.uuid4().hex}:"
    yield value
    keys = list(redis_client.scan_iter(match=value + "*", count=500))
    if keys:
        redis_client.delete(*keys)


@pytest.fixture
def redis_app(app_env, prefix):
    application = create_app({"TESTING": True, "REDIS_URL": REDIS_URL, "CACHE_KEY_PREFIX": prefix}, env=app_env)
    with application.app_context():
        yield application
        db.session.remove()
        db.engine.dispose()


class Keys:
    """Plant sentinel values under known keys and see which ones an action deleted."""

    def __init__(self, client: redis.Redis, prefix: str) -> None:
        self.client, self.prefix = client, prefix

    def plant(self, names: list[str]) -> None:
        from app.services.read.dashboard import task_catalog

        for name in names:
            if name == cache.CATALOG:
                task_catalog()  # pages read this one: store the real value
            else:
                self.client.set(self.prefix + name, '"sentinel"', ex=300)

    def present(self, names: list[str]) -> set[str]:
        return {name for name in names if self.client.exists(self.prefix + name)}


@pytest.fixture
def keys(redis_client, prefix):
    return Keys(redis_client, prefix)


def _all_keys(*job_ids: int) -> list[str]:
    names = [cache.SUMMARY, cache.QUEUE_DEPTH, cache.UPCOMING, cache.CATALOG, "unrelated:key"]
    for job_id in job_ids:
        names += [cache.job_stats_key(job_id), cache.job_upcoming_key(job_id)]
    return names


def test_redis_backend_is_used_with_redis_url(redis_app):
    assert cache.get_cache().backend_name == "redis"


def test_in_process_backend_without_redis_url(app):
    assert cache.get_cache().backend_name == "in-process"


def test_dashboard_values_are_cached_with_short_ttls(redis_app, redis_client, prefix):
    job = make_job("cached")
    client = signed_in_client(redis_app)

    def assert_ttls(expected: dict[str, int]) -> None:
        for name, ttl in expected.items():
            remaining = redis_client.ttl(prefix + name)
            assert 0 < remaining <= ttl, (name, remaining)

    # Each page's keys are read right after the page that wrote them: the shortest TTL is 5 s, and a
    # loaded machine can take longer than that over all three pages.
    assert client.get("/dashboard/").status_code == 200
    # The dashboard's figures are the organization's: one copy per scope (cache.scoped_key).
    scope = f"org:{default_organization().id}"
    scoped = {
        key: cache.get_cache().scoped_key(key, scope) for key in (cache.SUMMARY, cache.QUEUE_DEPTH, cache.UPCOMING)
    }
    assert_ttls({scoped[cache.SUMMARY]: 10, scoped[cache.QUEUE_DEPTH]: 5, scoped[cache.UPCOMING]: 15})
    assert client.get(f"/jobs/{job.id}").status_code == 200
    assert_ttls({cache.job_stats_key(job.id): 30, cache.job_upcoming_key(job.id): 60})
    client.get("/jobs/new")
    assert_ttls({cache.CATALOG: 300})


def test_cached_summary_is_served_until_a_service_invalidates_it(redis_app):
    job = make_job("stale-check")
    client = signed_in_client(redis_app)
    first = client.get("/dashboard/panels/summary", htmx=True).get_data(as_text=True)
    # A write that bypasses the services (so invalidates nothing) is not visible yet...
    db.session.add(
        Job(
            name="sneaked-in",
            queue_id=make_queue("default").id,
            task="always_succeed",
            config={},
            schedule_type="cron",
            schedule={"expression": "0 * * * *"},
            timezone="UTC",
            enabled=True,
        )
    )
    db.session.commit()
    assert client.get("/dashboard/panels/summary", htmx=True).get_data(as_text=True) == first
    # ...until a service change to any job deletes the summary after its commit.
    assert client.post(f"/jobs/{job.id}/trigger").status_code == 303
    after = client.get("/dashboard/panels/summary", htmx=True).get_data(as_text=True)
    assert after != first and "/ 2</span>" in after


@pytest.mark.parametrize("action", ["edit", "enable", "disable", "trigger", "delete", "retry", "cancel"])
def test_each_action_deletes_exactly_the_affected_keys(redis_app, keys, action):
    job, other = make_job("target", enabled=(action != "enable")), make_job("bystander")
    failed = make_execution(job, "failed")
    pending = make_execution(job, "pending")
    client = signed_in_client(redis_app)
    names = _all_keys(job.id, other.id)
    keys.plant(names)
    url, data = {
        "edit": (f"/jobs/{job.id}/edit", job_form(name="target", every="5m", description="changed")),
        "enable": (f"/jobs/{job.id}/enable", {}),
        "disable": (f"/jobs/{job.id}/disable", {}),
        "trigger": (f"/jobs/{job.id}/trigger", {}),
        "delete": (f"/jobs/{job.id}/delete", {"confirm_name": "target"}),
        "retry": (f"/executions/{failed.id}/retry", {}),
        "cancel": (f"/executions/{pending.id}/cancel", {}),
    }[action]
    assert client.post(url, data).status_code == 303
    assert keys.present(names) == {
        cache.CATALOG,
        "unrelated:key",
        cache.job_stats_key(other.id),
        cache.job_upcoming_key(other.id),
    }


def test_create_deletes_the_shared_keys_only(redis_app, keys):
    other = make_job("bystander")
    client = signed_in_client(redis_app)
    names = _all_keys(other.id)
    keys.plant(names)
    assert client.post("/jobs/new", job_form(name="brand new")).status_code == 303
    assert keys.present(names) == {
        cache.CATALOG,
        "unrelated:key",
        cache.job_stats_key(other.id),
        cache.job_upcoming_key(other.id),
    }


def test_refused_action_deletes_nothing(redis_app, keys):
    job = make_job("disabled", enabled=False)
    client = signed_in_client(redis_app)
    names = _all_keys(job.id)
    keys.plant(names)
    client.post(f"/jobs/{job.id}/trigger")  # refused: the job is disabled
    client.post("/jobs/new", job_form(name="disabled"))  # refused: duplicate name
    assert keys.present(names) == set(names)


def test_deletes_wait_for_commit(redis_app, keys):
    names = [cache.SUMMARY, cache.job_stats_key(7)]
    keys.plant(names)
    cache.invalidate_on_commit(db.session, names)
    db.session.execute(db.text("SELECT 1"))
    assert keys.present(names) == set(names)  # still there while the transaction is open
    db.session.commit()
    assert keys.present(names) == set()


def test_rollback_deletes_nothing(redis_app, keys):
    names = [cache.SUMMARY, cache.job_stats_key(7)]
    keys.plant(names)
    cache.invalidate_on_commit(db.session, names)
    db.session.execute(db.text("SELECT 1"))
    db.session.rollback()
    db.session.commit()  # a later commit must not pick up the rolled-back transaction's keys
    assert keys.present(names) == set(names)


def test_login_rate_limit_is_shared_between_processes(app_env, prefix, redis_app):
    """Two app instances (as two gunicorn workers) count attempts in the same Redis."""
    from tests.factories import make_user

    make_user("shared", "pw-shared")
    redis_app.config["LOGIN_RATE_LIMIT_ATTEMPTS"] = 2
    other = create_app(
        {"TESTING": True, "REDIS_URL": REDIS_URL, "CACHE_KEY_PREFIX": prefix, "LOGIN_RATE_LIMIT_ATTEMPTS": 2},
        env=app_env,
    )
    assert WebClient(redis_app).login("shared", "wrong").status_code == 400
    with other.app_context():
        assert WebClient(other).login("shared", "wrong").status_code == 400
        assert WebClient(other).login("shared", "pw-shared").status_code == 429
    assert WebClient(redis_app).login("shared", "pw-shared").status_code == 429


@pytest.fixture
def down_app(app_env):
    application = create_app(
        {"TESTING": True, "REDIS_URL": UNREACHABLE_REDIS_URL, "CACHE_KEY_PREFIX": f"cronwell-test-{uuid.uuid4().hex}:"},
        env=app_env,
    )
    with application.app_context():
        yield application
        db.session.remove()
        db.engine.dispose()


def test_pages_work_with_redis_unreachable(down_app):
    job = make_job("no cache")
    make_execution(job, "succeeded", output="fine")
    client = signed_in_client(down_app)  # the rate limiter fails open
    panels = tuple(f"/dashboard/panels/{name}" for name in ("summary", "queue", "upcoming"))
    for url in (
        "/",
        "/dashboard/",
        f"/jobs/{job.id}",
        "/jobs/",
        "/executions/",
        "/alerts/",
        "/health/",
        "/jobs/new",
        "/executions/1",
    ) + panels:
        assert client.get(url).status_code == 200, url
    assert client.post("/jobs/new", job_form(name="made without redis")).status_code == 303
    assert client.post(f"/jobs/{job.id}/trigger").status_code == 303
    assert "unreachable" in client.get("/health/").get_data(as_text=True)


def test_readyz_reports_unreachable_redis(down_app):
    client = WebClient(down_app)
    assert client.get("/healthz").status_code == 200
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.get_json()["checks"]["redis"]["ok"] is False


def test_failures_are_swallowed_and_backend_skipped_for_a_while():
    class Broken:
        calls = 0

        def __getattr__(self, name):
            def fail(*args, **kwargs):
                Broken.calls += 1
                raise ConnectionError("down")

            return fail

    store = cache.Cache(Broken(), "p:")
    assert store.get_or_compute("k", 5, lambda: {"n": 1}) == {"n": 1}
    assert store.get_or_compute("k", 5, lambda: {"n": 2}) == {"n": 2}
    store.delete(["k"])
    assert store.incr("k", 5) is None
    assert Broken.calls == 1  # after the first failure the backend is left alone for a while
    assert store.ping() is False


def test_cached_and_fresh_values_have_the_same_shape(app):
    from datetime import datetime

    store = cache.get_cache()
    moment = datetime(2026, 1, 1, tzinfo=UTC)
    fresh = store.get_or_compute("shape", 5, lambda: {"at": moment, "n": (1, 2)})
    assert fresh == store.get_or_compute("shape", 5, lambda: None) == {"at": "2026-01-01 00:00:00+00:00", "n": [1, 2]}
