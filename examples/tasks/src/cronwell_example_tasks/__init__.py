"""Example Cronwell tasks; the tasks themselves are in `cronwell_example_tasks.tasks`."""
