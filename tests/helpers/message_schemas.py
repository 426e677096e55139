"""JSON Schemas of the messages Slack and Microsoft Teams incoming webhooks accept, written from
their documentation (Slack: "Sending messages using incoming webhooks" and the Block Kit reference
for header, section, actions, button and context blocks with their text limits; Teams: "Create
and send messages" with an Adaptive Card attachment, and the Adaptive Card 1.4 schema for
TextBlock, FactSet and Action.OpenUrl). Only what Cronwell sends is described, strictly."""

from __future__ import annotations

PLAIN_TEXT = {
    "type": "object",
    "properties": {
        "type": {"const": "plain_text"},
        "text": {"type": "string", "minLength": 1},
        "emoji": {"type": "boolean"},
    },
    "required": ["type", "text"],
    "additionalProperties": False,
}
MRKDWN = {
    "type": "object",
    "properties": {"type": {"const": "mrkdwn"}, "text": {"type": "string", "minLength": 1, "maxLength": 3000}},
    "required": ["type", "text"],
    "additionalProperties": False,
}
HEADER_TEXT = {
    **PLAIN_TEXT,
    "properties": {**PLAIN_TEXT["properties"], "text": {"type": "string", "minLength": 1, "maxLength": 150}},
}
BUTTON = {
    "type": "object",
    "properties": {
        "type": {"const": "button"},
        "text": {**PLAIN_TEXT, "properties": {**PLAIN_TEXT["properties"], "text": {"type": "string", "maxLength": 75}}},
        "url": {"type": "string", "pattern": "^https?://", "maxLength": 3000},
    },
    "required": ["type", "text"],
    "additionalProperties": False,
}
SLACK = {
    "type": "object",
    "properties": {
        "text": {"type": "string", "minLength": 1},
        "blocks": {
            "type": "array",
            "maxItems": 50,
            "items": {
                "oneOf": [
                    {
                        "type": "object",
                        "properties": {"type": {"const": "header"}, "text": HEADER_TEXT},
                        "required": ["type", "text"],
                        "additionalProperties": False,
                    },
                    {
                        "type": "object",
                        "properties": {
                            "type": {"const": "section"},
                            "text": MRKDWN,
                            "fields": {"type": "array", "items": MRKDWN, "minItems": 1, "maxItems": 10},
                        },
                        "required": ["type"],
                        "anyOf": [{"required": ["text"]}, {"required": ["fields"]}],
                        "additionalProperties": False,
                    },
                    {
                        "type": "object",
                        "properties": {
                            "type": {"const": "actions"},
                            "elements": {"type": "array", "items": BUTTON, "minItems": 1, "maxItems": 25},
                        },
                        "required": ["type", "elements"],
                        "additionalProperties": False,
                    },
                    {
                        "type": "object",
                        "properties": {
                            "type": {"const": "context"},
                            "elements": {"type": "array", "items": MRKDWN, "minItems": 1, "maxItems": 10},
                        },
                        "required": ["type", "elements"],
                        "additionalProperties": False,
                    },
                ]
            },
        },
    },
    "required": ["text", "blocks"],
    "additionalProperties": False,
}

