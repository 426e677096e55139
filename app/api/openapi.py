"""What the OpenAPI document says of every operation alike, added in one place as it is generated.

- `operationId`: `<resource>.<view>` (`jobs.get_job`), from the view's endpoint, so it is stable
  and unique by construction; links and clients name operations by it.
- Responses every operation can give whatever it does: 414 (a URL over `MAX_URL_BYTES`, refused
  before the view runs; see `refuse_long_url`) and 429 (every operation is rate limited per
  credential, app/api/security.py). Both are the shared problem responses of the document.
- `links`: what a client (and Schemathesis' stateful phase) can do next with an answer, for
  example create a job -> read, edit, trigger it; trigger -> follow the execution.
"""

from __future__ import annotations

from apispec import BasePlugin
from flask import request

from app.api.errors import ApiError

# The longest URL (path and query string, as sent) the API reads. gunicorn reads request lines up
# to 8190 bytes (gunicorn.conf.py); this limit sits below it so that the API, not gunicorn, refuses
# a long URL, with a problem document that names it. Far above every URL the API gives out.
MAX_URL_BYTES = 4096

SHARED_RESPONSES = {"414": "REQUEST_URI_TOO_LONG", "429": "TOO_MANY_REQUESTS"}


def operation_id(endpoint: str) -> str:
    """`api_jobs.get_job` -> `jobs.get_job`."""
    blueprint, _, view = endpoint.partition(".")
    return f"{blueprint.removeprefix('api_')}.{view}"


def refuse_long_url() -> None:
    """414 for a URL over MAX_URL_BYTES (a before-request hook of every API blueprint)."""
    environ = request.environ
    # As sent (gunicorn and the development server keep it); a test client's lacks the query.
    target = environ.get("RAW_URI") or environ.get("REQUEST_URI") or environ.get("PATH_INFO", "")
    if "?" not in target and environ.get("QUERY_STRING"):
        target += "?" + environ["QUERY_STRING"]
    size = len(target.encode("latin-1", "replace"))
    if size > MAX_URL_BYTES:
        raise ApiError(414, f"the URL is {size} bytes long; the API reads URLs of up to {MAX_URL_BYTES} bytes")


def _body(pointer: str) -> str:
    return f"$response.body#{pointer}"


def _to(operation: str, description: str, **parameters: str) -> dict:
    return {"operationId": operation, "description": description, "parameters": parameters}


def _job_links(job_id: str) -> dict:
    return {
        "GetJob": _to("jobs.get_job", "Read the job.", job_id=job_id),
        "EditJob": _to("jobs.edit_job", "Change some of its fields.", job_id=job_id),
        "TriggerJob": _to("jobs.trigger_job", "Run it now (or later).", job_id=job_id),
        "EnableJob": _to("jobs.enable_job", "Enable it.", job_id=job_id),
        "DisableJob": _to("jobs.disable_job", "Disable it.", job_id=job_id),
        "PreviewJob": _to("jobs.preview_job", "Its next fire times.", job_id=job_id),
        "ListJobExecutions": _to("executions.list_executions", "Its runs.", job=job_id),
        "DeleteJob": _to("jobs.delete_job", "Delete it.", job_id=job_id),
    }


def _execution_links(execution_id: str) -> dict:
    return {
        "GetExecution": _to("executions.get_execution", "Follow the run.", execution_id=execution_id),
        "ListAttempts": _to("executions.list_attempts", "Its tries.", execution_id=execution_id),
        "GetOutput": _to("executions.get_output", "What it printed.", execution_id=execution_id),
        "CancelExecution": _to("executions.cancel_execution", "Cancel it.", execution_id=execution_id),
        "RetryExecution": _to("executions.retry_execution", "Run it again once it failed.", execution_id=execution_id),
    }


def _batch_links(batch_id: str) -> dict:
    return {
        "GetBatch": _to("batches.get_batch", "Follow the batch.", batch_id=batch_id),
        "ListBatchItems": _to("batches.list_items", "Its runs.", batch_id=batch_id),
        "CancelBatch": _to("batches.cancel_batch", "Cancel what has not started.", batch_id=batch_id),
    }


