"""The alerts page's resolve form: selected alert ids plus the CSRF token."""

from __future__ import annotations

from flask_wtf import FlaskForm


class ResolveAlertsForm(FlaskForm):
    """Bulk resolve posts `alert_ids` checkboxes; resolving one posts to its own URL."""

    def selected_ids(self, raw: list[str]) -> tuple[list[int], list[str]]:
        """The valid ids among the submitted values, and the values that were not ids."""
        ids, bad = [], []
        for value in raw:
            value = (value or "").strip()
            if value.isascii() and value.isdigit() and len(value) < 12:  # "²".isdigit() is True
                ids.append(int(value))
            else:
                bad.append(value)
        return sorted(set(ids)), bad
