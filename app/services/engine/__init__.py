"""Long-running engines: the scheduler tick, the worker loop, lease recovery, retention,
wake-ups and heartbeats. They own their loops and transaction boundaries."""
