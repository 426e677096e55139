"""Helpers for tests that run real processes: spawning `flask ...` commands, waiting for a
condition with a bounded deadline, and inspecting processes through /proc."""
