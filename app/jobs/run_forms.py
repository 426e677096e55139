"""The job page's "Run now / Run later" form and its batch form: text in, the runs and
batches use cases validate (the same messages as the CLI), errors shown beside each field."""

from __future__ import annotations

from flask_wtf import FlaskForm
from wtforms import StringField, TextAreaField

from app.definitions.batch import BatchSchema, RunSchema

_RUN = RunSchema(now=None, task="", job_config=None)  # only its field declarations are read
_BATCH = BatchSchema(task="", job_config=None)


def _described(schema, name: str) -> str:
    return schema.fields[name].metadata["description"]


class RunForm(FlaskForm):
    """Run an enabled job now, after a delay, or at an instant, with an optional config override."""

    run_in = StringField(
        "Run in", description=_described(_RUN, "run_in"), render_kw={"placeholder": "e.g. 10m", "autocomplete": "off"}
    )
    run_at = StringField(
        "or run at (UTC)",
        description=_described(_RUN, "run_at"),
        render_kw={"placeholder": "2026-01-01T12:00:00Z", "autocomplete": "off"},
    )
    config_override = TextAreaField(
        "Config override (JSON object)",
        description=_described(_RUN, "config_override") + " Leave empty to run with the job's config.",
        render_kw={"rows": 3, "spellcheck": "false"},
    )

    # The use case's field names (its data keys) -> this form's controls.
    FIELDS = {"in": "run_in", "at": "run_at", "config_override": "config_override"}

    def service_data(self) -> dict:
        return {key: (self[name].data or "").strip() or None for key, name in self.FIELDS.items()}

    def attach_errors(self, errors: dict[str, str]) -> None:
        for key, message in errors.items():
            name = self.FIELDS.get(key)
            if name is not None:
                self[name].errors = [*self[name].errors, message]
            else:
                self.form_errors.append(f"{key}: {message}")


class BatchForm(FlaskForm):
    """Submit a batch of the job: one run per item of a JSON list of config overrides."""

    items = TextAreaField(
        "Items (JSON list of config overrides)",
        description=_described(_BATCH, "items"),
        render_kw={"rows": 4, "spellcheck": "false", "placeholder": '[{"message": "a"}, {"message": "b"}]'},
    )
    on_complete = StringField(
        "On complete: run task",
        description=_described(_BATCH, "on_complete") + " Leave empty for none.",
        render_kw={"autocomplete": "off", "list": "task-names"},
    )
    on_complete_config = TextAreaField(
        "On complete: task config (JSON object)",
        description=_described(_BATCH, "on_complete_config"),
        render_kw={"rows": 2, "spellcheck": "false"},
    )

    FIELDS = {"items": "items", "on_complete": "on_complete", "on_complete_config": "on_complete_config"}

    def service_data(self) -> dict:
        return {key: (self[name].data or "").strip() or None for key, name in self.FIELDS.items()} | {
            "items": self.items.data or ""
        }

    def attach_errors(self, errors: dict[str, str]) -> None:
        for key, message in errors.items():
            name = self.FIELDS.get(key)
            if name is not None:
                self[name].errors = [*self[name].errors, message]
            else:
                self.form_errors.append(f"{key}: {message}")
