"""The published OpenAPI document describes every operation completely, and its examples are true.

Walks /api/v1/openapi.json: every operation has an operationId, a summary, its roles, the errors it
can answer (those its description names, 401 unless public, 403 when a role guards it, 404 when it
takes an id, 422 when it reads input, the shared 414 and 429, and a problem document as default)
and an example of its request body and of each success answer. Every example is validated against
the schema it illustrates (JSON Schema, with OpenAPI's `nullable` and formats), a response example
must show every field its schema declares and no other, and a request example may not send a field
only the server sets. The links between operations name operations and parameters that exist.
"""

from __future__ import annotations

import re
from datetime import datetime

import pytest
from jsonschema import Draft7Validator, FormatChecker
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT7

from app.api.openapi import MAX_URL_BYTES
from app.domain.permissions import Action

DOC_URI = "urn:cronwell:openapi"
# Fields an answer leaves out on purpose although its schema declares them (the schema is shared
# with an answer that has them): operationId -> field names.
OMITTED = {
    "auth.refresh": {"refresh_token"},  # a refresh answers a new access token only
    "executions.list_executions": {"output", "error", "result"},  # lists leave out what runs printed and returned
    "batches.list_items": {"output", "error", "result"},
}
METHODS = ("get", "post", "put", "patch", "delete")


@pytest.fixture
def backend():
    return "sqlite"  # the document does not depend on the database


@pytest.fixture
def document(app, api):
    response = api.get("/api/v1/openapi.json")
    assert response.status_code == 200
    return response.get_json()


def operations(document):
    for path, item in document["paths"].items():
        for method in METHODS:
            if method in item:
                yield path, method, item[method], item.get("parameters", [])


# --- OpenAPI 3.0 schemas as JSON Schema -----------------------------------------------------------


def as_json_schema(node, direction: str):
    """OpenAPI 3.0's schema dialect as draft 7: `nullable` as a null type, refs into the document,
    and in `direction` ("request" or "response") required fields that only go the other way dropped."""
    if isinstance(node, list):
        return [as_json_schema(item, direction) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: as_json_schema(value, direction) for key, value in node.items()}
    if isinstance(out.get("$ref"), str) and out["$ref"].startswith("#"):
        out["$ref"] = DOC_URI + out["$ref"]
    if isinstance(out.get("properties"), dict) and "required" in out:
        other_way = "writeOnly" if direction == "response" else "readOnly"
        out["required"] = [name for name in out["required"] if not (out["properties"].get(name) or {}).get(other_way)]
    if out.pop("nullable", False):
        if isinstance(out.get("type"), str):
            out["type"] = [out["type"], "null"]
            if "enum" in out and None not in out["enum"]:
                out["enum"] = [*out["enum"], None]
        else:
            out = {"anyOf": [out, {"type": "null"}]}
    return out


def _date_time(value) -> bool:
    if isinstance(value, str):
        datetime.fromisoformat(value.replace("Z", "+00:00"))
    return True


FORMATS = FormatChecker()
FORMATS.checks("date-time", raises=ValueError)(_date_time)


class Validators:
    """Validate an instance against a schema found anywhere in the document."""

    def __init__(self, document):
        self.document = document
        self.registries = {
            direction: Registry().with_resource(
                DOC_URI, Resource(contents=as_json_schema(document, direction), specification=DRAFT7)
            )
            for direction in ("request", "response")
        }

    def errors(self, schema, instance, direction):
        validator = Draft7Validator(
            as_json_schema(schema, direction), registry=self.registries[direction], format_checker=FORMATS
        )
        return [
            f"{'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}" for e in validator.iter_errors(instance)
        ]

    def resolve(self, schema):
        while isinstance(schema, dict) and "$ref" in schema:
            node = self.document
            for part in schema["$ref"].lstrip("#/").split("/"):
                node = node[part.replace("~1", "/").replace("~0", "~")]
            schema = node
        return schema

    def incomplete(self, schema, instance, where="(top)", omitted=frozenset()):
        """Where a response example leaves out a declared field (unless `omitted`) or shows an undeclared one."""
        schema = self.resolve(schema)
        if instance is None or not isinstance(schema, dict):
            return []
        for alternative in schema.get("anyOf", []) + schema.get("allOf", []):
            resolved = self.resolve(alternative)
            if isinstance(resolved, dict) and resolved.get("properties"):
                return self.incomplete(resolved, instance, where, omitted)
        found = []
        if isinstance(instance, list) and "items" in schema:
            for n, item in enumerate(instance):
                found += self.incomplete(schema["items"], item, f"{where}/{n}", omitted)
        properties = schema.get("properties")
        if isinstance(instance, dict) and properties:
            declared = {name for name, spec in properties.items() if not self.resolve(spec).get("writeOnly")}
            missing, extra = declared - instance.keys() - omitted, instance.keys() - declared
            if missing:
                found.append(f"{where}: missing {sorted(missing)}")
            if extra:
                found.append(f"{where}: undeclared {sorted(extra)}")
            for name in declared & instance.keys():
                found += self.incomplete(properties[name], instance[name], f"{where}/{name}", omitted)
        return found


