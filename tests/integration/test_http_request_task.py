"""The http_request task against real HTTP servers on loopback (allowed through HTTP_TASK_ALLOW
where the test says so), and its SSRF guard refusing real addresses and real redirects."""

from __future__ import annotations

import json
import shutil
import ssl
import subprocess
import time

import pytest

from app.tasks import TaskConfigError, TaskContext, get_task, load_catalog, validate_config
from app.tasks.catalog import http_fetch
from app.tasks.catalog.http_fetch import RequestFailed
from app.tasks.catalog.http_guard import RefusedTarget, parse_allowance
from app.tasks.catalog.http_request import UnexpectedStatus
from tests.helpers.http_origin import Origin

pytestmark = pytest.mark.timeout(60)
load_catalog()
SECRET = "partner-token-5c1e9a"


@pytest.fixture
def origin():
    with Origin() as server:
        yield server


@pytest.fixture
def loopback_allowed(monkeypatch):
    monkeypatch.setenv("HTTP_TASK_ALLOW", "127.0.0.1")


def context(tmp_path) -> TaskContext:
    return TaskContext(
        execution_id=1,
        job_id=1,
        job_name="ping",
        idempotency_key="job-1:2030-01-01T00:00:00Z",
        attempt=1,
        artifact_dir=str(tmp_path / "artifacts"),
        marker_dir=str(tmp_path / "markers"),
    )


def run(config: dict, tmp_path):
    """Validate as job creation does, then run as the worker's task process does."""
    return get_task("http_request").run(validate_config("http_request", config), context(tmp_path))


