"""Idempotency under concurrency, on PostgreSQL: the same trigger with the same key, sent twice at
the same instant to a real gunicorn (several threads), creates one run."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request

import pytest

from app.extensions import db
from app.models import Execution
from tests.factories import make_job, make_user
from tests.helpers.api import PASSWORD, ApiClient

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.timeout(180)]
ROUNDS = 12


@pytest.fixture
def backend():
    return "postgres"


def post(url: str, token: str, key: str) -> tuple[int, dict]:
    request = urllib.request.Request(
        url, method="POST", headers={"Authorization": f"Bearer {token}", "Idempotency-Key": key}
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}")


def test_two_concurrent_triggers_with_one_key_create_one_run(app, api_server):
    base, _log = api_server
    make_user("racer", PASSWORD, role="operator")
    job = make_job("raced")
    token = ApiClient(app).login("racer")["access_token"]
    url = f"{base}/api/v1/jobs/{job.id}/trigger"
    outcomes = []
    for round_number in range(ROUNDS):
        key = f"race-{round_number}"
        barrier = threading.Barrier(2)
        answers: list[tuple[int, dict]] = []

        def send(key=key, barrier=barrier, answers=answers) -> None:
            barrier.wait()
            answers.append(post(url, token, key))

        threads = [threading.Thread(target=send) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        statuses = sorted(status for status, _ in answers)
        # Both got the run (the second one replayed), or the second arrived while the first ran.
        assert statuses in ([201, 201], [201, 409]), answers
        created = {body["id"] for status, body in answers if status == 201}
        assert len(created) == 1, answers
        outcomes.append(statuses)
    db.session.rollback()
    runs = db.session.query(Execution).filter(Execution.job_id == job.id).count()
    assert runs == ROUNDS, f"{runs} runs for {ROUNDS} keys; outcomes {outcomes}"
    print(
        f"\n[idempotency] {ROUNDS} concurrent pairs: {outcomes.count([201, 201])} replayed, "
        f"{outcomes.count([201, 409])} told to retry, {runs} runs"
    )
