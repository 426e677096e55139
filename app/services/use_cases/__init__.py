"""Use cases: what a person asks for (jobs, executions, alerts, users). Each validates,
writes in one transaction, records an event and invalidates the cache after commit."""