@pytest.mark.usefixtures("loopback_allowed")
@pytest.mark.parametrize("method", ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"])
def test_each_method_goes_on_the_wire(origin, tmp_path, method):
    result = run({"url": origin.url("/echo"), "method": method}, tmp_path)
    assert origin.requests[-1].method == method
    assert result["body"]["method"] == method


@pytest.mark.usefixtures("loopback_allowed")
def test_head_has_no_body_and_succeeds(origin, tmp_path):
    result = run({"url": origin.url("/bytes/10"), "method": "HEAD"}, tmp_path)
    assert (origin.requests[-1].method, result["status"], result["body"]) == ("HEAD", 200, "")


@pytest.mark.usefixtures("loopback_allowed")
def test_a_json_body_query_and_headers_are_sent_and_a_json_answer_is_parsed(origin, tmp_path, capsys):
    result = run(
        {
            "url": origin.url("/echo?fixed=1"),
            "method": "POST",
            "json": {"event": "tick", "n": [1, 2]},
            "query": {"page": 2, "tag": ["a", "b"], "dry": True},
            "headers": {"X-Trace": "abc"},
        },
        tmp_path,
    )
    seen = origin.requests[-1]
    assert json.loads(seen.body) == {"event": "tick", "n": [1, 2]}
    assert seen.headers["content-type"] == "application/json"
    assert seen.headers["x-trace"] == "abc"
    assert seen.headers["host"] == f"127.0.0.1:{origin.port}"
    assert result["body"]["query"] == {"fixed": ["1"], "page": ["2"], "tag": ["a", "b"], "dry": ["true"]}
    assert set(result) == {"status", "elapsed_ms", "headers", "body"}
    assert result["status"] == 200 and isinstance(result["elapsed_ms"], int) and result["elapsed_ms"] >= 0
    assert result["headers"]["content-type"] == "application/json"
    assert "set-cookie" not in result["headers"]  # only the selected headers are kept
    assert f"POST {origin.url('/echo?fixed=1')}" in capsys.readouterr().out


@pytest.mark.usefixtures("loopback_allowed")
def test_a_text_body_is_sent_as_given_and_a_text_answer_is_kept_up_to_4_kb(origin, tmp_path):
    result = run({"url": origin.url("/echo"), "method": "PUT", "body": "plain words"}, tmp_path)
    assert origin.requests[-1].body == b"plain words"
    assert result["body"]["body"] == "plain words"
    long_text = run({"url": origin.url("/bytes/10000")}, tmp_path)
    assert long_text["body"] == "a" * 4096


@pytest.mark.usefixtures("loopback_allowed")
def test_an_unexpected_status_fails_with_the_status_and_the_first_500_bytes(origin, tmp_path):
    with pytest.raises(UnexpectedStatus) as failed:
        run({"url": origin.url("/status/503")}, tmp_path)
    message = str(failed.value)
    assert "answered 503 Service Unavailable, expected 2xx" in message
    excerpt = message.split(": ", 1)[1]
    assert excerpt.startswith("'status 503 body xxx") and excerpt.count("x") == 500 - len("status 503 body ")


@pytest.mark.usefixtures("loopback_allowed")
@pytest.mark.parametrize(
    "expect,status,ok",
    [
        (404, 404, True),
        ("4xx", 418, True),
        (["2xx", 404], 404, True),
        ("200-204", 204, True),
        ("200-204", 205, False),
        ([200, "3xx"], 500, False),
    ],
)
def test_expect_status_takes_codes_classes_and_ranges(origin, tmp_path, expect, status, ok):
    config = {"url": origin.url(f"/status/{status}"), "expect_status": expect}
    if ok:
        assert run(config, tmp_path)["status"] == status
    else:
        with pytest.raises(UnexpectedStatus, match=f"answered {status}"):
            run(config, tmp_path)


@pytest.mark.usefixtures("loopback_allowed")
def test_a_server_that_never_answers_fails_at_the_timeout(origin, tmp_path):
    started = time.monotonic()
    with pytest.raises(RequestFailed, match="timed out after 0.3 s"):
        run({"url": origin.url("/hang"), "timeout_seconds": 0.3}, tmp_path)
    assert time.monotonic() - started < 5


@pytest.mark.usefixtures("loopback_allowed")
def test_the_read_stops_at_max_response_bytes(origin, tmp_path, capsys):
    result = run({"url": origin.url("/bytes/5000"), "max_response_bytes": 1000}, tmp_path)
    assert result["body"] == "a" * 1000
    assert "read stopped at max_response_bytes" in capsys.readouterr().out

    fifty_mib = 50 * 1024 * 1024
    result = run({"url": origin.url(f"/stream/{fifty_mib}")}, tmp_path)  # default cap: 1 MiB
    assert result["status"] == 200 and len(result["body"]) == 4096
    deadline = time.monotonic() + 10
    while not origin.streamed and time.monotonic() < deadline:
        time.sleep(0.01)  # the server thread notices the closed connection on its next write
    assert 0 < origin.streamed < fifty_mib // 2  # the client hung up instead of draining the rest


@pytest.mark.usefixtures("loopback_allowed")
def test_redirects_are_not_followed_unless_asked_and_at_most_five(origin, tmp_path):
    to_echo = origin.url(f"/redirect?to={origin.url('/echo')}")
    with pytest.raises(UnexpectedStatus, match="answered 302"):
        run({"url": to_echo}, tmp_path)
    assert run({"url": to_echo, "expect_status": 302}, tmp_path)["status"] == 302
    result = run({"url": to_echo, "follow_redirects": True}, tmp_path)
    assert result["body"]["path"] == "/echo"

    chain = origin.url("/echo")
    for _ in range(6):
        chain = origin.url(f"/redirect?to={chain}")
    with pytest.raises(RequestFailed, match="more than 5 redirects"):
        run({"url": chain, "follow_redirects": True}, tmp_path)


@pytest.mark.usefixtures("loopback_allowed")
def test_a_303_after_a_post_continues_as_a_get_without_the_body(origin, tmp_path):
    url = origin.url(f"/redirect?status=303&to={origin.url('/echo')}")
    result = run({"url": url, "method": "POST", "json": {"a": 1}, "follow_redirects": True}, tmp_path)
    assert result["body"]["method"] == "GET" and result["body"]["body"] == ""


@pytest.mark.usefixtures("loopback_allowed")
@pytest.mark.parametrize(
    "target,rule",
    [("http://10.0.0.1/", "private"), ("http://[::1]:9/", "loopback"), ("http://169.254.169.254/", "metadata")],
)
def test_a_redirect_from_an_allowed_host_to_a_refused_one_is_refused(origin, tmp_path, target, rule):
    with pytest.raises(RefusedTarget, match=f"rule '{rule}'"):
        run({"url": origin.url(f"/redirect?to={target}"), "follow_redirects": True}, tmp_path)
    assert len(origin.requests) == 1  # the allowed hop only


@pytest.mark.parametrize(
    "url,rule",
    [
        ("http://127.0.0.1:{port}/echo", "loopback"),
        ("http://localhost:{port}/echo", "loopback"),  # a name that resolves to loopback
        ("http://[::1]:{port}/echo", "loopback"),
        ("http://10.0.0.1/", "private"),
        ("http://169.254.169.254/latest/meta-data/", "metadata"),
        ("http://0.0.0.0:{port}/echo", "unspecified"),
        ("http://2130706433:{port}/echo", "loopback"),  # 127.0.0.1 spelt as one number
    ],
)
def test_without_the_allowance_internal_addresses_are_refused_before_connecting(
    origin, tmp_path, monkeypatch, url, rule
):
    monkeypatch.delenv("HTTP_TASK_ALLOW", raising=False)
    with pytest.raises(RefusedTarget) as refused:
        run({"url": url.format(port=origin.port)}, tmp_path)
    assert refused.value.rule == rule and f"rule '{rule}'" in str(refused.value)
    assert origin.requests == []


@pytest.mark.parametrize("url", ["file:///etc/passwd", "gopher://127.0.0.1:70/_x", "ftp://example.org/"])
def test_other_schemes_are_refused_at_creation(url):
    with pytest.raises(TaskConfigError, match="is not http or https"):
        validate_config("http_request", {"url": url})


@pytest.fixture(scope="module")
def certificate(tmp_path_factory):
    """A self-signed certificate for the name `localhost` only (no IP address in it)."""
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is needed to make a test certificate")
    folder = tmp_path_factory.mktemp("tls")
    cert, key = str(folder / "cert.pem"), str(folder / "key.pem")
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert, "-days", "2",
         "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost"],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    return cert, key


