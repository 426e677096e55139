"""Worker pages: the registry of worker processes, drain and stop."""
