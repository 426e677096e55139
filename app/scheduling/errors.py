"""The one exception type the schedule engine raises for bad user input."""


class ScheduleError(ValueError):
    """A schedule, interval, cron expression or timezone that cannot be used.

    The message is written for an operator: it says exactly what is wrong
    (``interval must be positive, got "0s"``), so adapters can show it as is.
    """
