"""Bulk actions on the console's lists (retry, cancel, enable, disable), confirmed first."""
