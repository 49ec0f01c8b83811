"""Why a request about tool terminals is refused: one exception per answer, with its status.

The web edge maps every :class:`Refusal` (a :class:`SessionError`, an agent's ``AgentError``)
to its HTTP status and a JSON message in one place (``base.py``); the MCP tools turn it into an
``isError`` result.
"""

from __future__ import annotations


class Refusal(Exception):
    """A request cannot be honoured; ``status`` is the HTTP status to answer, ``message`` what
    the caller is told (as written)."""

    status = 400

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class SessionError(Refusal):
    """A request about sessions cannot be honoured."""


class NotPermitted(SessionError):
    """Not the caller's, or does not exist: deliberately the same answer for both."""

    status = 403


class NotRunning(SessionError):
    """The tool instance exists and is the caller's, but its container is not running."""

    status = 409


class Conflict(SessionError):
    """The request contradicts the current state (a grant that already exists)."""

    status = 409


class NotFound(SessionError):
    """A sub-resource of the caller's own session does not exist (an observer not granted)."""

    status = 404


class RecordingFailed(SessionError):
    """The tool type records its sessions and the recording cannot be written."""

    status = 500


class LimitReached(SessionError):
    """A session limit is reached."""

    status = 429


class EngineUnavailable(SessionError):
    """The container engine failed."""

    status = 503


class ShuttingDown(SessionError):
    """The server is stopping: it starts no new session."""

    status = 503
