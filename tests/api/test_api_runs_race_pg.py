"""One-off runs under concurrency, on PostgreSQL: the same run with the same idempotency key,
sent at the same instant to a real gunicorn (several threads, so separate connections), creates
one run, whether the key is the body's `idempotency_key` or the Idempotency-Key header."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request

import pytest

from app.extensions import db
from app.models import Execution
from tests.factories import make_user
from tests.helpers.api import PASSWORD, ApiClient

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.timeout(180)]
ROUNDS = 8


@pytest.fixture
def backend():
    return "postgres"


def post(url: str, token: str, body: dict, headers: dict) -> tuple[int, dict]:
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json", **headers},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}")


def race(url: str, token: str, body: dict, headers: dict) -> list[tuple[int, dict]]:
    barrier = threading.Barrier(2)
    answers: list[tuple[int, dict]] = []

    def send() -> None:
        barrier.wait()
        answers.append(post(url, token, body, headers))

    threads = [threading.Thread(target=send) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return answers


def test_one_key_sent_twice_at_once_creates_one_run(app, api_server):
    base, _log = api_server
    make_user("racer", PASSWORD, role="operator")
    token = ApiClient(app).login("racer")["access_token"]
    url = f"{base}/api/v1/runs"
    for round_number in range(ROUNDS):
        # The body's key: the unique key column decides; the loser gets the winner's run (200).
        answers = race(url, token, {"task": "echo", "idempotency_key": f"body-{round_number}"}, {})
        assert sorted(status for status, _ in answers) == [200, 201], answers
        assert len({body["id"] for _, body in answers}) == 1, answers
        # The header: the first request's claim decides; the second replays it or is told to retry.
        answers = race(url, token, {"task": "echo"}, {"Idempotency-Key": f"header-{round_number}"})
        statuses = sorted(status for status, _ in answers)
        assert statuses in ([201, 201], [201, 409]), answers
        assert len({body["id"] for status, body in answers if status == 201}) == 1, answers
    db.session.rollback()
    assert db.session.query(Execution).filter(Execution.job_id.is_(None)).count() == 2 * ROUNDS
