"""The /tasks page: the task catalog (built-in tasks and the deployer's own), read-only."""
