"""The jobs list's filters: read from the query string (a GET changes nothing, so no token), so a
filtered list is a URL that can be shared or bookmarked."""

from __future__ import annotations

from wtforms import Form, SelectChoice, SelectField, StringField  # type: ignore[attr-defined]  # new in WTForms 3.3; types-WTForms describes 3.2

from app.services.read.console_lists import NEVER, OUTCOMES


class JobFilterForm(Form):
    q = StringField("Search", render_kw={"placeholder": "name, task or description", "spellcheck": "false"})
    enabled = SelectField(
        "State",
        validate_choice=False,
        choices=[
            SelectChoice("", "enabled or disabled"),
            SelectChoice("yes", "enabled"),
            SelectChoice("no", "disabled"),
        ],
    )
    queue = SelectField("Queue", validate_choice=False)
    task = SelectField("Task", validate_choice=False)
    outcome = SelectField(
        "Last outcome",
        validate_choice=False,
        choices=[SelectChoice("", "any outcome")]
        + [SelectChoice(o, "no finished run yet" if o == NEVER else o.replace("_", " ")) for o in OUTCOMES],
    )

    def set_choices(self, queues: list[str], tasks: list[str]) -> None:
        self.queue.choices = [SelectChoice("", "any queue")] + [SelectChoice(name) for name in queues]
        self.task.choices = [SelectChoice("", "any task")] + [SelectChoice(name) for name in tasks]
