"""Typed errors. Every message names the file and the problem in one line."""


class StallscopeError(Exception):
    """Base of every error stallscope reports to a user (CLI exit 2, a message in the app)."""


class TraceError(StallscopeError):
    """A trace file that cannot be read or is not a trace."""


class Cancelled(StallscopeError):
    """A long job stopped because its cancel flag was set."""


class NoTraceInFolder(TraceError):
    """A folder that is empty or holds no trace file (the message names what it holds)."""
