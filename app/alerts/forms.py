"""The alerts page's resolve form: selected alert ids plus the CSRF token."""

from __future__ import annotations

from flask_wtf import FlaskForm

from app.models import Alert
from app.models.ids import id_in_range, is_whole_number, key_max


class ResolveAlertsForm(FlaskForm):
    """Bulk resolve posts `alert_ids` checkboxes; resolving one posts to its own URL."""

    def selected_ids(self, raw: list[str]) -> tuple[list[int], list[str], list[str]]:
        """The ids among the submitted values, the values that were not whole numbers, and the
        whole numbers beyond the id column (alerts that cannot exist)."""
        ids, bad, beyond = [], [], []
        largest = key_max(Alert)
        for value in raw:
            value = (value or "").strip()
            if not is_whole_number(value):  # ASCII digits only: "²".isdigit() is True
                bad.append(value)
            elif (alert_id := id_in_range(value, largest)) is None:
                beyond.append(value)
            else:
                ids.append(alert_id)
        return sorted(set(ids)), bad, beyond
