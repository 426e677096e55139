"""The package version: pyproject.toml reads it from here, and the User-Agent sends it."""

__version__ = "0.2.0"