@pytest.mark.usefixtures("loopback_allowed")
class TestTls:
    def test_an_untrusted_certificate_fails_unless_verify_tls_is_off(self, certificate, tmp_path):
        with Origin(tls=certificate) as origin:
            with pytest.raises(RequestFailed, match="CERTIFICATE_VERIFY_FAILED"):
                run({"url": origin.url("/echo", host="localhost")}, tmp_path)
            result = run({"url": origin.url("/echo", host="localhost"), "verify_tls": False}, tmp_path)
        assert result["status"] == 200 and origin.requests[-1].headers["host"] == f"localhost:{origin.port}"

    def test_the_certificate_is_checked_against_the_name_while_connecting_to_the_address(
        self, certificate, tmp_path, monkeypatch
    ):
        trusting = ssl.create_default_context(cafile=certificate[0])
        monkeypatch.setitem(http_fetch._TLS_CONTEXTS, True, trusting)
        with Origin(tls=certificate) as origin:
            # Connected to 127.0.0.1 (checked), verified as `localhost` (the certificate has no IP).
            assert run({"url": origin.url("/echo", host="localhost")}, tmp_path)["status"] == 200
            with pytest.raises(RequestFailed, match="CERTIFICATE_VERIFY_FAILED"):
                run({"url": origin.url("/echo", host="127.0.0.1")}, tmp_path)  # a name it is not for


