"""The events page: the event log of the caller's organization, filtered, newest first."""
