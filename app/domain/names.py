"""The one rule for the names an operator gives queues, organizations and projects: they appear in
URLs (`/queues/<name>`), on the command line (`--queues a,b`, `ORG/PROJECT`) and in job files, so
they are short, lower-case and need no quoting anywhere."""

from __future__ import annotations

import re

NAME_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,63}$")
NAME_RULE = "must be 1-64 characters: lower-case letters, digits, '_', '-', '.'"