def content_of(response_or_body):
    content = response_or_body.get("content") or {}
    return next(iter(content.items()), (None, None))


# --- the tests ----------------------------------------------------------------------------------


def test_every_operation_has_an_id_a_summary_its_roles_and_its_errors(app, document):
    validators = Validators(document)
    seen_ids = set()
    problems = []
    for path, method, operation, path_parameters in operations(document):
        name = f"{method.upper()} {path}"
        operation_id = operation.get("operationId")
        if not operation_id or operation_id in seen_ids:
            problems.append(f"{name}: operationId {operation_id!r} missing or not unique")
        seen_ids.add(operation_id)
        description = operation.get("description", "")
        if not operation.get("summary"):
            problems.append(f"{name}: no summary")
        if "Roles:" not in description:
            problems.append(f"{name}: does not name its roles")
        declared = set(operation["responses"])
        parameters = path_parameters + operation.get("parameters", [])
        expected = {"414", "429", "default"}
        # The errors the description promises must be documented responses.
        errors_text = description.partition("Errors:")[2]
        if not errors_text:
            problems.append(f"{name}: does not list its errors ('Errors: ...')")
        expected |= set(re.findall(r"\b([45]\d\d)\b", errors_text))
        if operation.get("security") != []:
            expected.add("401")
        view = app.view_functions["api_" + operation_id] if operation_id else None
        if getattr(view, "_cronwell_action", None) in (Action.READ, Action.OPERATE, Action.ADMINISTER):
            expected.add("403")
        if any(p["in"] == "path" for p in parameters):
            expected.add("404")
        if operation.get("requestBody") or any(p["in"] == "query" for p in parameters):
            expected.add("422")
        if expected - declared:
            problems.append(f"{name}: does not document {sorted(expected - declared)}")
        for status, response in operation["responses"].items():
            if status.startswith(("4", "5")) or status == "default":
                media, _ = content_of(validators.resolve(response))
                if media != "application/problem+json":
                    problems.append(f"{name}: {status} is not a problem document")
    assert problems == [], "\n".join(problems)


def test_every_request_and_success_answer_has_an_example_true_to_its_schema(document):
    validators = Validators(document)
    problems = []
    examples = 0
    for path, method, operation, _ in operations(document):
        name = f"{method.upper()} {path}"
        if "requestBody" in operation:
            media, content = content_of(operation["requestBody"])
            if not content or "example" not in content:
                problems.append(f"{name}: the request body has no example")
            else:
                examples += 1
                example = content["example"]
                problems += [f"{name} request: {e}" for e in validators.errors(content["schema"], example, "request")]
                schema = validators.resolve(content["schema"])
                for part in [schema, *[validators.resolve(s) for s in schema.get("allOf", [])]]:
                    read_only = {n for n, s in part.get("properties", {}).items() if s.get("readOnly")}
                    if read_only & set(example):
                        problems.append(f"{name} request sends fields only the server sets: {read_only & set(example)}")
        for status, response in operation["responses"].items():
            if not status.startswith("2"):
                continue
            media, content = content_of(validators.resolve(response))
            if content is None:  # 204: no body
                continue
            if "example" not in content:
                problems.append(f"{name}: the {status} answer has no example")
                continue
            examples += 1
            example = content["example"]
            problems += [f"{name} {status}: {e}" for e in validators.errors(content["schema"], example, "response")]
            omitted = OMITTED.get(operation["operationId"], set())
            problems += [
                f"{name} {status}: {e}" for e in validators.incomplete(content["schema"], example, omitted=omitted)
            ]
    assert problems == [], "\n".join(problems)
    assert examples >= 60  # 55 operations, most with a body, some with two answers


def test_the_shared_error_responses_are_problem_documents_with_true_examples(document):
    validators = Validators(document)
    problems = []
    for name, response in document["components"]["responses"].items():
        media, content = content_of(response)
        if content is None:
            continue
        assert media == "application/problem+json", name
        if "example" not in content:
            problems.append(f"{name}: no example")
            continue
        problems += [f"{name}: {e}" for e in validators.errors(content["schema"], content["example"], "response")]
    assert problems == [], "\n".join(problems)
    too_long = document["components"]["responses"]["REQUEST_URI_TOO_LONG"]
    assert str(MAX_URL_BYTES) in too_long["description"]


