"""Fuzzing task config validation: every registered task, any JSON-ish config. The answer is the
config itself or a TaskConfigError / UnknownTaskError naming the task, never another exception.
Path traversal and SSRF attempts on the two tasks that touch files and URLs are always refused.
"""

from __future__ import annotations

import ipaddress

from hypothesis import example, given
from hypothesis import strategies as st

from app.tasks import TaskConfigError, UnknownTaskError, all_tasks, load_catalog, validate_config
from tests.fuzz.strategies import FUZZ, SSRF, TRAVERSAL, hostile_text, json_values

load_catalog()
TASK_NAMES = [spec.name for spec in all_tasks()]


@FUZZ
@given(name=st.one_of(st.sampled_from(TASK_NAMES), hostile_text(30)), config=json_values)
@example(name="write_file_artifact", config={"filename": "x", "content": "y", "overwrite": float("nan")})
@example(name="sleep_for_seconds", config={"seconds": float("inf")})
def test_validate_config_returns_the_config_or_refuses_clearly(name, config):
    try:
        cleaned = validate_config(name, config)
    except (TaskConfigError, UnknownTaskError) as error:
        assert str(error).strip()
        return
    assert cleaned == config or (config is None and cleaned == {})


@FUZZ
@given(
    filename=st.one_of(
        st.sampled_from(TRAVERSAL),
        st.builds(lambda a, b: f"{a}/{b}", hostile_text(10), hostile_text(10)),
        st.builds(lambda a: f"..{a}", st.sampled_from(["/", "\\"])),
    )
)
def test_write_file_artifact_refuses_every_path_that_could_leave_the_artifact_dir(filename):
    try:
        validate_config("write_file_artifact", {"filename": filename, "content": "x"})
    except TaskConfigError as error:
        assert "filename" in str(error)
        return
    raise AssertionError(f"accepted {filename!r}")


@FUZZ
@given(
    url=st.one_of(
        st.sampled_from(SSRF),
        st.builds(
            lambda host, path: f"http://{host}/{path}",
            st.one_of(hostile_text(20), st.ip_addresses().map(str)),
            hostile_text(10),
        ),
    )
)
def test_http_health_check_local_accepts_only_loopback_targets(url):
    try:
        validate_config("http_health_check_local", {"url": url})
    except TaskConfigError as error:
        assert "url" in str(error)
        return
    from app.tasks.catalog.health_check import parse_loopback_url

    host = parse_loopback_url(url).host
    assert host == "localhost" or ipaddress.ip_address(host).is_loopback, f"accepted {url!r} (host {host!r})"
