"""Signing in and out of the web UI."""