def test_links_lead_to_operations_and_parameters_that_exist(document):
    by_id = {operation["operationId"]: (path, operation, shared) for path, _, operation, shared in operations(document)}
    problems = []
    count = 0
    for path, method, operation, _ in operations(document):
        for status, response in operation["responses"].items():
            for link_name, link in (response.get("links") or {}).items():
                count += 1
                where = f"{method.upper()} {path} {status} {link_name}"
                target = by_id.get(link["operationId"])
                if target is None:
                    problems.append(f"{where}: no operation {link['operationId']}")
                    continue
                target_path, target_operation, shared = target
                names = {(p["in"], p["name"]) for p in shared + target_operation.get("parameters", [])}
                for key, expression in link["parameters"].items():
                    location, _, parameter = key.rpartition(".")
                    if not any(n == parameter and (not location or location == where_in) for where_in, n in names):
                        problems.append(f"{where}: {link['operationId']} has no parameter {key}")
                    if not expression.startswith(("$response.body#/", "$response.header.")):
                        problems.append(f"{where}: {key} is not read from the answer")
    assert problems == [], "\n".join(problems)
    assert count >= 40
    create_job = document["paths"]["/api/v1/jobs"]["post"]["responses"]["201"]["links"]
    assert {"GetJob", "TriggerJob", "EnableJob"} <= set(create_job)


def test_the_request_examples_work_as_written(app, api):
    """The document's request examples, sent as they are (ids swapped for the objects made here):
    each is accepted, and the answers have the shape of their examples."""
    from app.api import examples as ex
    from tests.factories import make_user

    make_user("alice", ex.LOGIN["password"], role="admin")
    assert set(api.login("alice", ex.LOGIN["password"], organization="default")) == set(ex.TOKEN_PAIR)

    def send(method, path, body, status):
        response = api.request(method, path, json=body)
        assert response.status_code == status, (method, path, response.get_data(as_text=True))
        return response.get_json(silent=True)

    send("POST", "/api/v1/projects", ex.PROJECT_CREATE, 201)
    queue = send("POST", "/api/v1/queues", ex.QUEUE_CREATE, 201)
    send("PATCH", f"/api/v1/queues/{queue['id']}", ex.QUEUE_EDIT, 200)
    job = send("POST", "/api/v1/jobs", ex.JOB_CREATE, 201)
    assert set(job) == set(ex.JOB)
    send("PATCH", f"/api/v1/jobs/{job['id']}", ex.JOB_EDIT, 200)
    triggered = send("POST", f"/api/v1/jobs/{job['id']}/trigger", ex.TRIGGER, 201)
    send("POST", f"/api/v1/executions/{triggered['id']}/cancel", ex.CANCEL, 200)
    # The answers without a schema of their own have their examples' fields.
    plan = send("POST", f"/api/v1/jobs/{job['id']}/backfill", ex.BACKFILL, 200)
    assert set(plan) == set(ex.BACKFILL_PLAN)
    explained = api.get(f"/api/v1/jobs/{job['id']}/explain?at={ex.EXPLAIN['at']}").get_json()
    assert set(explained) == set(ex.EXPLAIN) and set(explained["occurrence"]) == set(ex.EXPLAIN["occurrence"])
    assert send("POST", "/api/v1/schedules/preview", ex.SCHEDULE_PREVIEW, 200) == ex.SCHEDULE_PREVIEW_ANSWER
    send("POST", "/api/v1/batches", {**ex.BATCH_SUBMIT, "job_id": job["id"]}, 201)
    send("POST", f"/api/v1/queues/{queue['id']}/pause", ex.PAUSE, 200)
    send("POST", "/api/v1/tokens", ex.TOKEN_CREATE, 201)
    assert set(send("POST", "/api/v1/channels", ex.CHANNEL_CREATE, 201)) == set(ex.CHANNEL_CREATED)
    invitation = send("POST", "/api/v1/users/invitations", {"role": "operator"}, 201)
    send("POST", "/api/v1/auth/register", {**ex.REGISTER, "invitation": invitation["invitation"]}, 201)
    send("POST", "/api/v1/auth/password", ex.PASSWORD_CHANGE, 204)


def test_the_document_is_written_when_first_read_and_reads_the_same_after(app):
    """Making an app registers the API's routes but leaves the document unwritten (most of an
    app's making, and most processes never serve it); the first read writes every operation."""
    api = next(iter(app.extensions["flask-smorest"]["blp_name_to_api"].values()))
    assert api._spec.to_dict()["paths"] == {}
    assert "/api/v1/jobs" in {rule.rule for rule in app.url_map.iter_rules()}
    first = app.test_client().get("/api/v1/openapi.json").get_json()
    assert "/api/v1/jobs" in first["paths"] and "TOO_MANY_REQUESTS" in first["components"]["responses"]
    assert {tag["name"] for tag in first["tags"]} >= {"jobs", "job files"}
    assert app.test_client().get("/api/v1/openapi.json").get_json() == first
