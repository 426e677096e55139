"""The maximum length of every free-text field, declared once.

The web forms (a `maxlength` and the server-side check), the CLI and the API all read these, and
every refusal names the limit: "must be at most 500 characters (got 10000)". A field longer than
any screen is shown clipped on lists, with the full text on its own page or in the element's
title. docs/web.md lists the table; a test keeps the list and this table the same.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TextLimit:
    field: str  # how the docs and messages name it
    maximum: int


JOB_NAME = TextLimit("job name", 200)
JOB_DESCRIPTION = TextLimit("job description", 2000)
QUEUE_DESCRIPTION = TextLimit("queue description", 2000)
PAUSE_REASON = TextLimit("queue pause reason", 500)
CANCEL_REASON = TextLimit("cancel reason", 500)
PROJECT_DESCRIPTION = TextLimit("project description", 2000)
TOKEN_NAME = TextLimit("API token name", 100)
CHANNEL_NAME = TextLimit("alert channel name", 100)
CHANNEL_TARGET = TextLimit("alert channel target (URL or address)", 500)
USERNAME = TextLimit("username", 150)

TEXT_LIMITS = (
    JOB_NAME,
    JOB_DESCRIPTION,
    QUEUE_DESCRIPTION,
    PAUSE_REASON,
    CANCEL_REASON,
    PROJECT_DESCRIPTION,
    TOKEN_NAME,
    CHANNEL_NAME,
    CHANNEL_TARGET,
    USERNAME,
)


def too_long(text: str, limit: TextLimit) -> str | None:
    """The refusal of `text` when it is longer than `limit` (naming the limit), else None."""
    if len(text) > limit.maximum:
        return f"must be at most {limit.maximum} characters (got {len(text)})"
    return None