TEXT_BLOCK = {
    "type": "object",
    "properties": {
        "type": {"const": "TextBlock"},
        "text": {"type": "string"},
        "wrap": {"type": "boolean"},
        "weight": {"enum": ["Default", "Lighter", "Bolder"]},
        "size": {"enum": ["Default", "Small", "Medium", "Large", "ExtraLarge"]},
        "fontType": {"enum": ["Default", "Monospace"]},
    },
    "required": ["type", "text"],
    "additionalProperties": False,
}
FACT_SET = {
    "type": "object",
    "properties": {
        "type": {"const": "FactSet"},
        "facts": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"title": {"type": "string"}, "value": {"type": "string"}},
                "required": ["title", "value"],
                "additionalProperties": False,
            },
        },
    },
    "required": ["type", "facts"],
    "additionalProperties": False,
}
TEAMS = {
    "type": "object",
    "properties": {
        "type": {"const": "message"},
        "attachments": {
            "type": "array",
            "minItems": 1,
            "maxItems": 1,
            "items": {
                "type": "object",
                "properties": {
                    "contentType": {"const": "application/vnd.microsoft.card.adaptive"},
                    "contentUrl": {"type": "null"},
                    "content": {
                        "type": "object",
                        "properties": {
                            "$schema": {"const": "http://adaptivecards.io/schemas/adaptive-card.json"},
                            "type": {"const": "AdaptiveCard"},
                            "version": {"enum": ["1.0", "1.1", "1.2", "1.3", "1.4", "1.5"]},
                            "body": {"type": "array", "items": {"oneOf": [TEXT_BLOCK, FACT_SET]}, "minItems": 1},
                            "actions": {
                                "type": "array",
                                "items": {
                                    "type": "object",
                                    "properties": {
                                        "type": {"const": "Action.OpenUrl"},
                                        "title": {"type": "string"},
                                        "url": {"type": "string", "pattern": "^https?://"},
                                    },
                                    "required": ["type", "url"],
                                    "additionalProperties": False,
                                },
                            },
                        },
                        "required": ["type", "version", "body"],
                        "additionalProperties": False,
                    },
                },
                "required": ["contentType", "content"],
                "additionalProperties": False,
            },
        },
    },
    "required": ["type", "attachments"],
    "additionalProperties": False,
}

# Cronwell's own signed webhook documents, one per `type` (docs/insight.md, "Alert delivery").
_ISO = {"type": "string", "pattern": r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$"}
_ID = {"type": "integer", "minimum": 1}
_MAYBE_ID = {"type": ["integer", "null"]}
WEBHOOK_ALERT = {
    "type": "object",
    "properties": {
        "type": {"const": "alert"},
        "alert": {
            "type": "object",
            "properties": {
                "id": _ID,
                "kind": {"type": "string"},
                "message": {"type": "string"},
                "job_id": _MAYBE_ID,
                "job_name": {"type": ["string", "null"]},
                "execution_id": _MAYBE_ID,
                "queue_id": _MAYBE_ID,
                "project_id": _MAYBE_ID,
                "created_at": _ISO,
            },
            "required": ["id", "kind", "message", "job_id", "execution_id", "project_id", "created_at"],
            "additionalProperties": False,
        },
    },
    "required": ["type", "alert"],
    "additionalProperties": False,
}
WEBHOOK_NOTICE = {
    "type": "object",
    "properties": {
        "type": {"const": "notice"},
        "notice": {
            "type": "object",
            "properties": {
                "event": {"enum": ["failure", "recovery", "success"]},
                "job_id": _ID,
                "job_name": {"type": "string"},
                "project_id": _ID,
                "execution_id": _ID,
                "message": {"type": "string"},
                "created_at": _ISO,
                "first_at": _ISO,
                "count": {"type": "integer", "minimum": 1},
                "closed_alert_ids": {"type": "array", "items": _ID},
            },
            "required": [
                "event",
                "job_id",
                "job_name",
                "project_id",
                "execution_id",
                "message",
                "created_at",
                "first_at",
                "count",
            ],
            "additionalProperties": False,
        },
    },
    "required": ["type", "notice"],
    "additionalProperties": False,
}
WEBHOOK_TEST = {
    "type": "object",
    "properties": {
        "type": {"const": "test"},
        "message": {"type": "string"},
        "channel_id": _ID,
        "created_at": _ISO,
    },
    "required": ["type", "message", "channel_id", "created_at"],
    "additionalProperties": False,
}
WEBHOOK = {"alert": WEBHOOK_ALERT, "notice": WEBHOOK_NOTICE, "test": WEBHOOK_TEST}
