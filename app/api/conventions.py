"""The API's conventions, each in one place: cursor pagination, ETag/If-Match, Idempotency-Key.

- Pagination: `limit` (capped) and an opaque `cursor`; a page is `{"items": [...], "next": URL}`
  where `next` is null on the last page (also sent as a `Link: <...>; rel="next"` header). The
  cursor is the last id of the page, so paging is stable while new rows arrive.
- ETag: a strong validator of an object's JSON; `If-Match` on an update that no longer matches is
  412 (someone changed the object since it was read).
- Idempotency-Key: on POSTs that create runs, batches or jobs; see
  app/services/use_cases/idempotency.py.
"""

from __future__ import annotations

import functools
import hashlib
import json
from urllib.parse import urlencode

from flask import make_response, request

from app.api.errors import ApiError, problem
from app.clock import utcnow

IDEMPOTENCY_HEADER = {
    "in": "header",
    "name": "Idempotency-Key",
    "required": False,
    "schema": {"type": "string", "minLength": 1, "maxLength": 255},
    "description": "Send the same key to retry safely: the first answer is replayed, no second run is created.",
}
IF_MATCH_HEADER = {
    "in": "header",
    "name": "If-Match",
    "required": False,
    "schema": {"type": "string"},
    "description": "The ETag of the object as read; a stale one answers 412.",
}


# --- pagination --------------------------------------------------------------------------------


def paginate(query, id_column, args: dict, serialize, *, descending: bool) -> dict:
    """One page of `query` (ordered by `id_column`), from `args` (limit, cursor), as {items, next}."""
    limit = args["limit"]
    cursor = args.get("cursor")
    if cursor is not None:
        query = query.where(id_column < int(cursor) if descending else id_column > int(cursor))
    from app.extensions import db

    rows = list(db.session.scalars(query.limit(limit + 1)))
    more = len(rows) > limit
    rows = rows[:limit]
    next_url = None
    if more and rows:
        params = {k: v for k, v in request.args.items() if k != "cursor"}
        params["cursor"] = str(rows[-1].id)
        params["limit"] = str(limit)
        next_url = f"{request.path}?{urlencode(params)}"
    return {"items": [serialize(row) for row in rows], "next": next_url}


def page_headers(page: dict) -> dict:
    return {"Link": f'<{page["next"]}>; rel="next"'} if page.get("next") else {}


def json_object_body() -> dict:
    """The request's JSON object body, or 422 (checked before any precondition)."""
    data = request.get_json(silent=True)
    if not isinstance(data, dict):
        raise ApiError(422, "the body must be a JSON object", errors={"_schema": "must be a JSON object"})
    return data


# --- ETag --------------------------------------------------------------------------------------


def etag_of(document: dict) -> str:
    data = json.dumps(document, sort_keys=True, default=str).encode()
    return '"' + hashlib.sha256(data).hexdigest()[:32] + '"'


def check_if_match(current: dict) -> None:
    """412 when the request's If-Match names another version than `current`."""
    wanted = (request.headers.get("If-Match") or "").strip()
    if not wanted:  # absent (or blank): an unconditional update
        return
    candidates = {value.strip() for value in wanted.split(",")}
    if "*" in candidates:
        return
    if etag_of(current) not in candidates and etag_of(current).replace('"', "") not in candidates:
        raise ApiError(412, "the object changed since you read it: read it again and reapply your change")


def with_etag(result, document: dict, status: int = 200, headers: dict | None = None):
    """`result` (what the view's response schema dumps) with the ETag of its JSON `document`."""
    return result, status, {"ETag": etag_of(document), **(headers or {})}


# --- Idempotency-Key ---------------------------------------------------------------------------


def idempotent(view):
    """Replay the first answer to a repeated POST with the same Idempotency-Key (and body)."""

    @functools.wraps(view)
    def wrapper(*args, **kwargs):
        from app.api.security import current_caller
        from app.services.use_cases import idempotency

        key = request.headers.get("Idempotency-Key")
        if key is None:
            return view(*args, **kwargs)
        if not 1 <= len(key) <= 255 or any(ord(ch) < 33 or ord(ch) > 126 for ch in key):
            raise ApiError(
                422, "Idempotency-Key must be 1-255 visible ASCII characters", errors={"Idempotency-Key": "is invalid"}
            )
        caller = current_caller()
        owner = f"{caller.actor}#{caller.user_id}"
        body = request.get_data() or b""
        try:
            canonical = json.dumps(json.loads(body), sort_keys=True).encode() if body.strip() else b""
        except ValueError:
            canonical = body
        fingerprint = hashlib.sha256(request.method.encode() + b" " + request.path.encode() + b"\n" + canonical)
        claim = idempotency.claim(owner, key, fingerprint.hexdigest(), now=utcnow())
        if claim.outcome == "mismatch":
            raise ApiError(
                422,
                "this Idempotency-Key was used with a different request; use a new key for a new request",
                errors={"Idempotency-Key": "was used with a different request"},
            )
        if claim.outcome == "in_progress":
            return problem(
                409, "a request with this Idempotency-Key is still running; retry shortly", headers={"Retry-After": "1"}
            )
        if claim.outcome == "replay":
            response = make_response(claim.body or "", claim.status_code)
            response.mimetype = "application/json"
            response.headers["Idempotent-Replayed"] = "true"
            if claim.location:
                response.headers["Location"] = claim.location
            return response
        try:
            response = make_response(view(*args, **kwargs))
        except BaseException:
            idempotency.release(claim.row_id)
            raise
        if response.status_code >= 400:
            idempotency.release(claim.row_id)
        else:
            idempotency.record(
                claim.row_id,
                status_code=response.status_code,
                body=response.get_data(as_text=True),
                location=response.headers.get("Location"),
            )
        return response

    return wrapper