def _queue_links(queue_id: str) -> dict:
    return {
        "GetQueue": _to("queues.get_queue", "Read the queue.", queue_id=queue_id),
        "GetQueueStats": _to("queues.get_queue_stats", "Its statistics.", queue_id=queue_id),
        "EditQueue": _to("queues.edit_queue", "Change its limits.", queue_id=queue_id),
        "PauseQueue": _to("queues.pause_queue", "Pause it.", queue_id=queue_id),
        "ResumeQueue": _to("queues.resume_queue", "Resume it.", queue_id=queue_id),
        "DeleteQueue": _to("queues.delete_queue", "Delete it (when empty).", queue_id=queue_id),
    }


def _channel_links(channel_id: str) -> dict:
    return {
        "GetChannel": _to("notifications.get_channel", "Read the channel (with its ETag).", channel_id=channel_id),
        "EditChannel": _to("notifications.edit_channel", "Change some of its fields.", channel_id=channel_id),
        "DeleteChannel": _to("notifications.delete_channel", "Delete it.", channel_id=channel_id),
    }


def _token_links(token_id: str) -> dict:
    return {
        "GetToken": _to("tokens.get_token", "Read the token (never its secret).", token_id=token_id),
        "RevokeToken": _to("tokens.revoke_token", "Revoke it.", token_id=token_id),
    }


# operationId -> status -> links of that answer. `$response.body#/id` is the object answered. No
# links from filtered lists: a filter that matches nothing leaves no id to follow.
LINKS: dict[str, dict[str, dict]] = {
    "jobs.create_job": {"201": _job_links(_body("/id"))},
    "jobs.get_job": {
        "200": {
            **_job_links(_body("/id")),
            "EditJobIfUnchanged": {
                **_to(
                    "jobs.edit_job", "Edit it unless it changed since this read (412 if it did).", job_id=_body("/id")
                ),
                "parameters": {"job_id": _body("/id"), "header.If-Match": "$response.header.ETag"},
            },
        }
    },
    "jobs.trigger_job": {"201": _execution_links(_body("/id"))},
    "executions.retry_execution": {"201": _execution_links(_body("/id"))},
    "executions.get_execution": {
        "200": {
            **_execution_links(_body("/id")),
            "GetJob": _to("jobs.get_job", "The job it is a run of.", job_id=_body("/job_id")),
        }
    },
    "batches.submit_batch": {"201": _batch_links(_body("/id"))},
    "queues.create_queue": {"201": _queue_links(_body("/id"))},
    "projects.create_project": {
        "201": {"GetProject": _to("projects.get_project", "Read it.", project_id=_body("/id"))}
    },
    "tokens.create_token": {"201": _token_links(_body("/id"))},
    "notifications.create_channel": {"201": _channel_links(_body("/id"))},
    "notifications.get_channel": {
        "200": {
            **_channel_links(_body("/id")),
            "EditChannelIfUnchanged": {
                **_to(
                    "notifications.edit_channel",
                    "Edit it unless it changed since this read (412 if it did).",
                    channel_id=_body("/id"),
                ),
                "parameters": {"channel_id": _body("/id"), "header.If-Match": "$response.header.ETag"},
            },
        }
    },
    "organizations.list_organizations": {
        "200": {"GetOrganization": _to("organizations.get_organization", "The first one.", name=_body("/0/name"))}
    },
}


def tag_name(blueprint_name: str) -> str:
    """The document's tag for a blueprint: the resource it serves (`api_job_files` -> `job files`)."""
    return blueprint_name.removeprefix("api_").replace("_", " ")


class CronwellDocPlugin(BasePlugin):
    """apispec plugin: operationId, the shared 414 and 429 responses, the links of each operation,
    and tags named for resources (`jobs`, not the blueprint's `api_jobs`)."""

    def operation_helper(self, path=None, operations=None, **kwargs):
        rule = kwargs.get("rule")
        for operation in (operations or {}).values():
            operation["tags"] = [tag_name(tag) for tag in operation.get("tags", [])]
            if rule is not None:
                operation["operationId"] = operation_id(rule.endpoint)
            # Status codes are still ints here (apispec turns them into strings later).
            responses = operation["responses"] = {str(k): v for k, v in operation.get("responses", {}).items()}
            for status, name in SHARED_RESPONSES.items():
                responses.setdefault(status, name)
            for status, links in LINKS.get(operation.get("operationId", ""), {}).items():
                response = responses.get(status)
                if isinstance(response, dict):
                    response["links"] = links
