"""Every number an API operation reads, from the query string or the JSON body, on SQLite and
PostgreSQL, with an admin's API token: values no column can hold (2**31, 2**63, 2**64), signs,
fractions and garbage.

Nothing here names an operation: the parameters come from the published OpenAPI document and the
bodies from its request examples (one field replaced at a time), so a new operation or field is
walked as soon as it is documented. Asserted: always a 4xx problem (never a 5xx, never a success
for a value no field accepts), and PostgreSQL never sees an out-of-range integer.
"""

from __future__ import annotations

import re

import pytest

from app.clock import utcnow
from app.services.caller import Caller
from app.services.use_cases import tokens
from tests.factories import make_execution, make_job, make_user
from tests.helpers.api import ApiClient

# Beyond PostgreSQL's integer and bigint, and not whole numbers at all.
BAD_NUMBERS = [2**31, 2**63, 2**64, "563269938582", "9223372036854775808", "garbage", "-1", "1.5", "٣", "9" * 40]
BAD_BODY_NUMBERS = [2**31, 2**63, 2**64, -(2**63) - 1, "garbage", 1.5, True, [1], {"a": 1}]
_PATH_PARAMETER = re.compile(r"\{(\w+)\}")


@pytest.fixture
def admin_api(app) -> ApiClient:
    admin = make_user("fuzz-api-admin", role="admin")
    secret = tokens.create_token(
        Caller.cli(), name="fuzz", project=None, role="admin", user_id=admin.id, now=utcnow()
    ).secret
    return ApiClient(app, token=secret)


@pytest.fixture
def document(admin_api) -> dict:
    return admin_api.get("/api/v1/openapi.json").get_json()


@pytest.fixture
def real_ids(app) -> dict[str, str]:
    """A path value per parameter name that addresses a real object (so a body is validated)."""
    job = make_job("fuzz-api-job")
    execution = make_execution(job, "failed")
    return {"job_id": str(job.id), "execution_id": str(execution.id), "queue_id": str(job.queue_id or 1)}


def operations(document: dict):
    for path, item in document["paths"].items():
        for method, operation in item.items():
            if isinstance(operation, dict) and "responses" in operation:
                yield path, method.upper(), operation


def filled(path: str, real_ids: dict[str, str]) -> str:
    return _PATH_PARAMETER.sub(lambda m: real_ids.get(m[1], "1"), path)


def integer_query_parameters(operation: dict) -> list[str]:
    """Names of the query parameters that hold a number or an id (cursors are ids)."""
    names = []
    for parameter in operation.get("parameters", []):
        schema = parameter.get("schema", {})
        if parameter.get("in") == "query" and (schema.get("type") == "integer" or parameter["name"] == "cursor"):
            names.append(parameter["name"])
    return names


def resolve(document: dict, schema: dict) -> dict:
    if "$ref" in schema:
        return document["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    return schema


def body_example(operation: dict) -> dict | None:
    content = operation.get("requestBody", {}).get("content", {}).get("application/json", {})
    example = content.get("example")
    return dict(example) if isinstance(example, dict) else None


def integer_body_fields(document: dict, operation: dict, example: dict) -> list[str]:
    """The body's fields that take a number: integers of the schema (not read-only) and, for bodies
    read by hand, every example field holding an integer or named like an id."""
    content = operation["requestBody"]["content"]["application/json"]
    schema = resolve(document, content.get("schema", {}))
    names = {
        name
        for name, field in schema.get("properties", {}).items()
        if field.get("type") == "integer" and not field.get("readOnly")
    }
    names |= {k for k, v in example.items() if (isinstance(v, int) and not isinstance(v, bool)) or k.endswith("_id")}
    return sorted(names)


def assert_refused(response, what: str) -> None:
    body = response.get_data(as_text=True)
    assert 400 <= response.status_code < 500, f"{what}: {response.status_code}\n{body[:1000]}"
    assert response.mimetype == "application/problem+json", f"{what}: {response.mimetype}"


def test_the_walk_covers_cursors_limits_and_ids(document):
    names = {name for _, _, op in operations(document) for name in integer_query_parameters(op)}
    assert {"cursor", "limit", "job"} <= names, names


def test_every_numeric_query_parameter_out_of_range_or_garbage_is_a_4xx(admin_api, document, real_ids):
    walked = 0
    for path, method, operation in operations(document):
        if method != "GET":
            continue
        for name in integer_query_parameters(operation):
            for value in BAD_NUMBERS:
                url = f"{filled(path, real_ids)}?{name}={value}"
                assert_refused(admin_api.get(url), f"GET {url}")
                walked += 1
    assert walked >= 50, walked


def test_every_numeric_body_field_out_of_range_or_garbage_is_a_4xx(admin_api, document, real_ids):
    walked = 0
    for path, method, operation in operations(document):
        example = body_example(operation)
        if example is None or path.startswith("/api/v1/auth"):
            continue
        for name in integer_body_fields(document, operation, example):
            for value in BAD_BODY_NUMBERS:
                url = filled(path, real_ids)
                response = admin_api.request(method, url, json={**example, name: value})
                assert_refused(response, f"{method} {url} with {name}={value!r}")
                walked += 1
    assert walked >= 40, walked