class TestSecretHeaders:
    @pytest.fixture(autouse=True)
    def listed(self, monkeypatch):
        monkeypatch.setenv("HTTP_TASK_ALLOW", "127.0.0.1")
        monkeypatch.setenv("HTTP_TASK_SECRETS", "PARTNER_TOKEN, OTHER_TOKEN, DATABASE_URL")
        monkeypatch.setenv("PARTNER_TOKEN", SECRET)
        monkeypatch.setenv("DATABASE_URL", "postgresql://cronwell:db-pass@db/cronwell")

    def test_the_value_goes_on_the_wire_and_nowhere_else(self, origin, tmp_path, capsys):
        config = {"url": origin.url("/echo"), "secret_headers": {"Authorization": "PARTNER_TOKEN"}}
        result = run(config, tmp_path)
        assert origin.requests[-1].headers["authorization"] == SECRET
        assert SECRET not in capsys.readouterr().out + json.dumps(result) + json.dumps(config)

    def test_a_server_echoing_the_value_gets_it_redacted_from_the_result(self, origin, tmp_path):
        config = {"url": origin.url(f"/echo?copy={SECRET}"), "secret_headers": {"X-Key": "PARTNER_TOKEN"}}
        result = run(config, tmp_path)
        assert SECRET not in json.dumps(result) and "[redacted]" in json.dumps(result)

    def test_the_value_does_not_follow_a_redirect_to_another_origin(self, origin, tmp_path):
        with Origin() as other:
            url = origin.url(f"/redirect?to={other.url('/echo', host='127.0.0.1')}")
            config = {"url": url, "follow_redirects": True, "secret_headers": {"X-Key": "PARTNER_TOKEN"}}
            run(config, tmp_path)
            assert origin.requests[0].headers["x-key"] == SECRET
            assert "x-key" not in other.requests[0].headers

    def test_a_variable_not_listed_is_refused_at_creation(self):
        with pytest.raises(TaskConfigError, match="'UNLISTED_TOKEN' is not listed in HTTP_TASK_SECRETS"):
            validate_config("http_request", {"url": "https://example.org/", "secret_headers": {"X": "UNLISTED_TOKEN"}})

    @pytest.mark.parametrize("variable", ["DATABASE_URL", "SECRET_KEY", "PGPASSWORD", "REDIS_URL"])
    def test_cronwells_own_secrets_are_refused_even_when_listed(self, variable):
        with pytest.raises(TaskConfigError, match=f"'{variable}' is one of Cronwell's own secrets"):
            validate_config("http_request", {"url": "https://example.org/", "secret_headers": {"X": variable}})

    def test_a_listing_withdrawn_after_creation_is_refused_at_run_time(self, origin, tmp_path, monkeypatch):
        config = validate_config("http_request", {"url": origin.url("/echo"), "secret_headers": {"X": "PARTNER_TOKEN"}})
        monkeypatch.setenv("HTTP_TASK_SECRETS", "OTHER_TOKEN")
        with pytest.raises(ValueError, match="'PARTNER_TOKEN' is not listed"):
            get_task("http_request").run(config, context(tmp_path))
        assert origin.requests == []

    def test_a_listed_variable_missing_from_the_worker_fails_the_run(self, origin, tmp_path):
        config = {"url": origin.url("/echo"), "secret_headers": {"X": "OTHER_TOKEN"}}
        with pytest.raises(ValueError, match="'OTHER_TOKEN' is not set in the worker's environment"):
            run(config, tmp_path)


@pytest.mark.parametrize(
    "config,complaint",
    [
        ({}, "'url' is required"),
        ({"url": "https://example.org/", "method": "TRACE"}, "method"),
        ({"url": "https://example.org/", "json": {}, "body": "x"}, "not both"),
        ({"url": "https://example.org/", "timeout_seconds": 0}, "timeout_seconds"),
        ({"url": "https://example.org/", "max_response_bytes": -1}, "max_response_bytes"),
        ({"url": "https://example.org/", "expect_status": "6xx"}, "expect_status"),
        ({"url": "https://example.org/", "expect_status": "300-200"}, "runs backwards"),
        ({"url": "https://example.org/", "expect_status": []}, "expect_status"),
        ({"url": "https://example.org/", "headers": {"Host": "internal"}}, "set by the client"),
        ({"url": "https://example.org/", "headers": {"Bad Name": "x"}}, "not a valid header name"),
        ({"url": "https://example.org/", "headers": {"X": "a\r\nInjected: 1"}}, "line break"),
        ({"url": "https://example.org/", "headers": {"X": 1}}, "headers"),
        ({"url": "https://example.org/", "secret_headers": {"X": "not a name"}}, "secret_headers"),
        ({"url": "https://u:p@example.org/"}, "user name or password"),
        ({"url": "https://example.org/", "follow": True}, "unknown key(s) 'follow'"),
    ],
)
def test_bad_config_is_refused_at_creation_with_the_key_named(config, complaint):
    with pytest.raises(TaskConfigError) as refused:
        validate_config("http_request", config)
    assert complaint in str(refused.value)


def test_a_name_with_several_addresses_is_tried_on_each_checked_one_in_turn(origin):
    request = http_fetch.Request(
        method="GET",
        url=f"http://service.test:{origin.port}/echo",
        headers={},
        query={},
        json_body=None,
        has_json=False,
        body=None,
        timeout_seconds=5,
        follow_redirects=False,
        max_redirects=5,
        max_response_bytes=1000,
        verify_tls=True,
    )
    tried = []

    def resolve(host, port):
        tried.append(host)
        return ["127.0.0.2", "127.0.0.1"]  # only 127.0.0.1 listens

    response = http_fetch.fetch(request, parse_allowance("127.0.0.0/8"), resolve)
    assert response.status == 200 and tried == ["service.test"]
    assert origin.requests[-1].headers["host"] == f"service.test:{origin.port}"
    with pytest.raises(RefusedTarget, match="'loopback'"):
        http_fetch.fetch(request, parse_allowance("127.0.0.1"), resolve)  # 127.0.0.2 is not allowed
