"""`99999999999999999999` (beyond PostgreSQL's `integer`) in every id route family once answered
500 on PostgreSQL and `Error: database error: integer out of range` on the CLI.
It is a missing object: the web's 404 page, the CLI's `Error: <noun> N does not exist` (exit 1).
Each test runs on SQLite and PostgreSQL.
"""

from __future__ import annotations

import pytest

from app.models import Alert, Execution, Job
from app.models.ids import id_in_range, key_max
from app.web.converters import IdConverter
from tests.factories import make_alert, make_execution, make_job, make_user
from tests.helpers.web import WebClient

HUGE = "99999999999999999999"
WEB = {
    "jobs": [
        ("GET", f"/jobs/{HUGE}"),
        ("GET", f"/jobs/{HUGE}/edit"),
        ("POST", f"/jobs/{HUGE}/edit"),
        ("GET", f"/jobs/{HUGE}/delete"),
        ("POST", f"/jobs/{HUGE}/delete"),
        ("POST", f"/jobs/{HUGE}/trigger"),
        ("POST", f"/jobs/{HUGE}/enable"),
        ("POST", f"/jobs/{HUGE}/disable"),
    ],
    "executions": [
        ("GET", f"/executions/{HUGE}"),
        ("POST", f"/executions/{HUGE}/retry"),
        ("POST", f"/executions/{HUGE}/cancel"),
    ],
    "alerts": [("POST", f"/alerts/{HUGE}/resolve")],
}


@pytest.fixture
def admin(app) -> WebClient:
    make_user("huge-admin", role="admin")
    client = WebClient(app)
    assert client.login("huge-admin").status_code == 302
    return client


@pytest.mark.parametrize("family", sorted(WEB))
def test_a_huge_id_is_the_404_page_of_a_missing_object(app, admin, family):
    missing = admin.get("/jobs/2147483647")  # in range, no such row: the page to match
    assert missing.status_code == 404
    for method, url in WEB[family]:
        response = admin.get(url) if method == "GET" else admin.post(url, {})
        body = response.get_data(as_text=True)
        assert response.status_code == 404, f"{method} {url}: {response.status_code}"
        assert "404 · Not found" in body and "Traceback" not in body, f"{method} {url}"


def test_a_huge_job_filter_on_the_executions_list_is_a_missing_job(app, admin):
    response = admin.get(f"/executions/?job={HUGE}")
    assert response.status_code == 400
    assert f"job {HUGE} does not exist" in response.get_data(as_text=True)


def test_a_huge_id_among_selected_alerts_resolves_nothing(app, admin):
    alert = make_alert(make_job("huge-alerts"))
    response = admin.post("/alerts/resolve", {"alert_ids": [str(alert.id), HUGE]})
    assert response.status_code == 303
    assert f"alert {HUGE} does not exist" in admin.get("/alerts/").get_data(as_text=True)
    from app.extensions import db

    db.session.expire_all()
    assert db.session.get(Alert, alert.id).resolved_at is None


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["job", "trigger", HUGE], f"Error: job {HUGE} does not exist"),
        (["execution", "inspect", HUGE], f"Error: execution {HUGE} does not exist"),
        (["execution", "list", "--job", HUGE], f"Error: job {HUGE} does not exist"),
    ],
    ids=["job-trigger", "execution-inspect", "execution-list-job"],
)
def test_a_huge_id_on_the_cli_is_a_missing_object(app, args, line):
    make_execution(make_job("huge-cli"), "failed")
    result = app.test_cli_runner().invoke(args=args)
    assert result.exit_code == 1, result.output
    assert result.stderr.splitlines() == [line]
    assert result.stdout == ""


def test_the_id_bounds_follow_the_key_columns():
    # Every routed id is an Integer key; if one widens, the converter must widen with it.
    assert {key_max(model) for model in (Job, Execution, Alert)} == {IdConverter.largest} == {2**31 - 1}
    assert id_in_range("2147483647", 2**31 - 1) == 2**31 - 1
    assert id_in_range("0002147483647", 2**31 - 1) == 2**31 - 1
    for text in ("2147483648", "0", "000", "", "-1", "+1", " 1", "٣", "9" * 5000):
        assert id_in_range(text, 2**31 - 1) is None, text
