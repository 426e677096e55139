"""Queue pages: live statistics, create, edit, pause and resume."""
