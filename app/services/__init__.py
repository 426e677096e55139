"""Services: the operations the web UI, the CLI, the scheduler and the worker share.

They take `now` as a parameter where time matters, own transaction boundaries, and call the
store for every statement that claims or moves an execution.
"""
