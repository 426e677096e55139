"""The built-in task catalog: importing this package registers every task.

Keep imports here and in the task modules to the standard library and the registry: the package is
imported into the worker's pre-forked zygote, so heavy libraries (SQLAlchemy, http.client + ssl) are
imported inside the tasks that need them, in the forked child.

    demo          sleep_for_seconds, always_succeed, always_fail, fail_once_then_succeed, echo
    history       generate_report, cleanup_old_runs (each opens its own database connection)
    artifacts     write_file_artifact (only inside ARTIFACT_DIR)
    health_check  http_health_check_local (loopback URLs only)
    http_request  http_request (any URL the SSRF guard in http_guard lets through; the request
                  itself, on httpx, is http_fetch, imported when the task runs)
"""

from app.tasks.catalog import artifacts, demo, health_check, history, http_request  # noqa: F401
