"""Alert pages: open and resolved alerts, dead letters, resolve and bulk resolve."""
