"""The audit log page: who changed what, filtered and paginated (signed-in readers only)."""
