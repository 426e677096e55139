"""The one declaration of what an operator defines (a job today), as marshmallow schemas.

Each field is declared once with its type, default, limits, help text and the adapters that show
it; validation, defaults, the JSON serializer, the CLI options and the web form are derived from
that declaration (and, later, the REST API's OpenAPI document).

Rule for this package: no Flask, no database session, no Click or WTForms. It may import the pure
layers (`app.domain`, `app.scheduling`) and the task catalog (`app.tasks`); adapters import it.
"""

from app.definitions.job import EDITABLE, REFERENCES, JobSchema, dump_job, load_job

__all__ = ["EDITABLE", "REFERENCES", "JobSchema", "dump_job", "load_job"]
