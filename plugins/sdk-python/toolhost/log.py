"""Lines for the host's log, tagged with the plugin's name. They never reach
the MCP client nor the audit trail, and the host caps how many a call may
write."""

from . import _host


def debug(message: str) -> None:
    """Detail useful only while developing the plugin."""
    _host.current().log_write("debug", message)


def info(message: str) -> None:
    """Normal operation worth recording."""
    _host.current().log_write("info", message)


def warn(message: str) -> None:
    """Something unexpected that the plugin handled."""
    _host.current().log_write("warn", message)


def error(message: str) -> None:
    """A failure."""
    _host.current().log_write("error", message)
