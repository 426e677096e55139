"""Job pages: list, detail, create, edit and the job actions."""
